//! The team's plausible mistakes (issue 48), each caught before
//! production: refused when the domain is built, made impossible by the
//! API's types, or refused at the step by the runner and by the test kit in
//! the same words (the test kit is the runner's twin), or found by a test
//! every crate has (`testkit::check_erasures`).
//!
//! | file | what it holds |
//! | --- | --- |
//! | `main.rs` | a library's event store and a reminders process over it, runnable on the embedded store |
//! | `deadlines.rs` | a deadline with no handler, in milliseconds; a deadline's append at the sequence seen |
//! | `declarations.rs` | a process that lacks `PersonalDataErased`, or another type of its store |
//! | `twin.rs` | what the runner refuses of an answer beyond the entity, the test kit refuses in its words; effects tested |
//! | `erasure.rs` | an entity that copies a personal value without declaring it, found on the samples |

mod deadlines;
mod declarations;
mod erasure;
mod twin;

use aws_lambda_events::event::sqs::{SqsEvent, SqsMessage};
use sequence_guard::personal::{Erasure, Personal};
use sequence_guard::process::{Due, DueOutbox, Outbox, Process};
use sequence_guard::runner::{BatchReport, Invocation, MessageReport, Runner, RunnerConfig};
use sequence_guard::store::memory::MemoryStore;
use sequence_guard::{Decision, Domain, Entity, Events, Handling, Sequenced};
use serde::de::IgnoredAny;
use serde::{Deserialize, Serialize};
use serde_json::json;

pub(crate) const NOW: u64 = 1_800_000_000;

/// The library's loan, as its projection keeps it: the borrower's name is
/// personal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Entity)]
#[serde(rename_all = "camelCase")]
#[entity(kind = "LOAN", personal("borrower"))]
pub(crate) struct Loan {
    pub(crate) sequence: u64,
    pub(crate) last_event_id: String,
    pub(crate) borrower: String,
    pub(crate) returned: bool,
}

/// `Lent` data: who borrowed (personal), and, for the process's tests, what
/// it is asked to do (`act`; the library ignores it).
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
pub(crate) struct Lending {
    #[serde(default)]
    pub(crate) borrower: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub(crate) act: String,
}

/// The library's events: its event store's types.
#[derive(Debug, Deserialize)]
#[serde(tag = "type", content = "data")]
pub(crate) enum LibraryEvent {
    Lent(Lending),
    Returned(IgnoredAny),
    Reminded(IgnoredAny),
    PersonalDataErased(Erasure),
}

impl Events for LibraryEvent {
    fn handling(self) -> Handling {
        match self {
            LibraryEvent::Lent(data) => Handling::sequenced(data, on_lent),
            LibraryEvent::Returned(_) => Handling::sequenced((), on_returned),
            LibraryEvent::Reminded(_) => Handling::pass::<Loan>(),
            LibraryEvent::PersonalDataErased(data) => Handling::erasure(data),
        }
    }

    fn personal() -> Personal {
        Personal::new().fields("Lent", &["borrower"])
    }
}

fn on_lent(loan: &mut Option<Loan>, event: &Sequenced<Lending>) -> Decision {
    if loan.is_some() {
        return Decision::Duplicate;
    }
    *loan = Some(Loan {
        sequence: event.sequence,
        last_event_id: event.event_id.clone(),
        borrower: event.data.borrower.clone(),
        returned: false,
    });
    Decision::Applied
}

fn on_returned(loan: &mut Option<Loan>, event: &Sequenced<()>) -> Decision {
    let Some(loan) = loan else {
        return Decision::NotCreated;
    };
    if loan.sequence != event.sequence - 1 {
        return if loan.sequence >= event.sequence {
            Decision::Duplicate
        } else {
            Decision::Gap
        };
    }
    loan.returned = true;
    loan.sequence = event.sequence;
    loan.last_event_id.clone_from(&event.event_id);
    Decision::Applied
}

/// The library's projection, and the event store's domain.
pub(crate) fn library() -> Domain {
    Domain::new::<LibraryEvent>()
}

/// The reminders process's state for one loan: nothing personal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Entity)]
#[serde(rename_all = "camelCase")]
#[entity(kind = "REMINDER")]
pub(crate) struct Reminder {
    pub(crate) sequence: u64,
    pub(crate) last_event_id: String,
    pub(crate) reminded: u32,
}

/// `Lent` as the process reads it: what it is asked to do, nothing
/// personal.
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct Act {
    #[serde(default)]
    pub(crate) act: String,
}

/// The process's types: every type of the library's store.
#[derive(Debug, Deserialize)]
#[serde(tag = "type", content = "data")]
pub(crate) enum ReminderEvent {
    Lent(Act),
    Returned(IgnoredAny),
    Reminded(IgnoredAny),
    PersonalDataErased(IgnoredAny),
}

impl Events for ReminderEvent {
    fn handling(self) -> Handling {
        match self {
            ReminderEvent::Lent(data) => Handling::process(data, on_lent_remind),
            ReminderEvent::Returned(_)
            | ReminderEvent::Reminded(_)
            | ReminderEvent::PersonalDataErased(_) => Handling::pass::<Reminder>(),
        }
    }
}

/// `Lent`: a reminder's state, and what `act` asks of its outbox.
fn on_lent_remind(
    state: &mut Option<Reminder>,
    event: &Sequenced<Act>,
    outbox: &mut Outbox,
) -> Decision {
    if state.is_some() {
        return Decision::Duplicate;
    }
    *state = Some(Reminder {
        sequence: event.sequence,
        last_event_id: event.event_id.clone(),
        reminded: 0,
    });
    let stream = event.aggregate_id.as_str();
    let nothing = json!({});
    match event.data.act.as_str() {
        "deadline" => outbox.set_deadline(outbox.now() + 60),
        "deadline-in-ms" => outbox.set_deadline((outbox.now() + 60) * 1000),
        "two-streams" => {
            outbox.append(stream, "Reminded", &nothing);
            outbox.append("another-loan", "Reminded", &nothing);
        }
        "unknown-type" => outbox.append(stream, "Recalled", &nothing),
        "personal" => outbox.append(stream, "Lent", &json!({"borrower": "Ada"})),
        "forty-one" => {
            for _ in 0..41 {
                outbox.append(stream, "Reminded", &nothing);
            }
        }
        _ => {}
    }
    Decision::Applied
}

/// The deadline: a reminder appended to the loan's stream, at the sequence
/// the process has seen (`DueOutbox::append` has no other way).
pub(crate) fn remind(state: &mut Reminder, _: &Due, outbox: &mut DueOutbox) {
    state.reminded += 1;
    outbox.append("Reminded", &json!({}));
}

/// The reminders process: with `on_deadline`, or none.
pub(crate) fn reminders(on_deadline: Option<fn(&mut Reminder, &Due, &mut DueOutbox)>) -> Domain {
    let process = Process::new("reminders", library());
    let process = match on_deadline {
        Some(handler) => process.on_deadline(handler),
        None => process,
    };
    Domain::new::<ReminderEvent>().with_process(process)
}

pub(crate) fn runner(domain: Domain) -> Runner<MemoryStore> {
    Runner::new(domain, MemoryStore::new(), RunnerConfig::default())
}

pub(crate) fn at(now: u64) -> Invocation {
    Invocation {
        deadline: None,
        now,
    }
}

/// The SQS record of an event of `stream` with `data`.
pub(crate) fn record(
    event_type: &str,
    stream: &str,
    sequence: u64,
    data: serde_json::Value,
) -> SqsMessage {
    let body = json!({
        "eventId": format!("{stream}-{sequence}"),
        "type": event_type,
        "aggregateId": stream,
        "sequence": sequence,
        "data": data,
    })
    .to_string();
    let mut message = SqsMessage::default();
    message.message_id = Some(format!("m-{stream}-{sequence}"));
    message.body = Some(body);
    message
        .attributes
        .insert("MessageGroupId".to_owned(), stream.to_owned());
    message
}

pub(crate) async fn run(runner: &Runner<MemoryStore>, records: Vec<SqsMessage>) -> BatchReport {
    let mut event = SqsEvent::default();
    event.records = records;
    runner.run(&event, at(NOW)).await.expect("a batch")
}

/// The one message of a batch of one `Lent` that asks `act` of the process.
pub(crate) async fn lent_asking(runner: &Runner<MemoryStore>, act: &str) -> MessageReport {
    let report = run(
        runner,
        vec![record("Lent", "loan-1", 1, json!({"act": act}))],
    )
    .await;
    report.messages[0].clone()
}
