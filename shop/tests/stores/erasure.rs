//! An erasure on both stores: the entity's conflict records, whole bodies
//! of the forgotten subject's events, are deleted before the erasure is
//! applied; the entity keeps everything but its personal attributes.

use super::*;

pub async fn an_erasure_deletes_the_entitys_conflict_records<S: Store>(store: S) {
    let runner = Runner::new(shop::domain(), store, RunnerConfig::default());
    let created = order_event("OrderCreated", "order-forgotten", 1, "e-1");
    let conflicting = order_event("OrderCreated", "order-forgotten", 1, "e-1-other");
    let erased = serde_json::json!({
        "eventId": "e-2",
        "type": "PersonalDataErased",
        "aggregateId": "order-forgotten",
        "sequence": 2,
        "data": {"subject": "order-forgotten"},
    })
    .to_string();
    let outcomes = |report: sequence_guard::runner::BatchReport| {
        report
            .messages
            .iter()
            .map(|line| line.outcome)
            .collect::<Vec<_>>()
    };
    let report = runner
        .run(
            &batch(vec![message("m-1", "order-forgotten", &created)]),
            invocation(),
        )
        .await
        .expect("ran");
    assert_eq!(outcomes(report), [Outcome::Applied]);
    let report = runner
        .run(
            &batch(vec![message("m-2", "order-forgotten", &conflicting)]),
            invocation(),
        )
        .await
        .expect("ran");
    assert_eq!(outcomes(report), [Outcome::Conflict]);
    let key = EntityKey::of::<Order>("order-forgotten");
    let before = runner.store().inspect(&key).await.expect("inspected");
    assert_eq!(before.conflicts.len(), 1, "{before:?}");

    let report = runner
        .run(
            &batch(vec![message("m-3", "order-forgotten", &erased)]),
            invocation(),
        )
        .await
        .expect("ran");
    assert_eq!(outcomes(report), [Outcome::Applied]);
    let after = runner.store().inspect(&key).await.expect("inspected");
    assert!(after.conflicts.is_empty(), "{after:?}");
    let order = after
        .stored
        .entity
        .as_ref()
        .and_then(|entity| entity.get::<Order>())
        .cloned()
        .expect("the order");
    assert_eq!(
        order,
        Order {
            sequence: 2,
            last_event_id: "e-2".to_owned(),
            customer_name: "(erased)".to_owned(),
            email: "(erased)".to_owned(),
            ..order_at(1)
        }
    );
}
