//! DynamoDB requests per message and sequential round trips per batch, for
//! the runner and for the naive handler, on DynamoDB Local behind a proxy
//! that adds 2 ms to each request.

use std::sync::Mutex;
use std::time::Instant;

use sequence_guard::EntityKey;
use sequence_guard::runner::{Invocation, Runner, RunnerConfig};
use sequence_guard::store::DedupAddition;
use sequence_guard::store::dynamodb::{DynamoStore, connect, create_table};
use sequence_guard::store::{
    Added, Commit, Committed, DedupKey, Inspection, Loaded, ParkedEvent, Store, StoreError,
};

use crate::figure_files::{Figure, Tables};
use crate::naive::naive;
use crate::workloads::{
    Workload, one_aggregate, one_aggregate_next, realistic_mix, ten_aggregates, ten_duplicates,
};

/// A store that records when each of its calls started and ended.
struct Traced<S> {
    inner: S,
    calls: Mutex<Vec<(Instant, Instant)>>,
}

impl<S: Store> Traced<S> {
    fn new(inner: S) -> Self {
        Traced {
            inner,
            calls: Mutex::new(Vec::new()),
        }
    }
    fn record(&self, started: Instant) {
        if let Ok(mut calls) = self.calls.lock() {
            calls.push((started, Instant::now()));
        }
    }
    /// The longest chain of calls each starting after the previous ended:
    /// the sequential round trips since the last take.
    fn take_round_trips(&self) -> usize {
        let mut calls = self
            .calls
            .lock()
            .map(|mut calls| std::mem::take(&mut *calls))
            .unwrap_or_default();
        calls.sort_by_key(|(_, end)| *end);
        let mut longest = vec![0usize; calls.len()];
        for i in 0..calls.len() {
            let before = (0..i)
                .filter(|&j| calls[j].1 <= calls[i].0)
                .map(|j| longest[j])
                .max()
                .unwrap_or(0);
            longest[i] = before + 1;
        }
        longest.into_iter().max().unwrap_or(0)
    }
}

impl<S: Store> Store for Traced<S> {
    async fn load(&self, keys: &[EntityKey], dedup: &[DedupKey]) -> Result<Loaded, StoreError> {
        let started = Instant::now();
        let result = self.inner.load(keys, dedup).await;
        self.record(started);
        result
    }
    async fn commit(&self, commit: &Commit) -> Result<Committed, StoreError> {
        let started = Instant::now();
        let result = self.inner.commit(commit).await;
        self.record(started);
        result
    }
    async fn parked(
        &self,
        key: &EntityKey,
        sequences: &[u64],
    ) -> Result<Vec<ParkedEvent>, StoreError> {
        let started = Instant::now();
        let result = self.inner.parked(key, sequences).await;
        self.record(started);
        result
    }
    async fn inspect(&self, key: &EntityKey) -> Result<Inspection, StoreError> {
        self.inner.inspect(key).await
    }

    async fn parked_entities(
        &self,
        after: Option<&str>,
        limit: usize,
    ) -> Result<sequence_guard::store::ParkedPage, StoreError> {
        self.inner.parked_entities(after, limit).await
    }
    async fn add(&self, adjustments: &[DedupAddition]) -> Result<Added, StoreError> {
        let started = Instant::now();
        let result = self.inner.add(adjustments).await;
        self.record(started);
        result
    }
    async fn counter(
        &self,
        counter: &'static sequence_guard::Counter,
        id: &str,
    ) -> Result<Option<i64>, StoreError> {
        self.inner.counter(counter, id).await
    }
    fn requests(&self) -> u64 {
        self.inner.requests()
    }
}

#[derive(Default)]
pub struct Figures {
    pub messages: usize,
    pub requests: u64,
    batches: usize,
    max_round_trips: usize,
    total_round_trips: usize,
}

impl Figures {
    fn per_message(&self) -> f64 {
        self.requests as f64 / self.messages.max(1) as f64
    }
    fn mean_round_trips(&self) -> f64 {
        self.total_round_trips as f64 / self.batches.max(1) as f64
    }
}

/// Who handles the workload's batches.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Handler {
    /// The runner, one process across the workload (its warm items kept).
    Runner,
    /// The runner with `WARM_ENTITIES=0`: every batch read first, as in a
    /// process's first batch of a stream.
    Cold,
    /// The naive handler.
    Naive,
}

/// Runs a workload through `handler` on a table of DynamoDB Local reached
/// through `via` (the latency proxy).
pub async fn measure(
    endpoint: &str,
    via: &str,
    table: &str,
    workload: &Workload,
    handler: Handler,
) -> Figures {
    let client = connect(Some(endpoint)).await;
    if let Err(err) = create_table(&client, table).await {
        eprintln!("cannot create table {table}: {err}");
        std::process::exit(1);
    }
    let store = Traced::new(DynamoStore::new(connect(Some(via)).await, table));
    let config = match handler {
        Handler::Cold => RunnerConfig {
            warm_entities: 0,
            ..RunnerConfig::default()
        },
        Handler::Runner | Handler::Naive => RunnerConfig::default(),
    };
    let runner = Runner::new(shop::domain(), &store, config);
    let invocation = || Invocation {
        deadline: None,
        now: sequence_guard::lambda::epoch_seconds(),
    };
    for event in &workload.setup {
        let _ = runner.run(event, invocation()).await;
    }
    store.take_round_trips();
    let mut figures = Figures::default();
    for event in &workload.batches {
        let before = store.requests();
        if handler == Handler::Naive {
            naive(&shop::domain(), &store, event, invocation().now).await;
        } else {
            let _ = runner.run(event, invocation()).await;
        }
        let trips = store.take_round_trips();
        figures.requests += store.requests() - before;
        figures.messages += event.records.len();
        figures.batches += 1;
        figures.max_round_trips = figures.max_round_trips.max(trips);
        figures.total_round_trips += trips;
    }
    figures
}

/// The table of (a) to (d): requests per message and sequential round trips
/// per batch, the runner beside the naive handler, on DynamoDB Local reached
/// through `via` (the latency proxy).
pub async fn print_requests(endpoint: &str, via: &str, tables: &mut Tables) {
    println!("== DynamoDB requests per message and sequential round trips per batch");
    println!("   (DynamoDB Local behind a proxy adding 2 ms to each request)");
    println!(
        "{:<48} {:>8} {:>9} {:>10} {:>7} {:>10} {:>10}",
        "workload", "req/msg", "cold req", "naive req", "ratio", "trips max", "naive max"
    );
    tables.start(
        "requests",
        "DynamoDB requests a message and sequential round trips a batch (the most of any \
         batch): the runner of one process across the workload, the same with nothing kept \
         warm (WARM_ENTITIES=0), and the naive handler, through a proxy adding 2 ms a request",
        "scripts/bench",
        "workload",
        &[
            "requests a message",
            "nothing warm: requests a message",
            "naive: requests a message",
            "round trips a batch",
            "naive: round trips a batch",
        ],
    );
    let workloads = [
        one_aggregate(),
        one_aggregate_next(),
        ten_aggregates(),
        ten_duplicates(),
        realistic_mix(3000, 7),
    ];
    for (index, workload) in workloads.iter().enumerate() {
        let ours = measure(
            endpoint,
            via,
            &format!("bench-{index}"),
            workload,
            Handler::Runner,
        )
        .await;
        let cold = measure(
            endpoint,
            via,
            &format!("bench-cold-{index}"),
            workload,
            Handler::Cold,
        )
        .await;
        let theirs = measure(
            endpoint,
            via,
            &format!("bench-naive-{index}"),
            workload,
            Handler::Naive,
        )
        .await;
        let ratio = match ours.per_message() {
            0.0 => "-".to_owned(),
            ours => format!("{:.1}x", theirs.per_message() / ours),
        };
        println!(
            "{:<48} {:>8.3} {:>9.3} {:>10.3} {:>7} {:>4} (avg {:>4.2}) {:>4} (avg {:>5.2})",
            workload.name,
            ours.per_message(),
            cold.per_message(),
            theirs.per_message(),
            ratio,
            ours.max_round_trips,
            ours.mean_round_trips(),
            theirs.max_round_trips,
            theirs.mean_round_trips()
        );
        let row = workload.name;
        let requests = Figure::cell(row, "requests a message", ours.per_message(), 2, "")
            .baseline("naive handler", theirs.per_message());
        let headline = match workload.name {
            name if name == one_aggregate_next().name => {
                Some("DynamoDB requests a message, a hot stream's next batch of 10")
            }
            name if name.starts_with("(d)") => {
                Some("DynamoDB requests a message, a skewed mix of 1,000 aggregates")
            }
            _ => None,
        };
        let requests = match headline {
            Some(label) => requests.headline(label),
            None => requests,
        };
        tables.record("requests", requests);
        tables.record(
            "requests",
            Figure::cell(
                row,
                "nothing warm: requests a message",
                cold.per_message(),
                2,
                "",
            ),
        );
        let naive = theirs.per_message();
        tables.record(
            "requests",
            Figure::cell(row, "naive: requests a message", naive, 2, ""),
        );
        let (trips, naive_trips) = (ours.max_round_trips as f64, theirs.max_round_trips as f64);
        tables.record(
            "requests",
            Figure::cell(row, "round trips a batch", trips, 0, "")
                .baseline("naive handler", naive_trips),
        );
        tables.record(
            "requests",
            Figure::cell(row, "naive: round trips a batch", naive_trips, 0, ""),
        );
    }
}
