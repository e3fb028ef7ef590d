//! The engine's check of every handler's answer, with a small domain of its
//! own: `Applied` must leave the entity at the event's sequence, any other
//! answer must leave it as it was, a snapshot must be at its event's
//! sequence. A handler that breaks this fails its message, with a reason
//! naming the handler, and nothing of it is written. Here: the domain and the
//! helpers the topics share.

mod answers;
mod domain_registration;
mod panics;

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
    /// Refused as invalid, with or without the guard.
    CountedInvalid(Nothing),
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

fn on_counted_invalid(_: &mut Option<Tally>, _: &Sequenced<Nothing>) -> Decision {
    Decision::Invalid
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
            TallyEvent::CountedInvalid(data) => Handling::sequenced(data, on_counted_invalid),
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

// The entities `domain_registration` refuses, here so that their type names
// (`handlers::Subscription`, `handlers::Misnamed`) are as its tests expect.

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
