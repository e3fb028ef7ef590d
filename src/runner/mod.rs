//! The batch runner: what decides which messages are reported failed.
//!
//! It reads every record on its own, groups the records into streams (in
//! batch order), reads every entity and deduplication record the batch needs
//! in one store call, decides the messages of each stream in order (its dry
//! run), then settles every stream with one conditional write per entity and
//! one transaction for its deduplicated effects, all at once (two sequential
//! round trips per batch), and answers with the SQS partial batch
//! response. It knows no domain: each event carries its handling, as the
//! domain's registration ([`crate::domain::Events`]) answered when it was read.
//!
//! A gap whose events the event store holds is closed at once: they are
//! read from it and applied first, in the same write (`fill.rs`). A gap
//! that has been delivered `PARK_AFTER_RECEIVES` times is parked in the
//! table instead of failed, and applied when the events before it arrive.
//!
//! | file | what it does |
//! | --- | --- |
//! | `mod.rs` | the configuration, and [`Runner::run`]: a batch's phases in order |
//! | `batch.rs` | those phases: records read, streams, the one load and each stream's share, the report's lines |
//! | `fill.rs` | a gap's events read from the event store and decided first, in the same write |
//! | `dry_run.rs` | a stream decided in order without writing: where it stops, each entity's share of it |
//! | `stream.rs` | the streams settled all at once, after each one's dry run; each stream's verdicts in order |
//! | `answer.rs` | a handler's answer beyond its entity checked (appends, deadline, effects): the planner's, the sweep's and the test kit's words |
//! | `plan/` | the pure planner of one entity's share: the guard's answers, parking, draining, conflicts |
//! | `warm.rs` | the items this process last wrote, kept so that a hot stream's next batch is not read first |
//! | `parking.rs` | what a commit parked and drained, reported and logged |
//! | `sealed.rs` | personal data: the batch's keys fetched and its sealed records read again; an erasure's conflict records deleted |
//! | `settle.rs` | that share written: fetch, commit, decide again after a lost race; the sweep's drain |
//! | `additions.rs` | a stream's deduplicated effects (counter additions), in one transaction |
//! | `deadline.rs` | store calls within the invocation's deadline |
//! | `due.rs` | a process's due deadlines fired, each once, by the sweep |
//! | `verdict.rs` | one message's verdict inside its stream |
//! | `report.rs` | the outcomes and reports the response, logs and metrics are made from |

mod additions;
pub(crate) mod answer;
mod batch;
mod deadline;
mod dry_run;
mod due;
mod fill;
mod parking;
mod plan;
mod report;
mod sealed;
mod settle;
mod stream;
mod verdict;
mod warm;

use std::time::{Duration, Instant};

use aws_lambda_events::event::sqs::SqsEvent;
use tracing::{info, trace, warn};

use crate::domain::Domain;
use crate::envelope::Record;
use crate::store::{Loaded, Store};
pub use additions::addition;
pub(crate) use deadline::CallError;
pub(crate) use due::fire_due;
pub use fill::MAX_FILL;
pub(crate) use report::stuck_handler_errors;
pub use report::{
    BatchReport, DrainedEvent, FilledReport, MessageReport, Outcome, ParkingReport, StuckEvent,
};

/// What a sweep did with the deadlines that were due.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeadlineReport {
    /// Deadlines fired: their steps written.
    pub fired: u64,
    /// Deadlines whose step appended at an exact sequence to a stream that
    /// had moved: nothing written; each fires again at the next sweep if
    /// the state still keeps it.
    pub moved: u64,
    /// Deadlines not fired: a store error, or a handler that broke its
    /// rule (logged); each is tried again at the next sweep.
    pub failed: u64,
    /// Whether the sweep's time ran out before every due deadline was tried.
    pub cut_short: bool,
    /// Where the next sweep goes on, when the time ran out
    /// ([`crate::store::SweepMark::deadlines`]).
    pub resume_at: Option<crate::store::DueCursor>,
    /// Why deadlines failed, each naming its state's item (a handler that
    /// broke its rule, in the words of its fault; a store error): the
    /// first [`DeadlineReport::MAX_PROBLEMS`].
    pub problems: Vec<String>,
}

impl DeadlineReport {
    /// The most reasons of failed deadlines a report keeps.
    pub const MAX_PROBLEMS: usize = 20;

    /// Keeps why a deadline failed, if there is room.
    pub(crate) fn problem(&mut self, problem: String) {
        if self.problems.len() < Self::MAX_PROBLEMS {
            self.problems.push(problem);
        }
    }
}

/// What a gap that keeps coming back becomes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GapPolicy {
    /// Parked in the table once delivered `park_after_receives` times, and
    /// applied when the missing events arrive (the default).
    Park,
    /// Always reported failed: the message is retried until the queue's
    /// `maxReceiveCount` sends it to the dead-letter queue.
    Retry,
}

/// How the runner behaves; see [`crate::config`] for the environment.
#[derive(Debug, Clone)]
pub struct RunnerConfig {
    /// How long a deduplication record is kept (`expiresAt` = now + this).
    pub dedup_ttl_seconds: u64,
    /// Time kept in hand before the invocation's deadline: work that would
    /// start later is reported failed instead of being attempted.
    pub deadline_margin: Duration,
    /// How often a run is decided again after its conditional write lost a
    /// race, from the item the failed condition returned.
    pub condition_retries: u32,
    /// What a gap that keeps coming back becomes.
    pub gap_policy: GapPolicy,
    /// A gap is parked from this delivery on (`ApproximateReceiveCount`);
    /// keep it below the queue's `maxReceiveCount`.
    pub park_after_receives: u32,
    /// The most events parked on one entity; past it, gaps fail again.
    pub max_parked_per_entity: usize,
    /// Whether a process's steps append what their handlers answer (and
    /// not only move the state and the deadline): `false` for a rebuild
    /// into an embedded table, which sends nothing anywhere.
    pub appends: bool,
    /// A process's start, epoch seconds: its steps react (append) only to
    /// events sent at or after it ([`Record::sent_at`]; a record without it
    /// reacts). A process's `rebuild` into its table sets it, so that what
    /// the store held before the process existed is folded without
    /// reacting, and what was appended since is reacted to, once, whether
    /// the rebuild or a live delivery applies it. `None`: every event.
    pub reacts_from: Option<u64>,
    /// The most entity items kept as this process last wrote them, so that
    /// a hot stream's next batch is decided without reading (`warm.rs`);
    /// `0`: every batch reads.
    pub warm_entities: usize,
}

impl RunnerConfig {
    /// Whether a gap of this record is parked rather than failed: under
    /// `GapPolicy::Park`, from its `park_after_receives`th delivery (a record
    /// without `ApproximateReceiveCount` counts as a first delivery).
    pub fn parks(&self, record: &Record) -> bool {
        self.gap_policy == GapPolicy::Park
            && record.receive_count.unwrap_or(1) >= self.park_after_receives
    }

    /// Whether a process's step reacts to this record's event: appends
    /// are on, and the event was sent at or after the process's start.
    pub fn reacts(&self, record: &Record) -> bool {
        self.appends
            && match (self.reacts_from, record.sent_at) {
                (Some(start), Some(sent)) => sent >= start,
                _ => true,
            }
    }
}

impl Default for RunnerConfig {
    fn default() -> Self {
        RunnerConfig {
            // 35 days: the queue's and the dead-letter queue's retention (14 days
            // each, as template.yaml sets them) and a week to redrive.
            dedup_ttl_seconds: 35 * 24 * 60 * 60,
            deadline_margin: Duration::from_millis(500),
            condition_retries: 3,
            gap_policy: GapPolicy::Park,
            park_after_receives: 3,
            max_parked_per_entity: 1000,
            appends: true,
            reacts_from: None,
            warm_entities: 1000,
        }
    }
}

/// The clock of one invocation.
#[derive(Debug, Clone, Copy)]
pub struct Invocation {
    /// When the invocation must have answered; `None` for no limit (replay).
    pub deadline: Option<Instant>,
    /// Now, in epoch seconds (for deduplication records).
    pub now: u64,
}

/// A batch that cannot be answered message by message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BatchError {
    /// A record has no `messageId`: the invocation fails, so the whole batch is
    /// retried.
    #[error(
        "record {index} of the batch has no messageId, so it cannot be reported failed on its own: \
         failing the invocation so that the whole batch is retried"
    )]
    MissingMessageId {
        /// The record's position in the batch, from 0.
        index: usize,
    },
}

/// The batch runner over a store.
#[derive(Debug)]
pub struct Runner<S> {
    domain: Domain,
    store: S,
    config: RunnerConfig,
    warm: warm::Warm,
}

impl<S: Store> Runner<S> {
    /// A runner of `domain`'s messages over `store`, configured by `config`.
    ///
    /// # Panics
    ///
    /// When the domain's declarations cannot work ([`Domain::check`]): the
    /// binaries check first and refuse to start with the same message.
    pub fn new(domain: Domain, store: S, config: RunnerConfig) -> Self {
        if let Err(err) = domain.check() {
            panic!("{err}");
        }
        Runner {
            domain,
            store,
            warm: warm::Warm::new(config.warm_entities),
            config,
        }
    }

    /// The store it reads and writes.
    pub fn store(&self) -> &S {
        &self.store
    }

    /// The domain whose messages it reads.
    pub fn domain(&self) -> &Domain {
        &self.domain
    }

    /// Runs one batch. Fails only when a record has no message id.
    pub async fn run(
        &self,
        event: &SqsEvent,
        invocation: Invocation,
    ) -> Result<BatchReport, BatchError> {
        let mut records = batch::read_records(event, &self.domain)?;
        self.open_sealed(event, &mut records).await;
        self.forget_conflicts(&records, &invocation).await;
        let requests_before = self.store.requests();
        let streams = batch::streams_of(&records);
        trace!(
            records = records.len(),
            streams = streams.len(),
            "batch read"
        );

        // One read for the whole batch: its entities and its deduplication
        // records, split into each stream's share.
        let wanted = batch::wanted(&records);
        // Items this process wrote last are not read again (`warm.rs`).
        let (cold, warm) = self.warm_split(&wanted.keys, &wanted.sequences);
        let loaded = if cold.is_empty() && wanted.dedup.is_empty() {
            Ok(Loaded::default())
        } else {
            let load = self.store.load(&cold, &wanted.dedup);
            self.timed("BatchGetItem", &invocation, load).await
        };
        if let Err(CallError::Store(err)) = &loaded {
            warn!(error = %err, "loading the batch's entities failed");
        }
        let (mut shares, handled) = batch::shares(loaded, wanted, warm, &streams);

        // Each stream decided in order without writing (its dry run), then
        // all of them settled at once. The records, stream after stream.
        let ordered: Vec<&Record> = streams
            .order()
            .iter()
            .map(|&position| &records[position])
            .collect();
        let mut verdicts = vec![None; records.len()];
        let mut entities = Vec::with_capacity(streams.len());
        let mut additions = Vec::new();
        for (index, (range, share)) in streams.ranges().zip(shares.each()).enumerate() {
            let added = self.dry_run(
                index,
                &ordered[range.clone()],
                share,
                &handled,
                &invocation,
                &mut verdicts[range],
                &mut entities,
            );
            if !added.is_empty() {
                additions.push((index, added));
            }
        }
        let planned = stream::Planned {
            records: &ordered,
            streams: &streams,
            verdicts,
            entities,
            additions,
        };
        let (settled, parking, filled) = self.settle_streams(planned, &invocation).await;
        // One verdict per record, stream after stream: put them back into
        // batch order.
        let mut verdicts = vec![None; records.len()];
        for (&position, verdict) in streams.order().iter().zip(settled) {
            verdicts[position] = Some(verdict);
        }
        drop(ordered);
        let report = BatchReport {
            messages: batch::message_reports(records, verdicts),
            requests: self.store.requests().saturating_sub(requests_before),
            parking,
            filled,
        };
        log_summary(&report);
        Ok(report)
    }
}

fn log_summary(report: &BatchReport) {
    let count = |outcome| report.count(outcome);
    info!(
        messages = report.messages.len(),
        applied = count(Outcome::Applied),
        duplicate = count(Outcome::Duplicate),
        parked = count(Outcome::Parked),
        ignored = count(Outcome::Ignored),
        conflict = count(Outcome::Conflict),
        drained = report.drained(),
        filled = report.filled_events(),
        gap = count(Outcome::Gap),
        not_created = count(Outcome::NotCreated),
        handler_error = report.handler_errors(),
        invalid = count(Outcome::Invalid),
        skipped = count(Outcome::Skipped),
        storage_error = count(Outcome::StorageError),
        rejected = count(Outcome::Rejected),
        failed = report.response().batch_item_failures.len(),
        dynamodb_requests = report.requests,
        "batch done"
    );
}
