//! Appends per second from concurrent writers, on one hot stream and on
//! 100 streams: what gave up, and the tail latency of an append.

use std::sync::Arc;
use std::time::{Duration, Instant};

use sequence_guard::producer::{Append, AppendError, EventStore};
use sequence_guard::store::dynamodb::connect;

use super::{keyed_store, updated};

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
/// id each) to one of `streams` streams; writer `i` through `stores[i % n]`.
pub async fn rate(
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
pub async fn print_contention(proxied: &str) {
    // Each store with a keyring of its own (a process's), its key items
    // read through the same proxy.
    let store = |_| async {
        let client = connect(Some(proxied)).await;
        Arc::new(keyed_store(client.clone(), "bench-events", &client))
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
