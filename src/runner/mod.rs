//! The batch runner: what decides which messages are reported failed.
//!
//! It reads every record on its own, groups the records into streams (in
//! batch order), reads every entity and deduplication record the batch needs
//! in one store call, runs the streams concurrently and decides the messages of
//! a stream in order, then settles each stream with one conditional write per
//! entity and one transaction for its stock adjustments, all at once (two
//! sequential round trips per batch), and answers with the SQS partial batch
//! response. It knows nothing of orders or products: events are routed to
//! their handlers by [`domain::decide`].
//!
//! A gap that has been delivered `PARK_AFTER_RECEIVES` times is parked in the
//! table instead of failed, and applied when the events before it arrive;
//! [`entity`] plans each entity's share of a stream with that in mind.

mod entity;

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::time::{Duration, Instant};

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use futures::future::join_all;
use tracing::{Instrument, debug, error, info, info_span, trace, warn};

use crate::domain::{self, Decision, Entity, EntityKey, Event, StockAdjustment, inventory};
use crate::envelope::Record;
use crate::store::{
    Adjusted, Committed, DedupKey, Loaded, MAX_ADJUSTMENTS, ParkedEvent, Store, StoreError, Stored,
};
use entity::{Fetched, Planned};

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
    pub gap_policy: GapPolicy,
    /// A gap is parked from this delivery on (`ApproximateReceiveCount`);
    /// keep it below the queue's `maxReceiveCount`.
    pub park_after_receives: u32,
    /// The most events parked on one entity; past it, gaps fail again.
    pub max_parked_per_stream: usize,
}

impl RunnerConfig {
    /// Whether a gap of this record is parked rather than failed: under
    /// `GapPolicy::Park`, from its `park_after_receives`th delivery (a record
    /// without `ApproximateReceiveCount` counts as a first delivery).
    pub fn parks(&self, record: &Record) -> bool {
        self.gap_policy == GapPolicy::Park
            && record.receive_count.unwrap_or(1) >= self.park_after_receives
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
            max_parked_per_stream: 1000,
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
pub enum BatchError {
    #[error(
        "record {index} of the batch has no messageId, so it cannot be reported failed on its own: \
         failing the invocation so that the whole batch is retried"
    )]
    MissingMessageId { index: usize },
}

/// What became of one message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Outcome {
    Applied,
    Duplicate,
    /// A gap, parked in the table: completed, applied when the gap closes.
    Parked,
    /// A different event for a sequence applied or parked: recorded, completed.
    Conflict,
    Gap,
    NotCreated,
    Invalid,
    /// Not attempted: an earlier message of its stream failed, or the
    /// invocation's deadline was too near.
    Skipped,
    StorageError,
    /// Refused for good by the table (DynamoDB's `ValidationException`, a
    /// stock level leaving the 64-bit range): retrying will not help; the
    /// message goes on to the dead-letter queue.
    Rejected,
}

impl Outcome {
    pub const ALL: [Outcome; 10] = [
        Outcome::Applied,
        Outcome::Duplicate,
        Outcome::Parked,
        Outcome::Conflict,
        Outcome::Gap,
        Outcome::NotCreated,
        Outcome::Invalid,
        Outcome::Skipped,
        Outcome::StorageError,
        Outcome::Rejected,
    ];

    /// Whether the message is listed in `batchItemFailures`.
    pub fn is_failure(self) -> bool {
        !matches!(
            self,
            Outcome::Applied | Outcome::Duplicate | Outcome::Parked | Outcome::Conflict
        )
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Applied => "applied",
            Outcome::Duplicate => "duplicate",
            Outcome::Parked => "parked",
            Outcome::Conflict => "conflict",
            Outcome::Gap => "gap",
            Outcome::NotCreated => "not created",
            Outcome::Invalid => "invalid",
            Outcome::Skipped => "skipped",
            Outcome::StorageError => "storage error",
            Outcome::Rejected => "rejected",
        }
    }
}

impl From<Decision> for Outcome {
    fn from(decision: Decision) -> Self {
        match decision {
            Decision::Applied => Outcome::Applied,
            Decision::Duplicate => Outcome::Duplicate,
            Decision::Gap => Outcome::Gap,
            Decision::NotCreated => Outcome::NotCreated,
        }
    }
}

/// One message's line of the report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessageReport {
    pub message_id: String,
    pub stream: String,
    pub event_type: Option<&'static str>,
    pub sequence: Option<u64>,
    pub outcome: Outcome,
    pub reason: Option<String>,
    /// For a gap: the sequence the entity waits for (the missing event).
    pub waiting_for: Option<u64>,
    /// A gap that was not parked because `max_parked_per_stream` events are
    /// parked on its entity already.
    pub parking_full: bool,
}

/// The outcome of one message, as decided inside its stream.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Verdict {
    outcome: Outcome,
    reason: Option<String>,
    waiting_for: Option<u64>,
    parking_full: bool,
    /// Done only once its step's write is: applied, parked, recorded as a
    /// conflict, or found behind an entity this step moves.
    written: bool,
}

impl Verdict {
    fn new(outcome: Outcome, reason: Option<String>) -> Self {
        Verdict {
            outcome,
            reason,
            waiting_for: None,
            parking_full: false,
            written: matches!(
                outcome,
                Outcome::Applied | Outcome::Parked | Outcome::Conflict
            ),
        }
    }
}

/// What one commit parked on an entity and drained from it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParkingReport {
    pub stream: String,
    pub entity: EntityKey,
    /// Sequences parked.
    pub parked: Vec<u64>,
    /// Parked events applied, in order (without their bodies: a long drain
    /// of large bodies is not held in memory by its report).
    pub drained: Vec<DrainedEvent>,
    /// Events parked on the entity once written.
    pub parked_now: usize,
    /// The sequence the entity waits for, while events are parked on it.
    pub waiting_for: Option<u64>,
    /// How long the oldest event parked on the entity (or drained from it
    /// now) has waited, in seconds.
    pub oldest_parked_age_seconds: Option<u64>,
    /// Parked sequences the entity got past another way (a creation at a
    /// later sequence): removed without being applied.
    pub cleared: Vec<u64>,
    /// Of those, the ones that were another event than the one applied at
    /// their sequence: recorded as conflicts.
    pub conflicts: Vec<u64>,
}

/// A parked event that was applied: what identifies it, not its body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DrainedEvent {
    pub sequence: u64,
    pub event_id: String,
    pub event_type: String,
    /// The message that brought it.
    pub message_id: String,
    /// Epoch seconds.
    pub parked_at: u64,
    /// The body's size, in bytes.
    pub body_bytes: usize,
}

impl From<&ParkedEvent> for DrainedEvent {
    fn from(parked: &ParkedEvent) -> Self {
        DrainedEvent {
            sequence: parked.sequence,
            event_id: parked.event_id.clone(),
            event_type: parked.event_type.clone(),
            message_id: parked.message_id.clone(),
            parked_at: parked.parked_at,
            body_bytes: parked.body.len(),
        }
    }
}

/// What became of every message of a batch, in batch order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BatchReport {
    pub messages: Vec<MessageReport>,
    /// Requests the batch sent to the table.
    pub requests: u64,
    /// Events parked and drained, per commit.
    pub parking: Vec<ParkingReport>,
}

impl BatchReport {
    /// The SQS partial batch response: exactly the failed messages.
    pub fn response(&self) -> SqsBatchResponse {
        let mut response = SqsBatchResponse::default();
        for message in self
            .messages
            .iter()
            .filter(|message| message.outcome.is_failure())
        {
            response.add_failure(message.message_id.clone());
        }
        response
    }

    pub fn count(&self, outcome: Outcome) -> usize {
        self.messages
            .iter()
            .filter(|message| message.outcome == outcome)
            .count()
    }

    /// Parked events applied.
    pub fn drained(&self) -> usize {
        self.parking
            .iter()
            .map(|parking| parking.drained.len())
            .sum()
    }

    /// Conflicts recorded: messages, and parked events found to differ from
    /// the event applied at their sequence.
    pub fn conflicts(&self) -> usize {
        self.count(Outcome::Conflict)
            + self
                .parking
                .iter()
                .map(|parking| parking.conflicts.len())
                .sum::<usize>()
    }

    /// Gaps not parked because their entity had no room left.
    pub fn parking_full(&self) -> usize {
        self.messages
            .iter()
            .filter(|message| message.parking_full)
            .count()
    }

    /// The longest wait of a parked event seen by the batch, in seconds.
    pub fn oldest_parked_age_seconds(&self) -> Option<u64> {
        self.parking
            .iter()
            .filter_map(|parking| parking.oldest_parked_age_seconds)
            .max()
    }
}

/// The batch runner over a store.
#[derive(Debug)]
pub struct Runner<S> {
    store: S,
    config: RunnerConfig,
}

/// Time left for store calls.
#[derive(Debug, Clone, Copy)]
enum Budget {
    Unlimited,
    Left(Duration),
    Exhausted,
}

/// One entity's share of a stream: its messages (positions in the stream, in
/// order), the entity's item as loaded, and the entity as the dry run of the
/// decisions leaves it.
struct EntityPlan {
    key: EntityKey,
    base: Result<Stored, CallError>,
    dry: Option<Entity>,
    positions: Vec<usize>,
}

/// Why a store call did not complete.
#[derive(Debug, Clone)]
pub(crate) enum CallError {
    /// Not attempted: the invocation's deadline is too near.
    Deadline,
    Store(StoreError),
}

impl CallError {
    /// The outcome of the message whose call this was, and why.
    fn outcome(&self) -> (Outcome, String) {
        match self {
            CallError::Deadline => (Outcome::Skipped, DEADLINE_REASON.to_owned()),
            CallError::Store(err @ StoreError::Rejected { .. }) => {
                (Outcome::Rejected, format!("{err}; retrying will not help"))
            }
            CallError::Store(err) => (Outcome::StorageError, err.to_string()),
        }
    }
}

const DEADLINE_REASON: &str = "not attempted: the invocation's deadline is too near";
const SKIPPED_REASON: &str = "not attempted: an earlier message of its stream failed";
const SETTLED_AFTER_FAILURE_REASON: &str = "an earlier message of its stream failed; this one was written at the same time and will be found done";

impl<S: Store> Runner<S> {
    pub fn new(store: S, config: RunnerConfig) -> Self {
        Runner { store, config }
    }

    pub fn store(&self) -> &S {
        &self.store
    }

    /// Runs one batch. Fails only when a record has no message id.
    pub async fn run(
        &self,
        event: &SqsEvent,
        invocation: Invocation,
    ) -> Result<BatchReport, BatchError> {
        let records = event
            .records
            .iter()
            .enumerate()
            .map(|(index, message)| {
                Record::read(message).ok_or(BatchError::MissingMessageId { index })
            })
            .collect::<Result<Vec<Record>, BatchError>>()?;
        let requests_before = self.store.requests();

        // Streams, in the order of their first message; each holds the batch
        // positions of its records.
        let mut streams: Vec<Vec<usize>> = Vec::new();
        let mut stream_of: HashMap<&str, usize> = HashMap::new();
        for (position, record) in records.iter().enumerate() {
            let index = *stream_of.entry(record.stream.as_str()).or_insert_with(|| {
                streams.push(Vec::new());
                streams.len() - 1
            });
            streams[index].push(position);
        }
        trace!(
            records = records.len(),
            streams = streams.len(),
            "batch read"
        );

        // One read for the whole batch: its entities and its deduplication records.
        let events = || {
            records
                .iter()
                .filter_map(|record| record.event.as_ref().ok())
        };
        let keys: Vec<EntityKey> = events().filter_map(Event::entity_key).collect();
        let dedup: Vec<DedupKey> = events().filter_map(dedup_key).collect();
        let loaded = if keys.is_empty() && dedup.is_empty() {
            Ok(Loaded::default())
        } else {
            let load = self.store.load(&keys, &dedup);
            self.timed("BatchGetItem", &invocation, load).await
        };
        if let Err(CallError::Store(err)) = &loaded {
            warn!(error = %err, "loading the batch's entities failed");
        }

        let runs = streams.iter().map(|positions| {
            let stream: Vec<&Record> = positions
                .iter()
                .map(|&position| &records[position])
                .collect();
            let span = info_span!("stream", stream = %stream[0].stream);
            let loaded = &loaded;
            async move { self.run_stream(&stream, loaded, &invocation).await }.instrument(span)
        });
        // One report per record of each stream, in stream order: put them back
        // into batch order.
        let mut slots: Vec<Option<MessageReport>> = vec![None; records.len()];
        let mut parking = Vec::new();
        for (positions, (reports, parked)) in streams.iter().zip(join_all(runs).await) {
            for (&position, report) in positions.iter().zip(reports) {
                slots[position] = Some(report);
            }
            parking.extend(parked);
        }
        let messages: Vec<MessageReport> = slots.into_iter().flatten().collect();
        let requests = self.store.requests().saturating_sub(requests_before);
        let report = BatchReport {
            messages,
            requests,
            parking,
        };
        log_summary(&report);
        Ok(report)
    }

    /// Runs one stream: decides its messages in order up to the first that
    /// cannot be done, then settles them with at most one write per entity and
    /// one transaction for its stock adjustments, all at once.
    async fn run_stream(
        &self,
        stream: &[&Record],
        loaded: &Result<Loaded, CallError>,
        invocation: &Invocation,
    ) -> (Vec<MessageReport>, Vec<ParkingReport>) {
        let mut verdicts: Vec<Option<Verdict>> = vec![None; stream.len()];
        let mut entities: Vec<EntityPlan> = Vec::new();
        let mut adjustments: Vec<(usize, StockAdjustment)> = Vec::new();
        let mut seen: HashSet<&str> = HashSet::new();
        for (position, record) in stream.iter().enumerate() {
            let event = match &record.event {
                Err(invalid) => {
                    error!(
                        message_id = %record.message_id,
                        stream = %record.stream,
                        decision = Outcome::Invalid.as_str(),
                        reason = %invalid,
                        "invalid message"
                    );
                    verdicts[position] =
                        Some(Verdict::new(Outcome::Invalid, Some(invalid.to_string())));
                    break;
                }
                Ok(event) => event,
            };
            if let Event::InventoryAdjusted(adjusted) = event {
                let known = loaded.as_ref().is_ok_and(|loaded| {
                    dedup_key(event).is_some_and(|key| loaded.handled.contains(&key))
                });
                if known || !seen.insert(adjusted.event_id.as_str()) {
                    verdicts[position] = Some(Verdict::new(Outcome::Duplicate, None));
                } else {
                    let adjustment = inventory::on_inventory_adjusted(
                        adjusted,
                        invocation.now,
                        self.config.dedup_ttl_seconds,
                    );
                    adjustments.push((position, adjustment));
                }
                continue;
            }
            let Some(key) = event.entity_key() else { break };
            let index = match entities.iter().position(|plan| plan.key == key) {
                Some(index) => index,
                None => {
                    let base = match loaded {
                        Err(err) => Err(err.clone()),
                        Ok(loaded) => match loaded.entities.get(&key).cloned().transpose() {
                            Err(err) => Err(CallError::Store(err)),
                            Ok(entity) => Ok(Stored {
                                entity,
                                parking: loaded.parking.get(&key).cloned().unwrap_or_default(),
                            }),
                        },
                    };
                    let dry = base.as_ref().ok().and_then(|stored| stored.entity.clone());
                    entities.push(EntityPlan {
                        key,
                        base,
                        dry,
                        positions: Vec::new(),
                    });
                    entities.len() - 1
                }
            };
            let plan = &mut entities[index];
            plan.positions.push(position);
            // The dry run does not know what parking will do: a gap that may
            // be parked, or on an entity with events parked, may be done.
            let maybe_done = match &plan.base {
                Err(_) => false,
                Ok(stored) => {
                    domain::decide(&mut plan.dry, event).is_done()
                        || self.config.parks(record)
                        || !stored.parking.sequences.is_empty()
                }
            };
            if !maybe_done {
                break; // this message fails: the ones after it are not attempted
            }
        }

        // Settle every entity and the stock adjustments concurrently.
        let entity_runs = entities.into_iter().map(
            |EntityPlan {
                 key,
                 base,
                 positions,
                 ..
             }| async move {
                let run: Vec<&Record> =
                    positions.iter().map(|&position| stream[position]).collect();
                let name = run.first().map_or("", |record| record.stream.as_str());
                let settled = self.run_entity(&key, name, &run, base, invocation).await;
                (positions, settled)
            },
        );
        let (settled, stock) = futures::join!(
            join_all(entity_runs),
            self.settle_stock(adjustments, invocation)
        );
        let mut parking = Vec::new();
        for (positions, (outcomes, parked)) in settled {
            for (position, verdict) in positions.into_iter().zip(outcomes) {
                verdicts[position] = Some(verdict);
            }
            parking.extend(parked);
        }
        for (position, verdict) in stock {
            verdicts[position] = Some(verdict);
        }

        // After the first failure in stream order, every message is failed.
        let mut failed = false;
        let mut reports = Vec::with_capacity(stream.len());
        for (record, verdict) in stream.iter().zip(verdicts) {
            let verdict = match verdict {
                Some(verdict) if failed && !verdict.outcome.is_failure() => {
                    // Settled concurrently with the failure before it: done, but
                    // reported failed; its redelivery will find it done.
                    Verdict::new(
                        Outcome::Skipped,
                        Some(SETTLED_AFTER_FAILURE_REASON.to_owned()),
                    )
                }
                Some(verdict) => verdict,
                None => skipped_one(),
            };
            failed |= verdict.outcome.is_failure();
            reports.push(report(record, verdict));
        }
        for message in &reports {
            if message.outcome == Outcome::Conflict {
                error!(
                    message_id = %message.message_id,
                    stream = %message.stream,
                    sequence = message.sequence,
                    decision = message.outcome.as_str(),
                    reason = message.reason.as_deref().unwrap_or(""),
                    "conflicting event recorded"
                );
            }
            if message.parking_full {
                error!(
                    message_id = %message.message_id,
                    stream = %message.stream,
                    sequence = message.sequence,
                    waiting_for = message.waiting_for,
                    max_parked_per_stream = self.config.max_parked_per_stream,
                    "parking full: the gap is failed instead"
                );
            }
        }
        for message in reports
            .iter()
            .filter(|message| message.outcome.is_failure())
        {
            if message.outcome != Outcome::Invalid {
                warn!(
                    message_id = %message.message_id,
                    stream = %message.stream,
                    sequence = message.sequence,
                    waiting_for = message.waiting_for,
                    decision = message.outcome.as_str(),
                    reason = message.reason.as_deref().unwrap_or(""),
                    "message failed"
                );
            }
        }
        (reports, parking)
    }

    /// Writes a stream's stock adjustments, with their deduplication records,
    /// in one transaction (in chunks of [`MAX_ADJUSTMENTS`]); adjustments
    /// another invocation recorded meanwhile are duplicates, and the rest is
    /// written again, a bounded number of times.
    async fn settle_stock(
        &self,
        adjustments: Vec<(usize, StockAdjustment)>,
        invocation: &Invocation,
    ) -> Vec<(usize, Verdict)> {
        let mut verdicts = Vec::with_capacity(adjustments.len());
        let mut chunks = adjustments.chunks(MAX_ADJUSTMENTS);
        while let Some(chunk) = chunks.next() {
            let mut pending: Vec<&(usize, StockAdjustment)> = chunk.iter().collect();
            // Adjustments behind a refused one: not attempted.
            let mut cut: Option<Vec<&(usize, StockAdjustment)>> = None;
            let mut attempt = 0;
            let failure = loop {
                let batch: Vec<StockAdjustment> = pending
                    .iter()
                    .map(|(_, adjustment)| adjustment.clone())
                    .collect();
                match self
                    .timed(
                        "TransactWriteItems",
                        invocation,
                        self.store.adjust_stock(&batch),
                    )
                    .await
                {
                    Ok(Adjusted::Applied) => {
                        verdicts.extend(pending.iter().map(|(position, _)| {
                            (*position, Verdict::new(Outcome::Applied, None))
                        }));
                        break None;
                    }
                    Ok(Adjusted::Duplicates(existing)) => {
                        let mut index = 0;
                        pending.retain(|(position, _)| {
                            let duplicate = existing.contains(&index);
                            index += 1;
                            if duplicate {
                                verdicts.push((*position, Verdict::new(Outcome::Duplicate, None)));
                            }
                            !duplicate
                        });
                        attempt += 1;
                        if pending.is_empty() {
                            break None;
                        }
                        if attempt > self.config.condition_retries {
                            break Some(lost_race(attempt));
                        }
                    }
                    Ok(Adjusted::OutOfRange { sku, on_hand }) => {
                        // In stream order, the first adjustment that takes the
                        // sku out of range is refused; the ones before it are
                        // written again without it, the ones after it wait.
                        let mut running = Some(on_hand.unwrap_or(0));
                        let refused = pending.iter().position(|(_, adjustment)| {
                            if adjustment.sku == sku {
                                running = running.and_then(|at| at.checked_add(adjustment.delta));
                            }
                            running.is_none()
                        });
                        attempt += 1;
                        match refused {
                            Some(at) => {
                                let (position, adjustment) = pending[at];
                                verdicts.push((
                                    *position,
                                    Verdict::new(
                                        Outcome::Rejected,
                                        Some(format!(
                                            "onHand of {sku} is {}: adding {} would take it outside the 64-bit range; retrying will not help",
                                            on_hand.unwrap_or(0),
                                            adjustment.delta
                                        )),
                                    ),
                                ));
                                let after = pending.split_off(at);
                                // Behind it: the rest, and what an earlier
                                // refusal in this chunk cut already.
                                let earlier = cut.take().into_iter().flatten();
                                cut = Some(after.into_iter().skip(1).chain(earlier).collect());
                                if pending.is_empty() {
                                    break None;
                                }
                            }
                            // onHand moved meanwhile: decide again.
                            None if attempt > self.config.condition_retries => {
                                break Some(lost_race(attempt));
                            }
                            None => {}
                        }
                    }
                    Err(err) => break Some(err.outcome()),
                }
            };
            if let Some((outcome, reason)) = failure {
                // Nothing of this chunk was written, nor of the chunks after it.
                let rest = pending
                    .into_iter()
                    .chain(cut.take().into_iter().flatten())
                    .chain(chunks.by_ref().flatten());
                verdicts.extend(
                    rest.map(|(position, _)| {
                        (*position, Verdict::new(outcome, Some(reason.clone())))
                    }),
                );
                break;
            }
            if let Some(cut) = cut {
                // After a refused adjustment, the stream stops.
                let rest = cut.into_iter().chain(chunks.by_ref().flatten());
                verdicts.extend(rest.map(|(position, _)| (*position, skipped_one())));
                break;
            }
        }
        verdicts
    }

    /// Decides a run of messages on one entity and writes it: one
    /// conditional write in the common case; a transaction when it parks,
    /// drains or records conflicts, in steps of at most one transaction's
    /// size. Returns one verdict per message of the run, and what each
    /// commit parked and drained.
    async fn run_entity(
        &self,
        key: &EntityKey,
        stream: &str,
        run: &[&Record],
        loaded: Result<Stored, CallError>,
        invocation: &Invocation,
    ) -> (Vec<Verdict>, Vec<ParkingReport>) {
        let mut stored = match loaded {
            Ok(stored) => stored,
            Err(err) => {
                let (outcome, reason) = err.outcome();
                return (
                    fail_from(skipped(run.len()), 0, outcome, &reason),
                    Vec::new(),
                );
            }
        };
        let mut verdicts: Vec<Verdict> = Vec::with_capacity(run.len());
        let mut parking = Vec::new();
        let mut fetched = Fetched::new();
        let mut races = 0;
        loop {
            let rest = &run[verdicts.len()..];
            let planned = entity::plan(key, &stored, rest, &fetched, &self.config, invocation.now);
            let step = match planned {
                Planned::Fetch(sequences) => {
                    let read = self.store.parked(key, &sequences);
                    match self.timed("BatchGetItem", invocation, read).await {
                        Ok(events) => {
                            for sequence in sequences {
                                fetched.insert(sequence, None);
                            }
                            for event in events {
                                fetched.insert(event.sequence, Some(event));
                            }
                            continue;
                        }
                        Err(err) => {
                            let (outcome, reason) = err.outcome();
                            verdicts.extend(fail_from(skipped(rest.len()), 0, outcome, &reason));
                            break;
                        }
                    }
                }
                Planned::Step(step) => step,
            };
            if let Some(sequence) = step.stuck {
                error!(
                    sequence,
                    "a parked event that follows the entity cannot be applied (missing or unreadable item): it stays parked"
                );
            }
            if step.commit.items() == 0 {
                verdicts.extend(step.verdicts);
                break; // nothing to write
            }
            let writes = |verdict: &Verdict| verdict.written;
            let operation = if step.commit.touches_entity() && step.commit.items() == 1 {
                "UpdateItem"
            } else {
                "TransactWriteItems"
            };
            match self
                .timed(operation, invocation, self.store.commit(&step.commit))
                .await
            {
                Ok(Committed::Written) => {
                    if step.commit.changes_parking() {
                        let report = parking_report(stream, key, &step, invocation.now);
                        log_parking(&report);
                        parking.push(report);
                    }
                    verdicts.extend(step.verdicts);
                    stored = step.after;
                    // Parked events read before, still parked and not parked again now.
                    fetched.retain(|sequence, _| {
                        stored.parking.sequences.contains(sequence)
                            && !step
                                .commit
                                .park
                                .iter()
                                .any(|parked| parked.sequence == *sequence)
                    });
                    if !step.more {
                        break;
                    }
                }
                Ok(Committed::Conflict { current }) => {
                    races += 1;
                    if races > self.config.condition_retries {
                        let reason = format!(
                            "the conditional write lost the race {races} times: another invocation keeps writing this entity"
                        );
                        let from = step.verdicts.iter().position(writes).unwrap_or(0);
                        verdicts.extend(fail_from(
                            step.verdicts,
                            from,
                            Outcome::StorageError,
                            &reason,
                        ));
                        break;
                    }
                    debug!(
                        expected = ?step.commit.expected.sequence,
                        found = ?current.entity.as_ref().map(Entity::sequence),
                        parked = current.parking.sequences.len(),
                        "conditional write lost a race; deciding again"
                    );
                    stored = current;
                    // What was read of parked events may be stale now.
                    fetched.clear();
                }
                Err(err) => {
                    let (outcome, reason) = err.outcome();
                    if !step.drained.is_empty() {
                        warn!(
                            stream,
                            reason = %reason,
                            "draining parked events stopped: the next event of the stream, or the next sweep, goes on"
                        );
                    }
                    let from = step.verdicts.iter().position(writes).unwrap_or(0);
                    verdicts.extend(fail_from(step.verdicts, from, outcome, &reason));
                    break;
                }
            }
        }
        // A step cut short by an error leaves the rest of the run unsettled.
        if verdicts.len() < run.len() {
            verdicts.resize_with(run.len(), skipped_one);
        }
        (verdicts, parking)
    }

    /// Applies the parked events that follow an entity (left by a drain
    /// that the deadline or an error cut short), in bounded steps. Returns
    /// what each step drained.
    pub async fn drain(
        &self,
        key: &EntityKey,
        invocation: &Invocation,
    ) -> Result<Vec<ParkingReport>, StoreError> {
        let load = self.store.load(std::slice::from_ref(key), &[]);
        let mut loaded = match self.timed("BatchGetItem", invocation, load).await {
            Ok(loaded) => loaded,
            Err(CallError::Store(err)) => return Err(err),
            Err(CallError::Deadline) => return Ok(Vec::new()),
        };
        let stored = Stored {
            entity: loaded.entities.remove(key).transpose()?,
            parking: loaded.parking.remove(key).unwrap_or_default(),
        };
        let stream = match key {
            EntityKey::Order(id) | EntityKey::Product(id) => id.as_str(),
        };
        let (_, parking) = self
            .run_entity(key, stream, &[], Ok(stored), invocation)
            .await;
        Ok(parking)
    }

    fn budget(&self, invocation: &Invocation) -> Budget {
        match invocation.deadline {
            None => Budget::Unlimited,
            Some(deadline) => {
                match deadline
                    .checked_duration_since(Instant::now())
                    .and_then(|left| left.checked_sub(self.config.deadline_margin))
                {
                    Some(left) if !left.is_zero() => Budget::Left(left),
                    _ => Budget::Exhausted,
                }
            }
        }
    }

    /// Runs a store call within the time left before the deadline; does not
    /// start it when there is none.
    pub(crate) async fn timed<T>(
        &self,
        operation: &'static str,
        invocation: &Invocation,
        call: impl Future<Output = Result<T, StoreError>>,
    ) -> Result<T, CallError> {
        match self.budget(invocation) {
            Budget::Unlimited => call.await.map_err(CallError::Store),
            Budget::Left(left) => match tokio::time::timeout(left, call).await {
                Ok(result) => result.map_err(CallError::Store),
                Err(_) => Err(CallError::Store(StoreError::Timeout {
                    operation,
                    millis: left.as_millis(),
                })),
            },
            Budget::Exhausted => Err(CallError::Deadline),
        }
    }
}

/// The failure of a stock transaction that kept losing to other invocations.
fn lost_race(attempts: u32) -> (Outcome, String) {
    (
        Outcome::StorageError,
        format!(
            "the stock transaction lost the race {attempts} times: another invocation keeps recording these events"
        ),
    )
}

/// Outcomes before `from` stand (duplicates decided on a consistent read);
/// the message at `from` gets `outcome` with `reason`; the ones after it are
/// skipped.
fn fail_from(outcomes: Vec<Verdict>, from: usize, outcome: Outcome, reason: &str) -> Vec<Verdict> {
    outcomes
        .into_iter()
        .enumerate()
        .map(|(index, decided)| match index.cmp(&from) {
            std::cmp::Ordering::Less => decided,
            std::cmp::Ordering::Equal => Verdict::new(outcome, Some(reason.to_owned())),
            std::cmp::Ordering::Greater => skipped_one(),
        })
        .collect()
}

/// The deduplication record an event is guarded by, if any.
fn dedup_key(event: &Event) -> Option<DedupKey> {
    match event {
        Event::InventoryAdjusted(adjusted) => Some(DedupKey {
            event_id: adjusted.event_id.clone(),
            handler: inventory::STOCK_HANDLER,
        }),
        _ => None,
    }
}

/// What a written step parked and drained.
fn parking_report(stream: &str, key: &EntityKey, step: &entity::Step, now: u64) -> ParkingReport {
    let parking = &step.after.parking;
    let oldest = step
        .drained
        .iter()
        .map(|parked| parked.parked_at)
        .chain(parking.since)
        .min();
    ParkingReport {
        stream: stream.to_owned(),
        entity: key.clone(),
        parked: step
            .commit
            .park
            .iter()
            .map(|parked| parked.sequence)
            .collect(),
        drained: step.drained.iter().map(DrainedEvent::from).collect(),
        parked_now: parking.sequences.len(),
        waiting_for: (!parking.sequences.is_empty()).then(|| {
            step.after
                .entity
                .as_ref()
                .map_or(1, |entity| entity.sequence().saturating_add(1))
        }),
        oldest_parked_age_seconds: oldest.map(|at| now.saturating_sub(at)),
        cleared: step.cleared.clone(),
        conflicts: step.parked_conflicts.clone(),
    }
}

fn log_parking(report: &ParkingReport) {
    let drained: Vec<u64> = report
        .drained
        .iter()
        .map(|parked| parked.sequence)
        .collect();
    if !report.cleared.is_empty() {
        let level_error = !report.conflicts.is_empty();
        if level_error {
            error!(
                stream = %report.stream,
                cleared = ?report.cleared,
                conflicts = ?report.conflicts,
                "parked events behind the entity cleared; those that differ from the event applied at their sequence recorded as conflicts"
            );
        } else {
            warn!(
                stream = %report.stream,
                cleared = ?report.cleared,
                "parked events behind the entity cleared (duplicates)"
            );
        }
    }
    info!(
        stream = %report.stream,
        parked = ?report.parked,
        drained = ?drained,
        parked_now = report.parked_now,
        waiting_for = report.waiting_for,
        oldest_parked_age_seconds = report.oldest_parked_age_seconds,
        "{}",
        if !drained.is_empty() {
            "parked events drained"
        } else if !report.parked.is_empty() {
            "events parked"
        } else {
            "parked events cleared"
        }
    );
}

fn skipped_one() -> Verdict {
    Verdict::new(Outcome::Skipped, Some(SKIPPED_REASON.to_owned()))
}

fn skipped(len: usize) -> Vec<Verdict> {
    vec![skipped_one(); len]
}

fn report(record: &Record, verdict: Verdict) -> MessageReport {
    let event = record.event.as_ref().ok();
    MessageReport {
        message_id: record.message_id.clone(),
        stream: record.stream.clone(),
        event_type: event.map(Event::type_name),
        sequence: event.and_then(Event::sequence),
        outcome: verdict.outcome,
        reason: verdict.reason,
        waiting_for: verdict.waiting_for,
        parking_full: verdict.parking_full,
    }
}

fn log_summary(report: &BatchReport) {
    let count = |outcome| report.count(outcome);
    info!(
        messages = report.messages.len(),
        applied = count(Outcome::Applied),
        duplicate = count(Outcome::Duplicate),
        parked = count(Outcome::Parked),
        conflict = count(Outcome::Conflict),
        drained = report.drained(),
        gap = count(Outcome::Gap),
        not_created = count(Outcome::NotCreated),
        invalid = count(Outcome::Invalid),
        skipped = count(Outcome::Skipped),
        storage_error = count(Outcome::StorageError),
        rejected = count(Outcome::Rejected),
        failed = report.response().batch_item_failures.len(),
        dynamodb_requests = report.requests,
        "batch done"
    );
}
