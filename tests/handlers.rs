//! The engine's check of every handler's answer, with a small domain of its
//! own: `Applied` must leave the entity at the event's sequence, any other
//! answer must leave it as it was, a snapshot must be at its event's
//! sequence. A handler that breaks this fails its message, with a reason
//! naming the handler, and nothing of it is written.

use aws_lambda_events::event::sqs::{SqsEvent, SqsMessage};
use sequence_guard::runner::{BatchReport, Invocation, Outcome, Runner, RunnerConfig};
use sequence_guard::store::memory::MemoryStore;
use sequence_guard::{Decision, Domain, Entity, EntityKey, Events, Handling, Sequenced};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Tally {
    sequence: u64,
    last_event_id: String,
    count: u64,
}

impl Entity for Tally {
    const KIND: &'static str = "TALLY";
    fn sequence(&self) -> u64 {
        self.sequence
    }
    fn last_event_id(&self) -> &str {
        &self.last_event_id
    }
}

#[derive(Debug, Deserialize)]
struct Nothing {}

#[derive(Debug, Deserialize)]
#[serde(tag = "type", content = "data")]
enum TallyEvent {
    Started(Nothing),
    Counted(Nothing),
    /// Applied, but forgets to move the sequence.
    CountedForgetful(Nothing),
    /// Says gap, and changes the count anyway.
    CountedSneaky(Nothing),
    /// A snapshot that claims another sequence than its event's.
    Reset(Nothing),
    /// No guard: applies whatever comes, a redelivery included.
    CountedBlindly(Nothing),
    /// Moves the sequence, forgets the last event id.
    CountedQuietly(Nothing),
}

fn on_started(tally: &mut Option<Tally>, event: &Sequenced<Nothing>) -> Decision {
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

fn on_counted(tally: &mut Option<Tally>, event: &Sequenced<Nothing>) -> Decision {
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
    tally.sequence += 1;
    tally.last_event_id.clone_from(&event.event_id);
    Decision::Applied
}

fn on_counted_forgetful(tally: &mut Option<Tally>, _: &Sequenced<Nothing>) -> Decision {
    if let Some(tally) = tally {
        tally.count += 1;
    }
    Decision::Applied
}

fn on_counted_sneaky(tally: &mut Option<Tally>, _: &Sequenced<Nothing>) -> Decision {
    if let Some(tally) = tally {
        tally.count += 100;
    }
    Decision::Gap
}

fn on_counted_blindly(tally: &mut Option<Tally>, event: &Sequenced<Nothing>) -> Decision {
    let Some(tally) = tally else {
        return Decision::NotCreated;
    };
    tally.count += 1;
    tally.sequence = event.sequence;
    tally.last_event_id.clone_from(&event.event_id);
    Decision::Applied
}

fn on_counted_quietly(tally: &mut Option<Tally>, event: &Sequenced<Nothing>) -> Decision {
    let Some(tally) = tally else {
        return Decision::NotCreated;
    };
    if tally.sequence != event.sequence - 1 {
        return Decision::Gap;
    }
    tally.count += 1;
    tally.sequence += 1;
    Decision::Applied
}

fn reset(event: &Sequenced<Nothing>) -> Tally {
    Tally {
        sequence: event.sequence + 1,
        last_event_id: event.event_id.clone(),
        count: 0,
    }
}

impl Events for TallyEvent {
    fn handling(self) -> Handling {
        match self {
            TallyEvent::Started(data) => Handling::sequenced(data, on_started),
            TallyEvent::Counted(data) => Handling::sequenced(data, on_counted),
            TallyEvent::CountedForgetful(data) => Handling::sequenced(data, on_counted_forgetful),
            TallyEvent::CountedSneaky(data) => Handling::sequenced(data, on_counted_sneaky),
            TallyEvent::Reset(data) => Handling::snapshot(data, reset),
            TallyEvent::CountedBlindly(data) => Handling::sequenced(data, on_counted_blindly),
            TallyEvent::CountedQuietly(data) => Handling::sequenced(data, on_counted_quietly),
        }
    }
}

fn domain() -> Domain {
    Domain::new::<TallyEvent>().entity::<Tally>()
}

fn batch(events: &[(&str, u64)]) -> SqsEvent {
    let mut batch = SqsEvent::default();
    for (index, (event_type, sequence)) in events.iter().enumerate() {
        let mut message = SqsMessage::default();
        message.message_id = Some(format!("m{index}-{sequence}"));
        message.body = Some(
            serde_json::json!({
                "eventId": format!("t-{sequence}-{event_type}"),
                "type": event_type,
                "aggregateId": "t",
                "sequence": sequence,
                "data": {}
            })
            .to_string(),
        );
        batch.records.push(message);
    }
    batch
}

async fn run(runner: &Runner<&MemoryStore>, events: &[(&str, u64)]) -> BatchReport {
    let invocation = Invocation {
        deadline: None,
        now: 1_764_489_600,
    };
    runner.run(&batch(events), invocation).await.expect("run")
}

fn outcomes(report: &BatchReport) -> Vec<Outcome> {
    report
        .messages
        .iter()
        .map(|message| message.outcome)
        .collect()
}

fn stored(store: &MemoryStore) -> Option<Tally> {
    store
        .entities()
        .into_iter()
        .find(|(key, _)| *key == EntityKey::of::<Tally>("t"))
        .and_then(|(_, entity)| entity.get::<Tally>().cloned())
}

fn tally(sequence: u64, count: u64, last: &str) -> Tally {
    Tally {
        sequence,
        last_event_id: last.to_owned(),
        count,
    }
}

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

#[test]
fn the_domain_knows_its_types_and_kinds_from_the_declarations() {
    let domain = domain();
    assert_eq!(
        domain.types(),
        [
            "Started",
            "Counted",
            "CountedForgetful",
            "CountedSneaky",
            "Reset",
            "CountedBlindly",
            "CountedQuietly"
        ]
    );
    assert_eq!(domain.kind("tally").map(|kind| kind.name), Some("TALLY"));
    assert_eq!(
        domain.key_of_pk("TALLY#t#1"),
        Some(EntityKey::of::<Tally>("t#1")),
        "an id may hold #"
    );
    assert_eq!(domain.key_of_pk("ORDER#o"), None, "not this domain's");
    let event = domain
        .parse(r#"{"eventId":"e","type":"Counted","aggregateId":"t","sequence":2,"data":{}}"#)
        .expect("valid");
    assert_eq!(event.type_name(), "Counted");
    assert_eq!(event.handler(), "handlers::on_counted");
    let err = domain
        .parse(r#"{"eventId":"e","type":"Counting","aggregateId":"t","sequence":2,"data":{}}"#)
        .expect_err("unknown");
    assert_eq!(err.to_string(), "unknown event type `Counting`");
}
