//! `replay` of a process whose handlers break their rules: the reasons
//! printed, and a failing exit status.

use std::process::ExitCode;

use aws_lambda_events::event::sqs::{SqsEvent, SqsMessage};
use serde::{Deserialize, Serialize};

use super::{Input, NotDone, exit_code, run_all};
use crate::process::{Due, DueOutbox, Outbox, Process};
use crate::runner::{Runner, RunnerConfig};
use crate::store::memory::MemoryStore;
use crate::{Decision, Domain, Entity, Events, Handling, Sequenced};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Ticket {
    sequence: u64,
    last_event_id: String,
}

impl Entity for Ticket {
    const KIND: &'static str = "TICKET";
    fn sequence(&self) -> u64 {
        self.sequence
    }
    fn last_event_id(&self) -> &str {
        &self.last_event_id
    }
}

#[derive(Debug, Default, Deserialize, Serialize)]
struct Nothing {}

/// The event store's types, and the process's.
#[derive(Debug, Deserialize)]
#[serde(tag = "type", content = "data")]
enum TicketEvent {
    Opened(Nothing),
    Noted(Nothing),
}

fn plain(ticket: &mut Option<Ticket>, event: &Sequenced<Nothing>) -> Decision {
    match ticket {
        None if event.sequence == 1 => {
            *ticket = Some(Ticket {
                sequence: 1,
                last_event_id: event.event_id.clone(),
            });
            Decision::Applied
        }
        None => Decision::NotCreated,
        Some(ticket) if ticket.sequence >= event.sequence => Decision::Duplicate,
        Some(ticket) if ticket.sequence + 1 < event.sequence => Decision::Gap,
        Some(ticket) => {
            ticket.sequence = event.sequence;
            ticket.last_event_id.clone_from(&event.event_id);
            Decision::Applied
        }
    }
}

impl Events for TicketEvent {
    fn handling(self) -> Handling {
        match self {
            TicketEvent::Opened(data) | TicketEvent::Noted(data) => {
                Handling::sequenced(data, plain)
            }
        }
    }
}

/// The process: `Opened` sets a deadline due at once, `Noted` appends a
/// type the event store does not know.
#[derive(Debug, Deserialize)]
#[serde(tag = "type", content = "data")]
enum Reacting {
    Opened(Nothing),
    Noted(Nothing),
}

fn on_opened(
    ticket: &mut Option<Ticket>,
    event: &Sequenced<Nothing>,
    outbox: &mut Outbox,
) -> Decision {
    let decision = plain(ticket, event);
    if decision == Decision::Applied {
        outbox.set_deadline(outbox.now());
    }
    decision
}

fn on_noted(
    ticket: &mut Option<Ticket>,
    event: &Sequenced<Nothing>,
    outbox: &mut Outbox,
) -> Decision {
    let decision = plain(ticket, event);
    if decision == Decision::Applied {
        outbox.append(&event.aggregate_id, "Unheard", &Nothing {});
    }
    decision
}

impl Events for Reacting {
    fn handling(self) -> Handling {
        match self {
            Reacting::Opened(data) => Handling::process(data, on_opened),
            Reacting::Noted(data) => Handling::process(data, on_noted),
        }
    }
}

/// Appends to its own stream wherever it stands: refused.
fn on_due(_: &mut Ticket, due: &Due, outbox: &mut DueOutbox) {
    outbox.append_to(&due.stream, "Noted", &Nothing {});
}

fn runner() -> Runner<MemoryStore> {
    let store = Domain::new::<TicketEvent>().entity::<Ticket>();
    let domain = Domain::new::<Reacting>()
        .entity::<Ticket>()
        .with_process(Process::new("tickets", store).on_deadline(on_due));
    Runner::new(domain, MemoryStore::new(), RunnerConfig::default())
}

fn batch(types: &[&str]) -> SqsEvent {
    let mut batch = SqsEvent::default();
    for (index, event_type) in types.iter().enumerate() {
        let sequence = index + 1;
        let mut message = SqsMessage::default();
        message.message_id = Some(format!("m-{sequence}"));
        message.body = Some(format!(
            r#"{{"eventId":"t-1-{sequence}","type":"{event_type}","aggregateId":"t-1","sequence":{sequence},"data":{{}}}}"#
        ));
        message
            .attributes
            .insert("MessageGroupId".into(), "t-1".to_owned());
        batch.records.push(message);
    }
    batch
}

#[tokio::test]
async fn a_process_append_the_store_refuses_is_printed_and_fails_the_replay() {
    let runner = runner();
    let inputs = [(
        "tickets.json".to_owned(),
        Input::Batch(batch(&["Opened", "Noted"])),
    )];
    let mut out = Vec::new();
    let failed = run_all(&mut out, &runner, &inputs, &|_| {})
        .await
        .expect("written");
    let out = String::from_utf8_lossy(&out);
    assert_eq!(failed.messages, 1, "{out}");
    assert!(
        out.contains("handler error (Noted event: handler")
            && out.contains(
                "appended an event the event store refuses: event 0: unknown event type `Unheard`"
            ),
        "{out}"
    );
    assert_eq!(exit_code("replay", Ok(failed)), ExitCode::FAILURE);
    assert_eq!(
        exit_code("replay", Ok(NotDone::default())),
        ExitCode::SUCCESS
    );
}

#[tokio::test]
async fn a_deadline_that_fails_in_a_sweep_is_printed_with_why_and_fails_the_replay() {
    let runner = runner();
    let inputs = [
        ("tickets.json".to_owned(), Input::Batch(batch(&["Opened"]))),
        ("sweep.json".to_owned(), Input::Schedule(None)),
    ];
    let mut out = Vec::new();
    let failed = run_all(&mut out, &runner, &inputs, &|_| {})
        .await
        .expect("written");
    let out = String::from_utf8_lossy(&out);
    assert_eq!(failed.deadlines, 1, "{out}");
    assert_eq!(exit_code("replay", Ok(failed)), ExitCode::FAILURE);
    assert!(
        out.contains("deadlines: fired 0, moved 0, failed 1")
            && out.contains("deadline failed: TICKET#t-1: handler")
            && out.contains("with DueOutbox::append_to"),
        "{out}"
    );
}
