//! What a sealed value may be, from the outside, with keys in memory: a
//! value opens only for the event, field, stream and subject it was sealed
//! for (an earlier release's format still opens); `append` stores as sealed
//! only what it sealed itself (a personal value that already looks sealed is
//! refused, naming the field); and a process, which cannot seal, appends no
//! personal value.

use std::sync::Arc;

use aws_lambda_events::event::sqs::{SqsEvent, SqsMessage};
use sequence_guard::envelope::InvalidMessage;
use sequence_guard::personal::{Erasure, Keyring, LocalKeys, Personal, is_sealed};
use sequence_guard::process::{Outbox, Process};
use sequence_guard::producer::seal_data;
use sequence_guard::producer::{Append, AppendError, ExpectedSequence, MemoryEvents, NewEvent};
use sequence_guard::runner::{Invocation, Outcome, Runner, RunnerConfig};
use sequence_guard::store::memory::MemoryStore;
use sequence_guard::{Decision, Domain, Entity, Events, Handling, Sequenced};
use serde::de::IgnoredAny;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// A visit, whose note is its member's personal data (the subject is a
/// field of `data`, so that two streams can name one subject).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Entity)]
#[serde(rename_all = "camelCase")]
#[entity(kind = "VISIT", personal("note"))]
struct Visit {
    sequence: u64,
    last_event_id: String,
    member_id: String,
    note: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Booked {
    member_id: String,
    note: String,
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type", content = "data")]
enum VisitEvent {
    VisitBooked(Booked),
    VisitNoted(Booked),
    PersonalDataErased(Erasure),
}

impl Events for VisitEvent {
    fn handling(self) -> Handling {
        match self {
            VisitEvent::VisitBooked(data) => Handling::sequenced(data, booked),
            VisitEvent::VisitNoted(data) => Handling::sequenced(data, noted),
            VisitEvent::PersonalDataErased(data) => Handling::erasure(data),
        }
    }

    fn personal() -> Personal {
        Personal::new()
            .fields_of("VisitBooked", "memberId", &["note"])
            .fields_of("VisitNoted", "memberId", &["note"])
    }
}

fn booked(visit: &mut Option<Visit>, event: &Sequenced<Booked>) -> Decision {
    if visit.is_some() {
        return Decision::Duplicate;
    }
    *visit = Some(Visit {
        sequence: event.sequence,
        last_event_id: event.event_id.clone(),
        member_id: event.data.member_id.clone(),
        note: event.data.note.clone(),
    });
    Decision::Applied
}

fn noted(visit: &mut Option<Visit>, event: &Sequenced<Booked>) -> Decision {
    let Some(visit) = visit else {
        return Decision::NotCreated;
    };
    if visit.sequence != event.sequence - 1 {
        return if visit.sequence >= event.sequence {
            Decision::Duplicate
        } else {
            Decision::Gap
        };
    }
    visit.note.clone_from(&event.data.note);
    visit.sequence = event.sequence;
    visit.last_event_id.clone_from(&event.event_id);
    Decision::Applied
}

fn domain(keys: &Arc<Keyring>) -> Domain {
    let domain = Domain::new::<VisitEvent>().with_keys(Arc::clone(keys));
    if let Err(err) = domain.check() {
        panic!("the test's domain: {err}");
    }
    domain
}

fn keys() -> Arc<Keyring> {
    Arc::new(Keyring::new(LocalKeys::new().expect("local keys")))
}

/// The body of a visit booked on `stream` for `member`, sealed as `append`
/// seals it.
async fn booked_body(domain: &Domain, stream: &str, member: &str) -> Value {
    let event_id = format!("{stream}-1");
    let mut data = json!({"memberId": member, "note": "Ada MARKER"});
    seal_data(domain, stream, &event_id, "VisitBooked", &mut data)
        .await
        .expect("sealed");
    assert!(data["note"].as_str().is_some_and(is_sealed), "{data}");
    json!({
        "eventId": event_id,
        "type": "VisitBooked",
        "aggregateId": stream,
        "sequence": 1,
        "data": data,
    })
}

async fn opened(domain: &Domain, body: &Value) -> Result<(), InvalidMessage> {
    let body = body.to_string();
    domain.fetch_keys([body.as_str()]).await.expect("keys");
    domain.parse(&body).map(|_| ())
}

#[tokio::test]
async fn a_sealed_value_opens_only_in_the_stream_and_for_the_subject_it_was_sealed_for() {
    let keys = keys();
    let domain = domain(&keys);
    let body = booked_body(&domain, "visit-1", "m-1").await;
    assert_eq!(opened(&domain, &body).await, Ok(()));

    // Copied with its event id into another stream that names the same
    // subject: refused, as it is when moved to another event or field.
    let mut moved = body.clone();
    moved["aggregateId"] = json!("visit-2");
    let refused = opened(&domain, &moved).await.expect_err("moved");
    assert!(
        matches!(&refused, InvalidMessage::Invalid { field, problem }
            if field == "data.note" && problem.contains("cannot be opened")),
        "{refused:?}"
    );
    let mut renamed_event = body.clone();
    renamed_event["eventId"] = json!("visit-1-other");
    assert!(opened(&domain, &renamed_event).await.is_err());

    // Relabelled to another subject: that subject's key does not open it
    // either (it has one of its own).
    booked_body(&domain, "visit-3", "m-2").await;
    let mut relabelled = body.clone();
    relabelled["data"]["memberId"] = json!("m-2");
    assert!(opened(&domain, &relabelled).await.is_err());
}

#[tokio::test]
async fn a_personal_value_that_already_looks_sealed_is_refused_naming_its_field() {
    let keys = keys();
    let domain = domain(&keys);
    let copied = booked_body(&domain, "visit-1", "m-1").await["data"]["note"]
        .as_str()
        .expect("sealed")
        .to_owned();
    for looks_sealed in [copied.as_str(), "sg:pd1:made-up", "sg:pd9:anything"] {
        let mut data = json!({"memberId": "m-1", "note": looks_sealed});
        let refused = seal_data(&domain, "visit-2", "visit-2-1", "VisitBooked", &mut data)
            .await
            .expect_err(looks_sealed);
        match &refused {
            AppendError::Invalid {
                reason: InvalidMessage::Invalid { field, problem },
                ..
            } => {
                assert_eq!(field, "data.note");
                assert!(problem.contains("already looks sealed"), "{problem}");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(data["note"], looks_sealed, "nothing changed");
    }
    // A value that is not personal may say anything.
    let mut data = json!({"memberId": "sg:pd2:not-personal", "note": "plain"});
    seal_data(&domain, "visit-2", "visit-2-1", "VisitBooked", &mut data)
        .await
        .expect("sealed");
}

/// Through `append` itself, on the event store in memory: a sealed value
/// copied from a stored event is refused naming its field, whether or not
/// the appender holds the subject's key (an appender that does not would
/// otherwise fail to open it while reading the body, naming nothing), and
/// nothing is written; a subject `erase --subject` could not name is
/// refused before a key is made for it.
#[tokio::test]
async fn append_refuses_a_copied_sealed_value_and_a_subject_erase_could_not_name() {
    let keys = keys();
    let domain = domain(&keys);
    let copied = booked_body(&domain, "visit-1", "m-1").await["data"]["note"].clone();
    for (appender, holds_the_key) in [
        (MemoryEvents::new(domain.clone()), true),
        (MemoryEvents::new(self::domain(&self::keys())), false),
    ] {
        let mut event = NewEvent::new("VisitBooked", json!({"memberId": "m-1", "note": copied}));
        event.event_id = Some("visit-2-1".to_owned());
        let refused = appender
            .append(Append {
                stream_id: "visit-2".to_owned(),
                events: vec![event],
                expected: ExpectedSequence::Exact(0),
                request_id: None,
                writes: Vec::new(),
            })
            .await
            .expect_err("a copied sealed value");
        match &refused {
            AppendError::Invalid {
                index: 0,
                reason: InvalidMessage::Invalid { field, problem },
            } => {
                assert_eq!(field, "data.note", "holds the key: {holds_the_key}");
                assert!(problem.contains("already looks sealed"), "{problem}");
            }
            other => panic!("holds the key: {holds_the_key}: {other:?}"),
        }
        assert_eq!(appender.last_sequence("visit-2"), 0, "nothing written");
    }

    let appender = MemoryEvents::new(domain.clone());
    let member = "m".repeat(257);
    let event = NewEvent::new("VisitBooked", json!({"memberId": member, "note": "Ada"}));
    let refused = appender
        .append(Append {
            stream_id: "visit-3".to_owned(),
            events: vec![event],
            expected: ExpectedSequence::Exact(0),
            request_id: None,
            writes: Vec::new(),
        })
        .await
        .expect_err("a subject no stream id could be");
    assert!(
        matches!(&refused, AppendError::Invalid {
            reason: InvalidMessage::Invalid { field, problem }, ..
        } if field == "data.memberId" && problem.contains("erase --subject")),
        "{refused:?}"
    );
    assert_eq!(appender.last_sequence("visit-3"), 0, "nothing written");
}

/// A process over the visits' event store that copies a note it read into
/// an event it appends.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Entity)]
#[serde(rename_all = "camelCase")]
#[entity(kind = "FOLLOWUP")]
struct Followup {
    sequence: u64,
    last_event_id: String,
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type", content = "data")]
enum FollowupEvent {
    VisitBooked(Booked),
    VisitNoted(IgnoredAny),
    PersonalDataErased(IgnoredAny),
}

impl Events for FollowupEvent {
    fn handling(self) -> Handling {
        match self {
            FollowupEvent::VisitBooked(data) => Handling::process(data, follow_up),
            FollowupEvent::VisitNoted(_) | FollowupEvent::PersonalDataErased(_) => {
                Handling::pass::<Followup>()
            }
        }
    }
}

fn follow_up(
    state: &mut Option<Followup>,
    event: &Sequenced<Booked>,
    outbox: &mut Outbox,
) -> Decision {
    if state.is_some() {
        return Decision::Duplicate;
    }
    *state = Some(Followup {
        sequence: event.sequence,
        last_event_id: event.event_id.clone(),
    });
    // The note as the process read it: sealed (it declares no personal
    // data), and not its own to copy.
    outbox.append(&event.aggregate_id, "VisitNoted", &event.data);
    Decision::Applied
}

#[tokio::test]
async fn a_process_appends_no_personal_value() {
    let keys = keys();
    let store_domain = domain(&keys);
    let body = booked_body(&store_domain, "visit-1", "m-1").await;
    let process = Domain::new::<FollowupEvent>()
        .entity::<Followup>()
        .with_process(Process::new("followups", store_domain));
    process.check().expect("a sound process");
    let runner = Runner::new(process, MemoryStore::new(), RunnerConfig::default());
    let mut message = SqsMessage::default();
    message.message_id = Some("m-1".to_owned());
    message.body = Some(body.to_string());
    let mut event = SqsEvent::default();
    event.records = vec![message];
    let report = runner
        .run(
            &event,
            Invocation {
                deadline: None,
                now: 1_800_000_000,
            },
        )
        .await
        .expect("a batch");
    let message = &report.messages[0];
    assert_eq!(message.outcome, Outcome::HandlerError, "{message:?}");
    let reason = message.reason.as_deref().unwrap_or_default();
    assert!(
        reason.contains("personal field `note`") && reason.contains("cannot seal"),
        "{reason}"
    );
    assert!(runner.store().entities().is_empty(), "nothing written");
}
