//! The sample events run through the runner on both stores, end to end.

use super::*;
use Outcome::*;

/// The sample events, replayed in order, tell the story the README tells.
pub async fn the_sample_events_tell_their_story<S: Store>(store: S) {
    let runner = Runner::new(shop::domain(), store, RunnerConfig::default());
    let expected: [&[Outcome]; 14] = [
        &[Applied, Applied, Applied],
        &[Duplicate, Duplicate, Duplicate],
        &[Gap, Skipped],
        &[Applied, Applied, Applied],
        &[NotCreated, Skipped],
        &[Applied, Applied, Applied, Gap, Applied, Skipped],
        &[
            Invalid, Skipped, Invalid, Invalid, Invalid, Invalid, Invalid, Applied,
        ],
        &[Applied, Applied, Applied, Duplicate],
        &[Applied, Applied, Applied, Duplicate],
        &[Parked, Parked],
        &[Applied, Conflict],
        &[Applied; 5],
        &[Applied, Duplicate],
        &[Applied],
    ];
    for ((file, json), expected) in samples::ALL.iter().zip(expected) {
        let event = sample(json);
        let report = runner
            .run(&event, invocation())
            .await
            .expect("every sample has message ids");
        assert_eq!(outcomes(&report), expected, "{file}");
        let failed: Vec<String> = event
            .records
            .iter()
            .zip(expected)
            .filter(|(_, outcome)| outcome.is_failure())
            .filter_map(|(record, _)| record.message_id.clone())
            .collect();
        let listed: Vec<String> = report
            .response()
            .batch_item_failures
            .into_iter()
            .map(|failure| failure.item_identifier)
            .collect();
        assert_eq!(listed, failed, "{file}: batchItemFailures");
    }
    let store = runner.store();
    match typed::<shop::Order, _>(store, "order-42").await {
        Some(order) => {
            assert_eq!(
                (order.sequence, order.total_cents, order.status),
                (6, 2000, OrderStatus::Cancelled)
            );
            assert_eq!(order.cancel_reason.as_deref(), Some("customer request"));
        }
        other => panic!("order-42: {other:?}"),
    }
    // Its events 5 and 6 were parked, and drained when 4 arrived.
    match typed::<shop::Order, _>(store, "order-100").await {
        Some(order) => {
            assert_eq!(
                (order.sequence, order.total_cents, order.status),
                (6, 500, OrderStatus::Cancelled)
            );
            assert_eq!(order.cancel_reason.as_deref(), Some("out of stock"));
        }
        other => panic!("order-100: {other:?}"),
    }
    let inspection = store
        .inspect(&EntityKey::of::<shop::Order>("order-100"))
        .await
        .expect("inspect");
    assert!(inspection.parked.is_empty());
    assert_eq!(inspection.conflicts.len(), 1);
    assert_eq!(inspection.conflicts[0].sequence, 6);
    assert_eq!(
        entity(store, EntityKey::of::<shop::Order>("order-200"))
            .await
            .map(|e| e.sequence()),
        Some(1)
    );
    assert_eq!(
        entity(store, EntityKey::of::<shop::Order>("order-505"))
            .await
            .map(|e| e.sequence()),
        Some(1)
    );
    assert_eq!(
        entity(store, EntityKey::of::<shop::Order>("order-77")).await,
        None
    );
    assert_eq!(
        entity(store, EntityKey::of::<shop::Order>("order-500")).await,
        None
    );
    // Its customer forgotten: the name and email read as the placeholder,
    // everything else as it was, the sequence moved past the erasure.
    match typed::<shop::Order, _>(store, "order-300").await {
        Some(order) => {
            assert_eq!(
                (order.customer_name.as_str(), order.email.as_str()),
                ("(erased)", "(erased)")
            );
            assert_eq!(
                (order.sequence, order.total_cents, order.paid_cents),
                (3, 2500, 2500)
            );
            assert_eq!(order.status, OrderStatus::Open);
        }
        other => panic!("order-300: {other:?}"),
    }
    match typed::<shop::Product, _>(store, "product-7").await {
        Some(product) => {
            assert_eq!((product.sequence, product.price_cents), (3, 2999))
        }
        other => panic!("product-7: {other:?}"),
    }
    assert_eq!(
        store.counter(&shop::STOCK, "SKU-LAMP").await.expect("read"),
        Some(7)
    );
    assert_eq!(
        store.counter(&shop::STOCK, "SKU-DESK").await.expect("read"),
        Some(5)
    );
}
