//! Writes the table refuses for good: `rejected`, not a storage error, and
//! one verdict per message when a counter step is refused twice.

use super::*;

/// A write the table refuses for good (DynamoDB's ValidationException) is
/// its own outcome, not a storage error: failed with a reason that says
/// retrying will not help; the rest of its stream waits, other streams go on.
#[tokio::test]
async fn a_write_the_table_refuses_for_good_is_rejected_not_a_storage_error() {
    let store = FaultyStore::with(Faults::default());
    let runner = Runner::new(domain(), store.clone(), RunnerConfig::default());
    let created = batch(vec![
        message(
            "big-1",
            "item-big",
            &item_body("ItemCreated", "item-big", 1),
        ),
        message("ok-1", "item-ok", &item_body("ItemCreated", "item-ok", 1)),
    ]);
    runner.run(&created, no_deadline()).await.expect("run");
    store.set(Faults {
        save_rejected_for: vec!["item-big".into()],
        ..Default::default()
    });
    let report = runner
        .run(
            &batch(vec![
                message(
                    "big-2",
                    "item-big",
                    &item_body("ItemUpdated", "item-big", 2),
                ),
                message(
                    "big-3",
                    "item-big",
                    &item_body("ItemUpdated", "item-big", 3),
                ),
                message("ok-2", "item-ok", &item_body("ItemUpdated", "item-ok", 2)),
            ]),
            no_deadline(),
        )
        .await
        .expect("run");
    assert_eq!(
        outcomes(&report),
        [
            ("big-2", Outcome::Rejected),
            ("big-3", Outcome::Skipped),
            ("ok-2", Outcome::Applied)
        ]
    );
    let reason = report.messages[0].reason.as_deref().unwrap_or_default();
    assert!(
        reason.contains("refused by the table")
            && reason.contains("ValidationException")
            && reason.contains("will not help"),
        "{reason}"
    );
    assert_eq!(report.count(Outcome::StorageError), 0);
    assert_eq!(
        sequence_of(&*store, EntityKey::of::<Item>("item-big")).await,
        Some(1)
    );
    assert!(sequence_guard::metrics::emitted().contains(&"Rejected"));
}

/// The level moves between two attempts of a stream's counter transaction:
/// the first refusal cuts at the fourth adjustment, the second (the level higher
/// now) at the second. Every message still gets exactly one verdict: the
/// first applied, the second rejected, the rest not attempted.
#[tokio::test]
async fn a_second_refusal_of_a_counter_step_keeps_one_verdict_per_message() {
    let store = FaultyStore::with(Faults {
        adjust_answers: vec![
            Added::OutOfRange {
                counter: &LEVEL,
                id: "G-Q".into(),
                value: Some(i64::MAX - 35),
            },
            Added::OutOfRange {
                counter: &LEVEL,
                id: "G-Q".into(),
                value: Some(i64::MAX - 15),
            },
        ],
        ..Default::default()
    });
    let runner = Runner::new(domain(), store.clone(), RunnerConfig::default());
    let messages: Vec<_> = (1..=5)
        .map(|n| {
            let id = format!("q{n}");
            message(&id, "G-Q", &level_adjusted(&id, "G-Q", 10))
        })
        .collect();
    let report = runner
        .run(&batch(messages), no_deadline())
        .await
        .expect("run");
    assert_eq!(
        outcomes(&report),
        [
            ("q1", Outcome::Applied),
            ("q2", Outcome::Rejected),
            ("q3", Outcome::Skipped),
            ("q4", Outcome::Skipped),
            ("q5", Outcome::Skipped),
        ]
    );
    assert_eq!(
        store.inner.counter(&LEVEL, "G-Q").await.expect("read"),
        Some(10)
    );
    assert_eq!(
        store.calls().2,
        3,
        "two refusals, then the one adjustment before both"
    );
}
