//! A parking storm on DynamoDB Local: every stream of a producer reordered
//! at once, so that thousands of entities park a gap together, then drain.
//! Every park and every drain also writes the entity's entry in the index of
//! parked entities: this prints how many writes the index takes, per park and
//! per second, in all and per shard (it is spread over 16 partition keys),
//! beside what one DynamoDB partition takes (1,000 write units a second; a
//! transactional write of an item under 1 KB costs 2).
//!
//! ```text
//! scripts/bench        # runs this after the other benchmarks
//! ```
//!
//! Prints, never asserts; with `--figures DIR` also writes its table there
//! (`bench/figure_files.rs`).

use std::path::PathBuf;
use std::time::Instant;

use aws_lambda_events::event::sqs::{SqsEvent, SqsMessage};
use futures::stream::{self, StreamExt};
use sequence_guard::runner::{BatchReport, Invocation, Runner, RunnerConfig};
use sequence_guard::store::dynamodb::{DynamoStore, connect, create_table};
use serde_json::json;

#[allow(dead_code)] // the splice is the bench's
#[path = "bench/figure_files.rs"]
mod figure_files;

use crate::figure_files::{Figure, Tables};

#[derive(Debug, clap::Parser)]
struct Args {
    /// DynamoDB Local's endpoint, e.g. http://127.0.0.1:8000.
    #[arg(long, value_name = "URL")]
    endpoint_url: String,
    /// Entities that park a gap at once.
    #[arg(long, default_value_t = 2000)]
    entities: usize,
    /// Batches in flight at once (concurrent invocations).
    #[arg(long, default_value_t = 16)]
    concurrency: usize,
    /// Also write the figures printed to DIR (`parking-storm.json` and
    /// `.md`).
    #[arg(long, value_name = "DIR")]
    figures: Option<PathBuf>,
}

/// The table's columns.
const COLUMNS: [&str; 4] = [
    "events/s",
    "index writes/s",
    "index write units/s",
    "index write units/s a shard",
];

/// One batch of ten: event `sequence` of ten orders, delivered `receives` times.
fn batch(orders: &[String], sequence: u64, receives: u32) -> SqsEvent {
    let mut event = SqsEvent::default();
    for order in orders {
        let mut message = SqsMessage::default();
        message.message_id = Some(format!("{order}-{sequence}"));
        let event_type = if sequence == 1 {
            "OrderCreated"
        } else {
            "OrderUpdated"
        };
        message.body = Some(
            json!({ "eventId": format!("{order}-{sequence}"), "type": event_type,
                    "aggregateId": order, "sequence": sequence,
                    "data": { "customerName": "Ada", "email": "ada@example.com", "totalCents": sequence } })
            .to_string(),
        );
        message
            .attributes
            .insert("MessageGroupId".into(), order.clone());
        message
            .attributes
            .insert("ApproximateReceiveCount".into(), receives.to_string());
        event.records.push(message);
    }
    event
}

/// Runs event `sequence` of every order, ten a batch, `concurrency` batches at
/// once; the reports and the seconds it took.
async fn wave(
    runner: &Runner<DynamoStore>,
    orders: &[String],
    sequence: u64,
    receives: u32,
    concurrency: usize,
) -> (Vec<BatchReport>, f64) {
    let started = Instant::now();
    let invocation = Invocation {
        deadline: None,
        now: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |since| since.as_secs()),
    };
    let reports: Vec<BatchReport> = stream::iter(orders.chunks(10))
        .map(|chunk| {
            let event = batch(chunk, sequence, receives);
            async move { runner.run(&event, invocation).await }
        })
        .buffer_unordered(concurrency)
        .filter_map(|report| async move { report.ok() })
        .collect()
        .await;
    (reports, started.elapsed().as_secs_f64())
}

/// Writes of the index of parked entities: one per commit that changes what
/// is parked on an entity (its entry updated, or deleted once empty).
fn index_writes(reports: &[BatchReport]) -> usize {
    reports
        .iter()
        .flat_map(|report| &report.parking)
        .filter(|parking| {
            !parking.parked.is_empty() || !parking.drained.is_empty() || !parking.cleared.is_empty()
        })
        .count()
}

#[tokio::main]
async fn main() {
    let args = <Args as clap::Parser>::parse();
    let client = connect(Some(&args.endpoint_url)).await;
    let table = format!("storm-{}", std::process::id());
    if let Err(err) = create_table(&client, &table).await {
        eprintln!("cannot create the table: {err}");
        std::process::exit(1);
    }
    let runner = Runner::new(
        shop::domain(),
        DynamoStore::new(client, table),
        RunnerConfig::default(),
    );
    let orders: Vec<String> = (0..args.entities).map(|n| format!("storm-{n}")).collect();
    let (created, _) = wave(&runner, &orders, 1, 1, args.concurrency).await;
    // Event 3 of every order, its third delivery: parked, on every entity at once.
    let (parked, park_seconds) = wave(&runner, &orders, 3, 3, args.concurrency).await;
    // Event 2 of every order: applied, and event 3 drained.
    let (drained, drain_seconds) = wave(&runner, &orders, 2, 1, args.concurrency).await;
    let parks: usize = parked
        .iter()
        .flat_map(|report| &report.parking)
        .map(|parking| parking.parked.len())
        .sum();
    let drains: usize = drained.iter().map(BatchReport::drained).sum();
    println!(
        "\n== A parking storm: {} entities park a gap at once, then drain ({} batches in flight)",
        args.entities, args.concurrency
    );
    println!(
        "{:<10} {:>8} {:>10} {:>14} {:>16} {:>18} {:>16}",
        "phase",
        "events",
        "events/s",
        "index writes",
        "index writes/s",
        "index WCU/s (x2)",
        "per shard (/16)"
    );
    let mut tables = Tables::default();
    tables.start(
        "parking-storm",
        &format!(
            "A parking storm on DynamoDB Local: {} entities park a gap at once, then drain ({} \
             batches in flight); the index of parked entities is 16 partition keys",
            args.entities, args.concurrency
        ),
        "scripts/bench",
        "phase",
        &COLUMNS,
    );
    for (phase, events, writes, seconds) in [
        ("park", parks, index_writes(&parked), park_seconds),
        ("drain", drains, index_writes(&drained), drain_seconds),
    ] {
        let per_second = writes as f64 / seconds.max(1e-9);
        println!(
            "{phase:<10} {events:>8} {:>10.0} {writes:>14} {per_second:>16.0} {:>18.0} {:>16.0}",
            events as f64 / seconds.max(1e-9),
            2.0 * per_second,
            2.0 * per_second / 16.0
        );
        let values = [
            events as f64 / seconds.max(1e-9),
            per_second,
            2.0 * per_second,
            2.0 * per_second / 16.0,
        ];
        for (column, value) in COLUMNS.into_iter().zip(values) {
            tables.record("parking-storm", Figure::cell(phase, column, value, 0, ""));
        }
    }
    let created: usize = created.iter().map(|report| report.messages.len()).sum();
    println!(
        "   ({created} creations first; one index write per commit that parks or drains; a partition takes 1,000 WCU/s, so one index key \
         would take about 500 such commits a second; 16 take about 8,000)"
    );
    if let Some(dir) = &args.figures {
        match tables.write_all(dir) {
            Ok(written) => {
                for path in written {
                    println!("wrote {}", path.display());
                }
            }
            Err(err) => {
                eprintln!("parking_storm --figures: {err}");
                std::process::exit(1);
            }
        }
    }
}
