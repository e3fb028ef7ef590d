//! The Lambda side of the worked example: a late invocation.

use std::time::{Instant, SystemTime, UNIX_EPOCH};

use aws_lambda_events::event::sqs::SqsEvent;
use lambda_runtime::LambdaEvent;
use sequence_guard::lambda::handle;
use sequence_guard::runner::{Invocation, Outcome, Runner, RunnerConfig};
use sequence_guard::store::memory::MemoryStore;

fn now_ms() -> u64 {
    u64::try_from(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis()),
    )
    .unwrap_or(u64::MAX)
}

/// A late invocation is bounded: it attempts nothing, and every message
/// is reported failed (retried), none run without a deadline.
#[tokio::test]
async fn a_late_invocation_attempts_nothing() {
    let runner = Runner::new(shop::domain(), MemoryStore::new(), RunnerConfig::default());
    let batch: SqsEvent = serde_json::from_str(include_str!(
        "../../events/01-order-created-and-updated.json"
    ))
    .expect("sample");
    let mut context = lambda_runtime::Context::default();
    context.deadline = now_ms() - 1_000;
    let response = handle(&runner, None, LambdaEvent::new(batch.clone(), context))
        .await
        .expect("answered");
    assert_eq!(response.batch_item_failures.len(), batch.records.len());
    assert!(runner.store().entities().is_empty(), "nothing written");
    let report = runner
        .run(
            &batch,
            Invocation {
                deadline: Some(Instant::now()),
                now: 0,
            },
        )
        .await
        .expect("run");
    assert!(
        report
            .messages
            .iter()
            .all(|message| message.outcome == Outcome::Skipped)
    );
}
