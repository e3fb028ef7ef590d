//! The store failing under the runner: failed and lost-answer writes,
//! failed loads, unreadable items, failed counter transactions; each fails
//! its own stream only, and nothing is acknowledged that did not land.

use super::*;

#[tokio::test]
async fn a_failed_write_fails_its_run_and_the_rest_of_its_stream_only() {
    let store = FaultyStore::with(Faults {
        save_fails_for: vec!["item-bad".into()],
        ..Default::default()
    });
    let runner = Runner::new(domain(), store.clone(), RunnerConfig::default());
    let event = batch(vec![
        message("bad1", "item-bad", &item_body("ItemCreated", "item-bad", 1)),
        message(
            "good1",
            "item-good",
            &item_body("ItemCreated", "item-good", 1),
        ),
        message("bad2", "item-bad", &item_body("ItemUpdated", "item-bad", 2)),
    ]);
    let report = runner.run(&event, no_deadline()).await.expect("run");
    assert_eq!(
        outcomes(&report),
        [
            ("bad1", Outcome::StorageError),
            ("good1", Outcome::Applied),
            ("bad2", Outcome::Skipped)
        ]
    );
    let reason = report.messages[0].reason.as_deref().unwrap_or_default();
    assert!(
        reason.contains("UpdateItem") && reason.contains("ProvisionedThroughputExceeded"),
        "{reason}"
    );
    assert_eq!(failed_ids(&report), ["bad1", "bad2"]);
    // Redelivered once the store is back: applied, nothing lost.
    store.set(Faults::default());
    let report = runner.run(&event, no_deadline()).await.expect("run");
    assert_eq!(
        outcomes(&report),
        [
            ("bad1", Outcome::Applied),
            ("good1", Outcome::Duplicate),
            ("bad2", Outcome::Applied)
        ]
    );
}

#[tokio::test]
async fn duplicates_before_a_failed_write_still_complete() {
    let store = FaultyStore::with(Faults::default());
    let runner = Runner::new(domain(), store.clone(), RunnerConfig::default());
    let first = batch(vec![message(
        "c1",
        "item-d",
        &item_body("ItemCreated", "item-d", 1),
    )]);
    runner.run(&first, no_deadline()).await.expect("run");
    store.set(Faults {
        save_fails_for: vec!["item-d".into()],
        ..Default::default()
    });
    let event = batch(vec![
        message("c1", "item-d", &item_body("ItemCreated", "item-d", 1)),
        message("u2", "item-d", &item_body("ItemUpdated", "item-d", 2)),
    ]);
    let report = runner.run(&event, no_deadline()).await.expect("run");
    assert_eq!(
        outcomes(&report),
        [("c1", Outcome::Duplicate), ("u2", Outcome::StorageError)]
    );
}

#[tokio::test]
async fn a_write_whose_answer_is_lost_is_retried_and_then_found_done() {
    // The write takes effect, but the answer never comes back.
    let store = FaultyStore::with(Faults {
        save_answer_lost: true,
        ..Default::default()
    });
    let runner = Runner::new(domain(), store.clone(), RunnerConfig::default());
    let event = batch(vec![
        message("p1", "tag-l", &tag_created("tag-l")),
        message("p2", "tag-l", &tag_weighed("tag-l", 2)),
    ]);
    let report = runner.run(&event, no_deadline()).await.expect("run");
    assert_eq!(
        outcomes(&report),
        [("p1", Outcome::StorageError), ("p2", Outcome::Skipped)]
    );
    // SQS redelivers both; the guard finds them applied.
    store.set(Faults::default());
    let report = runner.run(&event, no_deadline()).await.expect("run");
    assert_eq!(
        outcomes(&report),
        [("p1", Outcome::Duplicate), ("p2", Outcome::Duplicate)]
    );
    assert_eq!(
        sequence_of(&*store, EntityKey::of::<Tag>("tag-l")).await,
        Some(2),
        "applied once"
    );
}

#[tokio::test]
async fn a_failed_load_fails_entity_streams_but_not_counters() {
    let store = FaultyStore::with(Faults {
        load_fails: true,
        ..Default::default()
    });
    let runner = Runner::new(domain(), store.clone(), RunnerConfig::default());
    let event = batch(vec![
        message("o1", "item-l", &item_body("ItemCreated", "item-l", 1)),
        message("i1", "G-L", &level_adjusted("inv-1", "G-L", 4)),
        message("o2", "item-l", &item_body("ItemUpdated", "item-l", 2)),
    ]);
    let report = runner.run(&event, no_deadline()).await.expect("run");
    assert_eq!(
        outcomes(&report),
        [
            ("o1", Outcome::StorageError),
            ("i1", Outcome::Applied),
            ("o2", Outcome::Skipped)
        ]
    );
    assert_eq!(store.calls(), (1, 0, 1), "no write after a failed load");
}

#[tokio::test]
async fn an_unreadable_item_fails_its_stream_only() {
    let store = FaultyStore::with(Faults {
        corrupt: vec![EntityKey::of::<Item>("item-c")],
        ..Default::default()
    });
    let runner = Runner::new(domain(), store.clone(), RunnerConfig::default());
    let event = batch(vec![
        message("c1", "item-c", &item_body("ItemUpdated", "item-c", 2)),
        message("k1", "item-k", &item_body("ItemCreated", "item-k", 1)),
    ]);
    let report = runner.run(&event, no_deadline()).await.expect("run");
    assert_eq!(
        outcomes(&report),
        [("c1", Outcome::StorageError), ("k1", Outcome::Applied)]
    );
}

#[tokio::test]
async fn a_failed_counter_transaction_fails_its_stream_only() {
    let store = FaultyStore::with(Faults {
        adjust_fails: true,
        ..Default::default()
    });
    let runner = Runner::new(domain(), store.clone(), RunnerConfig::default());
    let event = batch(vec![
        message("i1", "G-F", &level_adjusted("inv-1", "G-F", 4)),
        message("i2", "G-F", &level_adjusted("inv-2", "G-F", 1)),
        message("o1", "item-f", &item_body("ItemCreated", "item-f", 1)),
    ]);
    let report = runner.run(&event, no_deadline()).await.expect("run");
    // i1 and i2 share one transaction: both fail with it; item-f goes on.
    assert_eq!(
        outcomes(&report),
        [
            ("i1", Outcome::StorageError),
            ("i2", Outcome::StorageError),
            ("o1", Outcome::Applied)
        ]
    );
    assert_eq!(
        store.calls().2,
        1,
        "one transaction for the gauge's adjustments"
    );
    assert_eq!(store.counter(&LEVEL, "G-F").await.expect("read"), None);
}

#[tokio::test]
async fn a_gauges_adjustments_are_one_transaction_and_known_duplicates_none() {
    let store = FaultyStore::with(Faults::default());
    let runner = Runner::new(domain(), store.clone(), RunnerConfig::default());
    let event = batch(vec![
        message("i1", "G-T", &level_adjusted("inv-1", "G-T", 4)),
        message("i2", "G-T", &level_adjusted("inv-2", "G-T", -1)),
        message("i1-again", "G-T", &level_adjusted("inv-1", "G-T", 4)),
        message("i3", "G-T", &level_adjusted("inv-3", "G-T", 10)),
    ]);
    let report = runner.run(&event, no_deadline()).await.expect("run");
    assert_eq!(
        outcomes(&report),
        [
            ("i1", Outcome::Applied),
            ("i2", Outcome::Applied),
            ("i1-again", Outcome::Duplicate),
            ("i3", Outcome::Applied)
        ]
    );
    assert_eq!(store.calls(), (1, 0, 1), "one load, one transaction");
    assert_eq!(store.counter(&LEVEL, "G-T").await.expect("read"), Some(13));
    // Redelivered: the load finds every record; no transaction at all.
    let report = runner.run(&event, no_deadline()).await.expect("run");
    assert_eq!(report.count(Outcome::Duplicate), 4);
    assert_eq!(store.calls(), (2, 0, 1));
}

/// An update parked in a batch and found behind a creation later in the same
/// batch stands only if the write that creates the entity does.
#[tokio::test]
async fn a_park_cleared_by_a_later_creation_is_not_acknowledged_when_the_write_fails() {
    let store = FaultyStore::with(Faults {
        save_fails_for: vec!["item-f".into()],
        ..Default::default()
    });
    let runner = Runner::new(domain(), store.clone(), RunnerConfig::default());
    let update = delivered(
        message("u3", "item-f", &item_body("ItemUpdated", "item-f", 3)),
        3,
    );
    let creation = message("c5", "item-f", &item_body("ItemCreated", "item-f", 5));
    let report = runner
        .run(&batch(vec![update, creation]), no_deadline())
        .await
        .expect("run");
    assert_eq!(failed_ids(&report), ["u3", "c5"], "{report:?}");
    store.set(Faults::default());
    let update = delivered(
        message("u3", "item-f", &item_body("ItemUpdated", "item-f", 3)),
        4,
    );
    let creation = message("c5", "item-f", &item_body("ItemCreated", "item-f", 5));
    let report = runner
        .run(&batch(vec![update, creation]), no_deadline())
        .await
        .expect("run");
    assert_eq!(
        outcomes(&report),
        [("u3", Outcome::Duplicate), ("c5", Outcome::Applied)]
    );
    let key = EntityKey::of::<Item>("item-f");
    assert_eq!(sequence_of(&*store, key.clone()).await, Some(5));
    assert!(
        store
            .inspect(&key)
            .await
            .expect("inspect")
            .parked
            .is_empty()
    );
}
