//! The Lambda side: an SQS batch becomes the partial batch response; the
//! schedule's event becomes a [`sweep`](crate::sweep) of parked events; and
//! the dispatcher's batch of change records is sent (`stream.rs`,
//! [`respond_to_stream`]).

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use lambda_runtime::LambdaEvent;
use serde_json::Value;
use tracing::Instrument;

use crate::metrics::{self, Emf};
use crate::runner::{BatchError, Invocation, Runner};
use crate::store::{Store, StoreError};
use crate::sweep::sweep;

mod stream;

pub use stream::respond_to_stream;

/// An invocation that fails as a whole.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum InvocationError {
    /// The batch cannot be answered message by message (a record without a
    /// message id).
    #[error(transparent)]
    Batch(#[from] BatchError),
    /// The event is neither an SQS batch nor a scheduled event, or could not be
    /// read or answered as one.
    #[error(
        "unsupported event: expected an SQS batch (`Records`) or a scheduled event (`source` = `aws.events`): {0}"
    )]
    Unsupported(String),
    /// The sweep of parked events failed on a store error.
    #[error("the sweep of parked events failed: {0}")]
    Sweep(StoreError),
    /// The dispatcher's event is not a batch of change records.
    #[error("unsupported event: expected a DynamoDB stream batch (`Records`): {0}")]
    NotAStreamBatch(String),
    /// The dispatcher's stream is set up wrong (not new images): nothing
    /// was sent.
    #[error("{0}")]
    Unusable(String),
}

/// Handles any invocation the function is wired to: an SQS batch from the
/// event source mapping, or the schedule's event (EventBridge). Every log
/// line of the invocation carries its request id and its X-Ray trace id
/// (the `invocation` span); the first invocation of the process records
/// `ColdStart`.
pub async fn respond<S: Store>(
    runner: &Runner<S>,
    emf: Option<&Emf>,
    event: LambdaEvent<Value>,
) -> Result<Value, InvocationError> {
    let span = invocation_span(&event.context);
    metrics::record_cold_start();
    // Boxed: one allocation per invocation keeps the caller's future (the
    // binary's `main`) shallow enough for the compiler's layout limit, which
    // a release build reaches without it.
    // Its trace is the scope's: under Managed Instances no variable holds it.
    let trace = event.context.xray_trace_id.clone();
    crate::trace::scope(trace, Box::pin(route(runner, emf, event)).instrument(span)).await
}

/// The span of one invocation: every log line in it carries the request id
/// and the X-Ray trace id.
pub(crate) fn invocation_span(context: &lambda_runtime::Context) -> tracing::Span {
    tracing::info_span!(
        "invocation",
        request_id = %context.request_id,
        xray_trace_id = context.xray_trace_id.as_deref(),
    )
}

async fn route<S: Store>(
    runner: &Runner<S>,
    emf: Option<&Emf>,
    event: LambdaEvent<Value>,
) -> Result<Value, InvocationError> {
    let LambdaEvent { payload, context } = event;
    if payload.get("Records").is_some() {
        let batch: SqsEvent = serde_json::from_value(payload)
            .map_err(|err| InvocationError::Unsupported(format!("not an SQS batch: {err}")))?;
        let response = handle(runner, emf, LambdaEvent::new(batch, context)).await?;
        return serde_json::to_value(response)
            .map_err(|err| InvocationError::Unsupported(err.to_string()));
    }
    if payload.get("source").and_then(Value::as_str) == Some("aws.events") {
        let invocation = Invocation {
            deadline: Some(deadline(context.deadline)),
            now: epoch_seconds(),
        };
        let report = sweep(runner, invocation)
            .await
            .map_err(InvocationError::Sweep)?;
        metrics::record_sweep(&report);
        if let Some(emf) = emf {
            emf.flush();
        }
        return Ok(serde_json::json!({
            "parkedEntities": report.entities,
            "seen": report.seen,
            "oldestParkedAgeSeconds": report.oldest_parked_age_seconds,
            "drained": report.drained.iter().map(|parking| parking.drained.len()).sum::<usize>(),
            "complete": report.complete,
        }));
    }
    let keys: Vec<&str> = payload
        .as_object()
        .map(|object| object.keys().map(String::as_str).collect())
        .unwrap_or_default();
    Err(InvocationError::Unsupported(format!("fields {keys:?}")))
}

/// Handles one invocation: runs the batch, records its metrics (written
/// as one EMF document when `emf` is given) and answers with the partial batch
/// response. An `Err` fails the whole invocation (and so the whole batch);
/// that happens only for a record without a message id.
pub async fn handle<S: Store>(
    runner: &Runner<S>,
    emf: Option<&Emf>,
    event: LambdaEvent<SqsEvent>,
) -> Result<SqsBatchResponse, BatchError> {
    let started = Instant::now();
    let invocation = Invocation {
        deadline: Some(deadline(event.context.deadline)),
        now: epoch_seconds(),
    };
    let report = runner.run(&event.payload, invocation).await?;
    metrics::record(&report, started.elapsed());
    if let Some(emf) = emf {
        emf.flush();
    }
    Ok(report.response())
}

/// Deadlines below this many epoch milliseconds (September 2001) are not
/// instants: a local runtime (`cargo lambda watch`) sends its timeout,
/// 600000, where Lambda sends the deadline.
const LOCAL_TIMEOUT_BELOW_MS: u64 = 1_000_000_000_000;

/// The invocation's deadline (epoch milliseconds, as the Runtime API gives
/// it) as an `Instant`. Lambda's deadline is ahead when an invocation
/// arrives; one already behind (a late invocation, a clock gone wrong)
/// leaves no time, so nothing is attempted and every message is retried.
/// A local runtime's timeout counts from now.
pub(crate) fn deadline(deadline_ms: u64) -> Instant {
    let now = Instant::now();
    if deadline_ms < LOCAL_TIMEOUT_BELOW_MS {
        return now + Duration::from_millis(deadline_ms);
    }
    let deadline = UNIX_EPOCH + Duration::from_millis(deadline_ms);
    match deadline.duration_since(SystemTime::now()) {
        Ok(left) => now + left,
        Err(_) => {
            tracing::warn!(
                deadline_ms,
                "the invocation's deadline had passed when it arrived: no message is attempted"
            );
            now
        }
    }
}

pub use crate::clock::epoch_seconds;

impl From<InvocationError> for lambda_runtime::Diagnostic {
    fn from(err: InvocationError) -> Self {
        let error_type = match err {
            InvocationError::Batch(BatchError::MissingMessageId { .. }) => {
                "SequenceGuard.MissingMessageId"
            }
            InvocationError::Unsupported(_) => "SequenceGuard.UnsupportedEvent",
            InvocationError::Sweep(_) => "SequenceGuard.SweepFailed",
            InvocationError::NotAStreamBatch(_) => "SequenceGuard.UnsupportedEvent",
            InvocationError::Unusable(_) => "SequenceGuard.StreamViewType",
        };
        lambda_runtime::Diagnostic {
            error_type: error_type.to_owned(),
            error_message: err.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now_ms() -> u64 {
        u64::try_from(
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_millis()),
        )
        .unwrap_or(u64::MAX)
    }

    #[test]
    fn a_deadline_ahead_becomes_an_instant() {
        let left = deadline(now_ms() + 60_000).duration_since(Instant::now());
        assert!(
            left > Duration::from_secs(55) && left <= Duration::from_secs(60),
            "{left:?}"
        );
    }

    #[test]
    fn a_local_runtimes_timeout_counts_from_now() {
        // cargo lambda watch's value: bounded, ten minutes from now.
        let left = deadline(600_000).duration_since(Instant::now());
        assert!(
            left > Duration::from_secs(595) && left <= Duration::from_secs(600),
            "{left:?}"
        );
    }

    #[test]
    fn a_deadline_already_past_leaves_no_time() {
        let past = deadline(now_ms() - 5_000);
        assert!(past <= Instant::now());
    }
}
