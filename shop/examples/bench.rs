//! The benchmark: what a batch costs, side by side with a naive handler.
//!
//! ```text
//! scripts/bench        # builds in release, starts DynamoDB Local, runs this
//! ```
//!
//! Prints, never asserts:
//! - on DynamoDB Local, for (a) one aggregate with 10 events in one batch,
//!   (b) 10 existing aggregates with one update each, (c) a batch of 10
//!   duplicates, (d) a realistic mix (1,000 aggregates, skewed activity, 1 %
//!   duplicates, batches of 10): DynamoDB requests per message and sequential
//!   round trips per batch, for the runner and for a naive handler (one read
//!   and one write per message, in order: the literal reading of the guard);
//! - on DynamoDB Local, (e) producers that send an event late, behind the
//!   next batch, through a simulated FIFO queue that redelivers failed messages:
//!   requests and deliveries per event with parking, and what
//!   `GAP_POLICY=retry` leaves in the dead-letter queue instead;
//! - on the embedded store: time per message (parse, decide, apply) on one
//!   thread, with glibc's defaults and again (in a new process) under the
//!   `GLIBC_TUNABLES` the template gives the consumers; `--cpu-only
//!   --handler runner|naive` runs one handler alone, for a profiler;
//! - for the release `projector`: time from process start to its first call
//!   for work, to its first batch answered (the cold start a user sees, over
//!   HTTP to DynamoDB Local and through a TLS proxy, with its CPU time), and
//!   peak memory after the mix, with glibc's defaults and the template's
//!   tunables (`--memory-only [--tunables VALUE]...` runs this alone);
//! - for the release `dispatcher`: time from process start to its first
//!   stream batch answered (one `SendMessageBatch` to an SQS stand-in, over
//!   HTTP and through TLS);
//! - with `--variant NAME=DIR` (`scripts/bench --tls-variants`), only the
//!   cold starts of several builds of both functions, side by side in one
//!   run, and the TLS connections each opened;
//! - reading a body by its version (`--versions` runs this alone): parse
//!   time of a body without `version`, with `"version":1`, at a current
//!   version 2, and at version 1 upcast to 2.

#[path = "../tests/support/runtime_api.rs"]
mod runtime_api;

#[allow(dead_code)] // some of the generator is for the simulation
#[path = "../tests/support/rng.rs"]
mod rng;

#[allow(dead_code)] // only the latency of the faulty proxy is used here
#[path = "../tests/support/fault_proxy.rs"]
mod fault_proxy;

#[path = "support/producer.rs"]
mod producer;

#[path = "support/sqs_stand_in.rs"]
mod sqs_stand_in;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use aws_lambda_events::event::sqs::{SqsEvent, SqsMessage};
use rng::Rng;
use sequence_guard::envelope::{Event, Record};
use sequence_guard::runner::{GapPolicy, Invocation, Outcome, Runner, RunnerConfig, addition};
use sequence_guard::store::Addition;
use sequence_guard::store::dynamodb::{DynamoStore, connect, create_table};
use sequence_guard::store::memory::MemoryStore;
use sequence_guard::store::{
    Added, Commit, Committed, DedupKey, Inspection, Loaded, ParkedEvent, Store, StoreError,
};
use sequence_guard::testing::Keyed;
use sequence_guard::testing::{SaveExt, Saved};
use sequence_guard::{Decision, Domain, EntityKey};
use serde_json::json;

// ---- workloads ------------------------------------------------------------

fn message(id: String, group: &str, body: String) -> SqsMessage {
    let mut message = SqsMessage::default();
    message.message_id = Some(id);
    message.body = Some(body);
    message
        .attributes
        .insert("MessageGroupId".into(), group.into());
    message
        .attributes
        .insert("ApproximateReceiveCount".into(), "1".into());
    message
}

fn batch(messages: Vec<SqsMessage>) -> SqsEvent {
    let mut event = SqsEvent::default();
    event.records = messages;
    event
}

fn product_event(product: &str, sequence: u64) -> String {
    let (event_type, data) = if sequence == 1 {
        (
            "ProductCreated",
            json!({ "name": "Desk lamp", "priceCents": 1000 }),
        )
    } else {
        (
            "ProductPriceChanged",
            json!({ "priceCents": 1000 + sequence }),
        )
    };
    json!({ "eventId": format!("{product}-{sequence}"), "type": event_type, "aggregateId": product,
            "sequence": sequence, "data": data })
    .to_string()
}

fn order_event(order: &str, sequence: u64) -> String {
    let event_type = if sequence == 1 {
        "OrderCreated"
    } else {
        "OrderUpdated"
    };
    json!({ "eventId": format!("{order}-{sequence}"), "type": event_type, "aggregateId": order, "sequence": sequence,
            "data": { "customerName": "Ada Lovelace", "email": "ada@example.com", "totalCents": 100 * sequence } })
    .to_string()
}

struct Workload {
    name: &'static str,
    /// Batches run first and not measured (to create what the workload updates).
    setup: Vec<SqsEvent>,
    batches: Vec<SqsEvent>,
}

fn one_aggregate() -> Workload {
    let messages = (1..=10)
        .map(|s| message(format!("a-{s}"), "product-a", product_event("product-a", s)))
        .collect();
    Workload {
        name: "(a) one aggregate, 10 events",
        setup: vec![],
        batches: vec![batch(messages)],
    }
}

fn ten_updates() -> SqsEvent {
    batch(
        (0..10)
            .map(|n| {
                let id = format!("product-b{n}");
                message(format!("{id}-2"), &id, product_event(&id, 2))
            })
            .collect(),
    )
}

fn ten_creations() -> SqsEvent {
    batch(
        (0..10)
            .map(|n| {
                let id = format!("product-b{n}");
                message(format!("{id}-1"), &id, product_event(&id, 1))
            })
            .collect(),
    )
}

fn ten_aggregates() -> Workload {
    Workload {
        name: "(b) 10 aggregates, one update each",
        setup: vec![ten_creations()],
        batches: vec![ten_updates()],
    }
}

fn ten_duplicates() -> Workload {
    Workload {
        name: "(c) 10 duplicates",
        setup: vec![ten_creations(), ten_updates()],
        batches: vec![ten_updates()],
    }
}

/// 1,000 aggregates (700 products, 200 orders, 100 skus), activity skewed
/// (Zipf-like), 1 % producer resends, in send order, batches of 10.
fn realistic_mix(messages: usize, seed: u64) -> Workload {
    let mut rng = Rng(seed);
    let aggregates = 1000usize;
    let weights: Vec<f64> = (1..=aggregates)
        .map(|rank| 1.0 / (rank as f64).powf(1.1))
        .collect();
    let total: f64 = weights.iter().sum();
    let mut cumulative = Vec::with_capacity(aggregates);
    let mut sum = 0.0;
    for weight in &weights {
        sum += weight / total;
        cumulative.push(sum);
    }
    // Shuffle which aggregate gets which rank.
    let mut ids: Vec<usize> = (0..aggregates).collect();
    for i in (1..ids.len()).rev() {
        ids.swap(i, (rng.next() % (i as u64 + 1)) as usize);
    }
    let mut next_sequence: HashMap<usize, u64> = HashMap::new();
    let mut sent: Vec<(String, String)> = Vec::new(); // (group, body)
    let mut out = Vec::with_capacity(messages);
    while out.len() < messages {
        if !sent.is_empty() && rng.unit() < 0.01 {
            let (group, body) = sent[(rng.next() % sent.len() as u64) as usize].clone();
            out.push(message(format!("m{}", out.len()), &group, body));
            continue;
        }
        let roll = rng.unit();
        let rank = cumulative
            .partition_point(|c| *c < roll)
            .min(aggregates - 1);
        let aggregate = ids[rank];
        let (group, body) = if aggregate < 700 {
            let id = format!("product-{aggregate}");
            let sequence = next_sequence.entry(aggregate).or_insert(0);
            *sequence += 1;
            let body = product_event(&id, *sequence);
            (id, body)
        } else if aggregate < 900 {
            let id = format!("order-{aggregate}");
            let sequence = next_sequence.entry(aggregate).or_insert(0);
            *sequence += 1;
            let body = order_event(&id, *sequence);
            (id, body)
        } else {
            let sku = format!("SKU-{aggregate}");
            let body =
                json!({ "eventId": format!("adjust-{}", out.len()), "type": "InventoryAdjusted",
                               "data": { "sku": sku, "delta": (rng.next() % 7) as i64 - 3 } })
                .to_string();
            (sku, body)
        };
        sent.push((group.clone(), body.clone()));
        out.push(message(format!("m{}", out.len()), &group, body));
    }
    let batches = out.chunks(10).map(|chunk| batch(chunk.to_vec())).collect();
    Workload {
        name: "(d) 1,000 aggregates, skewed, 1% resends",
        setup: vec![],
        batches,
    }
}

// ---- measuring ----------------------------------------------------------------

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
    async fn add(&self, adjustments: &[Addition]) -> Result<Added, StoreError> {
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

/// The naive handler: each message in order, one read and (when it applies)
/// one conditional write; a stock adjustment is its own transaction.
async fn naive<S: Store>(domain: &Domain, store: &S, event: &SqsEvent, now: u64) {
    let mut failed_streams: Vec<String> = Vec::new();
    for message in &event.records {
        let Some(record) = Record::read(message, domain) else {
            continue;
        };
        if failed_streams.contains(&record.stream) {
            continue;
        }
        let ok = match &record.event {
            Err(_) => false,
            Ok(event) if event.deduplicated().is_some() => {
                let Some(addition) = addition(event, now, 604_800) else {
                    continue;
                };
                store.add(std::slice::from_ref(&addition)).await.is_ok()
            }
            Ok(event) => {
                let Some(key) = event.entity_key() else {
                    continue;
                };
                match store.load(std::slice::from_ref(&key), &[]).await {
                    Err(_) => false,
                    Ok(mut loaded) => {
                        let base = loaded.entities.remove(&key).and_then(Result::ok);
                        let mut slot = base.clone();
                        let decision = event.decide(&mut slot);
                        match (decision, slot) {
                            (Ok(Decision::Applied), Some(entity)) => {
                                let expected = base.as_ref().map(|entity| entity.sequence());
                                let keyed = Keyed { key, entity };
                                matches!(store.save(&keyed, expected).await, Ok(Saved::Written))
                            }
                            (decision, _) => decision.is_ok_and(Decision::is_done),
                        }
                    }
                }
            }
        };
        if !ok {
            failed_streams.push(record.stream.clone());
        }
    }
}

#[derive(Default)]
struct Figures {
    messages: usize,
    requests: u64,
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

/// Runs a workload through the runner (or the naive handler) on a table of
/// DynamoDB Local reached through `via` (the latency proxy).
async fn measure(
    endpoint: &str,
    via: &str,
    table: &str,
    workload: &Workload,
    naive_handler: bool,
) -> Figures {
    let client = connect(Some(endpoint)).await;
    if let Err(err) = create_table(&client, table).await {
        eprintln!("cannot create table {table}: {err}");
        std::process::exit(1);
    }
    let store = Traced::new(DynamoStore::new(connect(Some(via)).await, table));
    let runner = Runner::new(shop::domain(), &store, RunnerConfig::default());
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
        if naive_handler {
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

/// What (e) cost.
#[derive(Debug, Default)]
struct Shuffled {
    events: usize,
    deliveries: usize,
    requests: u64,
    invocations: usize,
    parked: usize,
    drained: usize,
    dead_lettered: usize,
    applied_in_order: usize,
}

/// (e): `streams` orders of `events` events each, each producer sending
/// event 2 late, after event 15 (1, 3, 4, ..., 15, 2, 16, ...),
/// through a FIFO queue simulated here: batches of up to 10 messages from the
/// heads of the groups, completed messages deleted, failed ones delivered
/// again, and moved to the dead-letter queue after `max_receive_count`
/// deliveries.
async fn shuffled(
    endpoint: &str,
    via: &str,
    table: &str,
    policy: GapPolicy,
    streams: usize,
    events: u64,
    max_receive_count: u32,
) -> Shuffled {
    let client = connect(Some(endpoint)).await;
    if let Err(err) = create_table(&client, table).await {
        eprintln!("cannot create table {table}: {err}");
        std::process::exit(1);
    }
    let store = DynamoStore::new(connect(Some(via)).await, table);
    let runner = Runner::new(
        shop::domain(),
        &store,
        RunnerConfig {
            gap_policy: policy,
            ..RunnerConfig::default()
        },
    );
    // Each group: (message id, order, body, deliveries so far), in send order.
    let mut groups: Vec<std::collections::VecDeque<(String, String, u32)>> = (0..streams)
        .map(|stream| {
            let order = format!("order-e{stream}");
            // Event 2 held back by its producer and sent after event 15.
            let mut sequences: Vec<u64> = (1..=events).filter(|&sequence| sequence != 2).collect();
            let late = sequences.len().min(14);
            sequences.insert(late, 2);
            sequences
                .into_iter()
                .map(|sequence| {
                    (
                        format!("{order}-{sequence}"),
                        order_event(&order, sequence),
                        0,
                    )
                })
                .collect()
        })
        .collect();
    let mut figures = Shuffled {
        events: streams * events as usize,
        ..Shuffled::default()
    };
    let before = store.requests();
    while groups.iter().any(|group| !group.is_empty()) {
        // A poll: one batch per group with messages, up to 10 from its head.
        for (index, group) in groups.iter_mut().enumerate() {
            if group.is_empty() {
                continue;
            }
            let order = format!("order-e{index}");
            let picked: Vec<SqsMessage> = group
                .iter_mut()
                .take(10)
                .map(|(id, body, received)| {
                    *received += 1;
                    let mut message = message(id.clone(), &order, body.clone());
                    message
                        .attributes
                        .insert("ApproximateReceiveCount".into(), received.to_string());
                    message
                })
                .collect();
            figures.deliveries += picked.len();
            figures.invocations += 1;
            let invocation = Invocation {
                deadline: None,
                now: sequence_guard::lambda::epoch_seconds(),
            };
            let Ok(report) = runner.run(&batch(picked), invocation).await else {
                continue;
            };
            figures.parked += report.count(Outcome::Parked);
            figures.drained += report.drained();
            for message in &report.messages {
                let position = group
                    .iter()
                    .position(|(id, _, _)| *id == message.message_id);
                let Some(position) = position else { continue };
                if !message.outcome.is_failure() {
                    group.remove(position);
                } else if group[position].2 >= max_receive_count {
                    group.remove(position);
                    figures.dead_lettered += 1;
                }
            }
        }
    }
    figures.requests = store.requests() - before;
    for stream in 0..streams {
        let key = EntityKey::of::<shop::Order>(format!("order-e{stream}"));
        if let Ok(loaded) = store.load(std::slice::from_ref(&key), &[]).await
            && let Some(Ok(entity)) = loaded.entities.get(&key)
        {
            figures.applied_in_order += entity.sequence() as usize;
        }
    }
    figures
}

/// For a workload on one warm instance: batches whose every entity was read
/// or written by an earlier batch and that need no dedup record (a cache could
/// skip their read), and the requests the runner makes at most (one read per
/// batch that needs one, one write per stream; duplicates write nothing).
fn cache_upper_bound(workload: &Workload) -> (u64, u64) {
    let domain = shop::domain();
    let mut seen = std::collections::HashSet::new();
    let (mut skippable, mut requests) = (0u64, 0u64);
    for event in &workload.batches {
        let records: Vec<Record> = event
            .records
            .iter()
            .filter_map(|message| Record::read(message, &domain))
            .collect();
        let events: Vec<&Event> = records
            .iter()
            .filter_map(|record| record.event.as_ref().ok())
            .collect();
        let keys: Vec<EntityKey> = events
            .iter()
            .filter_map(|event| event.entity_key())
            .collect();
        let stock = events.iter().any(|event| event.deduplicated().is_some());
        if !keys.is_empty() || stock {
            requests += 1;
            if !stock && keys.iter().all(|key| seen.contains(key)) {
                skippable += 1;
            }
        }
        let mut writes: Vec<String> = events
            .iter()
            .map(|event| event.stream().to_owned())
            .collect();
        writes.sort();
        writes.dedup();
        requests += writes.len() as u64;
        seen.extend(keys);
    }
    (skippable, requests)
}

/// The CPU time this thread has spent (`CLOCK_THREAD_CPUTIME_ID`: to the
/// nanosecond, where `/proc` counts in scheduler ticks).
fn thread_cpu() -> Duration {
    let time = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    Duration::new(
        u64::try_from(time.tv_sec).unwrap_or(0),
        u32::try_from(time.tv_nsec).unwrap_or(0),
    )
}

/// One pass over `workload` on a new embedded store, by the runner or the
/// naive handler: the CPU time this thread spent on it.
fn embedded_pass(
    runtime: &tokio::runtime::Runtime,
    workload: &Workload,
    naive_handler: bool,
) -> Duration {
    let domain = shop::domain();
    let store = MemoryStore::new();
    let runner = Runner::new(shop::domain(), &store, RunnerConfig::default());
    let invocation = Invocation {
        deadline: None,
        now: 1_764_489_600,
    };
    let before = thread_cpu();
    for event in &workload.batches {
        if naive_handler {
            runtime.block_on(naive(&domain, &store, event, invocation.now));
        } else {
            let _ = runtime.block_on(runner.run(event, invocation));
        }
    }
    thread_cpu().saturating_sub(before)
}

/// What `--cpu-only` measured: the CPU time of each pass, by handler.
#[derive(Default)]
struct Passes {
    runner: Vec<Duration>,
    naive: Vec<Duration>,
}

/// `repeats` passes of each handler that `handlers` names, in alternation
/// (runner, naive, runner, ...) after one pass of each not kept, so that a
/// slower stretch of the machine falls on both.
fn embedded_passes(workload: &Workload, repeats: usize, handlers: Handlers) -> Passes {
    let runtime = match tokio::runtime::Builder::new_current_thread().build() {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("no runtime: {err}");
            std::process::exit(1);
        }
    };
    let mut passes = Passes::default();
    for round in 0..=repeats {
        if handlers != Handlers::Naive {
            let time = embedded_pass(&runtime, workload, false);
            if round > 0 {
                passes.runner.push(time);
            }
        }
        if handlers != Handlers::Runner {
            let time = embedded_pass(&runtime, workload, true);
            if round > 0 {
                passes.naive.push(time);
            }
        }
    }
    passes
}

/// How the projector reaches DynamoDB for a start measurement.
struct Reach<'a> {
    /// Where the benchmark itself creates the table (plain HTTP).
    setup: &'a str,
    /// The endpoint the projector is given.
    function: &'a str,
    /// A CA file the projector trusts (`SSL_CERT_FILE`), for a TLS endpoint.
    ca: Option<&'a str>,
    /// The table, new.
    table: &'a str,
    /// `GLIBC_TUNABLES` for the function, as the template sets it.
    tunables: Option<&'a str>,
}

/// The `GLIBC_TUNABLES` the template gives the consumers' functions (glibc's
/// per-thread cache of freed blocks), read from `template.yaml`.
fn template_tunables() -> Option<&'static str> {
    include_str!("../../template.yaml")
        .lines()
        .find_map(|line| line.trim().strip_prefix("GLIBC_TUNABLES:"))
        .map(|value| value.trim().trim_matches('"'))
}

/// What one start of a function measured.
struct Start {
    /// Process start to the first batch answered.
    first_batch: Duration,
    /// Peak memory (VmHWM) after the batches.
    peak_kb: u64,
    /// Connections the function opened to its service during the first batch.
    connections: usize,
    /// CPU time the function's threads had spent by the first batch answered
    /// (what Lambda bills, and at a fraction of a vCPU what its user waits).
    cpu: Duration,
    /// The same batch on other, new entities, answered by the same process
    /// right after the first (as many streams, reads and writes, on open
    /// connections): what the service takes, without the cold start.
    again: Option<Duration>,
}

/// The CPU time all threads of process `pid` have spent so far (Linux: the
/// first field of each `/proc/PID/task/TID/schedstat`, in nanoseconds).
fn cpu_time(pid: u32) -> Duration {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Duration::ZERO;
    };
    let nanos: u64 = tasks
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("schedstat")).ok())
        .filter_map(|stat| stat.split_whitespace().next()?.parse::<u64>().ok())
        .sum();
    Duration::from_nanos(nanos)
}

/// The release binary `name` beside the benchmark's directory
/// (`target/release/<name>`).
fn release_binary(name: &str) -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    Some(exe.parent()?.parent()?.join(name))
}

/// The port of an `http(s)://host:port` endpoint.
fn port_of(endpoint: &str) -> Option<u16> {
    endpoint
        .rsplit(':')
        .next()?
        .trim_end_matches('/')
        .parse()
        .ok()
}

/// The TCP connections process `pid` holds to 127.0.0.1:`port` (Linux:
/// its socket inodes in /proc/PID/fd matched against /proc/PID/net/tcp).
fn connections_to(pid: u32, port: u16) -> usize {
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return 0;
    };
    let inodes: std::collections::HashSet<String> = fds
        .filter_map(|fd| std::fs::read_link(fd.ok()?.path()).ok())
        .filter_map(|link| {
            let link = link.to_string_lossy().into_owned();
            Some(link.strip_prefix("socket:[")?.strip_suffix(']')?.to_owned())
        })
        .collect();
    let remote = format!("0100007F:{port:04X}");
    std::fs::read_to_string(format!("/proc/{pid}/net/tcp"))
        .unwrap_or_default()
        .lines()
        .skip(1)
        .filter(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            fields.get(2) == Some(&remote.as_str())
                && fields.get(9).is_some_and(|inode| inodes.contains(*inode))
        })
        .count()
}

/// The environment every function started here gets (a Lambda without AWS).
fn function_command(binary: &Path, api: &runtime_api::RuntimeApi) -> tokio::process::Command {
    let mut command = tokio::process::Command::new(binary);
    command
        .env_clear()
        .env("AWS_LAMBDA_RUNTIME_API", &api.address)
        .env("AWS_LAMBDA_FUNCTION_NAME", "bench")
        .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "128")
        .env("AWS_LAMBDA_FUNCTION_VERSION", "1")
        .env("AWS_REGION", "us-east-1")
        .env("AWS_ACCESS_KEY_ID", "local")
        .env("AWS_SECRET_ACCESS_KEY", "local")
        .env("AWS_LAMBDA_LOG_LEVEL", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true);
    command
}

/// Writes and reads an item no batch uses, so that the table is in use, as a
/// deployed function's is: DynamoDB Local's first requests on a new table
/// are slower than its later ones, and would be counted as the cold start.
async fn warm(client: &aws_sdk_dynamodb::Client, table: &str) {
    use aws_sdk_dynamodb::types::AttributeValue;
    let key = [
        ("pk", AttributeValue::S("bench-warm".to_owned())),
        ("sk", AttributeValue::S("warm".to_owned())),
    ];
    let mut put = client.put_item().table_name(table);
    let mut get = client.get_item().table_name(table);
    for (name, value) in key {
        put = put.item(name, value.clone());
        get = get.key(name, value);
    }
    if let Err(err) = put.send().await {
        eprintln!("warming {table}: {err}");
    }
    let _ = get.send().await;
}

/// `batch` on other entities: every aggregate, sku and event id (and message
/// id and group) prefixed, so that it makes as many streams, reads and
/// writes as `batch` did, on nothing stored yet.
fn same_shape(batch: &SqsEvent) -> SqsEvent {
    let mut again = batch.clone();
    for record in &mut again.records {
        let prefix = |id: &str| format!("again-{id}");
        record.message_id = record.message_id.as_deref().map(prefix);
        record.body = record.body.as_deref().map(|body| {
            body.replace(r#""aggregateId":""#, r#""aggregateId":"again-"#)
                .replace(r#""eventId":""#, r#""eventId":"again-"#)
                .replace(r#""sku":""#, r#""sku":"again-"#)
        });
        if let Some(group) = record.attributes.get_mut("MessageGroupId") {
            *group = prefix(group);
        }
    }
    again
}

/// Starts the release projector against a local Runtime API; returns the
/// time to the first batch answered, and (after running `batches`) its peak
/// memory.
async fn projector_figures(
    projector: &Path,
    reach: &Reach<'_>,
    batches: &[SqsEvent],
    again: bool,
) -> Option<Start> {
    if !projector.exists() {
        eprintln!(
            "{} not found: build it with `cargo build --release --bin projector`",
            projector.display()
        );
        return None;
    }
    let client = connect(Some(reach.setup)).await;
    create_table(&client, reach.table).await.ok()?;
    warm(&client, reach.table).await;
    let api = runtime_api::RuntimeApi::start().await;
    let mut command = function_command(projector, &api);
    if let Some(ca) = reach.ca {
        command.env("SSL_CERT_FILE", ca);
    }
    if let Some(tunables) = reach.tunables {
        command.env("GLIBC_TUNABLES", tunables);
    }
    command
        .env("TABLE_NAME", reach.table)
        .env("AWS_ENDPOINT_URL_DYNAMODB", reach.function);
    let started = Instant::now();
    let mut child = command.spawn().ok()?;
    let pid = child.id()?;
    let mut first_batch = None;
    let mut connections = 0;
    let mut cpu = Duration::ZERO;
    let mut again_took = None;
    for event in batches {
        let body = serde_json::to_string(event).ok()?;
        api.invoke(&body).await;
        // The cold start a user sees: process start to the first batch
        // answered (credentials, the first connection, the first requests).
        if first_batch.is_none() {
            first_batch = Some(started.elapsed());
            connections = port_of(reach.function).map_or(0, |port| connections_to(pid, port));
            cpu = cpu_time(pid);
            if again {
                let body = serde_json::to_string(&same_shape(event)).ok()?;
                let began = Instant::now();
                api.invoke(&body).await;
                again_took = Some(began.elapsed());
            }
        }
    }
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let peak_kb = status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|value| {
            value
                .trim()
                .trim_end_matches("kB")
                .trim()
                .parse::<u64>()
                .ok()
        })?;
    let _ = child.kill().await;
    Some(Start {
        first_batch: first_batch?,
        peak_kb,
        connections,
        cpu,
        again: again_took,
    })
}

/// The dispatcher's first stream batch (the worked example's, three records:
/// one `SendMessageBatch`).
const STREAM_BATCH: &str = include_str!("../../events/dispatcher/stream-batch.json");

/// Starts the release dispatcher against a local Runtime API, sending to the
/// SQS stand-in at `endpoint` (plain, or through the TLS proxy with `ca`
/// trusted); returns the time to the first batch answered and the
/// connections it opened, or `None` if it failed.
async fn dispatcher_start(
    dispatcher: &Path,
    endpoint: &str,
    ca: Option<&str>,
    stand_in: &sqs_stand_in::SqsStandIn,
) -> Option<Start> {
    if !dispatcher.exists() {
        eprintln!(
            "{} not found: build it with `cargo build --release --bin dispatcher`",
            dispatcher.display()
        );
        return None;
    }
    let api = runtime_api::RuntimeApi::start().await;
    let mut command = function_command(dispatcher, &api);
    if let Some(ca) = ca {
        command.env("SSL_CERT_FILE", ca);
    }
    command
        .env(
            "QUEUE_URL",
            "https://sqs.us-east-1.amazonaws.com/123456789012/bench.fifo",
        )
        .env(
            "FAILURE_QUEUE_URL",
            "https://sqs.us-east-1.amazonaws.com/123456789012/bench-failures",
        )
        .env("AWS_ENDPOINT_URL_SQS", endpoint);
    let before = stand_in.connections();
    let started = Instant::now();
    let mut child = command.spawn().ok()?;
    let answer = api.invoke(STREAM_BATCH).await;
    let first_batch = started.elapsed();
    let cpu = child.id().map_or(Duration::ZERO, cpu_time);
    let connections = stand_in.connections().saturating_sub(before) as usize;
    let _ = child.kill().await;
    // Every record taken: an answer with no batch item failure.
    match answer {
        runtime_api::Answer::Response(body) if body.contains(r#""batchItemFailures":[]"#) => {
            Some(Start {
                first_batch,
                peak_kb: 0,
                connections,
                cpu,
                again: None,
            })
        }
        other => {
            eprintln!("the dispatcher did not send the batch: {other:?}");
            None
        }
    }
}

/// The line of one cold-start measure: the times to the first batch
/// answered, the function's CPU time by then, and (when measured) the same
/// batch on new entities answered warm right after.
fn print_starts(label: &str, times: &mut [Duration], cpu: &mut [Duration], again: &mut [Duration]) {
    let cpu = spread(cpu).map_or(0.0, |(median, ..)| median);
    let again = spread(again).map_or(String::new(), |(median, ..)| {
        format!("; the same batch on new entities, warm: median {median:.1} ms")
    });
    match spread(times) {
        Some((median, min, max, runs)) => println!(
            "process start to the first batch answered, {label}: median {median:.1} ms (min {min:.1}, max {max:.1}, {runs} runs; its CPU time median {cpu:.1} ms{again})"
        ),
        None => println!("process start to the first batch answered, {label}: not measured"),
    }
}

/// Median, min and max in ms of `times` (sorted here), and how many.
fn spread(times: &mut [Duration]) -> Option<(f64, f64, f64, usize)> {
    times.sort();
    let ms = |time: &Duration| time.as_secs_f64() * 1e3;
    Some((
        ms(times.get(times.len() / 2)?),
        ms(times.first()?),
        ms(times.last()?),
        times.len(),
    ))
}

async fn start_times(samples: usize) -> Vec<Duration> {
    let mut times = Vec::new();
    let Some(projector) = std::env::current_exe()
        .ok()
        .and_then(|exe| Some(exe.parent()?.parent()?.join("projector")))
    else {
        return times;
    };
    for _ in 0..samples {
        let api = runtime_api::RuntimeApi::start().await;
        let started = Instant::now();
        let Ok(mut child) = tokio::process::Command::new(&projector)
            .env_clear()
            .env("AWS_LAMBDA_RUNTIME_API", &api.address)
            .env("AWS_LAMBDA_FUNCTION_NAME", "bench")
            .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "128")
            .env("AWS_LAMBDA_FUNCTION_VERSION", "1")
            .env("TABLE_NAME", "bench-start")
            .env("AWS_REGION", "us-east-1")
            .env("AWS_ACCESS_KEY_ID", "local")
            .env("AWS_SECRET_ACCESS_KEY", "local")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
        else {
            return times;
        };
        let deadline = Instant::now() + Duration::from_secs(5);
        while api.first_next().is_none() && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_micros(200)).await;
        }
        if let Some(at) = api.first_next() {
            times.push(at - started);
        }
        let _ = child.kill().await;
    }
    times.sort();
    times
}

/// The handlers `--cpu-only` times.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Handlers {
    Both,
    Runner,
    Naive,
}

/// The benchmark: prints what a batch costs, side by side with a naive
/// handler. `scripts/bench` builds it, starts DynamoDB Local and runs it.
#[derive(Debug, clap::Parser)]
#[command(name = "bench")]
struct Args {
    /// DynamoDB Local's endpoint, e.g. http://127.0.0.1:8000 (its tables
    /// must not exist yet: start it fresh).
    #[arg(long, value_name = "URL", required_unless_present_any = ["cpu_only", "versions"])]
    endpoint_url: Option<String>,
    /// Only the embedded store's time per message (no DynamoDB): passes over
    /// the mix, the two handlers in alternation; also for a profiler
    /// (valgrind --tool=callgrind).
    #[arg(long)]
    cpu_only: bool,
    /// With `--cpu-only`: the passes of each handler measured, after one not
    /// kept.
    #[arg(long, default_value_t = 20, requires = "cpu_only")]
    repeats: usize,
    /// With `--cpu-only`: only one of the two handlers, so that a profiler's
    /// count is that handler's (less a run with `--repeats 0`: the mix made
    /// and the pass not kept).
    #[arg(long, value_enum, default_value_t = Handlers::Both, requires = "cpu_only")]
    handler: Handlers,
    /// The same DynamoDB Local through TLS (`scripts/tls-proxy.py`), for the
    /// cold start through a TLS handshake.
    #[arg(long, value_name = "URL", requires = "tls_ca")]
    tls_endpoint: Option<String>,
    /// The CA that signed the TLS proxy's certificate (the projector trusts
    /// it through `SSL_CERT_FILE`).
    #[arg(long, value_name = "FILE")]
    tls_ca: Option<String>,
    /// Only the time to read a body by its version (no DynamoDB).
    #[arg(long, conflicts_with = "cpu_only")]
    versions: bool,
    /// Only the producer's half (appends to the event store, on DynamoDB
    /// Local behind the 2 ms proxy).
    #[arg(long, conflicts_with_all = ["cpu_only", "versions"])]
    producer: bool,
    /// A free port for the SQS stand-in (plain HTTP) the release dispatcher
    /// sends to, for its cold start.
    #[arg(long, value_name = "PORT")]
    sqs_stand_in_port: Option<u16>,
    /// The stand-in through TLS (`scripts/tls-proxy.py` in front of it; the
    /// CA of `--tls-ca`).
    #[arg(long, value_name = "URL", requires_all = ["sqs_stand_in_port", "tls_ca"])]
    sqs_tls_endpoint: Option<String>,
    /// The CA of `--tls-ca` with the system's root bundle in one file: what
    /// loading the roots of a real system costs.
    #[arg(long, value_name = "FILE")]
    tls_ca_bundle: Option<String>,
    /// Only the cold starts, of several builds side by side: NAME=DIR, DIR
    /// holding a `projector` and a `dispatcher`. Repeat for each build.
    #[arg(long = "variant", value_name = "NAME=DIR", requires = "tls_endpoint")]
    variants: Vec<String>,
    /// Rounds of the side-by-side cold starts (each starts every build once
    /// per measure).
    #[arg(long, default_value_t = 15)]
    rounds: usize,
    /// Only the release projector's peak memory, with glibc's defaults and
    /// with each `--tunables` (the template's when none is given).
    #[arg(long, conflicts_with_all = ["cpu_only", "versions", "producer"])]
    memory_only: bool,
    /// A `GLIBC_TUNABLES` value to measure with `--memory-only`; repeat for more.
    #[arg(long, value_name = "VALUE", requires = "memory_only")]
    tunables: Vec<String>,
}

/// The release projector's peak memory after the mix's batches, once for
/// each of `tunables` (`None`: glibc's defaults).
async fn print_memory(
    endpoint: &str,
    projector: &Path,
    batches: &[SqsEvent],
    tunables: &[Option<&str>],
) {
    for (index, &tunables) in tunables.iter().enumerate() {
        let table = format!("projector-mix-{index}");
        let plain = Reach {
            setup: endpoint,
            function: endpoint,
            ca: None,
            table: &table,
            tunables,
        };
        let with = tunables.map_or(String::new(), |value| format!(", GLIBC_TUNABLES={value}"));
        match projector_figures(projector, &plain, batches, false).await {
            Some(start) => println!(
                "peak memory (VmHWM) after {} batches of the mix{with}: {:.1} MB",
                batches.len(),
                start.peak_kb as f64 / 1024.0
            ),
            None => println!("peak memory{with}: not measured"),
        }
    }
}

/// The release dispatcher's cold start, over HTTP and through TLS, to the
/// SQS stand-in.
async fn print_dispatcher(args: &Args, stand_in: Option<&sqs_stand_in::SqsStandIn>) {
    println!("\n== Release dispatcher (SendMessageBatch to a local SQS stand-in)");
    let (Some(stand_in), Some(port)) = (stand_in, args.sqs_stand_in_port) else {
        println!(
            "process start to the first batch answered: not measured (no --sqs-stand-in-port)"
        );
        return;
    };
    let Some(dispatcher) = release_binary("dispatcher") else {
        return;
    };
    let plain = format!("http://127.0.0.1:{port}");
    for (label, endpoint, ca) in [
        ("over HTTP", Some(plain.as_str()), None),
        (
            "through TLS (a local TLS proxy)",
            args.sqs_tls_endpoint.as_deref(),
            args.tls_ca.as_deref(),
        ),
    ] {
        let Some(endpoint) = endpoint else {
            println!(
                "process start to the first batch answered, {label}: not measured (no --sqs-tls-endpoint)"
            );
            continue;
        };
        let (mut times, mut cpu) = (Vec::new(), Vec::new());
        for _ in 0..7 {
            if let Some(start) = dispatcher_start(&dispatcher, endpoint, ca, stand_in).await {
                times.push(start.first_batch);
                cpu.push(start.cpu);
            }
        }
        print_starts(label, &mut times, &mut cpu, &mut []);
    }
    if let Ok(meta) = std::fs::metadata(&dispatcher) {
        println!(
            "x86_64 release binary (stripped by the profile): {:.2} MB",
            meta.len() as f64 / 1e6
        );
    }
}

/// One measure of the side-by-side cold starts.
#[derive(Clone, Copy)]
enum Measure {
    ProjectorHttp,
    ProjectorTls,
    ProjectorSystemRoots,
    /// One stream's batch: one write, so one connection.
    ProjectorHttpOneStream,
    ProjectorTlsOneStream,
    DispatcherHttp,
    DispatcherTls,
}

impl Measure {
    fn label(self) -> &'static str {
        match self {
            Measure::ProjectorHttp => "projector, over HTTP",
            Measure::ProjectorTls => "projector, through TLS",
            Measure::ProjectorSystemRoots => "projector, through TLS, system roots too",
            Measure::ProjectorHttpOneStream => "projector, one stream, over HTTP",
            Measure::ProjectorTlsOneStream => "projector, one stream, through TLS",
            Measure::DispatcherHttp => "dispatcher, over HTTP",
            Measure::DispatcherTls => "dispatcher, through TLS",
        }
    }
}

/// Messages of the mix DynamoDB Local answers before the cold starts.
const WARM_MESSAGES: usize = 10_000;

/// DynamoDB Local is a JVM: fresh, it compiles its own code while it
/// serves, on the same cores as the functions measured. The mix first, on a
/// table of its own, so that its compilers are done before the first start
/// (DynamoDB on AWS is always warm).
async fn warm_service(endpoint: &str) {
    let began = Instant::now();
    let warmed = measure(
        endpoint,
        endpoint,
        "variant-warm",
        &realistic_mix(WARM_MESSAGES, 7),
        false,
    )
    .await;
    println!(
        "   DynamoDB Local warmed first: {} messages of the mix ({} requests) on a table of its own, {:.1} s",
        warmed.messages,
        warmed.requests,
        began.elapsed().as_secs_f64()
    );
}

/// The cold starts of several builds (`--variant NAME=DIR`), side by side in
/// one run: DynamoDB Local warmed first, then each round starts every build
/// once per measure, the build that goes first rotating, so that a slower
/// moment of the machine is shared.
async fn print_variants(args: &Args, endpoint: &str, stand_in: Option<&sqs_stand_in::SqsStandIn>) {
    let builds: Vec<(&str, PathBuf)> = args
        .variants
        .iter()
        .filter_map(|variant| {
            let (name, dir) = variant.split_once('=')?;
            Some((name, PathBuf::from(dir)))
        })
        .collect();
    let (Some(tls), Some(ca)) = (args.tls_endpoint.as_deref(), args.tls_ca.as_deref()) else {
        return;
    };
    if builds.len() != args.variants.len() {
        println!("--variant takes NAME=DIR: {:?}", args.variants);
        return;
    }
    let plain_sqs = args
        .sqs_stand_in_port
        .map(|port| format!("http://127.0.0.1:{port}"));
    let mut measures = vec![Measure::ProjectorHttp, Measure::ProjectorTls];
    if args.tls_ca_bundle.is_some() {
        measures.push(Measure::ProjectorSystemRoots);
    }
    measures.extend([
        Measure::ProjectorHttpOneStream,
        Measure::ProjectorTlsOneStream,
    ]);
    if stand_in.is_some() {
        measures.push(Measure::DispatcherHttp);
        if args.sqs_tls_endpoint.is_some() {
            measures.push(Measure::DispatcherTls);
        }
    }
    println!("== Cold start by build, side by side: process start to the first batch answered");
    println!(
        "   ({} rounds after one not kept; a round starts each build once per measure, the first build rotating;",
        args.rounds
    );
    println!(
        "   projector: the mix's first batch (10 messages), or one stream's 10 events, on a new table;"
    );
    println!("   dispatcher: 3 stream records, one SendMessageBatch;");
    println!(
        "   warm, same: the projector's batch again on new entities, answered right after by the same process)"
    );
    if tls.starts_with("http://") {
        println!(
            "   the proxies listen in plain TCP: the rows \"through TLS\" take the same hop without TLS"
        );
    }
    warm_service(endpoint).await;
    type Figures = (Vec<Duration>, Vec<usize>, Vec<Duration>, Vec<Duration>);
    let mut figures: HashMap<(usize, usize), Figures> = HashMap::new();
    // Round 0 is not kept: it warms the proxies and the page cache.
    for round in 0..=args.rounds {
        for turn in 0..builds.len() {
            let index = (round + turn) % builds.len();
            let dir = &builds[index].1;
            for (slot, measure) in measures.iter().enumerate() {
                let start = match measure {
                    Measure::ProjectorHttp
                    | Measure::ProjectorTls
                    | Measure::ProjectorSystemRoots
                    | Measure::ProjectorHttpOneStream
                    | Measure::ProjectorTlsOneStream => {
                        let (function, ca) = match measure {
                            Measure::ProjectorHttp | Measure::ProjectorHttpOneStream => {
                                (endpoint, None)
                            }
                            Measure::ProjectorSystemRoots => (tls, args.tls_ca_bundle.as_deref()),
                            _ => (tls, Some(ca)),
                        };
                        let table = format!("variant-{index}-{slot}-{round}");
                        let reach = Reach {
                            setup: endpoint,
                            function,
                            ca,
                            table: &table,
                            tunables: template_tunables(),
                        };
                        // The mix's first batch (several streams, written
                        // at once: a connection each), or one aggregate's
                        // 10 events (one write).
                        let batch = match measure {
                            Measure::ProjectorHttpOneStream | Measure::ProjectorTlsOneStream => {
                                one_aggregate().batches
                            }
                            _ => realistic_mix(10, 13).batches,
                        };
                        projector_figures(&dir.join("projector"), &reach, &batch, true).await
                    }
                    Measure::DispatcherHttp | Measure::DispatcherTls => {
                        let (Some(stand_in), Some(plain)) = (stand_in, plain_sqs.as_deref()) else {
                            continue;
                        };
                        let (endpoint, ca) = match measure {
                            Measure::DispatcherHttp => (plain, None),
                            _ => (args.sqs_tls_endpoint.as_deref().unwrap_or(plain), Some(ca)),
                        };
                        dispatcher_start(&dir.join("dispatcher"), endpoint, ca, stand_in).await
                    }
                };
                if let Some(start) = start.filter(|_| round > 0) {
                    let entry = figures.entry((index, slot)).or_default();
                    entry.0.push(start.first_batch);
                    entry.1.push(start.connections);
                    entry.2.push(start.cpu);
                    entry.3.extend(start.again);
                }
            }
        }
    }
    println!(
        "{:<24} {:<42} {:>10} {:>18} {:>12} {:>14} {:>16}",
        "build",
        "measure",
        "median ms",
        "range ms",
        "connections",
        "CPU ms median",
        "warm, same ms"
    );
    for (index, (name, dir)) in builds.iter().enumerate() {
        for (slot, measure) in measures.iter().enumerate() {
            let Some((times, connections, cpu, again)) = figures.get_mut(&(index, slot)) else {
                println!("{name:<24} {:<42} not measured", measure.label());
                continue;
            };
            connections.sort_unstable();
            let connections = match (connections.first(), connections.last()) {
                (Some(low), Some(high)) if low != high => format!("{low} to {high}"),
                (Some(low), _) => low.to_string(),
                _ => String::new(),
            };
            let cpu = spread(cpu).map_or(String::new(), |(median, ..)| format!("{median:.1}"));
            let again = spread(again).map_or(String::new(), |(median, ..)| format!("{median:.1}"));
            if let Some((median, min, max, _)) = spread(times) {
                println!(
                    "{name:<24} {:<42} {median:>10.1} {:>18} {connections:>12} {cpu:>14} {again:>16}",
                    measure.label(),
                    format!("{min:.1} to {max:.1}")
                );
            }
        }
        let size = |binary: &str| {
            std::fs::metadata(dir.join(binary))
                .map(|meta| format!("{:.2} MB", meta.len() as f64 / 1e6))
                .unwrap_or_else(|_| "?".to_owned())
        };
        println!(
            "{name:<24} x86_64 release binaries: projector {}, dispatcher {}",
            size("projector"),
            size("dispatcher")
        );
    }
}

// ---- versions -----------------------------------------------------------------

/// The time to read one body (`Domain::parse`: envelope, version, upcast,
/// data), by its version: the median of 5 rounds of 200,000 parses each.
fn print_versions() {
    const ROUNDS: usize = 5;
    const PARSES: u32 = 200_000;
    println!("\n== Reading a body by its version: ns per message (Domain::parse), one thread");
    let (shop, bank) = (shop::domain(), bank::domain());
    let order = |version: &str| {
        format!(
            r#"{{"eventId":"order-1-2","type":"OrderUpdated","aggregateId":"order-1","sequence":2,{version}"data":{{"customerName":"Ada Lovelace","email":"ada@example.com","totalCents":1250}}}}"#
        )
    };
    let account = |event_type: &str, version: &str, data: &str| {
        format!(
            r#"{{"eventId":"acct-1-1","type":"{event_type}","aggregateId":"acct-1","sequence":1,{version}"data":{data}}}"#
        )
    };
    let cases = [
        ("shop OrderUpdated, no `version`", &shop, order("")),
        (
            "shop OrderUpdated, \"version\":1",
            &shop,
            order(r#""version":1,"#),
        ),
        (
            "bank MoneyDeposited, no `version` (no upcasts)",
            &bank,
            account("MoneyDeposited", "", r#"{"amountCents":1250}"#),
        ),
        (
            "bank AccountOpened, \"version\":2 (current)",
            &bank,
            account(
                "AccountOpened",
                r#""version":2,"#,
                r#"{"owner":"Ada Lovelace","currency":"GBP"}"#,
            ),
        ),
        (
            "bank AccountOpened, version 1 upcast to 2",
            &bank,
            account("AccountOpened", "", r#"{"owner":"Ada Lovelace"}"#),
        ),
    ];
    let mut rounds: Vec<Vec<f64>> = vec![Vec::new(); cases.len()];
    for _ in 0..ROUNDS {
        // Rounds interleave the cases, so that a slower moment is shared.
        for ((_, domain, body), times) in cases.iter().zip(&mut rounds) {
            let started = Instant::now();
            for _ in 0..PARSES {
                let _ = std::hint::black_box(domain.parse(std::hint::black_box(body)));
            }
            times.push(started.elapsed().as_nanos() as f64 / f64::from(PARSES));
        }
    }
    for ((label, domain, body), times) in cases.iter().zip(&mut rounds) {
        times.sort_by(f64::total_cmp);
        let read = match domain.parse(body) {
            Ok(_) => String::new(),
            Err(err) => format!("  (refused: {err})"),
        };
        println!(
            "{label:<48} {:>7.0} ns  (rounds {:.0} to {:.0}){read}",
            times[ROUNDS / 2],
            times[0],
            times[ROUNDS - 1]
        );
    }
}

/// The embedded store's time per message, the runner and the naive handler.
fn print_cpu(repeats: usize, handlers: Handlers) {
    let tunables = std::env::var("GLIBC_TUNABLES").ok();
    let with = tunables
        .as_deref()
        .map_or(String::new(), |value| format!(", GLIBC_TUNABLES={value}"));
    println!("\n== Embedded store: time per message (parse, decide, apply), one thread{with}");
    let mix = realistic_mix(3000, 11);
    let messages = mix.batches.iter().map(|b| b.records.len()).sum::<usize>();
    // On a thread of its own, outside the tokio runtime of main.
    let passes = std::thread::scope(|scope| {
        scope
            .spawn(|| embedded_passes(&mix, repeats, handlers))
            .join()
            .unwrap_or_default()
    });
    for (name, times) in [("runner", &passes.runner), ("naive ", &passes.naive)] {
        let mut times: Vec<Duration> = times.clone();
        if let Some((median, min, max, runs)) = spread(&mut times) {
            let scale = 1e3 / messages.max(1) as f64;
            println!(
                "{name}: {:.2} µs/message CPU, median of {runs} passes of {messages} messages (min {:.2}, max {:.2})",
                median * scale,
                min * scale,
                max * scale
            );
        }
    }
    // Each pass of the runner beside the naive pass that followed it.
    let mut ratios: Vec<f64> = passes
        .runner
        .iter()
        .zip(&passes.naive)
        .map(|(runner, naive)| runner.as_secs_f64() / naive.as_secs_f64().max(f64::MIN_POSITIVE))
        .collect();
    ratios.sort_by(f64::total_cmp);
    if let Some(median) = ratios.get(ratios.len() / 2) {
        println!(
            "runner / naive, pass beside pass: median {median:.2} times ({} pairs, {:.2} to {:.2})",
            ratios.len(),
            ratios.first().copied().unwrap_or(*median),
            ratios.last().copied().unwrap_or(*median)
        );
    }
    // The same under the template's glibc tunables: glibc reads them when a
    // process starts, so in a new process of this benchmark.
    let handler = clap::ValueEnum::to_possible_value(&handlers);
    if let (None, Some(value), Some(handler)) = (tunables, template_tunables(), handler) {
        let status = std::env::current_exe().and_then(|exe| {
            std::process::Command::new(exe)
                .args(["--cpu-only", "--repeats", &repeats.to_string()])
                .args(["--handler", handler.get_name()])
                .env("GLIBC_TUNABLES", value)
                .status()
        });
        if let Err(err) = status {
            println!("with GLIBC_TUNABLES={value}: not measured ({err})");
        }
    }
}

#[tokio::main]
async fn main() {
    let args = <Args as clap::Parser>::parse();
    if args.versions {
        print_versions();
        return;
    }
    let Some(endpoint) = args.endpoint_url.clone().filter(|_| !args.cpu_only) else {
        print_cpu(args.repeats, args.handler);
        return;
    };
    let stand_in = match args.sqs_stand_in_port {
        Some(port) => sqs_stand_in::SqsStandIn::start(port).await,
        None => None,
    };
    if !args.variants.is_empty() {
        print_variants(&args, &endpoint, stand_in.as_ref()).await;
        return;
    }
    if args.memory_only {
        let Some(projector) = release_binary("projector") else {
            return;
        };
        let mut tunables: Vec<Option<&str>> = vec![None];
        match args.tunables.is_empty() {
            true => tunables.push(template_tunables()),
            false => tunables.extend(args.tunables.iter().map(|value| Some(value.as_str()))),
        }
        print_memory(
            &endpoint,
            &projector,
            &realistic_mix(3000, 13).batches,
            &tunables,
        )
        .await;
        return;
    }
    // A network between the function and DynamoDB: 2 ms per request, so that a
    // round trip is not hidden by the client's own time to issue a request.
    let upstream = endpoint.trim_start_matches("http://").to_owned();
    let proxy = fault_proxy::FaultProxy::start_with_latency(
        upstream,
        1,
        0,
        vec![],
        Duration::from_millis(2),
    )
    .await;
    if args.producer {
        producer::print_producer(&endpoint, &proxy.endpoint).await;
        return;
    }
    println!("== DynamoDB requests per message and sequential round trips per batch");
    println!("   (DynamoDB Local behind a proxy adding 2 ms to each request)");
    println!(
        "{:<44} {:>14} {:>14} {:>7} {:>12} {:>12}",
        "workload", "req/msg", "naive req/msg", "ratio", "trips max", "naive max"
    );
    let workloads = [
        one_aggregate(),
        ten_aggregates(),
        ten_duplicates(),
        realistic_mix(3000, 7),
    ];
    for (index, workload) in workloads.iter().enumerate() {
        let ours = measure(
            &endpoint,
            &proxy.endpoint,
            &format!("bench-{index}"),
            workload,
            false,
        )
        .await;
        let theirs = measure(
            &endpoint,
            &proxy.endpoint,
            &format!("bench-naive-{index}"),
            workload,
            true,
        )
        .await;
        println!(
            "{:<44} {:>14.3} {:>14.3} {:>6.1}x {:>5} (avg {:>4.2}) {:>5} (avg {:>5.2})",
            workload.name,
            ours.per_message(),
            theirs.per_message(),
            theirs.per_message() / ours.per_message().max(f64::MIN_POSITIVE),
            ours.max_round_trips,
            ours.mean_round_trips(),
            theirs.max_round_trips,
            theirs.mean_round_trips()
        );
    }

    println!(
        "\n== (e) 20 orders x 20 events, each producer sending event 2 after 15 (1, 3, ..., 15, 2, 16, ...),"
    );
    println!("   through a simulated FIFO queue: failed messages come back, maxReceiveCount 5");
    for (policy, name) in [(GapPolicy::Park, "park"), (GapPolicy::Retry, "retry")] {
        let figures = shuffled(
            &endpoint,
            &proxy.endpoint,
            &format!("bench-shuffled-{name}"),
            policy,
            20,
            20,
            5,
        )
        .await;
        println!(
            "GAP_POLICY={name:<5}: {:.2} requests/event, {:.2} deliveries/event, {} invocations, \
             {} parked, {} drained, {} of {} events applied in order, {} in the dead-letter queue",
            figures.requests as f64 / figures.events as f64,
            figures.deliveries as f64 / figures.events as f64,
            figures.invocations,
            figures.parked,
            figures.drained,
            figures.applied_in_order,
            figures.events,
            figures.dead_lettered
        );
    }

    println!("\n== A warm entity cache across invocations (not built): what it could save at best");
    let mix = realistic_mix(3000, 7);
    let (skippable, requests) = cache_upper_bound(&mix);
    println!(
        "(d): {skippable} of {} batches touch only entities seen before and no dedup record: \
         at best {:.3} requests/message instead of at most {:.3}; (b) warm: 1.000 instead of 1.100",
        mix.batches.len(),
        (requests - skippable) as f64 / 3000.0,
        requests as f64 / 3000.0
    );

    print_cpu(20, Handlers::Both);
    print_versions();

    producer::print_producer(&endpoint, &proxy.endpoint).await;

    println!("\n== Release projector");
    let times = start_times(20).await;
    if times.is_empty() {
        println!(
            "process start to first call for work: not measured (the projector did not start)"
        );
    }
    if let (Some(first), Some(last)) = (times.first(), times.last()) {
        println!(
            "process start to first call for work: median {:.1} ms (min {:.1}, max {:.1}, {} runs)",
            times[times.len() / 2].as_secs_f64() * 1e3,
            first.as_secs_f64() * 1e3,
            last.as_secs_f64() * 1e3,
            times.len()
        );
    }
    let Some(projector) = release_binary("projector") else {
        return;
    };
    let mix = realistic_mix(3000, 13);
    print_memory(
        &endpoint,
        &projector,
        &mix.batches,
        &[None, template_tunables()],
    )
    .await;
    // The cold start a user sees: start to the first batch answered, a new
    // process and table each time, over plain HTTP and through TLS.
    let first = &mix.batches[..1];
    for (label, function, ca) in [
        ("DynamoDB Local over HTTP", Some(endpoint.as_str()), None),
        (
            "DynamoDB Local through TLS (a local TLS proxy)",
            args.tls_endpoint.as_deref(),
            args.tls_ca.as_deref(),
        ),
    ] {
        let Some(function) = function else {
            println!(
                "process start to the first batch answered, {label}: not measured (no --tls-endpoint)"
            );
            continue;
        };
        let (mut times, mut cpu, mut again) = (Vec::new(), Vec::new(), Vec::new());
        for run in 0..7 {
            let table = format!("start-{}-{run}", label.len());
            let reach = Reach {
                setup: &endpoint,
                function,
                ca,
                table: &table,
                tunables: template_tunables(),
            };
            if let Some(start) = projector_figures(&projector, &reach, first, true).await {
                times.push(start.first_batch);
                cpu.push(start.cpu);
                again.extend(start.again);
            }
        }
        print_starts(label, &mut times, &mut cpu, &mut again);
    }
    if let Ok(meta) = std::fs::metadata(&projector) {
        println!(
            "x86_64 release binary (stripped by the profile): {:.2} MB",
            meta.len() as f64 / 1e6
        );
    }
    print_dispatcher(&args, stand_in.as_ref()).await;
}
