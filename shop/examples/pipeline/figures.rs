//! What a run measures, and the counts its tasks share while it runs: the
//! dispatcher's in [`Shared`], each consumer's in [`Tally`].

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use sequence_guard::runner::BatchReport;

use crate::faults::HotProfile;
use crate::meter;

/// The stream of the faults workload's hot order.
pub const HOT_STREAM: &str = "order-hot";

/// What one run measured.
pub struct Figures {
    pub appended: usize,
    /// `SendMessageBatch`, `SendMessage` or `PublishBatch` requests.
    pub requests: u64,
    pub consumers: Vec<Consumed>,
    /// The producers' DynamoDB requests and units (on the drain workload:
    /// the fill's).
    pub producer: meter::Usage,
    /// The producers' KMS requests (keys made and unwrapped).
    pub producer_kms: u64,
    /// The dispatcher: stream batches sent, busy time sending them,
    /// `GetRecords` calls and their time, when the last event was sent
    /// (seconds from the start).
    pub batches: u64,
    pub dispatch_busy: Duration,
    pub get_records: (u64, Duration),
    pub all_sent: f64,
}

/// What one consumer of a run measured.
pub struct Consumed {
    pub name: &'static str,
    pub projected: usize,
    pub seconds: f64,
    pub latencies: Vec<Duration>,
    /// Messages its queue delivered (each receipt, redeliveries included),
    /// and any left in it.
    pub deliveries: u64,
    /// Batches projected (one invocation each), receives that brought
    /// messages, `DeleteMessageBatch` requests.
    pub invocations: u64,
    pub receives: u64,
    pub deletes: u64,
    /// Time projecting (the invocations' busy time), in receives, in
    /// deletes: sums over its concurrent consumers.
    pub busy: Duration,
    pub receiving: Duration,
    pub deleting: Duration,
    /// Its DynamoDB requests and units.
    pub usage: meter::Usage,
    /// Its KMS requests (its keys unwrapped).
    pub kms: u64,
    /// What it saw of the hot stream ([`HOT_STREAM`]).
    pub hot: HotProfile,
}

/// Everything one run shares between its tasks.
pub struct Shared {
    pub appended: Mutex<HashMap<(String, u64), Instant>>,
    pub dispatched: AtomicUsize,
    pub requests: AtomicU64,
    /// Stream batches sent, and the time sending them.
    pub batches: AtomicU64,
    pub dispatch_busy: Mutex<Duration>,
    pub get_records: Mutex<(u64, Duration)>,
    /// When every event was sent.
    pub all_sent: Mutex<Option<Instant>>,
}

impl Shared {
    pub fn new(appended: HashMap<(String, u64), Instant>) -> Self {
        Shared {
            appended: Mutex::new(appended),
            dispatched: AtomicUsize::new(0),
            requests: AtomicU64::new(0),
            batches: AtomicU64::new(0),
            dispatch_busy: Mutex::new(Duration::ZERO),
            get_records: Mutex::new((0, Duration::ZERO)),
            all_sent: Mutex::new(None),
        }
    }
}

/// Adds `more` to a shared duration.
pub fn add_time(total: &Mutex<Duration>, more: Duration) {
    if let Ok(mut total) = total.lock() {
        *total += more;
    }
}

pub fn time_of(total: &Mutex<Duration>) -> Duration {
    total.lock().map(|total| *total).unwrap_or_default()
}

/// What one consumer's tasks share: its counts.
#[derive(Default)]
pub struct Tally {
    pub latencies: Mutex<Vec<Duration>>,
    /// The events projected (stream, sequence): each counts once.
    pub seen: Mutex<HashSet<(String, u64)>>,
    /// How many: `seen`'s size.
    pub projected: AtomicUsize,
    /// Messages received, each receipt counted.
    pub receipts: AtomicU64,
    pub hot: Mutex<HotProfile>,
    pub last_projected: Mutex<Option<Instant>>,
    pub invocations: AtomicU64,
    pub receives: AtomicU64,
    pub deletes: AtomicU64,
    pub busy: Mutex<Duration>,
    pub receiving: Mutex<Duration>,
    pub deleting: Mutex<Duration>,
}

impl Tally {
    /// Counts the events a batch projected at `now` (see `consumer.rs`):
    /// each the first time only, its latency from its append (when known)
    /// to `now`, and `now` the last projection.
    pub fn project(&self, shared: &Shared, events: Vec<(String, u64)>, now: Instant) {
        let fresh: Vec<(String, u64)> = match self.seen.lock() {
            Ok(mut seen) => events
                .into_iter()
                .filter(|event| seen.insert(event.clone()))
                .collect(),
            Err(_) => return,
        };
        if fresh.is_empty() {
            return;
        }
        let latencies: Vec<(bool, Duration)> = match shared.appended.lock() {
            Ok(appended) => fresh
                .iter()
                .filter_map(|event| {
                    let at = appended.get(event)?;
                    Some((event.0 == HOT_STREAM, now.duration_since(*at)))
                })
                .collect(),
            Err(_) => Vec::new(),
        };
        if let Ok(mut hot) = self.hot.lock() {
            hot.latencies
                .extend(latencies.iter().filter(|(hot, _)| *hot).map(|(_, at)| *at));
        }
        if let Ok(mut all) = self.latencies.lock() {
            all.extend(latencies.into_iter().map(|(_, at)| at));
        }
        if let Ok(mut last) = self.last_projected.lock() {
            *last = Some(last.map_or(now, |last| last.max(now)));
        }
        self.projected.fetch_add(fresh.len(), Ordering::Relaxed);
    }

    /// Counts what became of the hot stream's messages in `report`, a
    /// batch `killed` or not.
    pub fn profile_hot(&self, report: &BatchReport, killed: bool) {
        let Ok(mut hot) = self.hot.lock() else {
            return;
        };
        let mine: Vec<_> = report
            .messages
            .iter()
            .filter(|message| message.stream == HOT_STREAM)
            .collect();
        if mine.is_empty() {
            return;
        }
        hot.received += mine.len() as u64;
        for message in &mine {
            *hot.outcomes.entry(message.outcome).or_default() += 1;
        }
        if killed {
            hot.killed_batches += 1;
        } else if mine.iter().any(|message| message.outcome.is_failure()) {
            hot.failed_batches += 1;
        }
    }
}
