//! Deadlines under attack, on the embedded store and on DynamoDB Local: a
//! deadline set in the past (a periodic one behind after the sweep was out
//! longer than its period, or a message's) fires at the next sweep, once a
//! sweep, never dropped (`past.rs`); and deadlines whose streams keep
//! moving (a process behind them) take no other state's turn, nor the
//! parked events' share of a sweep (`turns.rs`).

// The shared support's test domain is not used here.
#[allow(unused_imports)]
#[path = "../support/mod.rs"]
mod support;

mod past;
mod turns;

use std::collections::HashMap;
use std::future::Future;
use std::sync::Mutex;
use std::time::Duration;

use aws_lambda_events::event::sqs::{SqsEvent, SqsMessage};
use sequence_guard::process::{Due, DueOutbox, Outbox, Process};
use sequence_guard::producer::{Append, NewEvent};
use sequence_guard::runner::{Invocation, Runner, RunnerConfig};
use sequence_guard::store::due_shard;
use sequence_guard::store::dynamodb::{DynamoStore, ensure_events_table};
use sequence_guard::store::memory::MemoryStore;
use sequence_guard::store::{
    Added, Commit, Committed, DedupAddition, DedupKey, DueEntry, Inspection, Loaded, ParkedEvent,
    ParkedPage, Store, StoreError, SweepMark,
};
use sequence_guard::{Decision, Domain, Entity, EntityKey, Events, Handling, Sequenced};
use serde::{Deserialize, Serialize};

/// Now, in the tests' clock.
const NOW: u64 = 1_800_000_000;

/// A periodic deadline's period, in seconds.
const PERIOD: u64 = 60;

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

#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
struct Open {
    /// Seconds from now to the ticket's first deadline (below 0: past).
    #[serde(default)]
    due_in: i64,
}

/// The event store's types: what the process appends.
#[derive(Debug, Deserialize)]
#[serde(tag = "type", content = "data")]
enum StoreEvent {
    Opened(Open),
    Noted(Open),
}

/// The event store's own view of a ticket: created by `Opened`, moved by
/// each event.
fn stored(ticket: &mut Option<Ticket>, event: &Sequenced<Open>) -> Decision {
    let reminded = ticket.as_ref().map_or(0, |ticket| ticket.reminded);
    *ticket = Some(Ticket {
        sequence: event.sequence,
        last_event_id: event.event_id.clone(),
        reminded,
    });
    Decision::Applied
}

impl Events for StoreEvent {
    fn handling(self) -> Handling {
        match self {
            StoreEvent::Opened(data) | StoreEvent::Noted(data) => Handling::sequenced(data, stored),
        }
    }
}

/// The process's one type: opens a ticket with its first deadline.
#[derive(Debug, Deserialize)]
#[serde(tag = "type", content = "data")]
enum TicketEvent {
    Opened(Open),
    /// Its own reminders, followed: the state's sequence moves.
    Noted(serde::de::IgnoredAny),
}

fn on_opened(
    ticket: &mut Option<Ticket>,
    event: &Sequenced<Open>,
    outbox: &mut Outbox,
) -> Decision {
    if ticket.is_some() {
        return Decision::Duplicate;
    }
    *ticket = Some(Ticket {
        sequence: event.sequence,
        last_event_id: event.event_id.clone(),
        reminded: 0,
    });
    outbox.set_deadline(outbox.now().saturating_add_signed(event.data.due_in));
    Decision::Applied
}

impl Events for TicketEvent {
    fn handling(self) -> Handling {
        match self {
            TicketEvent::Opened(data) => Handling::process(data, on_opened),
            TicketEvent::Noted(_) => Handling::pass::<Ticket>(),
        }
    }
}

/// Reminds every period, from when it was due: a deadline behind after an
/// outage sets its next one in the past.
fn periodic(ticket: &mut Ticket, due: &Due, outbox: &mut DueOutbox) {
    ticket.reminded += 1;
    outbox.set_deadline(due.at + PERIOD);
}

/// Reminds once, appending to the ticket's stream at the sequence the
/// process has seen: nothing is written when the stream moved.
fn reminding(ticket: &mut Ticket, _: &Due, outbox: &mut DueOutbox) {
    ticket.reminded += 1;
    outbox.append("Noted", &Open::default());
}

fn store_domain() -> Domain {
    Domain::new::<StoreEvent>().entity::<Ticket>()
}

fn domain(on_deadline: fn(&mut Ticket, &Due, &mut DueOutbox)) -> Domain {
    Domain::new::<TicketEvent>()
        .entity::<Ticket>()
        .with_process(Process::new("tickets", store_domain()).on_deadline(on_deadline))
}

fn at(now: u64) -> Invocation {
    Invocation {
        deadline: None,
        now,
    }
}

/// The SQS record of a ticket's `Opened`, its deadline `due_in` seconds on.
fn opened(id: &str, due_in: i64) -> SqsMessage {
    let body = serde_json::json!({
        "eventId": format!("{id}-1"),
        "type": "Opened",
        "aggregateId": id,
        "sequence": 1,
        "data": {"dueIn": due_in},
    })
    .to_string();
    let mut message = SqsMessage::default();
    message.message_id = Some(format!("m-{id}"));
    message.body = Some(body);
    message
        .attributes
        .insert("MessageGroupId".to_owned(), id.to_owned());
    message
}

/// Opens the tickets at `NOW` (their streams' first event appended to the
/// event store first, as a producer would), ten a batch.
async fn open<S: Tickets>(runner: &Runner<S>, ids: &[String], due_in: i64) {
    for id in ids {
        runner.store().append(id).await;
    }
    for chunk in ids.chunks(10) {
        let mut batch = SqsEvent::default();
        batch.records = chunk.iter().map(|id| opened(id, due_in)).collect();
        let report = runner.run(&batch, at(NOW)).await.expect("a batch");
        assert!(
            report.response().batch_item_failures.is_empty(),
            "{report:?}"
        );
    }
}

/// `count` ticket ids whose states' deadlines are in partition `shard` of
/// the index of due deadlines.
fn ids_in(shard: u8, count: usize, prefix: &str) -> Vec<String> {
    (0..)
        .map(|n| format!("{prefix}-{n}"))
        .filter(|id| due_shard(&format!("TICKET#{id}")) == shard)
        .take(count)
        .collect()
}

/// The ticket `id` as stored, and its deadline.
async fn ticket<S: Store>(store: &S, id: &str) -> (Option<Ticket>, Option<u64>) {
    let key = EntityKey::of::<Ticket>(id);
    let loaded = store
        .load(std::slice::from_ref(&key), &[])
        .await
        .expect("load");
    let ticket = loaded
        .entities
        .get(&key)
        .map(|entity| entity.as_ref().expect("readable"))
        .and_then(|entity| entity.get::<Ticket>().cloned());
    (ticket, loaded.due.get(&key).copied())
}

/// A store that is also the event store its process appends to: events
/// appended by a producer, and a stream's length.
trait Tickets: Store {
    fn append(&self, stream: &str) -> impl Future<Output = ()> + Send;
    fn length(&self, stream: &str) -> impl Future<Output = usize> + Send;
}

impl Tickets for MemoryStore {
    async fn append(&self, stream: &str) {
        let sequence = self.stream_events(stream).len() + 1;
        let event_id = format!("{stream}-{sequence}");
        let event_type = if sequence == 1 { "Opened" } else { "Noted" };
        self.append_event(stream, &event_id, event_type, serde_json::json!({}));
    }

    async fn length(&self, stream: &str) -> usize {
        self.stream_events(stream).len()
    }
}

impl Tickets for DynamoStore {
    async fn append(&self, stream: &str) {
        let events = self.event_store().expect("an event store");
        let head = events.read(stream, 0, 1000).await.expect("read").len();
        let event_type = if head == 0 { "Opened" } else { "Noted" };
        let event = NewEvent::new(event_type, serde_json::json!({}));
        events
            .append(Append::one(stream, event))
            .await
            .expect("appended");
    }

    async fn length(&self, stream: &str) -> usize {
        let events = self.event_store().expect("an event store");
        events.read(stream, 0, 1000).await.expect("read").len()
    }
}

/// A process's table and its event store on DynamoDB Local, new for each
/// test.
async fn dynamodb() -> DynamoStore {
    let table = support::fresh_table().await;
    let events_table = format!("{}-events", table.table());
    ensure_events_table(table.client(), &events_table)
        .await
        .expect("events table");
    let events = sequence_guard::producer::EventStore::new(
        table.client().clone(),
        events_table,
        store_domain(),
    );
    table.with_event_store(events)
}

/// A store whose reads of states take `delay` each, and which counts the
/// reads of each state; its walk of the parked index fails while
/// `walk_fails` is set.
struct Slow<S> {
    inner: S,
    delay: Duration,
    reads: Mutex<HashMap<String, usize>>,
    walk_fails: std::sync::atomic::AtomicBool,
}

impl<S> Slow<S> {
    fn new(inner: S, delay: Duration) -> Self {
        Slow {
            inner,
            delay,
            reads: Mutex::default(),
            walk_fails: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// Forgets the reads so far.
    fn forget_reads(&self) {
        self.reads.lock().expect("reads").clear();
    }

    /// How often the state `id` was read.
    fn reads(&self, id: &str) -> usize {
        let pk = EntityKey::of::<Ticket>(id).pk();
        self.reads
            .lock()
            .expect("reads")
            .get(&pk)
            .copied()
            .unwrap_or(0)
    }
}

fn runner<S: Tickets>(
    store: S,
    delay: Duration,
    deadline: fn(&mut Ticket, &Due, &mut DueOutbox),
) -> Runner<Slow<S>> {
    Runner::new(
        domain(deadline),
        Slow::new(store, delay),
        RunnerConfig::default(),
    )
}

impl<S: Tickets> Tickets for Slow<S> {
    async fn append(&self, stream: &str) {
        self.inner.append(stream).await;
    }

    async fn length(&self, stream: &str) -> usize {
        self.inner.length(stream).await
    }
}

impl<S: Store> Store for Slow<S> {
    async fn load(&self, keys: &[EntityKey], dedup: &[DedupKey]) -> Result<Loaded, StoreError> {
        tokio::time::sleep(self.delay).await;
        if let Ok(mut reads) = self.reads.lock() {
            for key in keys {
                *reads.entry(key.pk()).or_default() += 1;
            }
        }
        self.inner.load(keys, dedup).await
    }

    async fn commit(&self, commit: &Commit) -> Result<Committed, StoreError> {
        self.inner.commit(commit).await
    }

    async fn parked(
        &self,
        key: &EntityKey,
        sequences: &[u64],
    ) -> Result<Vec<ParkedEvent>, StoreError> {
        self.inner.parked(key, sequences).await
    }

    async fn parked_entities(
        &self,
        after: Option<&str>,
        limit: usize,
    ) -> Result<ParkedPage, StoreError> {
        if self.walk_fails.load(std::sync::atomic::Ordering::Relaxed) {
            return Err(StoreError::Request {
                operation: "Query",
                message: "the test's walk fails".to_owned(),
            });
        }
        self.inner.parked_entities(after, limit).await
    }

    async fn upgrade_parked_index(&self, limit: usize) -> Result<usize, StoreError> {
        self.inner.upgrade_parked_index(limit).await
    }

    async fn sweep_mark(&self) -> Result<Option<SweepMark>, StoreError> {
        self.inner.sweep_mark().await
    }

    async fn save_sweep_mark(&self, mark: &SweepMark) -> Result<(), StoreError> {
        self.inner.save_sweep_mark(mark).await
    }

    async fn inspect(&self, key: &EntityKey) -> Result<Inspection, StoreError> {
        self.inner.inspect(key).await
    }

    async fn add(&self, additions: &[DedupAddition]) -> Result<Added, StoreError> {
        self.inner.add(additions).await
    }

    async fn counter(
        &self,
        counter: &'static sequence_guard::Counter,
        id: &str,
    ) -> Result<Option<i64>, StoreError> {
        self.inner.counter(counter, id).await
    }

    async fn due(
        &self,
        shard: u8,
        now: u64,
        after: Option<&DueEntry>,
        limit: usize,
    ) -> Result<Vec<DueEntry>, StoreError> {
        self.inner.due(shard, now, after, limit).await
    }
}
