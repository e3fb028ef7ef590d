//! Projections keyed by something other than the stream: a book's events
//! move the book (keyed by its stream) and, in the same write, its member's
//! numbers (keyed by the member), once per event. Every story runs on the
//! in-memory store and on DynamoDB Local (started by the suite).
//!
//! Here: the store that counts writes, the messages, and the suite run on
//! each store.

mod library;
mod process;
mod stories;

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};

use aws_lambda_events::event::sqs::{SqsEvent, SqsMessage};
use sequence_guard::handling::{Counter, Effect};
use sequence_guard::runner::{Invocation, Outcome, Runner, RunnerConfig};
use sequence_guard::store::dynamodb::{DynamoStore, connect, create_table};
use sequence_guard::store::memory::MemoryStore;
use sequence_guard::store::{
    Added, Commit, Committed, DedupAddition, DedupKey, Inspection, Loaded, ParkedEvent, ParkedPage,
    Store, StoreError,
};
use sequence_guard::testing::DynamoLocal;
use sequence_guard::{Entity, EntityKey};

use library::Book;

/// A store that counts the writes of entities (each `commit`, with or
/// without effects): one write is one atomic request.
pub struct Writes<S> {
    store: S,
    writes: AtomicUsize,
}

impl<S> Writes<S> {
    pub fn new(store: S) -> Self {
        Writes {
            store,
            writes: AtomicUsize::new(0),
        }
    }

    /// The store it counts the writes of.
    pub fn inner(&self) -> &S {
        &self.store
    }

    /// The writes so far.
    pub fn writes(&self) -> usize {
        self.writes.load(Ordering::Relaxed)
    }
}

impl<S: Store> Store for Writes<S> {
    async fn load(&self, keys: &[EntityKey], dedup: &[DedupKey]) -> Result<Loaded, StoreError> {
        self.store.load(keys, dedup).await
    }

    async fn commit(&self, commit: &Commit) -> Result<Committed, StoreError> {
        self.writes.fetch_add(1, Ordering::Relaxed);
        self.store.commit(commit).await
    }

    async fn commit_with_effects(
        &self,
        commit: &Commit,
        effects: &[Effect],
    ) -> Result<Committed, StoreError> {
        self.writes.fetch_add(1, Ordering::Relaxed);
        self.store.commit_with_effects(commit, effects).await
    }

    async fn parked(
        &self,
        key: &EntityKey,
        sequences: &[u64],
    ) -> Result<Vec<ParkedEvent>, StoreError> {
        self.store.parked(key, sequences).await
    }

    async fn parked_entities(
        &self,
        after: Option<&str>,
        limit: usize,
    ) -> Result<ParkedPage, StoreError> {
        self.store.parked_entities(after, limit).await
    }

    async fn inspect(&self, key: &EntityKey) -> Result<Inspection, StoreError> {
        self.store.inspect(key).await
    }

    async fn add(&self, additions: &[DedupAddition]) -> Result<Added, StoreError> {
        self.store.add(additions).await
    }

    async fn counter(
        &self,
        counter: &'static Counter,
        id: &str,
    ) -> Result<Option<i64>, StoreError> {
        self.store.counter(counter, id).await
    }

    fn requests(&self) -> u64 {
        self.store.requests()
    }
}

static LOCAL: OnceLock<DynamoLocal> = OnceLock::new();
static TABLES: AtomicU32 = AtomicU32::new(0);

/// A new, empty table on this binary's DynamoDB Local (started on first use).
pub async fn fresh_table() -> DynamoStore {
    let local = LOCAL.get_or_init(|| {
        DynamoLocal::start().unwrap_or_else(|err| panic!("DynamoDB Local could not start: {err}"))
    });
    let client = connect(Some(&local.endpoint)).await;
    let name = format!(
        "library{}-{}",
        std::process::id(),
        TABLES.fetch_add(1, Ordering::Relaxed)
    );
    create_table(&client, &name).await.expect("create table");
    DynamoStore::new(client, name)
}

pub fn runner<S: Store>(store: S) -> Runner<Writes<S>> {
    Runner::new(
        library::domain(),
        Writes::new(store),
        RunnerConfig::default(),
    )
}

/// A book event's message to or from `member` (none: empty).
pub fn message(event_type: &str, book: &str, sequence: u64, member: &str) -> SqsMessage {
    let data = if member.is_empty() {
        serde_json::json!({})
    } else {
        serde_json::json!({ "member": member })
    };
    message_with(event_type, book, sequence, data)
}

/// A book event's message with `data`: its id `<book>-<sequence>`.
pub fn message_with(
    event_type: &str,
    book: &str,
    sequence: u64,
    data: serde_json::Value,
) -> SqsMessage {
    let body = serde_json::json!({
        "eventId": format!("{book}-{sequence}"),
        "type": event_type,
        "aggregateId": book,
        "sequence": sequence,
        "data": data,
    })
    .to_string();
    let mut message = SqsMessage::default();
    message.message_id = Some(format!("m-{book}-{sequence}-{event_type}"));
    message.body = Some(body);
    message
        .attributes
        .insert("MessageGroupId".to_owned(), book.to_owned());
    message
}

pub fn added(book: &str) -> SqsMessage {
    message("BookAdded", book, 1, "")
}

pub fn lent(book: &str, sequence: u64, member: &str) -> SqsMessage {
    message("BookLent", book, sequence, member)
}

pub fn returned(book: &str, sequence: u64, member: &str) -> SqsMessage {
    message("BookReturned", book, sequence, member)
}

/// Runs one batch; each message's outcome, in batch order.
pub async fn run<S: Store>(runner: &Runner<S>, messages: Vec<SqsMessage>) -> Vec<Outcome> {
    let mut event = SqsEvent::default();
    event.records = messages;
    let invocation = Invocation {
        deadline: None,
        now: sequence_guard::lambda::epoch_seconds(),
    };
    let report = runner.run(&event, invocation).await.expect("a batch");
    report
        .messages
        .iter()
        .map(|message| message.outcome)
        .collect()
}

/// The book as stored now.
pub async fn book<S: Store>(store: &S, id: &str) -> Option<Book> {
    let key = EntityKey::of::<Book>(id);
    let mut loaded = store
        .load(std::slice::from_ref(&key), &[])
        .await
        .expect("load")
        .entities;
    let entity = loaded.remove(&key)?.expect("readable");
    entity.get::<Book>().cloned()
}

/// The book's sequence as stored now (0: none).
pub async fn at<S: Store>(store: &S, id: &str) -> u64 {
    book(store, id).await.map_or(0, |book| book.sequence())
}

/// A counter's value now (`None`: never added to).
pub async fn counter<S: Store>(store: &S, counter: &'static Counter, id: &str) -> Option<i64> {
    store.counter(counter, id).await.expect("counter")
}

macro_rules! store_suite {
    ($module:ident, $store:expr) => {
        mod $module {
            use super::*;

            #[tokio::test]
            async fn a_lent_book_moves_its_member_in_the_same_write() {
                stories::a_lent_book_moves_its_member_in_the_same_write($store).await
            }
            #[tokio::test]
            async fn a_redelivered_event_adds_nothing_again() {
                stories::a_redelivered_event_adds_nothing_again($store).await
            }
            #[tokio::test]
            async fn two_books_lent_to_one_member_in_one_batch_both_count() {
                stories::two_books_lent_to_one_member_in_one_batch_both_count($store).await
            }
            #[tokio::test]
            async fn a_write_that_fails_the_guard_writes_no_effect() {
                stories::a_write_that_fails_the_guard_writes_no_effect($store).await
            }
            #[tokio::test]
            async fn a_counter_leaving_the_range_refuses_the_whole_write() {
                stories::a_counter_leaving_the_range_refuses_the_whole_write($store).await
            }
            #[tokio::test]
            async fn a_members_effects_in_one_write_are_merged() {
                stories::a_members_effects_in_one_write_are_merged($store).await
            }
            #[tokio::test]
            async fn effects_that_do_not_fit_one_write_are_written_in_steps() {
                stories::effects_that_do_not_fit_one_write_are_written_in_steps($store).await
            }
            #[tokio::test]
            async fn only_an_applied_answer_has_effects() {
                stories::only_an_applied_answer_has_effects($store).await
            }
            #[tokio::test]
            async fn an_unregistered_counter_is_a_handler_error() {
                stories::an_unregistered_counter_is_a_handler_error($store).await
            }
        }
    };
}

store_suite!(memory, MemoryStore::new());
store_suite!(dynamodb, fresh_table().await);
