//! The answers checked: `Applied` without moving the sequence or without
//! recording the event, another answer that changes the entity, a snapshot
//! at another sequence, a pass that cannot move its entity.

use super::*;

#[tokio::test]
async fn applied_without_moving_the_sequence_fails_the_message_and_writes_nothing_of_it() {
    let store = MemoryStore::new();
    let runner = Runner::new(domain(), &store, RunnerConfig::default());
    let report = run(
        &runner,
        &[
            ("Started", 1),
            ("Counted", 2),
            ("CountedForgetful", 3),
            ("Counted", 3),
        ],
    )
    .await;
    assert_eq!(
        outcomes(&report),
        [
            Outcome::Applied,
            Outcome::Applied,
            Outcome::HandlerError,
            Outcome::Skipped
        ]
    );
    let reason = report.messages[2].reason.as_deref().unwrap_or_default();
    assert!(
        reason.contains("on_counted_forgetful")
            && reason.contains("answered applied to event 3 and left the entity at sequence 2"),
        "{reason}"
    );
    let failed: Vec<String> = report
        .response()
        .batch_item_failures
        .into_iter()
        .map(|failure| failure.item_identifier)
        .collect();
    assert_eq!(failed, ["m2-3", "m3-3"], "the fault and what follows it");
    // The two before it are written; the forgetful count is not.
    assert_eq!(stored(&store), Some(tally(2, 1, "t-2-Counted")));
}

#[tokio::test]
async fn another_answer_that_changes_the_entity_fails_and_writes_nothing_of_it() {
    let store = MemoryStore::new();
    let runner = Runner::new(domain(), &store, RunnerConfig::default());
    run(&runner, &[("Started", 1), ("Counted", 2)]).await;
    let report = run(&runner, &[("CountedSneaky", 3)]).await;
    assert_eq!(outcomes(&report), [Outcome::HandlerError]);
    let reason = report.messages[0].reason.as_deref().unwrap_or_default();
    assert!(
        reason.contains("on_counted_sneaky")
            && reason.contains("answered gap to event 3 and changed the entity"),
        "{reason}"
    );
    assert_eq!(stored(&store), Some(tally(2, 1, "t-2-Counted")));
    // The stream goes on once a good handler takes the sequence.
    let report = run(&runner, &[("Counted", 3)]).await;
    assert_eq!(outcomes(&report), [Outcome::Applied]);
    assert_eq!(stored(&store), Some(tally(3, 2, "t-3-Counted")));
}

#[tokio::test]
async fn a_snapshot_at_another_sequence_than_its_event_is_a_fault() {
    let store = MemoryStore::new();
    let runner = Runner::new(domain(), &store, RunnerConfig::default());
    let report = run(&runner, &[("Reset", 4)]).await;
    assert_eq!(outcomes(&report), [Outcome::HandlerError]);
    let reason = report.messages[0].reason.as_deref().unwrap_or_default();
    assert!(
        reason.contains("built a snapshot at sequence 5 from event 4"),
        "{reason}"
    );
    assert_eq!(stored(&store), None);
}

/// `Applied` must move the entity forward and name the event as its last:
/// a handler without the guard re-applying a redelivered event, and one that
/// forgets the last event id (the next redelivery would look like a
/// conflict), fail their messages.
#[tokio::test]
async fn applied_must_move_forward_and_record_the_event() {
    let store = MemoryStore::new();
    let runner = Runner::new(domain(), &store, RunnerConfig::default());
    run(&runner, &[("Started", 1), ("Counted", 2)]).await;
    let report = run(&runner, &[("CountedBlindly", 2)]).await;
    assert_eq!(outcomes(&report), [Outcome::HandlerError]);
    let reason = report.messages[0].reason.as_deref().unwrap_or_default();
    assert!(
        reason.contains("answered applied to event 2 on an entity already at sequence 2"),
        "{reason}"
    );
    let report = run(&runner, &[("CountedQuietly", 3)]).await;
    assert_eq!(outcomes(&report), [Outcome::HandlerError]);
    let reason = report.messages[0].reason.as_deref().unwrap_or_default();
    assert!(
        reason.contains("left the entity's last event id at `t-2-Counted`"),
        "{reason}"
    );
    assert_eq!(stored(&store), Some(tally(2, 1, "t-2-Counted")));
    let report = run(&runner, &[("CountedBlindly", 3)]).await;
    assert_eq!(outcomes(&report), [Outcome::Applied], "next in line: fine");
}

/// An entity whose last event id is not the attribute `lastEventId`: the
/// default `Entity::advance` cannot move it, so a pass on it is a handler
/// error, never a silent write of a half-moved entity.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Renamed {
    sequence: u64,
    #[serde(rename = "lastEvent")]
    last_event_id: String,
}

impl Entity for Renamed {
    const KIND: &'static str = "RENAMED";
    fn sequence(&self) -> u64 {
        self.sequence
    }
    fn last_event_id(&self) -> &str {
        &self.last_event_id
    }
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type", content = "data")]
enum RenamedEvent {
    Touched(serde::de::IgnoredAny),
}

impl Events for RenamedEvent {
    fn handling(self) -> Handling {
        match self {
            RenamedEvent::Touched(_) => Handling::pass::<Renamed>(),
        }
    }
}

#[test]
fn a_pass_that_cannot_move_its_entity_is_a_handler_error() {
    use sequence_guard::testkit::given;

    let moved = given(Some(Tally {
        sequence: 1,
        last_event_id: "e1".into(),
        count: 4,
    }))
    .when("e2", "t", 2, TallyEvent::CountedPassing(Nothing {}));
    moved.then(Decision::Applied, Some(tally(2, 4, "e2")));

    let stuck = given(Some(Renamed {
        sequence: 1,
        last_event_id: "e1".into(),
    }))
    .when("e2", "r", 2, RenamedEvent::Touched(serde::de::IgnoredAny));
    let fault = stuck.decision().expect_err("a handler error");
    assert!(
        fault.problem.contains("answered applied to event 2"),
        "{fault}"
    );
    assert_eq!(stuck.entity().map(|renamed| renamed.sequence), Some(1));
}

#[tokio::test]
async fn invalid_on_the_next_sequence_fails_the_message_as_invalid_and_writes_nothing() {
    let store = MemoryStore::new();
    let runner = Runner::new(domain(), &store, RunnerConfig::default());
    run(&runner, &[("Started", 1), ("Counted", 2)]).await;
    let report = run(&runner, &[("CountedInvalid", 3), ("Counted", 4)]).await;
    assert_eq!(outcomes(&report), [Outcome::Invalid, Outcome::Skipped]);
    let reason = report.messages[0].reason.as_deref().unwrap_or_default();
    assert!(
        reason.contains("on_counted_invalid") && reason.contains("can never be applied"),
        "{reason}"
    );
    assert_eq!(stored(&store), Some(tally(2, 1, "t-2-Counted")));
    // Where applied would not be right (a duplicate, a gap), invalid is a
    // handler's mistake: a duplicate is never refused.
    let report = run(&runner, &[("CountedInvalid", 2)]).await;
    assert_eq!(outcomes(&report), [Outcome::HandlerError]);
    let reason = report.messages[0].reason.as_deref().unwrap_or_default();
    assert!(
        reason.contains("answered invalid to event 2 on an entity at sequence 2"),
        "{reason}"
    );
}
