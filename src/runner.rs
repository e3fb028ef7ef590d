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

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::time::{Duration, Instant};

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use futures::future::join_all;
use tracing::{Instrument, debug, error, info, info_span, warn};

use crate::domain::{self, Decision, Entity, EntityKey, Event, StockAdjustment, inventory};
use crate::envelope::Record;
use crate::store::{Adjusted, DedupKey, Loaded, MAX_ADJUSTMENTS, Saved, Store, StoreError};

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
}

impl Default for RunnerConfig {
    fn default() -> Self {
        RunnerConfig {
            dedup_ttl_seconds: 7 * 24 * 60 * 60,
            deadline_margin: Duration::from_millis(500),
            condition_retries: 3,
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
    Gap,
    NotCreated,
    Invalid,
    /// Not attempted: an earlier message of its stream failed, or the
    /// invocation's deadline was too near.
    Skipped,
    StorageError,
}

impl Outcome {
    pub const ALL: [Outcome; 7] = [
        Outcome::Applied,
        Outcome::Duplicate,
        Outcome::Gap,
        Outcome::NotCreated,
        Outcome::Invalid,
        Outcome::Skipped,
        Outcome::StorageError,
    ];

    /// Whether the message is listed in `batchItemFailures`.
    pub fn is_failure(self) -> bool {
        !matches!(self, Outcome::Applied | Outcome::Duplicate)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Applied => "applied",
            Outcome::Duplicate => "duplicate",
            Outcome::Gap => "gap",
            Outcome::NotCreated => "not created",
            Outcome::Invalid => "invalid",
            Outcome::Skipped => "skipped",
            Outcome::StorageError => "storage error",
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
}

/// The outcome of one message, as decided inside its stream.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Verdict {
    outcome: Outcome,
    reason: Option<String>,
    waiting_for: Option<u64>,
}

impl Verdict {
    fn new(outcome: Outcome, reason: Option<String>) -> Self {
        Verdict {
            outcome,
            reason,
            waiting_for: None,
        }
    }
}

/// What became of every message of a batch, in batch order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BatchReport {
    pub messages: Vec<MessageReport>,
    /// Requests the batch sent to the table.
    pub requests: u64,
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
/// order), the entity as loaded, and as the dry run of the decisions leaves it.
struct EntityPlan {
    key: EntityKey,
    base: Result<Option<Entity>, CallError>,
    dry: Option<Entity>,
    positions: Vec<usize>,
}

/// Why a store call did not complete.
#[derive(Debug, Clone)]
enum CallError {
    /// Not attempted: the invocation's deadline is too near.
    Deadline,
    Store(StoreError),
}

impl CallError {
    /// The outcome of the message whose call this was, and why.
    fn outcome(&self) -> (Outcome, String) {
        match self {
            CallError::Deadline => (Outcome::Skipped, DEADLINE_REASON.to_owned()),
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
        for (positions, reports) in streams.iter().zip(join_all(runs).await) {
            for (&position, report) in positions.iter().zip(reports) {
                slots[position] = Some(report);
            }
        }
        let messages: Vec<MessageReport> = slots.into_iter().flatten().collect();
        let requests = self.store.requests().saturating_sub(requests_before);
        let report = BatchReport { messages, requests };
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
    ) -> Vec<MessageReport> {
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
                        Ok(loaded) => loaded
                            .entities
                            .get(&key)
                            .cloned()
                            .transpose()
                            .map_err(CallError::Store),
                    };
                    let dry = base.as_ref().ok().cloned().flatten();
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
            if plan.base.is_err() || !domain::decide(&mut plan.dry, event).is_done() {
                break; // this message fails: the ones after it are not attempted
            }
        }

        // Settle every entity and the stock adjustments concurrently.
        let entity_runs = entities.into_iter().map(
            |EntityPlan {
                 base, positions, ..
             }| async move {
                let run: Vec<&Record> =
                    positions.iter().map(|&position| stream[position]).collect();
                (positions, self.run_entity(&run, base, invocation).await)
            },
        );
        let (settled, stock) = futures::join!(
            join_all(entity_runs),
            self.settle_stock(adjustments, invocation)
        );
        for (positions, outcomes) in settled {
            for (position, verdict) in positions.into_iter().zip(outcomes) {
                verdicts[position] = Some(verdict);
            }
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
        reports
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
                            break Some((
                                Outcome::StorageError,
                                format!(
                                    "the stock transaction lost the race {attempt} times: another invocation keeps recording these events"
                                ),
                            ));
                        }
                    }
                    Err(err) => break Some(err.outcome()),
                }
            };
            if let Some((outcome, reason)) = failure {
                // Nothing of this chunk was written, nor of the chunks after it.
                let rest = pending.into_iter().chain(chunks.by_ref().flatten());
                verdicts.extend(
                    rest.map(|(position, _)| {
                        (*position, Verdict::new(outcome, Some(reason.clone())))
                    }),
                );
                break;
            }
        }
        verdicts
    }

    /// Decides a run of messages on one entity and persists it with one
    /// conditional write. Returns one outcome per message of the run.
    async fn run_entity(
        &self,
        run: &[&Record],
        loaded: Result<Option<Entity>, CallError>,
        invocation: &Invocation,
    ) -> Vec<Verdict> {
        let mut base = match loaded {
            Ok(entity) => entity,
            Err(err) => {
                let (outcome, reason) = err.outcome();
                return fail_from(skipped(run.len()), 0, outcome, &reason);
            }
        };
        let mut attempt = 0;
        loop {
            let mut slot = base.clone();
            let mut outcomes = Vec::with_capacity(run.len());
            for record in run {
                let Ok(event) = &record.event else { break };
                let before = slot.as_ref().map(Entity::sequence);
                let decision = domain::decide(&mut slot, event);
                let at = before.unwrap_or(0);
                outcomes.push(match decision {
                    Decision::Gap => Verdict {
                        outcome: Outcome::Gap,
                        reason: Some(format!(
                            "gap: the entity is at sequence {at}, waiting for {}",
                            at + 1
                        )),
                        waiting_for: Some(at + 1),
                    },
                    Decision::NotCreated => Verdict::new(
                        Outcome::NotCreated,
                        Some("the entity has not been created yet".to_owned()),
                    ),
                    done => Verdict::new(Outcome::from(done), None),
                });
                if !decision.is_done() {
                    break;
                }
            }
            outcomes.extend(skipped(run.len() - outcomes.len()));

            let Some(first_applied) = outcomes
                .iter()
                .position(|verdict| verdict.outcome == Outcome::Applied)
            else {
                return outcomes; // nothing to write
            };
            let Some(entity) = slot else {
                return outcomes;
            };
            let expected = base.as_ref().map(Entity::sequence);
            match self
                .timed("UpdateItem", invocation, self.store.save(&entity, expected))
                .await
            {
                Ok(Saved::Written) => return outcomes,
                Ok(Saved::Conflict { current }) => {
                    attempt += 1;
                    if attempt > self.config.condition_retries {
                        let reason = format!(
                            "the conditional write lost the race {attempt} times: another invocation keeps writing this entity"
                        );
                        return fail_from(outcomes, first_applied, Outcome::StorageError, &reason);
                    }
                    debug!(
                        expected = ?expected,
                        found = ?current.as_ref().map(Entity::sequence),
                        "conditional write lost a race; deciding again"
                    );
                    base = current;
                }
                Err(err) => {
                    let (outcome, reason) = err.outcome();
                    return fail_from(outcomes, first_applied, outcome, &reason);
                }
            }
        }
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
    async fn timed<T>(
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
    }
}

fn log_summary(report: &BatchReport) {
    let count = |outcome| report.count(outcome);
    info!(
        messages = report.messages.len(),
        applied = count(Outcome::Applied),
        duplicate = count(Outcome::Duplicate),
        gap = count(Outcome::Gap),
        not_created = count(Outcome::NotCreated),
        invalid = count(Outcome::Invalid),
        skipped = count(Outcome::Skipped),
        storage_error = count(Outcome::StorageError),
        failed = report.response().batch_item_failures.len(),
        dynamodb_requests = report.requests,
        "batch done"
    );
}
