//! One `eventId` reused by two events of different streams: the second is
//! not dropped as a duplicate. A deduplication record knows its stream;
//! another stream's event under the same id is a conflict, recorded on its
//! own stream (a `CONFLICT#` item under the counter's key, with its body)
//! and counted (`Conflict`), on both stores. A record written by an earlier
//! release (no stream) still makes a duplicate.

mod support;

use aws_sdk_dynamodb::types::AttributeValue;
use sequence_guard::runner::{BatchReport, Invocation, Outcome, Runner, RunnerConfig};
use sequence_guard::store::Store;
use sequence_guard::store::dynamodb::DynamoStore;
use sequence_guard::store::memory::MemoryStore;
use support::*;

fn invocation() -> Invocation {
    Invocation {
        deadline: None,
        now: sequence_guard::lambda::epoch_seconds(),
    }
}

fn adjusted(
    message_id: &str,
    event_id: &str,
    gauge: &str,
    delta: i64,
) -> aws_lambda_events::event::sqs::SqsMessage {
    message(message_id, gauge, &level_adjusted(event_id, gauge, delta))
}

async fn run<S: Store>(
    runner: &Runner<S>,
    messages: Vec<aws_lambda_events::event::sqs::SqsMessage>,
) -> BatchReport {
    runner
        .run(&batch(messages), invocation())
        .await
        .expect("run")
}

async fn level<S: Store>(store: &S, gauge: &str) -> Option<i64> {
    store.counter(&LEVEL, gauge).await.expect("read")
}

/// GIVEN `e-1` applied to G-1, WHEN another event of G-2 comes under
/// `e-1`, THEN it is a conflict (recorded, counted, not applied), again on
/// its redelivery, while `e-1` of G-1 redelivered stays a duplicate.
async fn a_reused_event_id_is_a_conflict<S: Store>(store: S) -> Runner<S> {
    let runner = Runner::new(domain(), store, RunnerConfig::default());
    let report = run(&runner, vec![adjusted("m1", "e-1", "G-1", 5)]).await;
    assert_eq!(outcomes(&report), [Outcome::Applied]);
    let report = run(&runner, vec![adjusted("m2", "e-1", "G-2", 3)]).await;
    assert_eq!(outcomes(&report), [Outcome::Conflict], "{report:?}");
    assert_eq!(report.count(Outcome::Conflict), 1, "counted");
    let reason = report.messages[0].reason.clone().unwrap_or_default();
    assert!(
        reason.contains("e-1") && reason.contains("G-1") && reason.contains("G-2"),
        "{reason}"
    );
    assert!(
        failed_ids(&report).is_empty(),
        "done: recorded, not retried"
    );
    assert_eq!(level(runner.store(), "G-2").await, None, "not applied");
    assert_eq!(level(runner.store(), "G-1").await, Some(5));
    // Again: the same verdict, one record.
    let report = run(&runner, vec![adjusted("m2", "e-1", "G-2", 3)]).await;
    assert_eq!(outcomes(&report), [Outcome::Conflict]);
    let report = run(&runner, vec![adjusted("m1", "e-1", "G-1", 5)]).await;
    assert_eq!(outcomes(&report), [Outcome::Duplicate]);
    assert_eq!(level(runner.store(), "G-1").await, Some(5));
    runner
}

/// Both in one batch: one is applied, the other is the conflict.
async fn both_in_one_batch<S: Store>(store: S) -> Runner<S> {
    let runner = Runner::new(domain(), store, RunnerConfig::default());
    let report = run(
        &runner,
        vec![
            adjusted("m1", "e-2", "G-A", 1),
            adjusted("m2", "e-2", "G-B", 2),
        ],
    )
    .await;
    let mut found = outcomes(&report);
    found.sort_by_key(|outcome| outcome.as_str());
    assert_eq!(found, [Outcome::Applied, Outcome::Conflict], "{report:?}");
    let applied = [
        level(runner.store(), "G-A").await,
        level(runner.store(), "G-B").await,
    ];
    assert!(
        applied == [Some(1), None] || applied == [None, Some(2)],
        "{applied:?}"
    );
    runner
}

#[tokio::test]
async fn a_reused_event_id_is_a_conflict_in_memory() {
    let runner = a_reused_event_id_is_a_conflict(MemoryStore::new()).await;
    let conflicts = runner.store().counter_conflicts();
    assert_eq!(conflicts.len(), 1, "{conflicts:?}");
    let (counter, id, conflict) = &conflicts[0];
    assert_eq!((*counter, id.as_str()), (&LEVEL, "G-2"));
    assert_eq!((conflict.sequence, conflict.event_id.as_str()), (0, "e-1"));
    assert_eq!(conflict.body, level_adjusted("e-1", "G-2", 3));
}

#[tokio::test]
async fn a_reused_event_id_is_a_conflict_on_dynamodb() {
    let runner = a_reused_event_id_is_a_conflict(fresh_table().await).await;
    let conflict = item(
        runner.store(),
        "GAUGE#G-2",
        "CONFLICT#00000000000000000000#e-1",
    )
    .await
    .expect("the conflict record, under the second stream's key");
    assert_eq!(
        conflict.get("body"),
        Some(&AttributeValue::S(level_adjusted("e-1", "G-2", 3)))
    );
    assert!(conflict.contains_key("seenAt"));
    let record = item(
        runner.store(),
        "MESSAGE#e-1",
        &format!("HANDLER#{LEVEL_HANDLER}"),
    )
    .await
    .expect("the dedup record");
    assert_eq!(
        record.get("stream"),
        Some(&AttributeValue::S("G-1".into())),
        "the record knows its stream"
    );
}

#[tokio::test]
async fn both_in_one_batch_in_memory() {
    let runner = both_in_one_batch(MemoryStore::new()).await;
    assert_eq!(runner.store().counter_conflicts().len(), 1);
}

#[tokio::test]
async fn both_in_one_batch_on_dynamodb() {
    both_in_one_batch(fresh_table().await).await;
}

/// A record written by an earlier release has no stream: a duplicate, as
/// before, whatever the stream.
#[tokio::test]
async fn a_record_of_an_earlier_release_stays_a_duplicate() {
    let store = fresh_table().await;
    store
        .client()
        .put_item()
        .table_name(store.table())
        .item("pk", AttributeValue::S("MESSAGE#e-old".into()))
        .item("sk", AttributeValue::S(format!("HANDLER#{LEVEL_HANDLER}")))
        .item("handledAt", AttributeValue::N("1".into()))
        .item("expiresAt", AttributeValue::N("4102444800".into()))
        .send()
        .await
        .expect("an earlier release's record");
    let runner = Runner::new(domain(), store, RunnerConfig::default());
    let report = run(&runner, vec![adjusted("m1", "e-old", "G-9", 4)]).await;
    assert_eq!(outcomes(&report), [Outcome::Duplicate], "{report:?}");
    assert_eq!(level(runner.store(), "G-9").await, None);
}

/// One item of the table, read directly.
async fn item(
    store: &DynamoStore,
    pk: &str,
    sk: &str,
) -> Option<std::collections::HashMap<String, AttributeValue>> {
    store
        .client()
        .get_item()
        .table_name(store.table())
        .key("pk", AttributeValue::S(pk.into()))
        .key("sk", AttributeValue::S(sk.into()))
        .consistent_read(true)
        .send()
        .await
        .expect("GetItem")
        .item
}
