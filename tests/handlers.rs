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
    /// Panics, whatever comes.
    CountedPanicking(Nothing),
    /// Holds the guard, and panics when it would apply.
    CountedPanickingWhenNext(Nothing),
    /// Passes: only the sequence and the last event id move.
    CountedPassing(Nothing),
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

fn on_counted_panicking(_: &mut Option<Tally>, event: &Sequenced<Nothing>) -> Decision {
    panic!("a bug in the handler, at event {}", event.sequence)
}

fn on_counted_panicking_when_next(
    tally: &mut Option<Tally>,
    event: &Sequenced<Nothing>,
) -> Decision {
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
    tally.count += 1; // changed before the panic: none of it may be written
    panic!("a bug in the handler")
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
            TallyEvent::CountedPanicking(data) => Handling::sequenced(data, on_counted_panicking),
            TallyEvent::CountedPanickingWhenNext(data) => {
                Handling::sequenced(data, on_counted_panicking_when_next)
            }
            TallyEvent::CountedPassing(_) => Handling::pass::<Tally>(),
        }
    }
}

fn domain() -> Domain {
    Domain::new::<TallyEvent>().entity::<Tally>()
}

fn batch(events: &[(&str, u64)]) -> SqsEvent {
    let events: Vec<(&str, &str, u64)> = events
        .iter()
        .map(|(event_type, sequence)| ("t", *event_type, *sequence))
        .collect();
    batch_of(&events, 1)
}

/// Events of several aggregates (`(aggregateId, type, sequence)`), each
/// delivered for the `receives`th time.
fn batch_of(events: &[(&str, &str, u64)], receives: u32) -> SqsEvent {
    let mut batch = SqsEvent::default();
    for (index, (aggregate, event_type, sequence)) in events.iter().enumerate() {
        let mut message = SqsMessage::default();
        message.message_id = Some(format!("m{index}-{sequence}"));
        message
            .attributes
            .insert("ApproximateReceiveCount".to_owned(), receives.to_string());
        let prefix = if *aggregate == "t" {
            String::new()
        } else {
            format!("{aggregate}-")
        };
        message.body = Some(
            serde_json::json!({
                "eventId": format!("{prefix}t-{sequence}-{event_type}"),
                "type": event_type,
                "aggregateId": aggregate,
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
    run_batch(runner, &batch(events)).await
}

async fn run_batch(runner: &Runner<&MemoryStore>, batch: &SqsEvent) -> BatchReport {
    let invocation = Invocation {
        deadline: None,
        now: 1_764_489_600,
    };
    runner.run(batch, invocation).await.expect("run")
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

/// A panic in a handler is a handler error of its message alone: its
/// stream's later messages are skipped, other streams go on, the batch is
/// answered, and nothing the handler changed before panicking is written.
#[tokio::test]
async fn a_panicking_handler_fails_its_message_alone() {
    let store = MemoryStore::new();
    let runner = Runner::new(domain(), &store, RunnerConfig::default());
    let report = run_batch(
        &runner,
        &batch_of(
            &[
                ("t", "Started", 1),
                ("t", "Counted", 2),
                ("t", "CountedPanicking", 3),
                ("t", "Counted", 3),
                ("u", "Started", 1),
                ("u", "Counted", 2),
            ],
            1,
        ),
    )
    .await;
    assert_eq!(
        outcomes(&report),
        [
            Outcome::Applied,
            Outcome::Applied,
            Outcome::HandlerError,
            Outcome::Skipped,
            Outcome::Applied,
            Outcome::Applied
        ]
    );
    let reason = report.messages[2].reason.as_deref().unwrap_or_default();
    assert!(
        reason.contains("on_counted_panicking") && reason.contains("panicked"),
        "{reason}"
    );
    assert!(
        !reason.contains("a bug in the handler"),
        "the panic's message (it may quote data) stays in the panic hook's line: {reason}"
    );
    assert_eq!(report.handler_errors(), 1);
    assert_eq!(stored(&store), Some(tally(2, 1, "t-2-Counted")));
    // The same entity takes the next good event.
    let report = run(&runner, &[("Counted", 3)]).await;
    assert_eq!(outcomes(&report), [Outcome::Applied]);
}

/// A panic while draining a parked event: the message that closed the gap
/// is applied, the parked event stays parked, and the fault is named and
/// counted as a handler error, at every try.
#[tokio::test]
async fn a_panicking_handler_on_a_parked_event_keeps_it_parked_and_is_counted() {
    let store = MemoryStore::new();
    let runner = Runner::new(domain(), &store, RunnerConfig::default());
    run(&runner, &[("Started", 1)]).await;
    // Its third delivery: parked.
    let report = run_batch(
        &runner,
        &batch_of(&[("t", "CountedPanickingWhenNext", 3)], 3),
    )
    .await;
    assert_eq!(outcomes(&report), [Outcome::Parked]);
    let report = run(&runner, &[("Counted", 2)]).await;
    assert_eq!(outcomes(&report), [Outcome::Applied]);
    assert_eq!(report.drained(), 0);
    assert_eq!(report.handler_errors(), 1, "{report:?}");
    let stuck = report
        .parking
        .iter()
        .find_map(|parking| parking.stuck.clone())
        .expect("the stuck event is reported");
    assert_eq!(stuck.sequence, 3);
    assert!(stuck.handler_error);
    assert!(
        stuck.reason.contains("on_counted_panicking_when_next")
            && stuck.reason.contains("panicked"),
        "{}",
        stuck.reason
    );
    assert_eq!(stored(&store), Some(tally(2, 1, "t-2-Counted")));
    let parked: Vec<u64> = store
        .parking()
        .into_iter()
        .flat_map(|(_, inspection)| inspection.stored.parking.sequences)
        .collect();
    assert_eq!(parked, [3], "still parked");
    // The sweep's drain tries it again, and counts it again.
    let invocation = Invocation {
        deadline: None,
        now: 1_764_489_600,
    };
    let drained = runner
        .drain(&EntityKey::of::<Tally>("t"), &invocation)
        .await
        .expect("drain");
    assert!(
        drained.iter().any(|parking| parking
            .stuck
            .as_ref()
            .is_some_and(|stuck| stuck.handler_error)),
        "{drained:?}"
    );
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
            "CountedQuietly",
            "CountedPanicking",
            "CountedPanickingWhenNext",
            "CountedPassing"
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

/// An entity with a field the table uses as its TTL: DynamoDB would delete
/// its item, its guard with it, when that time passed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Subscription {
    sequence: u64,
    last_event_id: String,
    expires_at: u64,
}

impl Entity for Subscription {
    const KIND: &'static str = "SUBSCRIPTION";
    fn sequence(&self) -> u64 {
        self.sequence
    }
    fn last_event_id(&self) -> &str {
        &self.last_event_id
    }
}

/// An entity whose sequence is serialized under another name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Misnamed {
    seq: u64,
    last_event_id: String,
}

impl Entity for Misnamed {
    const KIND: &'static str = "MISNAMED";
    fn sequence(&self) -> u64 {
        self.seq
    }
    fn last_event_id(&self) -> &str {
        &self.last_event_id
    }
}

static IN_PK: sequence_guard::Counter = sequence_guard::Counter {
    kind: "BIN",
    sort_key: "COUNT",
    attribute: "pk",
};

#[test]
fn a_domain_that_would_write_the_engines_attributes_is_refused_when_registered() {
    assert_eq!(domain().check(), Ok(()));
    let err = domain()
        .entity::<Subscription>()
        .check()
        .expect_err("expiresAt is the table's TTL attribute");
    let text = err.to_string();
    assert!(
        text.contains("handlers::Subscription")
            && text.contains("SUBSCRIPTION")
            && text.contains("`expiresAt`")
            && text.contains("TTL")
            && text.contains("rename"),
        "{text}"
    );
    let err = domain()
        .entity::<Misnamed>()
        .counter(&IN_PK)
        .check()
        .expect_err("two mistakes");
    assert_eq!(err.problems().len(), 2, "{err}");
    assert!(
        err.problems()[0].contains("handlers::Misnamed")
            && err.problems()[0].contains("no field serialized as `sequence`"),
        "{err}"
    );
    assert!(
        err.problems()[1].contains("counter count") && err.problems()[1].contains("`pk`"),
        "{err}"
    );
}

#[test]
#[should_panic(expected = "`expiresAt`")]
fn a_runner_refuses_a_domain_whose_declarations_cannot_work() {
    let store = MemoryStore::new();
    let _runner = Runner::new(
        domain().entity::<Subscription>(),
        &store,
        RunnerConfig::default(),
    );
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
