//! The payments process on DynamoDB Local: its state and the events it
//! appends written in one transaction across its table and the event
//! store's (or not at all, under a fault on the transaction), deadlines
//! found through the index `due` and fired once, duplicate and raced
//! deliveries, what a handler that asks too much of one step gets, the
//! memory test's property, and the embedded store agreeing with DynamoDB.
//! Here: the world the topics share (a producer appending to the event
//! store, and the store's events delivered to the process as SQS records).

#[path = "../support/mod.rs"]
mod support;

mod agreement;
mod deadlines;
mod deliveries;
mod limits;
mod property;
mod proxy;
mod tools;
mod transaction;

use std::collections::BTreeMap;
use std::time::Duration;

use aws_sdk_dynamodb::Client;
use sequence_guard::EntityKey;
use sequence_guard::producer::{Append, EventStore, ExpectedSequence, NewEvent};
use sequence_guard::runner::{Invocation, Outcome, Runner, RunnerConfig};
use sequence_guard::store::Store;
use sequence_guard::store::dynamodb::{DynamoStore, connect, ensure_events_table};
use sequence_guard::store::memory::MemoryStore;
use serde_json::{Value, json};
use shop::payments::{Payment, PaymentState};
use support::*;

/// Now, in the tests' clock: deadlines are due at it plus the window.
const BASE: u64 = 1_800_000_000;
/// `PAYMENT_WINDOW_SECONDS`' default (the tests leave it unset).
const WINDOW: u64 = 900;

fn at(now: u64) -> Invocation {
    Invocation {
        deadline: None,
        now,
    }
}

fn created(total_cents: u64) -> Value {
    json!({"customerName": "Ada", "email": "ada@example.com", "totalCents": total_cents})
}

fn paid(amount_cents: u64) -> Value {
    json!({"amountCents": amount_cents})
}

fn cancelled() -> Value {
    json!({"reason": "changed mind"})
}

/// A process's table (with its index `due`) and an event store's, on
/// DynamoDB Local, new for each test.
struct Tables {
    client: Client,
    table: String,
    events: String,
}

impl Tables {
    async fn new() -> Tables {
        let store = fresh_table().await;
        let client = store.client().clone();
        let table = store.table().to_owned();
        let events = format!("{table}-events");
        ensure_events_table(&client, &events)
            .await
            .expect("events table");
        Tables {
            client,
            table,
            events,
        }
    }

    /// The payments process over these tables, its requests sent through
    /// `client` (DynamoDB Local's, or a proxy's).
    fn runner_through(&self, client: Client) -> Runner<DynamoStore> {
        let events = EventStore::new(client.clone(), self.events.clone(), shop::domain())
            .with_retry_budget(Duration::from_secs(2));
        let store = DynamoStore::new(client, self.table.clone()).with_event_store(events);
        Runner::new(shop::payments::domain(), store, RunnerConfig::default())
    }

    fn runner(&self) -> Runner<DynamoStore> {
        self.runner_through(self.client.clone())
    }

    /// The shop's producer, appending to the event store (its orders'
    /// personal data sealed with the tests' key).
    fn producer(&self) -> EventStore {
        let domain = personal_data::keyed_domain(&self.client, &self.events);
        EventStore::new(self.client.clone(), self.events.clone(), domain)
    }

    /// A world of `orders` orders, each created in the event store.
    async fn world(&self, orders: usize) -> World<DynamoStore, EventStore> {
        World::new(self.runner(), self.producer(), orders).await
    }
}

/// A client of DynamoDB Local through `endpoint` (a proxy in front of it).
async fn client_through(endpoint: &str) -> Client {
    connect(Some(endpoint)).await
}

/// A proxy in front of DynamoDB Local for `operation`.
async fn proxy_for(operation: &str) -> proxy::OperationFaults {
    let upstream = dynamodb_local()
        .endpoint
        .trim_start_matches("http://")
        .to_owned();
    proxy::OperationFaults::start(upstream, operation).await
}

/// Two runners (two functions, each its own event store) whose
/// transactions are held a while on the way: two that read at once write
/// at once. The proxy counts their transactions.
async fn racing(
    tables: &Tables,
) -> (
    proxy::OperationFaults,
    Runner<DynamoStore>,
    Runner<DynamoStore>,
) {
    let proxy = proxy_for("TransactWriteItems").await;
    proxy.delay(Duration::from_millis(300));
    let client = client_through(&proxy.endpoint).await;
    let runners = (
        tables.runner_through(client.clone()),
        tables.runner_through(client),
    );
    (proxy, runners.0, runners.1)
}

/// An event of the event store, as the tests read it.
#[derive(Debug, Clone, PartialEq)]
struct Logged {
    stream: String,
    sequence: u64,
    event_id: String,
    event_type: String,
    data: Value,
    /// The message body a dispatcher sends.
    body: String,
}

/// The event store a world's producer appends to and its dispatcher reads.
trait Log<S> {
    async fn produce(&self, store: &S, stream: &str, event_id: &str, event_type: &str, data: Value);
    async fn events(&self, store: &S, stream: &str) -> Vec<Logged>;
}

/// The embedded store's own event log.
struct Embedded;

impl Log<MemoryStore> for Embedded {
    async fn produce(
        &self,
        store: &MemoryStore,
        stream: &str,
        event_id: &str,
        event_type: &str,
        data: Value,
    ) {
        store.append_event(stream, event_id, event_type, data);
    }

    async fn events(&self, store: &MemoryStore, stream: &str) -> Vec<Logged> {
        store
            .stream_events(stream)
            .into_iter()
            .map(|event| {
                let body = json!({
                    "eventId": event.event_id,
                    "type": event.event_type,
                    "aggregateId": event.stream,
                    "sequence": event.sequence,
                    "data": event.data,
                })
                .to_string();
                Logged {
                    stream: event.stream,
                    sequence: event.sequence,
                    event_id: event.event_id,
                    event_type: event.event_type,
                    data: event.data,
                    body,
                }
            })
            .collect()
    }
}

impl<S> Log<S> for EventStore {
    async fn produce(&self, _: &S, stream: &str, event_id: &str, event_type: &str, data: Value) {
        produce(self, stream, event_id, event_type, data).await;
    }

    async fn events(&self, _: &S, stream: &str) -> Vec<Logged> {
        stream_events(self, stream).await
    }
}

/// Appends one event (with its id) to `stream`, wherever it stands.
async fn produce(store: &EventStore, stream: &str, event_id: &str, event_type: &str, data: Value) {
    let mut event = NewEvent::new(event_type, data);
    event.event_id = Some(event_id.to_owned());
    let append = Append {
        expected: ExpectedSequence::Any,
        ..Append::one(stream, event)
    };
    store
        .append(append)
        .await
        .unwrap_or_else(|err| panic!("{stream}: {event_type} {event_id}: {err}"));
}

/// A stream of the event store, in order, read back strongly (page after
/// page: one read holds at most 1 MB).
async fn stream_events(store: &EventStore, stream: &str) -> Vec<Logged> {
    let mut events = Vec::new();
    loop {
        let after = events
            .last()
            .map_or(0, |event: &sequence_guard::producer::StoredEvent| {
                event.sequence
            });
        let page = store
            .read(stream, after, 1000)
            .await
            .unwrap_or_else(|err| panic!("{stream}: {err}"));
        if page.is_empty() {
            break;
        }
        events.extend(page);
    }
    let mut logged = Vec::new();
    for event in events {
        // The data as the producer gave it: an order's personal values
        // asserted sealed in the store, and opened.
        let body = personal_data::opened(store.domain(), &event.body).await;
        logged.push(Logged {
            stream: stream.to_owned(),
            sequence: event.sequence,
            event_id: event.event_id,
            event_type: event.event_type,
            data: body["data"].clone(),
            body: event.body,
        });
    }
    logged
}

/// SQS records of these events, as the dispatcher sends them (message ids
/// made of the event's).
fn records(events: &[Logged], delivery: &str) -> aws_lambda_events::event::sqs::SqsEvent {
    batch(
        events
            .iter()
            .map(|event| {
                let id = format!("{delivery}-{}", event.event_id);
                message(&id, &event.stream, &event.body)
            })
            .collect(),
    )
}

/// Fires the due deadlines until `expected` fired in all (the index `due`
/// is eventually consistent: read again, briefly), answering how many did.
async fn fire_until<S: Store>(runner: &Runner<S>, now: u64, expected: u64) -> u64 {
    let mut fired = 0;
    for _ in 0..50 {
        fired += runner.fire_due(&at(now)).await.fired;
        if fired >= expected {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    fired
}

/// The process's state of `order`, as stored now.
async fn state<S: Store>(store: &S, order: &str) -> Option<Payment> {
    typed::<Payment, _>(store, order).await
}

/// The deadline of `order`'s state, as stored now.
async fn deadline<S: Store>(store: &S, order: &str) -> Option<u64> {
    let key = EntityKey::of::<Payment>(order);
    store
        .load(std::slice::from_ref(&key), &[])
        .await
        .expect("load")
        .due
        .remove(&key)
}

/// The shop's producer and the dispatcher, over an event store, delivering
/// to the payments process (the memory test's world, on any store).
struct World<S: Store, L: Log<S>> {
    runner: Runner<S>,
    log: L,
    orders: Vec<String>,
    /// Per order, how many of its events were delivered (in order) so far.
    delivered: BTreeMap<String, u64>,
    next_id: u64,
    messages: u64,
}

impl<S: Store, L: Log<S>> World<S, L> {
    async fn new(runner: Runner<S>, log: L, orders: usize) -> Self {
        let orders: Vec<String> = (0..orders).map(|n| format!("order-{n}")).collect();
        let mut world = World {
            runner,
            log,
            orders: orders.clone(),
            delivered: BTreeMap::new(),
            next_id: 0,
            messages: 0,
        };
        for order in &orders {
            world.produce(order, "OrderCreated", created(1000)).await;
        }
        world
    }

    async fn produce(&mut self, order: &str, event_type: &str, data: Value) {
        self.next_id += 1;
        let id = format!("p-{}", self.next_id);
        self.log
            .produce(self.runner.store(), order, &id, event_type, data)
            .await;
    }

    async fn events(&self, order: &str) -> Vec<Logged> {
        self.log.events(self.runner.store(), order).await
    }

    /// Delivers up to `count` next events of `order`, in one batch, with
    /// `again` events before them delivered once more (duplicates).
    async fn deliver(&mut self, order: &str, count: u64, again: u64, now: u64) {
        let events = self.events(order).await;
        let from = *self.delivered.get(order).unwrap_or(&0);
        let start = from.saturating_sub(again);
        let end = (from + count).min(events.len() as u64);
        if start >= end {
            return;
        }
        self.messages += 1;
        let delivery = format!("m-{}", self.messages);
        let event = records(&events[start as usize..end as usize], &delivery);
        let report = self.runner.run(&event, at(now)).await.expect("a batch");
        // What applied (or was a duplicate) counts as delivered, in order.
        let mut done = start;
        for message in &report.messages {
            match message.outcome {
                Outcome::Applied | Outcome::Duplicate => done += 1,
                other => {
                    assert!(
                        matches!(other, Outcome::Gap | Outcome::NotCreated | Outcome::Skipped),
                        "{order}: {other:?} {:?}",
                        message.reason
                    );
                    break;
                }
            }
        }
        self.delivered.insert(order.to_owned(), done.max(from));
    }

    /// Delivers everything, stream by stream, until nothing is left.
    async fn drain(&mut self, now: u64) {
        loop {
            let mut moved = false;
            for order in self.orders.clone() {
                let before = *self.delivered.get(&order).unwrap_or(&0);
                self.deliver(&order, 10, 0, now).await;
                moved |= *self.delivered.get(&order).unwrap_or(&0) > before;
            }
            if !moved {
                return;
            }
        }
    }

    async fn state(&self, order: &str) -> Option<Payment> {
        state(self.runner.store(), order).await
    }

    async fn deadline(&self, order: &str) -> Option<u64> {
        deadline(self.runner.store(), order).await
    }
}

/// What an order's stream says: its payments, refunds, and whether it was
/// cancelled; and each cancel for non-payment that found the order paid in
/// full (what was paid before it covered the total then).
struct Fold {
    total: u64,
    cancelled_paid_in_full: Vec<u64>,
    paid: u64,
    payments_after_cancel: Vec<u64>,
    paid_before_cancel: u64,
    refunds: Vec<u64>,
    cancelled: bool,
}

fn fold(events: &[Logged]) -> Fold {
    let mut fold = Fold {
        total: 0,
        cancelled_paid_in_full: Vec::new(),
        paid: 0,
        payments_after_cancel: Vec::new(),
        paid_before_cancel: 0,
        refunds: Vec::new(),
        cancelled: false,
    };
    for event in events {
        let amount = event.data["amountCents"].as_u64().unwrap_or(0);
        match event.event_type.as_str() {
            "PaymentReceived" => {
                fold.paid += amount;
                if fold.cancelled {
                    fold.payments_after_cancel.push(amount);
                } else {
                    fold.paid_before_cancel += amount;
                }
            }
            "RefundRequested" => fold.refunds.push(amount),
            "OrderCreated" | "OrderUpdated" => {
                fold.total = event.data["totalCents"].as_u64().unwrap_or(0);
            }
            "OrderCancelled" => {
                if event.data["reason"] == shop::payments::NOT_PAID
                    && !fold.cancelled
                    && fold.paid >= fold.total
                {
                    fold.cancelled_paid_in_full.push(event.sequence);
                }
                fold.cancelled = true;
            }
            _ => {}
        }
    }
    fold
}

/// Every order ended paid (and not cancelled) or cancelled, none paid in
/// full cancelled for non-payment, each payment that needs it requested
/// back once, its stream gapless and with unique
/// event ids, its state the fold of its stream; `ids` gathers the ids.
fn assert_settled(
    what: &str,
    order: &str,
    events: &[Logged],
    state: Option<&Payment>,
    ids: &mut std::collections::HashSet<String>,
) {
    for (index, event) in events.iter().enumerate() {
        assert_eq!(event.sequence, index as u64 + 1, "{what}: {order} gapless");
        assert!(
            ids.insert(event.event_id.clone()),
            "{what}: {} appended twice",
            event.event_id
        );
    }
    let fold = fold(events);
    let state = state.unwrap_or_else(|| panic!("{what}: {order} has no state"));
    assert_eq!(
        state.sequence,
        events.len() as u64,
        "{what}: {order} followed its stream"
    );
    assert_eq!(state.paid_cents, fold.paid, "{what}: {order} paid");
    assert_eq!(state.total_cents, fold.total, "{what}: {order} total");
    assert_eq!(
        fold.cancelled_paid_in_full,
        Vec::<u64>::new(),
        "{what}: {order} cancelled for non-payment (at these sequences) while paid in full"
    );
    if fold.cancelled {
        assert_eq!(state.state, PaymentState::Cancelled, "{what}: {order}");
        let mut wanted = fold.payments_after_cancel.clone();
        if fold.paid_before_cancel > 0 {
            wanted.push(fold.paid_before_cancel);
        }
        let mut refunds = fold.refunds.clone();
        wanted.sort_unstable();
        refunds.sort_unstable();
        assert_eq!(refunds, wanted, "{what}: {order} refunds");
    } else {
        assert_eq!(
            state.state,
            PaymentState::Paid,
            "{what}: {order} not cancelled, so paid"
        );
        assert!(
            fold.refunds.is_empty(),
            "{what}: {order} refunded while not cancelled"
        );
    }
}
