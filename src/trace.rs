//! The invocation's X-Ray trace header, wherever the engine needs it: the
//! DynamoDB calls' subsegments (`store/dynamodb/xray.rs`) and the trace an
//! `append` stores with its events (`traceHeader`, sent on as the message's
//! `AWSTraceHeader`).
//!
//! `lambda_runtime` sets `_X_AMZN_TRACE_ID` for each invocation only when it
//! serves one at a time. Under Lambda Managed Instances it serves several at
//! once in one process, and a process-wide variable cannot hold several
//! traces: it leaves the variable unset, and the trace is in each
//! invocation's context. So an invocation's work runs in [`scope`], which
//! keeps its header for the tasks it runs; outside a scope the variable is
//! read, as before.
//!
//! The projector scopes every invocation. A producer's own function that
//! appends under `run_concurrent` scopes its handler the same way:
//!
//! ```
//! # async fn example(context: lambda_runtime::Context) {
//! sequence_guard::trace::scope(context.xray_trace_id.clone(), async {
//!     // append(...).await, whose events carry this invocation's trace
//! })
//! .await;
//! # }
//! ```

use std::future::Future;

tokio::task_local! {
    static HEADER: Option<String>;
}

/// Runs `work` with `header` as its invocation's trace header.
pub async fn scope<F: Future>(header: Option<String>, work: F) -> F::Output {
    HEADER.scope(header, work).await
}

/// The current invocation's trace header: the scope's, or else
/// `_X_AMZN_TRACE_ID`.
pub fn current() -> Option<String> {
    HEADER
        .try_with(Clone::clone)
        .unwrap_or_else(|_| std::env::var("_X_AMZN_TRACE_ID").ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn each_scope_sees_its_own_header_while_both_run() {
        let (a_started, a_wait) = tokio::sync::oneshot::channel::<()>();
        let a = scope(Some("Root=1-a".into()), async move {
            let _ = a_wait.await;
            current()
        });
        let b = scope(Some("Root=1-b".into()), async move {
            let seen = current();
            let _ = a_started.send(());
            seen
        });
        let (a, b) = tokio::join!(a, b);
        assert_eq!(a.as_deref(), Some("Root=1-a"));
        assert_eq!(b.as_deref(), Some("Root=1-b"));
        assert_eq!(scope(None, async { current() }).await, None);
    }
}
