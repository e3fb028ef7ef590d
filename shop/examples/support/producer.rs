//! The benchmark's producer section: the event store's append side by side
//! with the naive producer most teams write (a counter `ADD`, then a
//! `PutItem` of the event), on DynamoDB Local.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::{
    AttributeValue, ConsumedCapacity, Put, ReturnConsumedCapacity, ReturnValue,
    ReturnValuesOnConditionCheckFailure, TransactWriteItem, Update,
};
use sequence_guard::producer::capacity;
use sequence_guard::producer::{
    Append, AppendError, Consumed, EventStore, ExactCheck, ExpectedSequence, NewEvent, Units,
};
use sequence_guard::store::dynamodb::{connect, ensure_events_table};
use serde_json::json;

use super::fault_proxy::{Fault, FaultProxy};

/// An order's event as the benchmark appends it: a creation, since any
/// append may be its stream's first (an update cannot open a stream); the
/// store minds no other type, and costs the same.
fn updated(n: u64) -> NewEvent {
    NewEvent::new(
        "OrderCreated",
        json!({"customerName": "Ada", "email": "ada@example.com", "totalCents": n}),
    )
}

async fn table(endpoint: &str, name: &str) -> Client {
    let client = connect(Some(endpoint)).await;
    if let Err(err) = ensure_events_table(&client, name).await {
        eprintln!("{name}: {err}");
        std::process::exit(1);
    }
    client
}

/// The naive producer: `ADD` the head, then put the event at the sequence it
/// answered. A caller retries the whole command when either fails.
async fn naive_append(
    client: &Client,
    table: &str,
    stream: &str,
    event_id: &str,
) -> Result<(), String> {
    let output = client
        .update_item()
        .table_name(table)
        .key("pk", AttributeValue::S(format!("STREAM#{stream}")))
        .key("sk", AttributeValue::S("HEAD".into()))
        .update_expression("ADD #s :one")
        .expression_attribute_names("#s", "sequence")
        .expression_attribute_values(":one", AttributeValue::N("1".into()))
        .return_values(ReturnValue::UpdatedNew)
        .send()
        .await
        .map_err(|err| err.to_string())?;
    let sequence: u64 = match output
        .attributes
        .as_ref()
        .and_then(|item| item.get("sequence"))
    {
        Some(AttributeValue::N(number)) => number.parse().map_err(|_| "sequence".to_owned())?,
        _ => return Err("no sequence".into()),
    };
    client
        .put_item()
        .table_name(table)
        .item("pk", AttributeValue::S(format!("STREAM#{stream}")))
        .item("sk", AttributeValue::S(format!("EVENT#{sequence:020}")))
        .item("eventId", AttributeValue::S(event_id.into()))
        .item("sequence", AttributeValue::N(sequence.to_string()))
        .send()
        .await
        .map_err(|err| err.to_string())?;
    Ok(())
}

/// Gaps (sequences up to the head with no event) and duplicates (events
/// stored more than once) in a stream, read without faults.
async fn gaps_and_duplicates(client: &Client, table: &str, stream: &str) -> (u64, u64) {
    let mut events: BTreeMap<u64, String> = BTreeMap::new();
    let mut head = 0;
    let mut start = None;
    loop {
        let Ok(output) = client
            .query()
            .table_name(table)
            .key_condition_expression("pk = :pk")
            .expression_attribute_values(":pk", AttributeValue::S(format!("STREAM#{stream}")))
            .consistent_read(true)
            .set_exclusive_start_key(start)
            .send()
            .await
        else {
            return (u64::MAX, u64::MAX);
        };
        for item in output.items.unwrap_or_default() {
            let number = |name: &str| match item.get(name) {
                Some(AttributeValue::N(n)) => n.parse::<u64>().ok(),
                _ => None,
            };
            match item.get("sk") {
                Some(AttributeValue::S(sk)) if sk == "HEAD" => {
                    head = number("sequence").unwrap_or(0)
                }
                _ => {
                    if let (Some(sequence), Some(AttributeValue::S(id))) =
                        (number("sequence"), item.get("eventId"))
                    {
                        events.insert(sequence, id.clone());
                    }
                }
            }
        }
        start = output.last_evaluated_key;
        if start.is_none() {
            break;
        }
    }
    let gaps = (1..=head)
        .filter(|sequence| !events.contains_key(sequence))
        .count() as u64;
    let distinct: HashSet<&String> = events.values().collect();
    (gaps, (events.len() - distinct.len()) as u64)
}

pub async fn print_producer(local: &str, proxied: &str) {
    println!("\n== The producer's half: appends to the event store (through the 2 ms proxy)");
    let client = table(local, "bench-events").await;
    let store = EventStore::new(connect(Some(proxied)).await, "bench-events", shop::domain());

    // Requests per append.
    let mut rows = Vec::new();
    for (label, expected, request) in [
        ("expected sequence known, no request id", true, false),
        ("expected sequence known, request id", true, true),
        ("any sequence (the last event read first)", false, false),
    ] {
        let before = store.requests();
        let stream = format!("req-{}", label.len());
        for n in 0..50u64 {
            let append = Append {
                expected: if expected {
                    ExpectedSequence::Exact(n)
                } else {
                    ExpectedSequence::Any
                },
                request_id: request.then(|| format!("{stream}-{n}")),
                ..Append::one(stream.clone(), updated(n))
            };
            if let Err(err) = store.append(append).await {
                println!("{label}: failed: {err}");
            }
        }
        rows.push((label, (store.requests() - before) as f64 / 50.0));
    }
    for (label, requests) in rows {
        println!("{label:<48} {requests:.2} requests/append");
    }

    print_units(client.clone()).await;

    // One hot stream: one writer (one transaction at a time: the limit),
    // then 8 and 32 concurrent writers; and 8 writers on 100 streams.
    print_contention(proxied).await;

    // Faults: a third of the requests throttled, failed or answered lost.
    let upstream = local.trim_start_matches("http://").to_owned();
    let proxy = FaultProxy::start(
        upstream,
        0x0BAD_5EED,
        0,
        vec![Fault::Throttle, Fault::ServerError, Fault::LostAnswer],
    )
    .await;
    let faulty = EventStore::new(
        connect(Some(&proxy.endpoint)).await,
        "bench-events",
        shop::domain(),
    );
    let naive_client = connect(Some(&proxy.endpoint)).await;
    proxy.set_percent(33);
    for n in 0..30u64 {
        let append = Append {
            request_id: Some(format!("fault-{n}")),
            ..Append::one("faults-ours", {
                let mut event = updated(n);
                event.event_id = Some(format!("fault-{n}"));
                event
            })
        };
        for _ in 0..20 {
            match faulty.append(append.clone()).await {
                Ok(_) => break,
                Err(AppendError::Store(_) | AppendError::Contention { .. }) => {}
                Err(err) => {
                    println!("fault-{n}: {err}");
                    break;
                }
            }
        }
        for _ in 0..20 {
            if naive_append(
                &naive_client,
                "bench-events",
                "faults-naive",
                &format!("fault-{n}"),
            )
            .await
            .is_ok()
            {
                break;
            }
        }
    }
    proxy.set_percent(0);
    let ours = gaps_and_duplicates(&client, "bench-events", "faults-ours").await;
    let naive = gaps_and_duplicates(&client, "bench-events", "faults-naive").await;
    println!(
        "30 appends, a third of the requests faulted ({}):",
        proxy.counts.summary()
    );
    println!(
        "  event store append (request id, retried): {} gaps, {} duplicates",
        ours.0, ours.1
    );
    println!(
        "  naive ADD then PutItem (retried):         {} gaps, {} duplicates",
        naive.0, naive.1
    );
}

/// What a run of concurrent writers did.
struct Rate {
    appends: usize,
    seconds: f64,
    gave_up: usize,
    failed: usize,
    /// Each append's time, successful or not, sorted.
    latencies: Vec<Duration>,
}

impl Rate {
    fn per_second(&self) -> f64 {
        self.appends as f64 / self.seconds
    }

    fn quantile(&self, q: f64) -> f64 {
        let index = ((self.latencies.len() as f64 * q).ceil() as usize).saturating_sub(1);
        self.latencies
            .get(index.min(self.latencies.len().saturating_sub(1)))
            .map_or(f64::NAN, |latency| latency.as_secs_f64() * 1e3)
    }
}

/// `writers` writers, each appending `each` events (any sequence, a request
/// id each) to one of `streams` streams; writer `i` through `stores[i % n]`.
async fn rate(
    stores: &[Arc<EventStore>],
    name: &str,
    writers: usize,
    each: usize,
    streams: usize,
) -> Rate {
    let started = Instant::now();
    let tasks = (0..writers).map(|writer| {
        let store = stores[writer % stores.len()].clone();
        let name = name.to_owned();
        tokio::spawn(async move {
            let mut results = Vec::with_capacity(each);
            for n in 0..each {
                let stream = format!("{name}-{}", (writer * each + n) % streams);
                let append = Append {
                    request_id: Some(format!("{name}-{writer}-{n}")),
                    ..Append::one(stream, updated(n as u64))
                };
                let began = Instant::now();
                let result = store.append(append).await;
                results.push((began.elapsed(), result));
            }
            results
        })
    });
    let mut rate = Rate {
        appends: 0,
        seconds: 0.0,
        gave_up: 0,
        failed: 0,
        latencies: Vec::new(),
    };
    for writer in futures::future::join_all(tasks).await {
        for (latency, result) in writer.unwrap_or_default() {
            rate.latencies.push(latency);
            match result {
                Ok(_) => rate.appends += 1,
                Err(AppendError::Contention { .. }) => rate.gave_up += 1,
                Err(_) => rate.failed += 1,
            }
        }
    }
    rate.seconds = started.elapsed().as_secs_f64();
    rate.latencies.sort();
    rate
}

/// Appends per second on one hot stream, 1, 8 and 32 writers (sharing one
/// store, as the tasks of one process; and a store and client each, as
/// many processes), and on 100 streams; what gave up; the tail latency of
/// an append.
async fn print_contention(proxied: &str) {
    let store = |_| async {
        Arc::new(EventStore::new(
            connect(Some(proxied)).await,
            "bench-events",
            shop::domain(),
        ))
    };
    let shared = vec![store(0).await];
    let mut own = Vec::new();
    for writer in 0..32 {
        own.push(store(writer).await);
    }
    let limit = rate(&shared, "hot-1", 1, 160, 1).await;
    println!(
        "{:<48} {:.0} appends/s (160 appends one at a time: the limit; p50 {:.1} ms, p99 {:.1} ms)",
        "one hot stream, 1 writer",
        limit.per_second(),
        limit.quantile(0.5),
        limit.quantile(0.99)
    );
    for (label, name, stores, writers, streams) in [
        ("one hot stream, 8 writers", "hot-8", &shared, 8, 1),
        ("one hot stream, 32 writers", "hot-32", &shared, 32, 1),
        (
            "one hot stream, 8 writers, a client each",
            "hot-8-own",
            &own,
            8,
            1,
        ),
        (
            "one hot stream, 32 writers, a client each",
            "hot-32-own",
            &own,
            32,
            1,
        ),
        ("100 streams, 8 writers", "rate-100", &shared, 8, 100),
    ] {
        let run = rate(stores, name, writers, 320 / writers, streams).await;
        let of_limit = if streams == 1 {
            format!(
                ", {:.0} % of the limit",
                100.0 * run.per_second() / limit.per_second()
            )
        } else {
            String::new()
        };
        println!(
            "{label:<48} {:.0} appends/s ({} of 320 appended, {} gave up, {} failed{of_limit}); \
             latency p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
            run.per_second(),
            run.appends,
            run.gave_up,
            run.failed,
            run.quantile(0.5),
            run.quantile(0.99),
            run.quantile(1.0)
        );
    }
}

// ---- capacity units per append: today's layout beside the event store's ----

/// Today's layout (0.2): the stream's head and its events in one
/// transaction, the head read first for any sequence; kept here to be
/// measured beside the event store, as the naive producer is.
struct HeadLayout {
    client: Client,
    table: String,
    requests: u64,
    consumed: Consumed,
}

fn reported_sum<'a>(reported: impl IntoIterator<Item = &'a ConsumedCapacity>) -> f64 {
    reported
        .into_iter()
        .filter_map(ConsumedCapacity::capacity_units)
        .sum()
}

impl HeadLayout {
    async fn head(&mut self, stream: &str) -> Result<u64, String> {
        self.requests += 1;
        let output = self
            .client
            .get_item()
            .table_name(&self.table)
            .key("pk", AttributeValue::S(format!("STREAM#{stream}")))
            .key("sk", AttributeValue::S("HEAD".into()))
            .consistent_read(true)
            .return_consumed_capacity(ReturnConsumedCapacity::Total)
            .send()
            .await
            .map_err(|err| err.to_string())?;
        let item = output.item.unwrap_or_default();
        self.consumed.reported.read += reported_sum(output.consumed_capacity.iter());
        self.consumed.by_rules.read += capacity::read_units(capacity::item_bytes(&item));
        Ok(match item.get("sequence") {
            Some(AttributeValue::N(n)) => n.parse().unwrap_or(0),
            _ => 0,
        })
    }

    fn event(&self, stream: &str, sequence: u64, n: u64) -> TransactWriteItem {
        let id = sequence_guard::producer::new_event_id();
        let body = json!({"eventId": id, "type": "OrderUpdated", "aggregateId": stream, "sequence": sequence,
            "data": {"customerName": "Ada", "email": "ada@example.com", "totalCents": n}});
        let put = Put::builder()
            .table_name(&self.table)
            .item("pk", AttributeValue::S(format!("STREAM#{stream}")))
            .item("sk", AttributeValue::S(format!("EVENT#{sequence:020}")))
            .item("eventId", AttributeValue::S(id))
            .item("type", AttributeValue::S("OrderUpdated".into()))
            .item("sequence", AttributeValue::N(sequence.to_string()))
            .item("body", AttributeValue::S(body.to_string()))
            .item("appendedAt", AttributeValue::N("1764547200".into()))
            .condition_expression("attribute_not_exists(pk)");
        TransactWriteItem::builder()
            .put(put.build().expect("a put"))
            .build()
    }

    /// One append as 0.2 sent it: the items written, or 0 when refused or a
    /// duplicate request.
    async fn append(&mut self, shape: &Shape, stream: &str, n: u64) -> Result<u64, String> {
        let at = match shape.expected {
            Some(at) => at,
            None => self.head(stream).await?,
        };
        let last = at + shape.events;
        let head = Update::builder()
            .table_name(&self.table)
            .key("pk", AttributeValue::S(format!("STREAM#{stream}")))
            .key("sk", AttributeValue::S("HEAD".into()))
            .update_expression("SET #s = :last")
            .condition_expression(if at == 0 {
                "attribute_not_exists(#s)"
            } else {
                "#s = :at"
            })
            .expression_attribute_names("#s", "sequence")
            .set_expression_attribute_values(Some(
                [(":last".to_owned(), AttributeValue::N(last.to_string()))]
                    .into_iter()
                    .chain((at > 0).then(|| (":at".to_owned(), AttributeValue::N(at.to_string()))))
                    .collect(),
            ))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .build()
            .expect("an update");
        let mut items = vec![TransactWriteItem::builder().update(head).build()];
        for sequence in at + 1..=last {
            items.push(self.event(stream, sequence, n));
        }
        if let Some(request) = &shape.request {
            items.push(request_put(&self.table, request, stream, last));
        }
        if shape.write {
            items.push(caller_write(&self.table, n));
        }
        let written = items.len() as u64;
        let units = capacity::transaction_units(&items);
        self.requests += 1;
        self.consumed.by_rules.write += units;
        match self
            .client
            .transact_write_items()
            .set_transact_items(Some(items))
            .return_consumed_capacity(ReturnConsumedCapacity::Total)
            .send()
            .await
        {
            Ok(output) => {
                self.consumed.reported.write +=
                    reported_sum(output.consumed_capacity.iter().flatten());
                Ok(written)
            }
            Err(err) => {
                let request_failed = format!("{err:?}").matches("ConditionalCheckFailed").count()
                    > 0
                    && shape.request.is_some()
                    && shape.expected.is_none();
                if request_failed {
                    // 0.2 read the request record for the first answer: a
                    // strongly consistent GetItem of a small item, as this.
                    self.head(&format!("request-{n}")).await?;
                }
                Ok(0)
            }
        }
    }
}

fn request_put(table: &str, request: &str, stream: &str, last: u64) -> TransactWriteItem {
    let put = Put::builder()
        .table_name(table)
        .item("pk", AttributeValue::S(format!("REQUEST#{request}")))
        .item("sk", AttributeValue::S("REQUEST".into()))
        .item("streamId", AttributeValue::S(stream.into()))
        .item("sequence", AttributeValue::N(last.to_string()))
        .item(
            "eventId",
            AttributeValue::S(sequence_guard::producer::new_event_id()),
        )
        .item("firstSequence", AttributeValue::N(last.to_string()))
        .item("expiresAt", AttributeValue::N("1765152000".into()))
        .condition_expression("attribute_not_exists(pk)");
    TransactWriteItem::builder()
        .put(put.build().expect("a put"))
        .build()
}

/// The caller's own write: a customer's order count.
fn caller_write(table: &str, n: u64) -> TransactWriteItem {
    let put = Put::builder()
        .table_name(table)
        .item("pk", AttributeValue::S(format!("CUSTOMER#ada-{n}")))
        .item("sk", AttributeValue::S("ORDERS".into()))
        .item("count", AttributeValue::N(n.to_string()));
    TransactWriteItem::builder()
        .put(put.build().expect("a put"))
        .build()
}

/// One kind of append, as both layouts send it.
struct Shape {
    /// `Some`: an exact expected sequence.
    expected: Option<u64>,
    events: u64,
    request: Option<String>,
    write: bool,
}

/// The kinds of append measured: a label, and the append for the `n`th
/// of 20 (on its stream, which stands at `n` unless the kind says otherwise).
#[derive(Clone, Copy, PartialEq)]
enum Kind {
    First,
    Exact,
    ExactRequest,
    Any,
    AnyRequest,
    Three,
    Write,
    Duplicate,
    Stale,
}

impl Kind {
    const ALL: [Kind; 9] = [
        Kind::First,
        Kind::Exact,
        Kind::ExactRequest,
        Kind::Any,
        Kind::AnyRequest,
        Kind::Three,
        Kind::Write,
        Kind::Duplicate,
        Kind::Stale,
    ];

    fn label(self) -> &'static str {
        match self {
            Kind::First => "a new stream (expected 0), no request id",
            Kind::Exact => "expected sequence known, no request id",
            Kind::ExactRequest => "expected sequence known, request id",
            Kind::Any => "any sequence, no request id",
            Kind::AnyRequest => "any sequence, request id",
            Kind::Three => "any sequence, 3 events",
            Kind::Write => "any sequence, a caller's write",
            Kind::Duplicate => "a request id seen before (any sequence)",
            Kind::Stale => "expected sequence stale (refused)",
        }
    }

    /// The stream of the `n`th append, and its shape.
    fn shape(self, layout: &str, n: u64) -> (String, Shape) {
        let name = format!("units-{layout}-{}", self as u8);
        let stream = match self {
            Kind::First => format!("{name}-{n}"),
            _ => name.clone(),
        };
        let shape = Shape {
            expected: match self {
                Kind::First | Kind::Stale => Some(0),
                Kind::Exact | Kind::ExactRequest => Some(n),
                _ => None,
            },
            events: if self == Kind::Three { 3 } else { 1 },
            request: match self {
                Kind::ExactRequest | Kind::AnyRequest => Some(format!("{name}-{n}")),
                Kind::Duplicate => Some(format!("{name}-once")),
                _ => None,
            },
            write: self == Kind::Write,
        };
        (stream, shape)
    }

    /// Appended before the 20 measured (the shape of `n` = 0): what the
    /// kind needs in place.
    fn setup(self) -> bool {
        matches!(
            self,
            Kind::Exact | Kind::ExactRequest | Kind::Duplicate | Kind::Stale
        )
    }
}

fn store_append(shape: &Shape, stream: &str, n: u64, table: &str) -> Append {
    let mut events: Vec<NewEvent> = (0..shape.events).map(|k| updated(n * 10 + k)).collect();
    if events.is_empty() {
        events.push(updated(n));
    }
    Append {
        stream_id: stream.to_owned(),
        events,
        expected: shape
            .expected
            .map_or(ExpectedSequence::Any, ExpectedSequence::Exact),
        request_id: shape.request.clone(),
        writes: if shape.write {
            vec![caller_write(table, n)]
        } else {
            Vec::new()
        },
    }
}

/// Per append of one kind: requests, units by the rules, units reported,
/// items written.
struct PerAppend {
    requests: f64,
    consumed: Consumed,
    written: f64,
}

async fn measure_store(store: &EventStore, kind: Kind, layout: &str) -> PerAppend {
    if kind.setup() {
        let (stream, shape) = kind.shape(layout, 0);
        let _ = store
            .append(store_append(&shape, &stream, 0, store.table()))
            .await;
    }
    let (requests, consumed) = (store.requests(), store.consumed());
    let mut written = 0;
    for n in 1..=20 {
        let (stream, shape) = kind.shape(layout, n);
        if let Ok(appended) = store
            .append(store_append(&shape, &stream, n, store.table()))
            .await
            && !appended.duplicate_request
        {
            written += shape.events + u64::from(shape.request.is_some()) + u64::from(shape.write);
        }
    }
    PerAppend {
        requests: (store.requests() - requests) as f64 / 20.0,
        consumed: scaled(store.consumed().since(&consumed), 20.0),
        written: written as f64 / 20.0,
    }
}

async fn measure_heads(heads: &mut HeadLayout, kind: Kind) -> PerAppend {
    if kind.setup() {
        let (stream, shape) = kind.shape("heads", 0);
        let _ = heads.append(&shape, &stream, 0).await;
    }
    let (requests, consumed) = (heads.requests, heads.consumed);
    let mut written = 0;
    for n in 1..=20 {
        let (stream, shape) = kind.shape("heads", n);
        written += heads.append(&shape, &stream, n).await.unwrap_or(0);
    }
    PerAppend {
        requests: (heads.requests - requests) as f64 / 20.0,
        consumed: scaled(heads.consumed.since(&consumed), 20.0),
        written: written as f64 / 20.0,
    }
}

fn scaled(consumed: Consumed, by: f64) -> Consumed {
    let units = |units: Units| Units {
        write: units.write / by,
        read: units.read / by,
    };
    Consumed {
        reported: units(consumed.reported),
        by_rules: units(consumed.by_rules),
    }
}

/// Write and read units per append of each kind, today's layout (the head)
/// beside the event store's (no head), and the store with
/// `ExactCheck::ReadFirst`.
async fn print_units(client: Client) {
    println!(
        "\n-- capacity units per append (20 of each; events of about 250 bytes): requests, \
         write + read units by AWS's rules, items written (each a stream record);"
    );
    println!(
        "   [DynamoDB Local's own ReturnConsumedCapacity=TOTAL, which counts any transaction as 2 \
         and a failed condition as nothing]"
    );
    let mut heads = HeadLayout {
        client: client.clone(),
        table: "bench-events".to_owned(),
        requests: 0,
        consumed: Consumed::default(),
    };
    let store = EventStore::new(client.clone(), "bench-events", shop::domain());
    let read_first = EventStore::new(client, "bench-events", shop::domain())
        .with_exact_check(ExactCheck::ReadFirst);
    let row = |figures: &PerAppend| {
        format!(
            "{:.2} req, {:>4.1} W + {:.1} R, {:.1} items [{:.1} W + {:.1} R]",
            figures.requests,
            figures.consumed.by_rules.write,
            figures.consumed.by_rules.read,
            figures.written,
            figures.consumed.reported.write,
            figures.consumed.reported.read
        )
    };
    for kind in Kind::ALL {
        let today = measure_heads(&mut heads, kind).await;
        let new = measure_store(&store, kind, "store").await;
        println!("{:<44} head (0.2): {}", kind.label(), row(&today));
        println!("{:<44} no head:    {}", "", row(&new));
        if matches!(kind, Kind::Exact | Kind::ExactRequest | Kind::Stale) {
            let read = measure_store(&read_first, kind, "read-first").await;
            println!("{:<44} read first: {}", "", row(&read));
        }
    }
}
