//! What personal data costs (`--personal`): an order's `customerName` and
//! `email` sealed by `append` with a data key of its subject and opened by
//! the consumers that project them (docs/personal-data.md).
//!
//! On DynamoDB Local, the key items in the event store's table
//! ([`sequence_guard::personal::DynamoKeys`]), wrapped under a KMS key on
//! LocalStack (`--kms-endpoint`) or else under a master key of the bench's
//! own, whose "KMS requests" are counted as KMS's would be. Per append:
//! write and read units, DynamoDB requests (the key item's among them) and
//! KMS requests, for an order's creation without personal data declared
//! (appended through the status consumer's domain: the shop's types, no
//! personal data; the body as the shop wrote it before), an `OrderCancelled`
//! (no personal field: no key read), a subject's first personal append, a
//! later one from the same appender (its key kept), one from a new
//! appender, and that appender's next (no key item read: every event of
//! the stream since it read the item is its own). Per message: a shop consumer with a new keyring (the first
//! message of a subject), the same consumer later (the key kept), a plain
//! body, and the status consumer, which declares none. Then the CPU time a
//! consumer spends on a sealed body against a plain one, keys kept.

use std::time::Duration;

use aws_sdk_dynamodb::Client;
use sequence_guard::Domain;
use sequence_guard::personal::{Keyring, LocalKeys};
use sequence_guard::producer::seal_data;
use sequence_guard::producer::{Append, EventStore, ExpectedSequence, NewEvent};
use sequence_guard::runner::{Invocation, Outcome, Runner, RunnerConfig};
use sequence_guard::store::dynamodb::{DynamoStore, connect, create_table, ensure_events_table};
use sequence_guard::store::memory::MemoryStore;
use serde_json::{Value, json};

use crate::cpu::thread_cpu;
use crate::figure_files::{Figure, Tables};
use crate::keys::{Wrapping, keyring, kms_wrapping};
use crate::meter::{Meter, Usage};
use crate::workloads::{batch, message};

/// Subjects (orders) per row.
const SUBJECTS: usize = 20;

/// The event store's table.
const EVENTS: &str = "bench-personal-events";

fn created(n: usize) -> Value {
    json!({"customerName": "Ada Lovelace", "email": "ada@example.com", "totalCents": 1000 + n})
}

fn updated(n: usize) -> Value {
    json!({"customerName": "Ada King", "email": "ada.king@example.com", "totalCents": 2000 + n})
}

/// The tables of this file's figures.
const APPENDS: &str = "personal-appends";
const MESSAGES: &str = "personal-messages";

/// One row: per append or per message.
#[derive(Default, Clone, Copy)]
struct Row {
    write: f64,
    read: f64,
    requests: f64,
    key_requests: f64,
    key_read: f64,
    key_write: f64,
    kms: f64,
}

/// The columns of a row, in the tables `personal-appends` and
/// `personal-messages`.
const COLUMNS: [&str; 5] = [
    "write units",
    "read units",
    "DynamoDB requests",
    "the key item's requests",
    "KMS requests",
];

impl Row {
    /// Prints the row and records it in `table`.
    fn print(&self, tables: &mut Tables, table: &str, label: &str) {
        let values = [
            self.write,
            self.read,
            self.requests,
            self.key_requests,
            self.kms,
        ];
        for (column, value) in COLUMNS.into_iter().zip(values) {
            tables.record(table, Figure::cell(label, column, value, 2, ""));
        }
        println!(
            "{label:<58} {:>5.2} W {:>5.2} R {:>5.2} req  key item: {:.2} req {:.2} W {:.2} R  \
             {:.2} KMS",
            self.write,
            self.read,
            self.requests,
            self.key_requests,
            self.key_write,
            self.key_read,
            self.kms
        );
    }
}

/// Two metered clients (the projection's or the event store's, and the key
/// items'), and a keyring's KMS count: where the counts stand.
struct Mark {
    work: Usage,
    keys: Usage,
    kms: u64,
}

/// What one appender or consumer sends: its own requests, its key items',
/// and its keyring.
struct Metered {
    work: Meter,
    keys: Meter,
    keyring: Option<std::sync::Arc<Keyring>>,
}

impl Metered {
    fn new() -> Metered {
        Metered {
            work: Meter::default(),
            keys: Meter::default(),
            keyring: None,
        }
    }

    /// `domain` with a keyring of its own over the key items, when it
    /// declares personal data.
    fn keyed(&mut self, domain: Domain, client: &Client, wrapping: &Wrapping) -> Domain {
        if !domain.declares_personal() {
            return domain;
        }
        let ring = keyring(&self.keys.wrap(client), EVENTS, wrapping);
        self.keyring = Some(ring.clone());
        domain.with_keys(ring)
    }

    fn mark(&self) -> Mark {
        Mark {
            work: self.work.usage(),
            keys: self.keys.usage(),
            kms: self.keyring.as_ref().map_or(0, |ring| ring.kms_requests()),
        }
    }

    /// Per one of `count` since `mark`.
    fn since(&self, mark: &Mark, count: usize) -> Row {
        let (now, by) = (self.mark(), count as f64);
        Row {
            write: (now.work.write_units - mark.work.write_units + now.keys.write_units
                - mark.keys.write_units)
                / by,
            read: (now.work.read_units - mark.work.read_units + now.keys.read_units
                - mark.keys.read_units)
                / by,
            requests: (now.work.requests - mark.work.requests + now.keys.requests
                - mark.keys.requests) as f64
                / by,
            key_requests: (now.keys.requests - mark.keys.requests) as f64 / by,
            key_read: (now.keys.read_units - mark.keys.read_units) / by,
            key_write: (now.keys.write_units - mark.keys.write_units) / by,
            kms: (now.kms - mark.kms) as f64 / by,
        }
    }
}

/// An appender of its own (a process's): its store, metered.
fn appender(client: &Client, domain: Domain, wrapping: &Wrapping) -> (EventStore, Metered) {
    let mut metered = Metered::new();
    let domain = metered.keyed(domain, client, wrapping);
    let store = EventStore::new(metered.work.wrap(client), EVENTS, domain);
    (store, metered)
}

/// Appends one `event_type` to each order at `at`: per append.
async fn appends(
    (store, metered): &(EventStore, Metered),
    orders: &[String],
    event_type: &str,
    data: fn(usize) -> Value,
    at: u64,
) -> Row {
    let mark = metered.mark();
    for (n, order) in orders.iter().enumerate() {
        let append = Append {
            expected: ExpectedSequence::Exact(at),
            ..Append::one(order.clone(), NewEvent::new(event_type, data(n)))
        };
        if let Err(err) = store.append(append).await {
            eprintln!("cannot append {event_type} to {order}: {err}");
            std::process::exit(1);
        }
    }
    metered.since(&mark, orders.len())
}

/// Each order's event at `sequence`, as the dispatcher sends it.
async fn bodies(store: &EventStore, orders: &[String], sequence: u64) -> Vec<(String, String)> {
    let mut bodies = Vec::new();
    for order in orders {
        match store.read(order, sequence - 1, 1).await {
            Ok(events) if !events.is_empty() => {
                bodies.push((order.clone(), events[0].body.clone()))
            }
            other => {
                eprintln!("{order}: no event {sequence} ({:?})", other.err());
                std::process::exit(1);
            }
        }
    }
    bodies
}

/// A consumer of its own on its own table: its runner, metered.
async fn consumer(
    client: &Client,
    name: &str,
    domain: Domain,
    wrapping: &Wrapping,
) -> (Runner<DynamoStore>, Metered) {
    let table = format!("bench-personal-{name}");
    if let Err(err) = create_table(client, &table).await {
        eprintln!("{table}: {err}");
        std::process::exit(1);
    }
    let mut metered = Metered::new();
    let domain = metered.keyed(domain, client, wrapping);
    let store = DynamoStore::new(metered.work.wrap(client), table);
    (Runner::new(domain, store, RunnerConfig::default()), metered)
}

/// Delivers `bodies`, `size` a batch: per message.
async fn deliver(
    (runner, metered): &(Runner<DynamoStore>, Metered),
    bodies: &[(String, String)],
    size: usize,
) -> Row {
    let mark = metered.mark();
    for chunk in bodies.chunks(size) {
        let messages = chunk
            .iter()
            .map(|(stream, body)| message(format!("{stream}-{}", body.len()), stream, body.clone()))
            .collect();
        let invocation = Invocation {
            deadline: None,
            now: sequence_guard::lambda::epoch_seconds(),
        };
        match runner.run(&batch(messages), invocation).await {
            Ok(report) => {
                for failed in report
                    .messages
                    .iter()
                    .filter(|one| one.outcome != Outcome::Applied)
                {
                    eprintln!(
                        "{}: {:?} (counted all the same)",
                        failed.stream, failed.outcome
                    );
                }
            }
            Err(err) => eprintln!("a batch could not be read: {err}"),
        }
    }
    metered.since(&mark, bodies.len())
}

pub async fn print_personal(endpoint: &str, kms_endpoint: Option<&str>, tables: &mut Tables) {
    let client = connect(Some(endpoint)).await;
    if let Err(err) = ensure_events_table(&client, EVENTS).await {
        eprintln!("{EVENTS}: {err}");
        std::process::exit(1);
    }
    let wrapping = match kms_endpoint {
        Some(endpoint) => kms_wrapping(endpoint).await,
        None => Wrapping::Local,
    };
    println!(
        "\n== Personal data: an order's name and email sealed (DynamoDB Local; keys wrapped by {})",
        match wrapping {
            Wrapping::Local => "a local master key, its KMS requests counted as KMS's would be",
            Wrapping::Kms { .. } => "LocalStack's KMS",
        }
    );
    println!(
        "   {SUBJECTS} orders a row, each its own subject; units as DynamoDB Local reports them \
         (a transaction's twice: AWS's rate)"
    );
    // Names of this run's own: DynamoDB Local may have served one before.
    let run = sequence_guard::lambda::epoch_seconds();
    let orders = |tag: &str| -> Vec<String> {
        (0..SUBJECTS)
            .map(|n| format!("personal-{run}-{tag}-{n}"))
            .collect()
    };
    let (plain, sealed) = (orders("plain"), orders("sealed"));

    println!("-- per append");
    tables.start(
        APPENDS,
        "An append of an order with personal data (name and email sealed), 20 orders a row, \
         each its own subject; units as DynamoDB Local reports them",
        "bench --personal",
        "append",
        &COLUMNS,
    );
    let baseline = appender(&client, shop::status::domain(), &wrapping);
    let warm = appender(&client, shop::domain(), &wrapping);
    let rows = [
        (
            "(a) OrderCreated, no personal data declared (status domain)",
            appends(&baseline, &plain, "OrderCreated", created, 0).await,
        ),
        (
            "(b) OrderCreated, the subject's first personal append",
            appends(&warm, &sealed, "OrderCreated", created, 0).await,
        ),
        (
            "(c) OrderUpdated, same subject, same appender (key kept)",
            appends(&warm, &sealed, "OrderUpdated", updated, 1).await,
        ),
    ];
    // A new appender (another process): it reads each stream's last event
    // first (not counted), so that its append is the slot's put alone, as
    // the warm one's; what differs is its key, not held.
    let cold = appender(&client, shop::domain(), &wrapping);
    for order in &sealed {
        if let Err(err) = cold.0.last_sequence(order).await {
            eprintln!("cannot read {order}: {err}");
            std::process::exit(1);
        }
    }
    let cold_row = appends(&cold, &sealed, "OrderUpdated", updated, 2).await;
    let cancel = |_| json!({"reason": "changed their mind"});
    let cancelled = appends(&cold, &sealed, "OrderCancelled", cancel, 3).await;
    // Its next one: every event since it read the key item is its own, so
    // the key is vouched for and the item not read.
    let vouched = appends(&cold, &sealed, "OrderUpdated", updated, 4).await;
    for (label, row) in rows {
        row.print(tables, APPENDS, label);
    }
    cold_row.print(
        tables,
        APPENDS,
        "(d) OrderUpdated, same subject, a new appender (cold)",
    );
    cancelled.print(
        tables,
        APPENDS,
        "OrderCancelled, shop domain (no personal field)",
    );
    vouched.print(
        tables,
        APPENDS,
        "(e) OrderUpdated, that appender again (every event since its read its own)",
    );

    println!("-- per message, consumers (batches of 1 and of 10)");
    tables.start(
        MESSAGES,
        "A message with personal data, on a consumer of its own table, 20 orders a row",
        "bench --personal",
        "message",
        &COLUMNS,
    );
    let store = &warm.0;
    let (plain_created, sealed_created, sealed_updated) = (
        bodies(store, &plain, 1).await,
        bodies(store, &sealed, 1).await,
        bodies(store, &sealed, 2).await,
    );
    for size in [1, 10] {
        let shop_plain = consumer(
            &client,
            &format!("{run}-plain-{size}"),
            shop::domain(),
            &wrapping,
        )
        .await;
        let shop_sealed = consumer(
            &client,
            &format!("{run}-sealed-{size}"),
            shop::domain(),
            &wrapping,
        )
        .await;
        let status = consumer(
            &client,
            &format!("{run}-status-{size}"),
            shop::status::domain(),
            &wrapping,
        )
        .await;
        let rows = [
            (
                "shop consumer, plain OrderCreated (no key)",
                deliver(&shop_plain, &plain_created, size).await,
            ),
            (
                "shop consumer, cold: a subject's first (OrderCreated)",
                deliver(&shop_sealed, &sealed_created, size).await,
            ),
            (
                "shop consumer, warm: key kept (OrderUpdated)",
                deliver(&shop_sealed, &sealed_updated, size).await,
            ),
            (
                "status consumer, sealed OrderCreated (no keys)",
                deliver(&status, &sealed_created, size).await,
            ),
        ];
        for (label, row) in rows {
            row.print(tables, MESSAGES, &format!("{label}, batch {size}"));
        }
    }

    // On a thread of its own: its runtime is a current-thread one, as a
    // function's, and its CPU clock counts this work alone.
    if std::thread::scope(|scope| scope.spawn(|| print_cpu(tables)).join()).is_err() {
        eprintln!("the CPU measure failed");
    }
}

/// The CPU time a consumer spends on an `OrderCreated` body, sealed and
/// plain, its keys kept: `Domain::parse` alone, and the runner's whole
/// handling on the embedded store (batches of 10), by the thread's CPU
/// clock, the two in alternation.
fn print_cpu(tables: &mut Tables) {
    const BODIES: usize = 100;
    const PASSES: usize = 41;
    const PARSES: usize = 200;
    let Ok(runtime) = tokio::runtime::Builder::new_current_thread().build() else {
        eprintln!("no runtime");
        return;
    };
    let source = match LocalKeys::new() {
        Ok(source) => source,
        Err(err) => {
            eprintln!("local keys: {err}");
            return;
        }
    };
    let domain = shop::domain().with_keys(std::sync::Arc::new(Keyring::new(source)));
    let body = |order: &str, data: &Value| {
        json!({"eventId": format!("{order}-1"), "type": "OrderCreated", "aggregateId": order,
            "sequence": 1, "data": data})
        .to_string()
    };
    let mut plain = Vec::new();
    let mut sealed = Vec::new();
    for n in 0..BODIES {
        let order = format!("cpu-{n}");
        let data = created(n);
        plain.push((order.clone(), body(&order, &data)));
        let mut data = data;
        let stream = order.clone();
        let id = format!("{order}-1");
        if let Err(err) =
            runtime.block_on(seal_data(&domain, &stream, &id, "OrderCreated", &mut data))
        {
            eprintln!("cannot seal {order}: {err}");
            return;
        }
        sealed.push((order.clone(), body(&order, &data)));
    }
    // The keys kept (sealing made them); the bodies read before timing.
    let all: Vec<&str> = sealed.iter().map(|(_, body)| body.as_str()).collect();
    if let Err(err) = runtime.block_on(domain.fetch_keys(all)) {
        eprintln!("cannot fetch the keys: {err}");
        return;
    }
    for (_, body) in &sealed {
        if let Err(err) = domain.parse(body) {
            eprintln!("a sealed body does not read: {err}");
            return;
        }
    }
    let parse = |bodies: &[(String, String)]| {
        let before = thread_cpu();
        for _ in 0..PARSES {
            for (_, body) in bodies {
                let _ = std::hint::black_box(domain.parse(std::hint::black_box(body)));
            }
        }
        thread_cpu().saturating_sub(before) / (PARSES * bodies.len()) as u32
    };
    let handle = |bodies: &[(String, String)]| {
        let store = MemoryStore::new();
        let runner = Runner::new(domain.clone(), &store, RunnerConfig::default());
        let batches: Vec<_> = bodies
            .chunks(10)
            .map(|chunk| {
                batch(
                    chunk
                        .iter()
                        .map(|(order, body)| message(order.clone(), order, body.clone()))
                        .collect(),
                )
            })
            .collect();
        let invocation = Invocation {
            deadline: None,
            now: 1_764_489_600,
        };
        let before = thread_cpu();
        for event in &batches {
            let _ = runtime.block_on(runner.run(event, invocation));
        }
        thread_cpu().saturating_sub(before) / bodies.len() as u32
    };
    let mut times: [Vec<Duration>; 4] = Default::default();
    for pass in 0..=PASSES {
        let measured = [
            parse(&plain),
            parse(&sealed),
            handle(&plain),
            handle(&sealed),
        ];
        if pass > 0 {
            for (all, time) in times.iter_mut().zip(measured) {
                all.push(time);
            }
        }
    }
    for all in &mut times {
        all.sort();
    }
    let median = |all: &Vec<Duration>| all[all.len() / 2].as_secs_f64() * 1e6;
    println!(
        "-- CPU per message, keys kept (thread CPU time, median of {PASSES} passes in alternation)"
    );
    tables.start(
        "personal-cpu",
        "CPU an `OrderCreated` body, plain and sealed, its keys kept (thread CPU time, medians \
         of passes in alternation)",
        "bench --personal",
        "per body",
        &["plain", "sealed"],
    );
    for (label, plain, sealed) in [
        (
            "parse an OrderCreated body (Domain::parse)",
            &times[0],
            &times[1],
        ),
        (
            "handle it (runner, embedded store, batches of 10)",
            &times[2],
            &times[3],
        ),
    ] {
        println!(
            "{label:<52} plain {:.2} µs, sealed {:.2} µs: +{:.2} µs",
            median(plain),
            median(sealed),
            median(sealed) - median(plain)
        );
        for (column, times) in [("plain", plain), ("sealed", sealed)] {
            let figure = Figure::cell(label, column, median(times), 2, "µs");
            tables.record("personal-cpu", figure);
        }
    }
}
