//! A hot order's stream split over two shards, on real parts (issue 49,
//! docs/event-store.md): DynamoDB splits a hot partition by sort key, and
//! Lambda reads the two shards in parallel, so the dispatcher can send a
//! stream's later events before its earlier ones.
//!
//! The parts: the producer's `append` on DynamoDB Local, the event store's
//! change records read with the DynamoDB Streams API (`support::streams`),
//! the `dispatcher` binary publishing to LocalStack's SNS FIFO topic, and
//! one SQS FIFO queue (raw delivery, a dead-letter queue behind it) for
//! each consumer binary: `projector` (the shop, opening the orders'
//! personal data), `status-projector` and `payments-process`, each reading
//! the event store (`EVENT_STORE_TABLE`).
//!
//! One hot order's change records are split as a split by sort key gives
//! them (its first half of events, its second half) and handed to the
//! dispatcher one invocation a record, so that it cannot put them back in
//! order: the later shard's first, latest first, then the earlier shard's,
//! latest first (every event after a later one); or the two shards read
//! in parallel, each in order, a few records of one then of the other (a
//! consumer's batch applies events in order, then meets one far ahead). Each
//! consumer then reads its queue as Lambda's mapping does. With the event
//! store to read, every consumer converges at the first delivery of every
//! message: the gap its first message meets is closed from the event store
//! in the same write, nothing fails, nothing is parked, no message is
//! received twice (no visibility timeout spent). The control without the
//! fill (the status consumer without `EVENT_STORE_TABLE`: the orders'
//! projector needs that table for its subjects' keys, the process to append)
//! shows the same feed failing batches and spending visibility timeouts
//! before it converges by parking.

mod support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use aws_sdk_sqs::types::MessageSystemAttributeName;
use sequence_guard::Domain;
use sequence_guard::producer::{Append, EventStore, NewEvent};
use sequence_guard::runner::RunnerConfig;
use sequence_guard::store::dynamodb::{DynamoStore, connect, create_table, ensure_events_table};
use serde_json::{Value, json};
use shop::OrderStatus;
use shop::payments::{Payment, PaymentState};
use support::function::{Function, start_binary, start_with};
use support::localstack::{
    Poller, Queues, bodies, fifo_queues, fifo_topic, sns, sqs, subscribe_raw,
};
use support::process::{append, deadlines_left, dispatch_to_topic, fold_into_table};
use support::runtime_api::{Answer, RuntimeApi};
use support::streams::StreamSource;
use support::*;

/// The hot order's events: its creation, then updates and payments, the
/// last payment paying it in full (so that the process appends nothing).
const EVENTS: u64 = 36;
/// What the order's creation asks for.
const CREATED_TOTAL: u64 = 100_000;

/// One consumer: its binary behind a Runtime API, its queues, its table
/// (the kinds of its items), and its domain and runner configuration for
/// the fold.
struct Consumer {
    name: &'static str,
    function: Function,
    poller: Poller,
    queues: Queues,
    table: String,
    kinds: &'static [&'static str],
    domain: Domain,
    config: RunnerConfig,
}

/// What draining one queue through its consumer saw.
#[derive(Debug, Default)]
struct Drained {
    /// Messages received, each receipt counted.
    receipts: u64,
    batches: u64,
    /// Batches whose response listed a failure (or that failed whole).
    failed_batches: u64,
    /// Each message id, and the highest `ApproximateReceiveCount` it was
    /// received with.
    received: BTreeMap<String, u64>,
}

struct Split {
    name: String,
    client: aws_sdk_dynamodb::Client,
    events: EventStore,
    sqs: aws_sdk_sqs::Client,
    failure_url: String,
    source: StreamSource,
    dispatcher: Function,
    consumers: Vec<Consumer>,
}

/// Every part. With `fill`, the three consumers, each reading the event
/// store; without, the status consumer alone, without `EVENT_STORE_TABLE`
/// (the control).
async fn split(name: &str, fill: bool) -> Split {
    let client = connect(Some(&dynamodb_local().endpoint)).await;
    let name = format!("split-{name}-{}", std::process::id());
    let events_table = format!("{name}-events");
    ensure_events_table(&client, &events_table)
        .await
        .expect("events table");
    let (sqs, sns) = (sqs().await, sns().await);
    let topic = fifo_topic(&sns, &format!("{name}-events")).await;
    let failure_url = sqs
        .create_queue()
        .queue_name(format!("{name}-dispatch-failures"))
        .send()
        .await
        .expect("failure queue")
        .queue_url
        .expect("failure queue url");
    let key = personal_data::personal_data_key();
    let names: &[&'static str] = if fill {
        &["orders", "status", "payments"]
    } else {
        &["status"]
    };
    let mut consumers = Vec::new();
    for &consumer in names {
        let table = format!("{name}-{consumer}");
        create_table(&client, &table).await.expect("table");
        // Visibility 2 s: a failed batch (the control's) comes back soon;
        // 50 receives: nothing reaches the dead-letter queue meanwhile.
        let queues = fifo_queues(&sqs, &format!("{name}-{consumer}"), 2, 50).await;
        subscribe_raw(&sns, &topic, &queues.arn).await;
        let api = RuntimeApi::start().await;
        let reads = [("EVENT_STORE_TABLE", events_table.as_str())];
        let reads: &[(&str, &str)] = if fill { &reads } else { &[] };
        let (function, domain, kinds, config) = match consumer {
            // The shop opens its orders' personal data, also in the events
            // it reads from the event store.
            "orders" => (
                start_with(
                    &api,
                    Some(&table),
                    &[
                        ("EVENT_STORE_TABLE", &events_table),
                        ("PERSONAL_DATA_KEY", &key),
                    ],
                ),
                personal_data::keyed_domain(&client, &events_table),
                &["ORDER#"][..],
                RunnerConfig::default(),
            ),
            "status" => {
                let mut variables = vec![("TABLE_NAME", table.as_str())];
                variables.extend_from_slice(reads);
                variables.push(("METRICS_SERVICE", "status-test"));
                (
                    start_binary(env!("CARGO_BIN_EXE_status-projector"), &api, &variables),
                    shop::status::domain(),
                    &["STATUS#"][..],
                    RunnerConfig::default(),
                )
            }
            // The fold of the process appends nothing: the store holds
            // what it appended (here nothing: the order ends paid).
            _ => (
                start_binary(
                    env!("CARGO_BIN_EXE_payments-process"),
                    &api,
                    &[
                        ("TABLE_NAME", &table),
                        ("EVENT_STORE_TABLE", &events_table),
                        ("PAYMENT_WINDOW_SECONDS", "3600"),
                        ("METRICS_SERVICE", "payments-test"),
                    ],
                ),
                shop::payments::domain(),
                &["PAYMENT#"][..],
                RunnerConfig {
                    appends: false,
                    ..RunnerConfig::default()
                },
            ),
        };
        let poller = Poller {
            sqs: sqs.clone(),
            queue_url: queues.url.clone(),
            queue_arn: queues.arn.clone(),
            api,
        };
        consumers.push(Consumer {
            name: consumer,
            function,
            poller,
            queues,
            table,
            kinds,
            domain,
            config,
        });
    }
    let (source, dispatcher) = dispatch_to_topic(&events_table, &topic, &sqs, &failure_url).await;
    Split {
        events: EventStore::new(
            client.clone(),
            events_table.clone(),
            personal_data::keyed_domain(&client, &events_table),
        ),
        name,
        client,
        sqs,
        failure_url,
        source,
        dispatcher,
        consumers,
    }
}

/// The order's customer: details sealed by the producer (personal data).
fn details(total: u64) -> Value {
    json!({ "customerName": "Ada", "email": "ada@example.com", "totalCents": total })
}

/// Appends the hot order's story: created, then updated and paid in turn
/// (what is paid stays below the total), the last payment the rest. Its
/// total in the end.
async fn produce(events: &EventStore, order: &str) -> u64 {
    append(
        events,
        Append::one(order, NewEvent::new("OrderCreated", details(CREATED_TOTAL))),
    )
    .await;
    let (mut total, mut paid) = (CREATED_TOTAL, 0);
    for n in 2..EVENTS {
        let event = if n % 2 == 0 {
            total += 100;
            NewEvent::new("OrderUpdated", details(total))
        } else {
            paid += 1_000;
            NewEvent::new("PaymentReceived", json!({ "amountCents": 1_000 }))
        };
        append(events, Append::one(order, event)).await;
    }
    let rest = json!({ "amountCents": total - paid });
    append(
        events,
        Append::one(order, NewEvent::new("PaymentReceived", rest)),
    )
    .await;
    total
}

/// The event's sequence, when a change record (as Lambda delivers it) is
/// of an event item (`STREAM#<id>` / `EVENT#<20 digits>`).
fn event_sequence(record: &Value) -> Option<u64> {
    let keys = &record["dynamodb"]["Keys"];
    keys["pk"]["S"].as_str()?.strip_prefix("STREAM#")?;
    keys["sk"]["S"]
        .as_str()?
        .strip_prefix("EVENT#")?
        .parse()
        .ok()
}

/// Every change record of the events table: its event items', in stream
/// order, and the rest (the subject's key item, another partition).
async fn change_records(source: &mut StreamSource) -> (Vec<(u64, Value)>, Vec<Value>) {
    let (mut events, mut others) = (Vec::new(), Vec::new());
    let started = Instant::now();
    while (events.len() as u64) < EVENTS {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the stream gave {} event records of {EVENTS}",
            events.len()
        );
        for record in source.read(1000).await {
            match event_sequence(&record) {
                Some(sequence) => events.push((sequence, record)),
                None => others.push(record),
            }
        }
    }
    (events, others)
}

/// How the dispatcher meets the records of a stream split in two by sort
/// key (its earlier half of events in one shard, its later half in the
/// other), one record an invocation.
#[derive(Debug, Clone, Copy)]
enum Meeting {
    /// The later shard's records first, latest first, then the earlier
    /// shard's, latest first: every record after a later one.
    LaterShardFirstReversed,
    /// The two shards read in parallel, each in order, three records of
    /// the earlier shard, then three of the later, and so on: a consumer's
    /// batch holds events it applies in order, then one far ahead.
    Interleaved,
}

impl Meeting {
    /// `events` (sequence, record), in the order the dispatcher meets them.
    fn order(self, mut events: Vec<(u64, Value)>) -> Vec<(u64, Value)> {
        events.sort_by_key(|(sequence, _)| *sequence);
        let later = events.split_off(events.len() / 2);
        match self {
            Meeting::LaterShardFirstReversed => later
                .into_iter()
                .rev()
                .chain(events.into_iter().rev())
                .collect(),
            Meeting::Interleaved => {
                let (mut earlier, mut later) = (events.into_iter(), later.into_iter());
                let mut met = Vec::new();
                loop {
                    let before = met.len();
                    met.extend(earlier.by_ref().take(3));
                    met.extend(later.by_ref().take(3));
                    if met.len() == before {
                        return met;
                    }
                }
            }
        }
    }

    /// The sequences of a stream of `events` events, as met.
    fn sequences(self, events: u64) -> Vec<u64> {
        let half = events / 2;
        match self {
            Meeting::LaterShardFirstReversed => {
                (half + 1..=events).rev().chain((1..=half).rev()).collect()
            }
            Meeting::Interleaved => (0..half.div_ceil(3))
                .flat_map(|n| {
                    let earlier = 3 * n + 1..=(3 * n + 3).min(half);
                    let later = half + 3 * n + 1..=(half + 3 * n + 3).min(events);
                    earlier.chain(later)
                })
                .collect(),
        }
    }
}

/// Whether a dispatcher's answer lists no failure.
fn no_failures(answer: &Answer) -> bool {
    let Answer::Response(body) = answer else {
        return false;
    };
    let response: Value = serde_json::from_str(body).unwrap_or(Value::Null);
    match response.get("batchItemFailures") {
        None | Some(Value::Null) => true,
        Some(Value::Array(failures)) => failures.is_empty(),
        Some(_) => false,
    }
}

impl Split {
    /// Appends the story, and hands its change records to the dispatcher
    /// one at a time as `meeting` says; the order's total. Waits until
    /// every queue holds every event.
    async fn feed(&mut self, order: &str, meeting: Meeting) -> u64 {
        let total = produce(&self.events, order).await;
        let (events, others) = change_records(&mut self.source).await;
        let met = meeting.order(events);
        let sent: Vec<u64> = met.iter().map(|(sequence, _)| *sequence).collect();
        assert_eq!(sent, meeting.sequences(EVENTS), "{meeting:?}");
        // The subject's key item first: another partition, another shard.
        let records = others
            .into_iter()
            .chain(met.into_iter().map(|(_, record)| record));
        for record in records {
            let answer =
                StreamSource::invoke(&self.source.api, std::slice::from_ref(&record)).await;
            assert!(
                no_failures(&answer),
                "the dispatcher sent {record}: {answer:?}\n{}",
                self.dispatcher.output()
            );
        }
        // Its metrics are written after its answer: read until the last
        // invocation's are there.
        let started = Instant::now();
        while metric_sum(&self.dispatcher.output(), "Dispatched") < EVENTS as f64
            && started.elapsed() < Duration::from_secs(10)
        {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert_eq!(
            metric_sum(&self.dispatcher.output(), "Dispatched"),
            EVENTS as f64,
            "{}",
            self.dispatcher.output()
        );
        // SNS delivers to the queues on its own time: the consumers start
        // once all is there, so that each meets the order as sent.
        let started = Instant::now();
        for consumer in &self.consumers {
            while consumer.poller.in_queue().await < EVENTS {
                assert!(
                    started.elapsed() < Duration::from_secs(30),
                    "{}: {} of {EVENTS} messages reached the queue",
                    consumer.name,
                    consumer.poller.in_queue().await
                );
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
        total
    }
}

/// Drains a queue through its consumer as Lambda's mapping does, until it
/// has stayed empty through two polls, or `limit` passes.
async fn drain(consumer: &Consumer, limit: Duration) -> Drained {
    let mut drained = Drained::default();
    let (started, mut empty) = (Instant::now(), 0);
    while empty < 2 && started.elapsed() < limit {
        let Some(batch) = consumer.poller.receive().await else {
            empty = if consumer.poller.in_queue().await == 0 {
                empty + 1
            } else {
                0
            };
            continue;
        };
        empty = 0;
        for message in &batch {
            let count = message
                .attributes
                .as_ref()
                .and_then(|attributes| {
                    attributes.get(&MessageSystemAttributeName::ApproximateReceiveCount)
                })
                .and_then(|count| count.parse::<u64>().ok())
                .expect("an ApproximateReceiveCount");
            let id = message.message_id.clone().expect("a message id");
            let seen = drained.received.entry(id).or_default();
            *seen = (*seen).max(count);
        }
        drained.receipts += batch.len() as u64;
        drained.batches += 1;
        let poll = consumer.poller.invoke(batch).await;
        if !poll.failed.is_empty() {
            drained.failed_batches += 1;
        }
    }
    drained
}

/// Drains every consumer's queue at once.
async fn drain_all(split: &Split, limit: Duration) -> Vec<Drained> {
    futures::future::join_all(
        split
            .consumers
            .iter()
            .map(|consumer| drain(consumer, limit)),
    )
    .await
}

impl Split {
    /// Each consumer's table is the fold of the order's stream through its
    /// domain (attribute by attribute: no event parked, none missing); its
    /// dead-letter queue is empty; nothing was given up.
    async fn assert_every_consumer_is_the_fold(&self, order: &str) {
        let stored: Vec<(String, String)> = self
            .events
            .read(order, 0, 1000)
            .await
            .expect("read")
            .into_iter()
            .map(|event| (order.to_owned(), event.body))
            .collect();
        assert_eq!(stored.len() as u64, EVENTS, "the process appended nothing");
        let endpoint = &dynamodb_local().endpoint;
        for consumer in &self.consumers {
            let folded =
                fold_into_table(&self.name, &consumer.domain, &consumer.config, &stored).await;
            let live = items_of(endpoint, &consumer.table, consumer.kinds).await;
            let fold = items_of(endpoint, &folded, consumer.kinds).await;
            assert_eq!(live.len(), 1, "{}: the order's item", consumer.name);
            assert_eq!(
                live,
                fold,
                "{}: the table is the fold of the stream; its function:\n{}",
                consumer.name,
                consumer.function.output()
            );
            let dead = bodies(&self.sqs, &consumer.queues.dlq_url).await;
            assert!(dead.is_empty(), "{}: dead letters {dead:?}", consumer.name);
        }
        let failures = bodies(&self.sqs, &self.failure_url).await;
        assert!(failures.is_empty(), "nothing given up: {failures:?}");
    }
}

/// Feeds the hot order's change records as `meeting` says, drains every
/// consumer, and checks that each converged at the first delivery of
/// every message.
async fn every_consumer_converges_with_no_timeout_spent(name: &str, meeting: Meeting) {
    // GIVEN a hot order's 36 events, their change records handed to the
    // dispatcher as two shards can give them
    let mut split = split(name, true).await;
    let order = format!("{}-hot-order", split.name);
    let total = split.feed(&order, meeting).await;

    // WHEN each consumer, reading the event store, drains its queue
    let drained = drain_all(&split, Duration::from_secs(60)).await;

    // THEN every message was done at its first delivery: no batch failed,
    // none was received twice, nothing parked or dead-lettered
    for (consumer, drained) in split.consumers.iter().zip(&drained) {
        // A batch's metrics are written after its answer: read until every
        // message received is counted.
        let started = Instant::now();
        while metric_sum(&consumer.function.output(), "Messages") < drained.receipts as f64
            && started.elapsed() < Duration::from_secs(10)
        {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let output = consumer.function.output();
        let name = consumer.name;
        assert_eq!(drained.failed_batches, 0, "{name}: {drained:?}\n{output}");
        assert_eq!(drained.received.len() as u64, EVENTS, "{name}: {drained:?}");
        assert_eq!(
            drained.receipts, EVENTS,
            "{name}: each message received once: {drained:?}"
        );
        let again: Vec<_> = drained
            .received
            .iter()
            .filter(|(_, count)| **count > 1)
            .collect();
        assert!(again.is_empty(), "{name}: received again: {again:?}");
        // Each event applied once: by its own message, or read from the
        // event store before the message that met its gap (its own
        // message then a duplicate).
        let applied = metric_sum(&output, "Applied");
        let filled = metric_sum(&output, "Filled");
        assert_eq!(applied + filled, EVENTS as f64, "{name}:\n{output}");
        assert!(filled > 0.0, "{name}: a gap met, and closed from the store");
        assert_eq!(
            metric_sum(&output, "Duplicate"),
            filled,
            "{name}: a message whose event was read from the store is a duplicate"
        );
        for outcome in ["Gap", "NotCreated", "Parked", "Drained", "Invalid"] {
            assert_eq!(metric_sum(&output, outcome), 0.0, "{name}: {outcome}");
        }
        assert!(
            output.contains("a gap's events read from the event store"),
            "{name}: the fill is logged:\n{output}"
        );
    }
    split.assert_every_consumer_is_the_fold(&order).await;
    let at = |n: usize| DynamoStore::new(split.client.clone(), split.consumers[n].table.clone());
    let projected = typed::<shop::Order, _>(&at(0), &order)
        .await
        .expect("an order");
    assert_eq!(
        (
            projected.sequence,
            projected.total_cents,
            projected.paid_cents,
            projected.status,
            projected.customer_name.as_str()
        ),
        (EVENTS, total, total, OrderStatus::Open, "Ada"),
        "the order, its personal data opened"
    );
    let status = typed::<shop::status::Status, _>(&at(1), &order).await;
    assert_eq!(status.expect("a status").sequence, EVENTS);
    let payment = typed::<Payment, _>(&at(2), &order)
        .await
        .expect("a payment");
    assert_eq!(
        (payment.sequence, payment.state, payment.paid_cents),
        (EVENTS, PaymentState::Paid, total)
    );
    assert_eq!(deadlines_left(&split.consumers[2].table).await, 0, "paid");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_stream_split_over_two_shards_reaches_every_consumer_with_no_timeout_spent() {
    every_consumer_converges_with_no_timeout_spent("fill", Meeting::LaterShardFirstReversed).await;
}

// The two shards read in parallel, each in order: a batch applies the
// earlier shard's events and then meets the later shard's, far ahead,
// within the same run of its entity; the gap is closed there.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_shards_read_in_parallel_reach_every_consumer_with_no_timeout_spent() {
    every_consumer_converges_with_no_timeout_spent("parallel", Meeting::Interleaved).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn without_the_fill_the_same_feed_spends_visibility_timeouts() {
    // GIVEN the same feed, and the status consumer without the event store
    let mut split = split("control", false).await;
    let order = format!("{}-hot-order", split.name);
    split.feed(&order, Meeting::LaterShardFirstReversed).await;

    // WHEN it drains its queue
    let drained = drain_all(&split, Duration::from_secs(120)).await;

    // THEN its batches failed on the gaps and came back after their
    // visibility timeout, until parked; it converges all the same
    let drained = &drained[0];
    let output = split.consumers[0].function.output();
    assert!(drained.failed_batches > 0, "{drained:?}\n{output}");
    assert!(
        drained.received.values().any(|count| *count > 1),
        "received again after a visibility timeout: {drained:?}"
    );
    assert!(drained.receipts > EVENTS, "{drained:?}");
    let waited = metric_sum(&output, "Gap") + metric_sum(&output, "NotCreated");
    assert!(waited > 0.0, "{output}");
    assert!(metric_sum(&output, "Parked") > 0.0, "{output}");
    assert_eq!(metric_sum(&output, "Filled"), 0.0, "{output}");
    split.assert_every_consumer_is_the_fold(&order).await;
}
