//! A batch's streams: after a failure the rest of its stream waits while
//! other streams go on; one load and one write per stream; a record without
//! a message id failing the invocation before any work.

use super::*;

#[tokio::test]
async fn after_a_failure_the_rest_of_the_stream_is_not_attempted_and_other_streams_go_on() {
    // GIVEN item-a: created, then 3 (a gap), then 2, which alone would apply.
    let store = FaultyStore::with(Faults::default());
    let runner = Runner::new(domain(), store.clone(), RunnerConfig::default());
    let event = batch(vec![
        message("a1", "item-a", &item_body("ItemCreated", "item-a", 1)),
        message("b1", "item-b", &item_body("ItemCreated", "item-b", 1)),
        message("a3", "item-a", &item_body("ItemUpdated", "item-a", 3)),
        message("a2", "item-a", &item_body("ItemUpdated", "item-a", 2)),
        message("b2", "item-b", &item_body("ItemUpdated", "item-b", 2)),
    ]);
    // WHEN the batch runs
    let report = runner.run(&event, no_deadline()).await.expect("run");
    // THEN a3 and everything after it in item-a fail; item-b completes.
    assert_eq!(
        outcomes(&report),
        [
            ("a1", Outcome::Applied),
            ("b1", Outcome::Applied),
            ("a3", Outcome::Gap),
            ("a2", Outcome::Skipped),
            ("b2", Outcome::Applied)
        ]
    );
    assert_eq!(failed_ids(&report), ["a3", "a2"]);
    assert_eq!(
        sequence_of(&*store, EntityKey::of::<Item>("item-a")).await,
        Some(1),
        "a2 was not attempted"
    );
    assert_eq!(
        sequence_of(&*store, EntityKey::of::<Item>("item-b")).await,
        Some(2)
    );
}

#[tokio::test]
async fn a_batch_loads_once_and_writes_once_per_stream() {
    let store = FaultyStore::with(Faults::default());
    let runner = Runner::new(domain(), store.clone(), RunnerConfig::default());
    let mut messages = Vec::new();
    for item in 0..10 {
        let id = format!("item-{item}");
        for sequence in 1..=3 {
            let event_type = if sequence == 1 {
                "ItemCreated"
            } else {
                "ItemUpdated"
            };
            messages.push(message(
                &format!("{id}-{sequence}"),
                &id,
                &item_body(event_type, &id, sequence),
            ));
        }
    }
    let event = batch(messages);
    let report = runner.run(&event, no_deadline()).await.expect("run");
    assert_eq!(report.count(Outcome::Applied), 30);
    assert_eq!(store.calls(), (1, 10, 0), "one load, one write per stream");

    // The same batch again: all duplicates, answered from the items this
    // runner wrote (`src/runner/warm.rs`): no load and no write at all.
    let report = runner.run(&event, no_deadline()).await.expect("run");
    assert_eq!(report.count(Outcome::Duplicate), 30);
    assert_eq!(store.calls(), (1, 10, 0));
}

#[tokio::test]
async fn a_record_without_a_message_id_fails_the_invocation_before_any_work() {
    let store = FaultyStore::with(Faults::default());
    let runner = Runner::new(domain(), store.clone(), RunnerConfig::default());
    let mut anonymous = message("", "item-x", &item_body("ItemCreated", "item-x", 1));
    anonymous.message_id = None;
    let event = batch(vec![
        message("ok", "item-y", &item_body("ItemCreated", "item-y", 1)),
        anonymous,
    ]);
    assert_eq!(
        runner.run(&event, no_deadline()).await,
        Err(BatchError::MissingMessageId { index: 1 })
    );
    assert_eq!(store.calls(), (0, 0, 0), "nothing was attempted");
}
