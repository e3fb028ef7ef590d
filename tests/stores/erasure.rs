//! An erasure on both stores: the entity's conflict records, whole bodies
//! of the forgotten subject's events, are deleted before the erasure is
//! applied; the entity keeps everything but its personal attributes.

use super::*;

pub async fn an_erasure_deletes_the_entitys_conflict_records<S: Store>(store: S) {
    let runner = Runner::new(domain(), store, RunnerConfig::default());
    let created = item_event("ItemCreated", "item-forgotten", 1, "e-1");
    let conflicting = item_event("ItemCreated", "item-forgotten", 1, "e-1-other");
    let erased = item_event("PersonalDataErased", "item-forgotten", 2, "e-2");
    let outcomes = |report: sequence_guard::runner::BatchReport| {
        report
            .messages
            .iter()
            .map(|line| line.outcome)
            .collect::<Vec<_>>()
    };
    let report = runner
        .run(
            &batch(vec![message("m-1", "item-forgotten", &created)]),
            invocation(),
        )
        .await
        .expect("ran");
    assert_eq!(outcomes(report), [Outcome::Applied]);
    let report = runner
        .run(
            &batch(vec![message("m-2", "item-forgotten", &conflicting)]),
            invocation(),
        )
        .await
        .expect("ran");
    assert_eq!(outcomes(report), [Outcome::Conflict]);
    let key = EntityKey::of::<Item>("item-forgotten");
    let before = runner.store().inspect(&key).await.expect("inspected");
    assert_eq!(before.conflicts.len(), 1, "{before:?}");

    let report = runner
        .run(
            &batch(vec![message("m-3", "item-forgotten", &erased)]),
            invocation(),
        )
        .await
        .expect("ran");
    assert_eq!(outcomes(report), [Outcome::Applied]);
    let after = runner.store().inspect(&key).await.expect("inspected");
    assert!(after.conflicts.is_empty(), "{after:?}");
    let item = after
        .stored
        .entity
        .as_ref()
        .and_then(|entity| entity.get::<Item>())
        .cloned()
        .expect("the item");
    assert_eq!(
        item,
        Item {
            sequence: 2,
            last_event_id: "e-2".to_owned(),
            name: "(erased)".to_owned(),
            ..item_at(1)
        }
    );
}
