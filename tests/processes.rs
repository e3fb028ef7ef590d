//! The engine's processes, with a small domain of their own on the embedded
//! store (which is also the event store the process appends to): what a
//! handler may answer, how a step's appends are gathered (one stream, one
//! request id, cut before an event whose appends cannot join), deadlines
//! fired once through the same checks, and the declarations refused.

use aws_lambda_events::event::sqs::{SqsEvent, SqsMessage};
use sequence_guard::process::{Due, DueOutbox, Outbox, Process};
use sequence_guard::runner::{BatchReport, Invocation, Outcome, Runner, RunnerConfig};
use sequence_guard::store::memory::MemoryStore;
use sequence_guard::{Decision, Domain, Entity, Events, Handling, Sequenced};
use serde::{Deserialize, Serialize};

const NOW: u64 = 1_800_000_000;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Ticket {
    sequence: u64,
    last_event_id: String,
    reminded: u32,
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

#[derive(Debug, Deserialize, Serialize)]
struct Note {
    #[serde(default)]
    to: String,
    #[serde(default)]
    count: usize,
}

/// The event store's types: what the process may append.
#[derive(Debug, Deserialize)]
#[serde(tag = "type", content = "data")]
enum StoreEvent {
    Opened(Note),
    Noted(Note),
}

impl Events for StoreEvent {
    fn handling(self) -> Handling {
        match self {
            StoreEvent::Opened(data) => Handling::sequenced(data, opened_plain),
            StoreEvent::Noted(data) => Handling::sequenced(data, noted_plain),
        }
    }
}

fn opened_plain(ticket: &mut Option<Ticket>, event: &Sequenced<Note>) -> Decision {
    if ticket.is_some() {
        return Decision::Duplicate;
    }
    *ticket = Some(Ticket {
        sequence: event.sequence,
        last_event_id: event.event_id.clone(),
        reminded: 0,
    });
    Decision::Applied
}

fn noted_plain(ticket: &mut Option<Ticket>, event: &Sequenced<Note>) -> Decision {
    let Some(ticket) = ticket else {
        return Decision::NotCreated;
    };
    if ticket.sequence != event.sequence - 1 {
        return if ticket.sequence >= event.sequence {
            Decision::Duplicate
        } else {
            Decision::Gap
        };
    }
    ticket.sequence = event.sequence;
    ticket.last_event_id.clone_from(&event.event_id);
    Decision::Applied
}

fn store_domain() -> Domain {
    Domain::new::<StoreEvent>().entity::<Ticket>()
}

/// The process's types: each a way to answer.
#[derive(Debug, Deserialize)]
#[serde(tag = "type", content = "data")]
enum TicketEvent {
    /// Creates the ticket and sets a deadline 60 s later.
    Opened(Note),
    /// Appends `count` events `Noted` to the stream `to`.
    Noted(Note),
    /// Answers duplicate, and fills the outbox anyway.
    NotedSneakily(Note),
    /// Appends at an exact sequence, then again at another.
    NotedTwiceExactly(Note),
    /// Appends a type the event store does not know.
    NotedWrongly(Note),
}

fn next<'a>(
    ticket: &'a mut Option<Ticket>,
    event: &Sequenced<Note>,
) -> Result<&'a mut Ticket, Decision> {
    let Some(ticket) = ticket else {
        return Err(Decision::NotCreated);
    };
    if ticket.sequence != event.sequence - 1 {
        return Err(if ticket.sequence >= event.sequence {
            Decision::Duplicate
        } else {
            Decision::Gap
        });
    }
    ticket.sequence = event.sequence;
    ticket.last_event_id.clone_from(&event.event_id);
    Ok(ticket)
}

fn on_opened(
    ticket: &mut Option<Ticket>,
    event: &Sequenced<Note>,
    outbox: &mut Outbox,
) -> Decision {
    let decision = opened_plain(ticket, event);
    if decision == Decision::Applied {
        outbox.set_deadline(outbox.now() + 60);
    }
    decision
}

fn on_noted(ticket: &mut Option<Ticket>, event: &Sequenced<Note>, outbox: &mut Outbox) -> Decision {
    if let Err(decision) = next(ticket, event) {
        return decision;
    }
    for n in 0..event.data.count {
        outbox.append(
            &event.data.to,
            "Noted",
            &Note {
                to: format!("n{n}"),
                count: 0,
            },
        );
    }
    Decision::Applied
}

fn on_noted_sneakily(
    _: &mut Option<Ticket>,
    event: &Sequenced<Note>,
    outbox: &mut Outbox,
) -> Decision {
    outbox.append(
        &event.data.to,
        "Noted",
        &Note {
            to: String::new(),
            count: 0,
        },
    );
    Decision::Duplicate
}

fn on_noted_twice_exactly(
    ticket: &mut Option<Ticket>,
    event: &Sequenced<Note>,
    outbox: &mut Outbox,
) -> Decision {
    if let Err(decision) = next(ticket, event) {
        return decision;
    }
    let note = Note {
        to: String::new(),
        count: 0,
    };
    outbox.append_at(&event.data.to, 0, "Noted", &note);
    outbox.append_at(&event.data.to, 5, "Noted", &note);
    Decision::Applied
}

fn on_noted_wrongly(
    ticket: &mut Option<Ticket>,
    event: &Sequenced<Note>,
    outbox: &mut Outbox,
) -> Decision {
    if let Err(decision) = next(ticket, event) {
        return decision;
    }
    outbox.append(
        &event.data.to,
        "Unheard",
        &Note {
            to: String::new(),
            count: 0,
        },
    );
    Decision::Applied
}

impl Events for TicketEvent {
    fn handling(self) -> Handling {
        match self {
            TicketEvent::Opened(data) => Handling::process(data, on_opened),
            TicketEvent::Noted(data) => Handling::process(data, on_noted),
            TicketEvent::NotedSneakily(data) => Handling::process(data, on_noted_sneakily),
            TicketEvent::NotedTwiceExactly(data) => Handling::process(data, on_noted_twice_exactly),
            TicketEvent::NotedWrongly(data) => Handling::process(data, on_noted_wrongly),
        }
    }
}

/// Reminds: appends `Noted` to the ticket's own stream (at the sequence seen).
fn on_due(ticket: &mut Ticket, _: &Due, outbox: &mut DueOutbox) {
    ticket.reminded += 1;
    let note = Note {
        to: "reminder".to_owned(),
        count: 0,
    };
    outbox.append("Noted", &note);
}

/// Breaks its rule: moves the sequence.
fn on_due_moving(ticket: &mut Ticket, _: &Due, _: &mut DueOutbox) {
    ticket.sequence += 1;
}

/// Keeps a later deadline.
fn on_due_later(ticket: &mut Ticket, due: &Due, outbox: &mut DueOutbox) {
    ticket.reminded += 1;
    outbox.set_deadline(due.at + 3600);
}

/// A state no handling of the tickets' events names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Desk {
    sequence: u64,
    last_event_id: String,
}

impl Entity for Desk {
    const KIND: &'static str = "DESK";
    fn sequence(&self) -> u64 {
        self.sequence
    }
    fn last_event_id(&self) -> &str {
        &self.last_event_id
    }
}

fn on_due_desk(_: &mut Desk, _: &Due, _: &mut DueOutbox) {}

fn domain_with(process: Process) -> Domain {
    Domain::new::<TicketEvent>()
        .entity::<Ticket>()
        .with_process(process)
}

fn domain() -> Domain {
    domain_with(Process::new("tickets", store_domain()).on_deadline(on_due))
}

fn runner(domain: Domain) -> Runner<MemoryStore> {
    Runner::new(domain, MemoryStore::new(), RunnerConfig::default())
}

fn at(now: u64) -> Invocation {
    Invocation {
        deadline: None,
        now,
    }
}

fn record(event_type: &str, stream: &str, sequence: u64, data: serde_json::Value) -> SqsMessage {
    let body = serde_json::json!({
        "eventId": format!("{stream}-{sequence}"),
        "type": event_type,
        "aggregateId": stream,
        "sequence": sequence,
        "data": data,
    })
    .to_string();
    let mut message = SqsMessage::default();
    message.message_id = Some(format!("m-{stream}-{sequence}-{event_type}"));
    message.body = Some(body);
    message
        .attributes
        .insert("MessageGroupId".to_owned(), stream.to_owned());
    message
}

async fn run(runner: &Runner<MemoryStore>, records: Vec<SqsMessage>) -> BatchReport {
    let mut event = SqsEvent::default();
    event.records = records;
    runner.run(&event, at(NOW)).await.expect("a batch")
}

fn outcomes(report: &BatchReport) -> Vec<Outcome> {
    report
        .messages
        .iter()
        .map(|message| message.outcome)
        .collect()
}

fn ticket(runner: &Runner<MemoryStore>, id: &str) -> Option<Ticket> {
    runner
        .store()
        .entities()
        .into_iter()
        .find(|(key, _)| key.id() == id)
        .and_then(|(_, entity)| entity.get::<Ticket>().cloned())
}

fn opened(stream: &str) -> SqsMessage {
    record("Opened", stream, 1, serde_json::json!({}))
}

#[tokio::test]
async fn a_step_appends_to_one_stream_under_ids_derived_from_its_cause() {
    let runner = runner(domain());
    let report = run(
        &runner,
        vec![
            opened("t-1"),
            record(
                "Noted",
                "t-1",
                2,
                serde_json::json!({"to": "log", "count": 2}),
            ),
        ],
    )
    .await;
    assert_eq!(outcomes(&report), [Outcome::Applied, Outcome::Applied]);
    let log = runner.store().stream_events("log");
    let ids: Vec<&str> = log.iter().map(|event| event.event_id.as_str()).collect();
    assert_eq!(ids, ["process-tickets-t-1-2-0", "process-tickets-t-1-2-1"]);
    assert_eq!(log[1].sequence, 2);
    // Delivered again: a duplicate, nothing appended.
    let again = run(
        &runner,
        vec![record(
            "Noted",
            "t-1",
            2,
            serde_json::json!({"to": "log", "count": 2}),
        )],
    )
    .await;
    assert_eq!(outcomes(&again), [Outcome::Duplicate]);
    assert_eq!(runner.store().stream_events("log").len(), 2);
}

#[tokio::test]
async fn appends_to_another_stream_are_the_next_step_and_both_are_written() {
    let runner = runner(domain());
    run(&runner, vec![opened("t-1")]).await;
    let report = run(
        &runner,
        vec![
            record(
                "Noted",
                "t-1",
                2,
                serde_json::json!({"to": "a", "count": 1}),
            ),
            record(
                "Noted",
                "t-1",
                3,
                serde_json::json!({"to": "b", "count": 1}),
            ),
            record(
                "Noted",
                "t-1",
                4,
                serde_json::json!({"to": "b", "count": 1}),
            ),
        ],
    )
    .await;
    assert_eq!(
        outcomes(&report),
        [Outcome::Applied, Outcome::Applied, Outcome::Applied]
    );
    assert_eq!(runner.store().stream_events("a").len(), 1);
    assert_eq!(runner.store().stream_events("b").len(), 2);
    assert_eq!(ticket(&runner, "t-1").expect("ticket").sequence, 4);
}

#[tokio::test]
async fn a_handler_that_appends_without_applying_or_past_the_limits_writes_nothing() {
    let runner = runner(domain());
    run(&runner, vec![opened("t-1")]).await;
    let cases = [
        (
            "NotedSneakily",
            serde_json::json!({"to": "log"}),
            "only an applied event appends",
        ),
        (
            "Noted",
            serde_json::json!({"to": "log", "count": 41}),
            "at most 40",
        ),
        (
            "NotedTwiceExactly",
            serde_json::json!({"to": "log"}),
            "expected sequence",
        ),
        ("NotedWrongly", serde_json::json!({"to": "log"}), "Unheard"),
    ];
    for (event_type, data, names) in cases {
        let report = run(&runner, vec![record(event_type, "t-1", 2, data)]).await;
        let message = &report.messages[0];
        assert_eq!(message.outcome, Outcome::HandlerError, "{event_type}");
        let reason = message.reason.as_deref().unwrap_or_default();
        assert!(reason.contains(names), "{event_type}: {reason}");
        assert!(
            runner.store().stream_events("log").is_empty(),
            "{event_type}"
        );
        assert_eq!(
            ticket(&runner, "t-1").expect("ticket").sequence,
            1,
            "{event_type}"
        );
    }
}

#[tokio::test]
async fn a_deadline_fires_once_through_the_guard_and_its_exact_append() {
    let runner = runner(domain());
    // The event store holds the ticket's stream; the process has seen it.
    runner
        .store()
        .append_event("t-1", "t-1-1", "Opened", serde_json::json!({}));
    run(&runner, vec![opened("t-1")]).await;
    assert_eq!(runner.store().deadlines().len(), 1);
    assert_eq!(runner.fire_due(&at(NOW + 59)).await.fired, 0, "not yet due");
    let report = runner.fire_due(&at(NOW + 60)).await;
    assert_eq!((report.fired, report.moved, report.failed), (1, 0, 0));
    let stream = runner.store().stream_events("t-1");
    assert_eq!(
        stream.len(),
        2,
        "the reminder, appended right after the event seen"
    );
    assert_eq!(
        stream[1].event_id,
        format!("process-tickets-due-t-1-{}-0", NOW + 60)
    );
    let state = ticket(&runner, "t-1").expect("ticket");
    assert_eq!(
        (state.reminded, state.sequence),
        (1, 1),
        "changed, not moved"
    );
    assert!(runner.store().deadlines().is_empty(), "cleared once fired");
    assert_eq!(runner.fire_due(&at(NOW + 999)).await.fired, 0);
}

#[tokio::test]
async fn a_deadline_whose_stream_moved_writes_nothing_and_stays() {
    let runner = runner(domain());
    run(&runner, vec![opened("t-1")]).await;
    // The event store holds events of t-1 the process has not seen.
    runner
        .store()
        .append_event("t-1", "x-1", "Opened", serde_json::json!({}));
    runner
        .store()
        .append_event("t-1", "x-2", "Noted", serde_json::json!({}));
    let report = runner.fire_due(&at(NOW + 60)).await;
    assert_eq!((report.fired, report.moved), (0, 1));
    assert_eq!(runner.store().stream_events("t-1").len(), 2);
    assert_eq!(ticket(&runner, "t-1").expect("ticket").reminded, 0);
    assert_eq!(
        runner.store().deadlines().len(),
        1,
        "it fires again at the next sweep"
    );
}

#[tokio::test]
async fn a_deadline_handler_that_moves_the_sequence_writes_nothing() {
    let runner = runner(domain_with(
        Process::new("tickets", store_domain()).on_deadline(on_due_moving),
    ));
    run(&runner, vec![opened("t-1")]).await;
    let report = runner.fire_due(&at(NOW + 60)).await;
    assert_eq!((report.fired, report.failed), (0, 1));
    assert_eq!(ticket(&runner, "t-1").expect("ticket").sequence, 1);
    assert_eq!(runner.store().deadlines().len(), 1);
}

#[tokio::test]
async fn a_deadline_handler_may_set_a_later_one() {
    let runner = runner(domain_with(
        Process::new("tickets", store_domain()).on_deadline(on_due_later),
    ));
    run(&runner, vec![opened("t-1")]).await;
    assert_eq!(runner.fire_due(&at(NOW + 60)).await.fired, 1);
    let due: Vec<u64> = runner
        .store()
        .deadlines()
        .iter()
        .map(|(_, at)| *at)
        .collect();
    assert_eq!(due, [NOW + 60 + 3600]);
    assert_eq!(runner.fire_due(&at(NOW + 61)).await.fired, 0);
}

#[tokio::test]
async fn without_appends_a_rebuild_moves_states_and_appends_nothing() {
    let runner = Runner::new(
        domain(),
        MemoryStore::new(),
        RunnerConfig {
            appends: false,
            ..RunnerConfig::default()
        },
    );
    let report = run(
        &runner,
        vec![
            opened("t-1"),
            record(
                "Noted",
                "t-1",
                2,
                serde_json::json!({"to": "log", "count": 3}),
            ),
        ],
    )
    .await;
    assert_eq!(outcomes(&report), [Outcome::Applied, Outcome::Applied]);
    assert!(runner.store().stream_events("log").is_empty());
    assert_eq!(ticket(&runner, "t-1").expect("ticket").sequence, 2);
    assert_eq!(runner.store().deadlines().len(), 1, "deadlines are kept");
}

#[test]
fn declarations_that_cannot_work_are_refused() {
    // The ticket is named by the events' handlings, so it is registered.
    let named_by_handling = Domain::new::<TicketEvent>()
        .with_process(Process::new("tickets", store_domain()).on_deadline(on_due));
    assert_eq!(named_by_handling.check(), Ok(()));
    // A state no handling names and nobody registered cannot hold a deadline.
    let unregistered = Domain::new::<TicketEvent>()
        .with_process(Process::new("tickets", store_domain()).on_deadline(on_due_desk));
    let problems = unregistered.check().expect_err("refused");
    assert!(
        problems.problems().iter().any(|p| p.contains("DESK")),
        "{problems}"
    );
    let named = domain_with(Process::new("Tickets Desk", store_domain()));
    let problems = named.check().expect_err("refused");
    assert!(problems.to_string().contains("Tickets Desk"), "{problems}");
    assert_eq!(domain().check(), Ok(()));
}

#[tokio::test]
async fn a_long_cause_makes_an_id_that_fits_an_event_id() {
    let runner = runner(domain());
    let long = "t".repeat(120);
    run(&runner, vec![opened(&long)]).await;
    run(
        &runner,
        vec![record(
            "Noted",
            &long,
            2,
            serde_json::json!({"to": "log", "count": 1}),
        )],
    )
    .await;
    let log = runner.store().stream_events("log");
    assert_eq!(log.len(), 1);
    assert!(log[0].event_id.len() <= 128, "{}", log[0].event_id);
    assert!(log[0].event_id.starts_with("process-tickets-"));
}
