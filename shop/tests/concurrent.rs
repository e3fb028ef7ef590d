//! Lambda Managed Instances: one process serves several invocations at once
//! (`lambda_runtime::run_concurrent`). One runner, shared, must answer each
//! invocation on its own and leave the store as one invocation would.

use std::sync::Arc;

use aws_lambda_events::event::sqs::SqsEvent;
use lambda_runtime::LambdaEvent;
use sequence_guard::lambda::handle;
use sequence_guard::runner::{Runner, RunnerConfig};
use sequence_guard::store::memory::MemoryStore;

fn batch() -> SqsEvent {
    serde_json::from_str(include_str!(
        "../../events/01-order-created-and-updated.json"
    ))
    .expect("sample")
}

fn context() -> lambda_runtime::Context {
    let mut context = lambda_runtime::Context::default();
    context.deadline = u64::try_from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis())
            + 30_000,
    )
    .unwrap_or(u64::MAX);
    context
}

/// 8 invocations of the same batch at once on one runner: each answers
/// with no failure, and the store holds what one invocation writes.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_invocations_share_one_runner() {
    let alone = Runner::new(shop::domain(), MemoryStore::new(), RunnerConfig::default());
    let response = handle(&alone, None, LambdaEvent::new(batch(), context()))
        .await
        .expect("answered");
    assert!(response.batch_item_failures.is_empty());
    let expected = alone.store().entities();
    assert!(!expected.is_empty(), "the sample writes an entity");

    let runner = Arc::new(Runner::new(
        shop::domain(),
        MemoryStore::new(),
        RunnerConfig::default(),
    ));
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let runner = Arc::clone(&runner);
            tokio::spawn(async move {
                handle(&runner, None, LambdaEvent::new(batch(), context())).await
            })
        })
        .collect();
    for task in futures::future::join_all(tasks).await {
        let response = task.expect("joined").expect("answered");
        assert!(
            response.batch_item_failures.is_empty(),
            "a concurrent invocation failed: {:?}",
            response.batch_item_failures
        );
    }
    assert_eq!(runner.store().entities(), expected);
}
