//! The store failing under the runner: failed and lost-answer writes,
//! failed loads, unreadable items, failed stock transactions; each fails
//! its own stream only, and nothing is acknowledged that did not land.

use super::*;

#[tokio::test]
async fn a_failed_write_fails_its_run_and_the_rest_of_its_stream_only() {
    let store = FaultyStore::with(Faults {
        save_fails_for: vec!["order-bad".into()],
        ..Default::default()
    });
    let runner = Runner::new(shop::domain(), store.clone(), RunnerConfig::default());
    let event = batch(vec![
        message(
            "bad1",
            "order-bad",
            &order_body("OrderCreated", "order-bad", 1),
        ),
        message(
            "good1",
            "order-good",
            &order_body("OrderCreated", "order-good", 1),
        ),
        message(
            "bad2",
            "order-bad",
            &order_body("OrderUpdated", "order-bad", 2),
        ),
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
    let runner = Runner::new(shop::domain(), store.clone(), RunnerConfig::default());
    let first = batch(vec![message(
        "c1",
        "order-d",
        &order_body("OrderCreated", "order-d", 1),
    )]);
    runner.run(&first, no_deadline()).await.expect("run");
    store.set(Faults {
        save_fails_for: vec!["order-d".into()],
        ..Default::default()
    });
    let event = batch(vec![
        message("c1", "order-d", &order_body("OrderCreated", "order-d", 1)),
        message("u2", "order-d", &order_body("OrderUpdated", "order-d", 2)),
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
    let runner = Runner::new(shop::domain(), store.clone(), RunnerConfig::default());
    let event = batch(vec![
        message("p1", "product-l", &product_created("product-l")),
        message("p2", "product-l", &price_changed("product-l", 2)),
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
        sequence_of(&*store, EntityKey::of::<shop::Product>("product-l")).await,
        Some(2),
        "applied once"
    );
}

#[tokio::test]
async fn a_failed_load_fails_entity_streams_but_not_inventory() {
    let store = FaultyStore::with(Faults {
        load_fails: true,
        ..Default::default()
    });
    let runner = Runner::new(shop::domain(), store.clone(), RunnerConfig::default());
    let event = batch(vec![
        message("o1", "order-l", &order_body("OrderCreated", "order-l", 1)),
        message("i1", "SKU-L", &inventory_adjusted("inv-1", "SKU-L", 4)),
        message("o2", "order-l", &order_body("OrderUpdated", "order-l", 2)),
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
        corrupt: vec![EntityKey::of::<shop::Order>("order-c")],
        ..Default::default()
    });
    let runner = Runner::new(shop::domain(), store.clone(), RunnerConfig::default());
    let event = batch(vec![
        message("c1", "order-c", &order_body("OrderUpdated", "order-c", 2)),
        message("k1", "order-k", &order_body("OrderCreated", "order-k", 1)),
    ]);
    let report = runner.run(&event, no_deadline()).await.expect("run");
    assert_eq!(
        outcomes(&report),
        [("c1", Outcome::StorageError), ("k1", Outcome::Applied)]
    );
}

#[tokio::test]
async fn a_failed_stock_transaction_fails_its_stream_only() {
    let store = FaultyStore::with(Faults {
        adjust_fails: true,
        ..Default::default()
    });
    let runner = Runner::new(shop::domain(), store.clone(), RunnerConfig::default());
    let event = batch(vec![
        message("i1", "SKU-F", &inventory_adjusted("inv-1", "SKU-F", 4)),
        message("i2", "SKU-F", &inventory_adjusted("inv-2", "SKU-F", 1)),
        message("o1", "order-f", &order_body("OrderCreated", "order-f", 1)),
    ]);
    let report = runner.run(&event, no_deadline()).await.expect("run");
    // i1 and i2 share one transaction: both fail with it; order-f goes on.
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
        "one transaction for the sku's adjustments"
    );
    assert_eq!(
        store.counter(&shop::STOCK, "SKU-F").await.expect("read"),
        None
    );
}

#[tokio::test]
async fn a_skus_adjustments_are_one_transaction_and_known_duplicates_none() {
    let store = FaultyStore::with(Faults::default());
    let runner = Runner::new(shop::domain(), store.clone(), RunnerConfig::default());
    let event = batch(vec![
        message("i1", "SKU-T", &inventory_adjusted("inv-1", "SKU-T", 4)),
        message("i2", "SKU-T", &inventory_adjusted("inv-2", "SKU-T", -1)),
        message(
            "i1-again",
            "SKU-T",
            &inventory_adjusted("inv-1", "SKU-T", 4),
        ),
        message("i3", "SKU-T", &inventory_adjusted("inv-3", "SKU-T", 10)),
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
    assert_eq!(
        store.counter(&shop::STOCK, "SKU-T").await.expect("read"),
        Some(13)
    );
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
        save_fails_for: vec!["order-f".into()],
        ..Default::default()
    });
    let runner = Runner::new(shop::domain(), store.clone(), RunnerConfig::default());
    let update = delivered(
        message("u3", "order-f", &order_body("OrderUpdated", "order-f", 3)),
        3,
    );
    let creation = message("c5", "order-f", &order_body("OrderCreated", "order-f", 5));
    let report = runner
        .run(&batch(vec![update, creation]), no_deadline())
        .await
        .expect("run");
    assert_eq!(failed_ids(&report), ["u3", "c5"], "{report:?}");
    store.set(Faults::default());
    let update = delivered(
        message("u3", "order-f", &order_body("OrderUpdated", "order-f", 3)),
        4,
    );
    let creation = message("c5", "order-f", &order_body("OrderCreated", "order-f", 5));
    let report = runner
        .run(&batch(vec![update, creation]), no_deadline())
        .await
        .expect("run");
    assert_eq!(
        outcomes(&report),
        [("u3", Outcome::Duplicate), ("c5", Outcome::Applied)]
    );
    let key = EntityKey::of::<shop::Order>("order-f");
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
