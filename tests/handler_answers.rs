//! A handler's answer is checked against the entity's sequence, on both
//! stores and on every path: `Applied` only on the entity's next sequence
//! (an update handler that forgot the guard, answering applied to event 4
//! on an entity at 2, is a handler error, and nothing of it is written),
//! `Duplicate` never on the entity's next sequence (the stream would wait
//! for ever), `Gap` only when events are missing, `NotCreated` only with no
//! entity. A domain of its own, as a new user would write it.

// This suite has a domain of its own: the test domain's items go unused.
#[allow(unused_imports)]
mod support;

use sequence_guard::runner::{BatchReport, Invocation, Outcome, Runner, RunnerConfig};
use sequence_guard::store::Store;
use sequence_guard::store::memory::MemoryStore;
use sequence_guard::testkit::given;
use sequence_guard::{Decision, Domain, Entity, Events, Handling, Sequenced};
use serde::{Deserialize, Serialize};
use support::*;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Entity)]
#[serde(rename_all = "camelCase")]
#[entity(kind = "TALLY")]
struct Tally {
    sequence: u64,
    last_event_id: String,
    count: u64,
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type", content = "data")]
enum TallyEvent {
    Started(serde::de::IgnoredAny),
    Counted(serde::de::IgnoredAny),
    /// The guard forgotten: applied to whatever comes after the entity.
    CountedBlindly(serde::de::IgnoredAny),
    /// Never applies: says duplicate from the entity's next sequence on.
    CountedNever(serde::de::IgnoredAny),
    /// Says gap whatever comes.
    CountedWaiting(serde::de::IgnoredAny),
    /// The gap forgotten: duplicate for anything but the next sequence.
    CountedForgettingGaps(serde::de::IgnoredAny),
}

fn on_started(tally: &mut Option<Tally>, event: &Sequenced<serde::de::IgnoredAny>) -> Decision {
    if tally.is_some() {
        return Decision::Duplicate;
    }
    *tally = Some(Tally {
        sequence: event.sequence,
        last_event_id: event.event_id.clone(),
        count: 0,
    });
    Decision::Applied
}

fn on_counted(tally: &mut Option<Tally>, event: &Sequenced<serde::de::IgnoredAny>) -> Decision {
    let Some(tally) = tally else {
        return Decision::NotCreated;
    };
    if tally.sequence != event.sequence - 1 {
        return if tally.sequence >= event.sequence {
            Decision::Duplicate
        } else {
            Decision::Gap
        };
    }
    tally.count += 1;
    tally.sequence = event.sequence;
    tally.last_event_id.clone_from(&event.event_id);
    Decision::Applied
}

fn on_counted_blindly(
    tally: &mut Option<Tally>,
    event: &Sequenced<serde::de::IgnoredAny>,
) -> Decision {
    let Some(tally) = tally else {
        return Decision::NotCreated;
    };
    if tally.sequence >= event.sequence {
        return Decision::Duplicate;
    }
    tally.count += 1;
    tally.sequence = event.sequence;
    tally.last_event_id.clone_from(&event.event_id);
    Decision::Applied
}

fn on_counted_never(
    tally: &mut Option<Tally>,
    event: &Sequenced<serde::de::IgnoredAny>,
) -> Decision {
    match tally {
        None => Decision::NotCreated,
        Some(tally) if tally.sequence + 1 >= event.sequence => Decision::Duplicate,
        Some(_) => Decision::Gap,
    }
}

fn on_counted_forgetting_gaps(
    tally: &mut Option<Tally>,
    event: &Sequenced<serde::de::IgnoredAny>,
) -> Decision {
    let Some(tally) = tally else {
        return Decision::NotCreated;
    };
    if tally.sequence != event.sequence - 1 {
        return Decision::Duplicate;
    }
    tally.count += 1;
    tally.sequence = event.sequence;
    tally.last_event_id.clone_from(&event.event_id);
    Decision::Applied
}

fn on_counted_waiting(_: &mut Option<Tally>, _: &Sequenced<serde::de::IgnoredAny>) -> Decision {
    Decision::Gap
}

impl Events for TallyEvent {
    fn handling(self) -> Handling {
        match self {
            TallyEvent::Started(data) => Handling::sequenced(data, on_started),
            TallyEvent::Counted(data) => Handling::sequenced(data, on_counted),
            TallyEvent::CountedBlindly(data) => Handling::sequenced(data, on_counted_blindly),
            TallyEvent::CountedNever(data) => Handling::sequenced(data, on_counted_never),
            TallyEvent::CountedWaiting(data) => Handling::sequenced(data, on_counted_waiting),
            TallyEvent::CountedForgettingGaps(data) => {
                Handling::sequenced(data, on_counted_forgetting_gaps)
            }
        }
    }
}

fn domain() -> Domain {
    Domain::new::<TallyEvent>().entity::<Tally>()
}

fn tally_event(
    event_type: &str,
    sequence: u64,
    receives: u32,
) -> aws_lambda_events::event::sqs::SqsMessage {
    delivered(
        message(
            &format!("m-{sequence}-{event_type}"),
            "t",
            &body(event_type, "t", sequence, serde_json::json!({})),
        ),
        receives,
    )
}

async fn run<S: Store>(runner: &Runner<S>, events: &[(&str, u64, u32)]) -> BatchReport {
    let messages = events
        .iter()
        .map(|(event_type, sequence, receives)| tally_event(event_type, *sequence, *receives))
        .collect();
    let invocation = Invocation {
        deadline: None,
        now: sequence_guard::lambda::epoch_seconds(),
    };
    runner.run(&batch(messages), invocation).await.expect("run")
}

fn reason(report: &BatchReport, index: usize) -> String {
    report.messages[index].reason.clone().unwrap_or_default()
}

async fn stored<S: Store>(store: &S) -> Option<(u64, u64)> {
    typed::<Tally, _>(store, "t")
        .await
        .map(|tally| (tally.sequence, tally.count))
}

/// GIVEN a tally at 2, WHEN a handler without the guard answers applied to
/// event 4, THEN a handler error names the handler, its answer and both
/// sequences, the message fails, and nothing of it is written.
async fn applied_past_the_next_sequence_is_a_handler_error<S: Store>(store: S) {
    let runner = Runner::new(domain(), store, RunnerConfig::default());
    run(&runner, &[("Started", 1, 1), ("Counted", 2, 1)]).await;
    let report = run(&runner, &[("CountedBlindly", 4, 1)]).await;
    assert_eq!(outcomes(&report), [Outcome::HandlerError], "{report:?}");
    assert_eq!(report.handler_errors(), 1);
    let reason = reason(&report, 0);
    assert!(
        reason.starts_with("CountedBlindly event: handler ")
            && reason.contains("on_counted_blindly")
            && reason.contains("answered applied to event 4 on an entity at sequence 2"),
        "{reason}"
    );
    assert_eq!(failed_ids(&report), ["m-4-CountedBlindly"]);
    assert_eq!(
        stored(runner.store()).await,
        Some((2, 1)),
        "nothing written"
    );
    // Its next sequence: right.
    let report = run(&runner, &[("CountedBlindly", 3, 1)]).await;
    assert_eq!(outcomes(&report), [Outcome::Applied]);
    assert_eq!(stored(runner.store()).await, Some((3, 2)));
}

/// `Duplicate` on the entity's next sequence completes a message that was
/// never applied (the stream then waits for ever), and `Gap` or
/// `NotCreated` where the entity is right there retries for ever: handler
/// errors.
async fn other_answers_out_of_place_are_handler_errors<S: Store>(store: S) {
    let runner = Runner::new(domain(), store, RunnerConfig::default());
    run(&runner, &[("Started", 1, 1)]).await;
    let report = run(&runner, &[("CountedNever", 2, 1)]).await;
    assert_eq!(outcomes(&report), [Outcome::HandlerError], "{report:?}");
    assert!(
        reason(&report, 0).contains(
            "answered duplicate to event 2 on an entity at sequence 1: the event is its next"
        ),
        "{}",
        reason(&report, 0)
    );
    let report = run(&runner, &[("CountedWaiting", 2, 1)]).await;
    assert_eq!(outcomes(&report), [Outcome::HandlerError], "{report:?}");
    assert!(
        reason(&report, 0).contains("answered gap to event 2 on an entity at sequence 1"),
        "{}",
        reason(&report, 0)
    );
    assert_eq!(stored(runner.store()).await, Some((1, 0)));
    // A gap that is one: still a gap.
    let report = run(&runner, &[("CountedWaiting", 3, 1)]).await;
    assert_eq!(outcomes(&report), [Outcome::Gap]);
}

/// GIVEN a tally at 1, WHEN an update handler that forgot the gap answers
/// duplicate to event 3, THEN a handler error (completed as a duplicate,
/// event 3 would be lost); a creation's duplicate on an entity behind the
/// event (a second creation appended by mistake) is right, not listed.
async fn a_gap_answered_duplicate_is_a_handler_error<S: Store>(store: S) {
    let runner = Runner::new(domain(), store, RunnerConfig::default());
    run(&runner, &[("Started", 1, 1)]).await;
    let report = run(&runner, &[("CountedForgettingGaps", 3, 1)]).await;
    assert_eq!(outcomes(&report), [Outcome::HandlerError], "{report:?}");
    assert!(
        reason(&report, 0).contains(
            "answered duplicate to event 3 on an entity at sequence 1: events 2 to 2 are missing"
        ),
        "{}",
        reason(&report, 0)
    );
    assert_eq!(failed_ids(&report), ["m-3-CountedForgettingGaps"]);
    let report = run(&runner, &[("Started", 4, 1)]).await;
    assert_eq!(outcomes(&report), [Outcome::Duplicate], "{report:?}");
    assert!(failed_ids(&report).is_empty());
    assert_eq!(stored(runner.store()).await, Some((1, 0)));
}

/// A parked event whose handler answers duplicate when it is drained on
/// the entity's next sequence stays parked, counted as a handler error
/// (before: a silent refusal).
async fn a_drained_event_is_checked_as_well<S: Store>(store: S) {
    let runner = Runner::new(domain(), store, RunnerConfig::default());
    run(&runner, &[("Started", 1, 1)]).await;
    let report = run(&runner, &[("CountedNever", 3, 3)]).await;
    assert_eq!(outcomes(&report), [Outcome::Parked], "{report:?}");
    let report = run(&runner, &[("Counted", 2, 1)]).await;
    assert_eq!(outcomes(&report), [Outcome::Applied], "{report:?}");
    assert_eq!(report.handler_errors(), 1, "{report:?}");
    let stuck = report
        .parking
        .iter()
        .find_map(|parking| parking.stuck.clone())
        .expect("the parked event that cannot be applied");
    assert!(stuck.handler_error, "{stuck:?}");
    assert!(
        stuck.reason.contains("on_counted_never")
            && stuck
                .reason
                .contains("answered duplicate to event 3 on an entity at sequence 2")
            && stuck.reason.contains("(CountedNever event)"),
        "{}",
        stuck.reason
    );
    assert_eq!(stored(runner.store()).await, Some((2, 1)));
}

#[tokio::test]
async fn applied_past_the_next_sequence_is_a_handler_error_in_memory() {
    applied_past_the_next_sequence_is_a_handler_error(MemoryStore::new()).await;
}

#[tokio::test]
async fn applied_past_the_next_sequence_is_a_handler_error_on_dynamodb() {
    applied_past_the_next_sequence_is_a_handler_error(fresh_table().await).await;
}

#[tokio::test]
async fn other_answers_out_of_place_are_handler_errors_in_memory() {
    other_answers_out_of_place_are_handler_errors(MemoryStore::new()).await;
}

#[tokio::test]
async fn other_answers_out_of_place_are_handler_errors_on_dynamodb() {
    other_answers_out_of_place_are_handler_errors(fresh_table().await).await;
}

#[tokio::test]
async fn a_gap_answered_duplicate_is_a_handler_error_in_memory() {
    a_gap_answered_duplicate_is_a_handler_error(MemoryStore::new()).await;
}

#[tokio::test]
async fn a_gap_answered_duplicate_is_a_handler_error_on_dynamodb() {
    a_gap_answered_duplicate_is_a_handler_error(fresh_table().await).await;
}

#[tokio::test]
async fn a_drained_event_is_checked_as_well_in_memory() {
    a_drained_event_is_checked_as_well(MemoryStore::new()).await;
}

#[tokio::test]
async fn a_drained_event_is_checked_as_well_on_dynamodb() {
    a_drained_event_is_checked_as_well(fresh_table().await).await;
}

/// The test kit runs the same check: a user's own handler test catches
/// the forgotten guard.
#[test]
fn the_testkit_names_the_forgotten_guard() {
    let at = |sequence, count| Tally {
        sequence,
        last_event_id: format!("e{sequence}"),
        count,
    };
    let then = given(Some(at(2, 1))).when(
        "e4",
        "t",
        4,
        TallyEvent::CountedBlindly(serde::de::IgnoredAny),
    );
    let fault = then.decision().expect_err("a handler error");
    assert!(
        fault.handler.ends_with("on_counted_blindly")
            && fault
                .problem
                .contains("answered applied to event 4 on an entity at sequence 2"),
        "{fault}"
    );
    assert_eq!(then.entity(), Some(&at(2, 1)), "left as it was");
    given(Some(at(2, 1)))
        .when(
            "e3",
            "t",
            3,
            TallyEvent::CountedBlindly(serde::de::IgnoredAny),
        )
        .then(
            Decision::Applied,
            Some(Tally {
                sequence: 3,
                last_event_id: "e3".into(),
                count: 2,
            }),
        );
    given(None::<Tally>)
        .when(
            "e2",
            "t",
            2,
            TallyEvent::CountedNever(serde::de::IgnoredAny),
        )
        .then(Decision::NotCreated, None);
}
