//! Appends per second from concurrent writers, on one hot stream and on
//! 100 streams: what gave up, and the tail latency of an append.

use std::sync::Arc;
use std::time::{Duration, Instant};

use sequence_guard::producer::{Append, AppendError, EventStore};
use sequence_guard::store::dynamodb::connect;

use super::{keyed_store, updated};
use crate::figure_files::{Figure, Tables};
use crate::meter::{Meter, Usage};

/// What a run of concurrent writers did.
pub struct Rate {
    pub appends: usize,
    pub seconds: f64,
    pub gave_up: usize,
    pub failed: usize,
    /// Each append's time, successful or not, sorted.
    pub latencies: Vec<Duration>,
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
/// id each when `request_ids`) to one of `streams` streams; writer `i`
/// through `stores[i % n]`.
pub async fn rate(
    stores: &[Arc<EventStore>],
    name: &str,
    (writers, each, streams): (usize, usize, usize),
    request_ids: bool,
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
                    request_id: request_ids.then(|| format!("{name}-{writer}-{n}")),
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
pub async fn print_contention(proxied: &str, tables: &mut Tables) {
    tables.start(
        "producer-contention",
        "Appends from concurrent writers (any sequence, a request id each, then none: the \
         command's retry-safe append, then the bare one; an order's name and email sealed), \
         through a proxy adding 2 ms a request: the rate, the tail, what gave up, and what \
         DynamoDB bills an append (a lost race's failed put included)",
        "scripts/bench",
        "writers",
        &[
            "appends a second",
            "p50 (ms)",
            "p99 (ms)",
            "gave up",
            "requests an append",
            "write units an append",
            "read units an append",
        ],
    );
    // Each store with a keyring of its own (a process's), its key items
    // read through the same proxy; every request metered.
    let meter = Meter::default();
    let store = |_| async {
        let client = meter.wrap(&connect(Some(proxied)).await);
        Arc::new(keyed_store(client.clone(), "bench-events", &client))
    };
    let shared = vec![store(0).await];
    let mut own = Vec::new();
    for writer in 0..32 {
        own.push(store(writer).await);
    }
    for request_ids in [true, false] {
        let (suffix, tag) = if request_ids {
            ("", "")
        } else {
            (", no request id", "-bare")
        };
        let before = meter.usage();
        let limit = rate(&shared, &format!("hot-1{tag}"), (1, 160, 1), request_ids).await;
        let label = format!("one hot stream, 1 writer{suffix}");
        record(tables, &label, &limit, &meter.usage(), &before);
        println!(
            "{label:<60} {:.0} appends/s (160 appends one at a time: the limit; p50 {:.1} ms, p99 {:.1} ms)",
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
            ("100 streams, 1 writer", "rate-100-1", &shared, 1, 100),
            ("100 streams, 8 writers", "rate-100", &shared, 8, 100),
            ("100 streams, 32 writers", "rate-100-32", &shared, 32, 100),
        ] {
            let label = format!("{label}{suffix}");
            let before = meter.usage();
            let shape = (writers, 320 / writers, streams);
            let run = rate(stores, &format!("{name}{tag}"), shape, request_ids).await;
            record(tables, &label, &run, &meter.usage(), &before);
            let of_limit = if streams == 1 {
                format!(
                    ", {:.0} % of the limit",
                    100.0 * run.per_second() / limit.per_second()
                )
            } else {
                String::new()
            };
            println!(
                "{label:<60} {:.0} appends/s ({} of 320 appended, {} gave up, {} failed{of_limit}); \
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
}

/// One row of the contention table: `run`, and what the meter counted
/// from `before` to `after`. A failed conditional put is billed a write unit
/// (items here are under 1 KB), which DynamoDB Local does not report.
fn record(tables: &mut Tables, row: &str, run: &Rate, after: &Usage, before: &Usage) {
    let appended = run.appends.max(1) as f64;
    let requests = (after.requests - before.requests) as f64 / appended;
    let failed = (after.failed - before.failed) as f64;
    let write = (after.write_units - before.write_units + failed) / appended;
    let read = (after.read_units - before.read_units) / appended;
    let table = "producer-contention";
    tables.record(
        table,
        Figure::cell(row, "appends a second", run.per_second(), 0, ""),
    );
    tables.record(
        table,
        Figure::cell(row, "p50 (ms)", run.quantile(0.5), 1, ""),
    );
    tables.record(
        table,
        Figure::cell(row, "p99 (ms)", run.quantile(0.99), 1, ""),
    );
    tables.record(
        table,
        Figure::cell(row, "gave up", run.gave_up as f64, 0, ""),
    );
    tables.record(
        table,
        Figure::cell(row, "requests an append", requests, 2, ""),
    );
    tables.record(
        table,
        Figure::cell(row, "write units an append", write, 2, ""),
    );
    tables.record(
        table,
        Figure::cell(row, "read units an append", read, 2, ""),
    );
}
