//! Bad inputs, each failing alone: unreadable bodies, and bodies too large
//! to park or record.

use super::*;

#[tokio::test]
async fn bad_inputs_each_fail_alone() {
    let store = FaultyStore::with(Faults::default());
    let runner = Runner::new(domain(), store.clone(), RunnerConfig::default());
    let mut no_body = message("no-body", "g-nobody", "");
    no_body.body = None;
    let event = batch(vec![
        message("not-json", "g1", "{\"eventId\""),
        message("deep", "g2", &"[".repeat(100_000)),
        message("array", "g3", "[1,2,3]"),
        message(
            "unknown",
            "g4",
            &json!({"eventId":"e","type":"Nope","data":{}}).to_string(),
        ),
        message("zero", "g5", &item_body("ItemUpdated", "item-z", 0)),
        message("binary", "g6", "\u{0}\u{1}\u{fffd}"),
        no_body,
        message(
            "fine",
            "item-fine",
            &item_body("ItemCreated", "item-fine", 1),
        ),
    ]);
    let report = runner.run(&event, no_deadline()).await.expect("run");
    let expected_invalid = [
        "not-json", "deep", "array", "unknown", "zero", "binary", "no-body",
    ];
    assert_eq!(failed_ids(&report), expected_invalid);
    for message in &report.messages[..7] {
        assert_eq!(message.outcome, Outcome::Invalid, "{}", message.message_id);
        assert!(
            message
                .reason
                .as_deref()
                .is_some_and(|reason| !reason.is_empty())
        );
    }
    assert_eq!(report.messages[7].outcome, Outcome::Applied);
}

/// A body too large for a DynamoDB item (400 KB) cannot be parked or
/// recorded as a conflict: the message fails with a reason that says so,
/// and costs nothing else.
#[tokio::test]
async fn bodies_too_large_to_park_or_record_fail_alone_with_a_reason() {
    let store = FaultyStore::with(Faults::default());
    let runner = Runner::new(domain(), store.clone(), RunnerConfig::default());
    let big = |sequence: u64, event_id: &str| {
        json!({
            "eventId": event_id,
            "type": "ItemUpdated",
            "aggregateId": "item-big",
            "sequence": sequence,
            "data": { "name": NAME, "amount": 1 },
            "padding": "x".repeat(360 * 1024),
        })
        .to_string()
    };
    let created = item_body("ItemCreated", "item-big", 1);
    runner
        .run(
            &batch(vec![message("c1", "item-big", &created)]),
            no_deadline(),
        )
        .await
        .expect("run");

    let gap = delivered(message("g3", "item-big", &big(3, "item-big-3")), 3);
    let fine = delivered(
        message(
            "o1",
            "item-other",
            &item_body("ItemCreated", "item-other", 1),
        ),
        1,
    );
    let report = runner
        .run(&batch(vec![gap, fine]), no_deadline())
        .await
        .expect("run");
    assert_eq!(
        outcomes(&report),
        [("g3", Outcome::Gap), ("o1", Outcome::Applied)]
    );
    assert!(
        report.messages[0]
            .reason
            .as_deref()
            .is_some_and(|reason| reason.contains("not parked: the body is")),
        "{:?}",
        report.messages[0].reason
    );
    let key = EntityKey::of::<Item>("item-big");
    assert!(
        store
            .inspect(&key)
            .await
            .expect("inspect")
            .parked
            .is_empty()
    );

    // A different event for the applied sequence 1, too large to record.
    let conflicting = big(1, "another-1").replace("ItemUpdated", "ItemCreated");
    let report = runner
        .run(
            &batch(vec![message("x1", "item-big", &conflicting)]),
            no_deadline(),
        )
        .await
        .expect("run");
    assert_eq!(outcomes(&report), [("x1", Outcome::Invalid)]);
    assert!(
        report.messages[0]
            .reason
            .as_deref()
            .is_some_and(|reason| reason.contains("too large to record")),
        "{:?}",
        report.messages[0].reason
    );
    assert!(
        store
            .inspect(&key)
            .await
            .expect("inspect")
            .conflicts
            .is_empty()
    );
    assert_eq!(sequence_of(&*store, key).await, Some(1));
}
