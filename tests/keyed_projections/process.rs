//! A process's step with effects: an event that appends (a notice to the
//! member) and one with effects (the member's numbers) in one step, one
//! transaction across the process's table and the event store, on both
//! stores.

use sequence_guard::process::{Outbox, Process};
use sequence_guard::producer::EventStore;
use sequence_guard::runner::{Runner, RunnerConfig};
use sequence_guard::store::Store;
use sequence_guard::store::dynamodb::{DynamoStore, ensure_events_table};
use sequence_guard::store::memory::MemoryStore;
use sequence_guard::{Decision, Domain, Entity, Events, Handling, Sequenced};
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::library::{self, Added, Book, LOANS, Loan, ON_LOAN};
use super::{Writes, added, at, counter, fresh_table, lent, message, run};

/// The desk's events: a book lent (with effects) and overdue (a notice
/// appended to the member's stream of notices).
#[derive(Debug, Deserialize)]
#[serde(tag = "type", content = "data")]
#[allow(clippy::enum_variant_names)] // the event types' names
enum DeskEvent {
    BookAdded(Added),
    BookLent(Loan),
    BookOverdue(Loan),
    /// Its own notices, of the event store it appends to: another stream's.
    NoticeSent(serde::de::IgnoredAny),
}

impl Events for DeskEvent {
    fn handling(self) -> Handling {
        match self {
            DeskEvent::BookAdded(data) => Handling::sequenced(data, library::added),
            DeskEvent::BookLent(data) => Handling::sequenced_with_effects(data, library::lent),
            DeskEvent::BookOverdue(data) => Handling::process(data, overdue),
            DeskEvent::NoticeSent(_) => Handling::ignore(),
        }
    }
}

fn overdue(book: &mut Option<Book>, event: &Sequenced<Loan>, outbox: &mut Outbox) -> Decision {
    if let Err(decision) = library::next(book, event) {
        return decision;
    }
    let stream = format!("notices-{}", event.data.member);
    outbox.append(
        &stream,
        "NoticeSent",
        &json!({ "book": event.aggregate_id }),
    );
    Decision::Applied
}

/// A member's notices: the event store's stream the desk appends to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Notices {
    sequence: u64,
    last_event_id: String,
}

impl Entity for Notices {
    const KIND: &'static str = "NOTICES";
    fn sequence(&self) -> u64 {
        self.sequence
    }
    fn last_event_id(&self) -> &str {
        &self.last_event_id
    }
}

#[derive(Debug, Deserialize)]
struct Notice {}

#[derive(Debug, Deserialize)]
#[serde(tag = "type", content = "data")]
enum NoticeEvent {
    NoticeSent(Notice),
}

impl Events for NoticeEvent {
    fn handling(self) -> Handling {
        match self {
            NoticeEvent::NoticeSent(data) => Handling::sequenced(data, noticed),
        }
    }
}

fn noticed(notices: &mut Option<Notices>, event: &Sequenced<Notice>) -> Decision {
    match notices {
        Some(notices) if notices.sequence >= event.sequence => Decision::Duplicate,
        Some(notices) if notices.sequence + 1 != event.sequence => Decision::Gap,
        _ => {
            *notices = Some(Notices {
                sequence: event.sequence,
                last_event_id: event.event_id.clone(),
            });
            Decision::Applied
        }
    }
}

fn notices_domain() -> Domain {
    Domain::new::<NoticeEvent>().entity::<Notices>()
}

fn desk() -> Domain {
    Domain::new::<DeskEvent>()
        .entity::<Book>()
        .counter(&ON_LOAN)
        .counter(&LOANS)
        .with_process(Process::new("desk", notices_domain()))
}

/// GIVEN a book, WHEN it is lent and overdue in one batch, THEN the book,
/// the member's numbers and the notice are written in one step.
async fn a_step_appends_and_adds_in_one_write<S: Store>(store: S) -> Runner<Writes<S>> {
    let runner = Runner::new(desk(), Writes::new(store), RunnerConfig::default());
    let overdue = message("BookOverdue", "b1", 3, "ada");
    let outcomes = run(&runner, vec![added("b1"), lent("b1", 2, "ada"), overdue]).await;

    assert_eq!(outcomes, [sequence_guard::runner::Outcome::Applied; 3]);
    let store = runner.store();
    assert_eq!(store.writes(), 1);
    assert_eq!(at(store, "b1").await, 3);
    assert_eq!(counter(store, &ON_LOAN, "ada").await, Some(1));
    assert_eq!(counter(store, &LOANS, "ada").await, Some(1));
    runner
}

#[tokio::test]
async fn on_memory_a_step_appends_and_adds_in_one_write() {
    let runner = a_step_appends_and_adds_in_one_write(MemoryStore::new()).await;
    let notices = runner.store().inner().stream_events("notices-ada");
    assert_eq!(notices.len(), 1);
}

#[tokio::test]
async fn on_dynamodb_a_step_appends_and_adds_in_one_write() {
    let table = fresh_table().await;
    let client = table.client().clone();
    let events = format!("{}-events", table.table());
    ensure_events_table(&client, &events)
        .await
        .expect("events table");
    let log = EventStore::new(client.clone(), events, notices_domain());
    let store = DynamoStore::new(client, table.table()).with_event_store(log.clone());
    a_step_appends_and_adds_in_one_write(store).await;
    assert_eq!(log.last_sequence("notices-ada").await, Ok(1));
}
