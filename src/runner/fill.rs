//! A gap closed from the event store: when a run's first message is ahead
//! of its entity, the events between are read from the event store (they
//! are all there: the store holds every event before its change record
//! exists) and decided first, in order, in the same write. A stream that
//! reaches the consumer out of order (a hot stream the store's change
//! stream split over two shards, read in parallel) is applied at its first
//! delivery, with no visibility timeout spent; its earlier messages, when
//! they arrive, are duplicates.
//!
//! The gap is the run's first message ahead of its entity as the run's
//! messages before it leave it (a batch of a stream read from two shards in
//! parallel meets it mid-run); the events read in go just before it. Only
//! what the consumer would apply is read in: the events that follow the
//! entity, contiguous, each readable and on the entity, at most
//! [`MAX_FILL`] a run. A gap whose events the store does not hold (a
//! consumer fed directly), or whose first missing event the consumer would
//! not apply (refused, unreadable), is a gap as before: retried, then
//! parked from its `PARK_AFTER_RECEIVES`th delivery, when no fill is tried
//! after the first delivery (so that what the fill cannot close is parked
//! as it always was; `PARK_AFTER_RECEIVES=1` reads the store, then parks).

use aws_lambda_events::event::sqs::SqsEvent;
use tracing::{info, warn};

use super::deadline::CallError;
use super::verdict::{SKIPPED_REASON, Verdict};
use super::{FilledReport, GapPolicy, Invocation, Outcome, ParkingReport, Runner};
use crate::entity::EntityKey;
use crate::envelope::Record;
use crate::handling::Decision;
use crate::producer::StoredEvent;
use crate::store::{Store, Stored};

/// One entity's run settled: a verdict per message of the run, what each
/// commit parked and drained, and what was read from the event store.
pub(super) struct Settled {
    pub(super) verdicts: Vec<Verdict>,
    pub(super) parking: Vec<ParkingReport>,
    pub(super) filled: Option<FilledReport>,
}

/// The most events read from the event store for one run: one read of at
/// most 1 MB, one conditional write of the entity.
pub const MAX_FILL: usize = 100;

/// The message id a record read from the event store goes by in logs.
pub(super) fn fill_message_id(stream: &str, sequence: u64) -> String {
    format!("event-store:{stream}:{sequence}")
}

impl<S: Store> Runner<S> {
    /// Settles one entity's run ([`Runner::run_entity`]), the events its
    /// first message waits for read from the event store and decided
    /// before it, in the same write.
    pub(super) async fn settle_entity(
        &self,
        key: &EntityKey,
        stream: &str,
        run: &[&Record],
        loaded: Result<Stored, CallError>,
        invocation: &Invocation,
    ) -> Settled {
        let (at, filled) = match &loaded {
            Ok(stored) => self.fill(key, stream, run, stored, invocation).await,
            Err(_) => (0, Vec::new()),
        };
        if filled.is_empty() {
            let (verdicts, parking) = self.run_entity(key, stream, run, loaded, invocation).await;
            return Settled {
                verdicts,
                parking,
                filled: None,
            };
        }
        // The events read in go just before the message that waits for
        // them: the run's messages before it come first, in order.
        let joined: Vec<&Record> = run[..at]
            .iter()
            .copied()
            .chain(filled.iter())
            .chain(run[at..].iter().copied())
            .collect();
        let (mut messages, parking) = self
            .run_entity(key, stream, &joined, loaded, invocation)
            .await;
        let verdicts: Vec<Verdict> = messages.drain(at..at + filled.len()).collect();
        let sequence = |record: &Record| {
            record
                .event
                .as_ref()
                .ok()
                .and_then(|event| event.sequence())
        };
        let applied: Vec<u64> = filled
            .iter()
            .zip(&verdicts)
            .filter(|(_, verdict)| verdict.outcome == Outcome::Applied)
            .filter_map(|(record, _)| sequence(record))
            .collect();
        // One of them not applied after all (its write failed, its step was
        // refused): the message that waited for it is the gap it was, or
        // the storage error it met, and retried.
        let failed = filled
            .iter()
            .zip(&verdicts)
            .find(|(_, verdict)| verdict.outcome.is_failure());
        if let (Some((record, verdict)), Some(first)) = (failed, messages.get_mut(at))
            && first.outcome == Outcome::Skipped
            && first.reason.as_deref() == Some(SKIPPED_REASON)
        {
            let reason = verdict
                .reason
                .as_deref()
                .unwrap_or(verdict.outcome.as_str());
            *first = if verdict.outcome == Outcome::StorageError {
                Verdict::new(
                    Outcome::StorageError,
                    Some(format!(
                        "applying the events before it, read from the event store: {reason}"
                    )),
                )
            } else {
                let waiting = sequence(record);
                let mut gap = Verdict::new(
                    Outcome::Gap,
                    Some(format!(
                        "waiting for sequence {}: its event, read from the event store, was not applied ({}: {reason})",
                        waiting.unwrap_or_default(),
                        verdict.outcome.as_str()
                    )),
                );
                gap.waiting_for = waiting;
                gap
            };
        }
        let filled = match (applied.first(), applied.last()) {
            (Some(&from), Some(&to)) => Some(FilledReport {
                stream: stream.to_owned(),
                entity: key.clone(),
                from,
                to,
            }),
            _ => None,
        };
        Settled {
            verdicts: messages,
            parking,
            filled,
        }
    }

    /// The events the run's first message waits for, read from the event
    /// store as records to decide before it; none when it waits for none,
    /// is to be parked, or the store cannot say (see the module's
    /// documentation).
    pub(super) async fn fill(
        &self,
        key: &EntityKey,
        stream: &str,
        run: &[&Record],
        stored: &Stored,
        invocation: &Invocation,
    ) -> (usize, Vec<Record>) {
        let Some((at, after, missing)) = self.missing(key, run, stored) else {
            return (0, Vec::new());
        };
        let read = self
            .store
            .stored_events(stream, after, missing.min(MAX_FILL));
        let events = match Box::pin(self.timed("Query", invocation, read)).await {
            Ok(Some(events)) => events,
            Ok(None) => return (0, Vec::new()),
            Err(err) => {
                warn!(stream, after, error = ?err, "reading a gap's events from the event store failed: the gap is retried");
                return (0, Vec::new());
            }
        };
        let mut records = self.records(stream, &events, invocation).await;
        // The prefix the consumer applies, in order, from the entity as
        // the run's messages before the gap leave it.
        let mut dry = stored.entity.clone();
        for record in &run[..at] {
            if let Ok(event) = &record.event {
                event.decide_unchecked(&mut dry);
            }
        }
        let applied = records
            .iter()
            .zip(after + 1..)
            .take_while(|(record, expected)| {
                record.event.as_ref().is_ok_and(|event| {
                    event.is_on(key)
                        && event.sequence() == Some(*expected)
                        && event.decide_unchecked(&mut dry) == Some(Decision::Applied)
                })
            })
            .count();
        records.truncate(applied);
        if let (Some(first), Some(last)) = (records.first(), records.last()) {
            let sequence = |record: &Record| {
                record
                    .event
                    .as_ref()
                    .ok()
                    .and_then(|event| event.sequence())
            };
            info!(
                stream,
                entity = %key,
                from = sequence(first),
                to = sequence(last),
                events = records.len(),
                "a gap's events read from the event store, applied before the message that waited for them"
            );
        }
        (at, records)
    }

    /// The first message of the run that is ahead of its entity (the
    /// run's messages before it applied in order, or duplicates): its
    /// place in the run, the sequence the entity is at before it, and how
    /// many events it waits for, when it waits and a fill is tried.
    fn missing(
        &self,
        key: &EntityKey,
        run: &[&Record],
        stored: &Stored,
    ) -> Option<(usize, u64, usize)> {
        if !self.store.reads_event_store() {
            return None;
        }
        let mut at = stored.entity.as_ref().map_or(0, |entity| entity.sequence());
        for (position, record) in run.iter().enumerate() {
            let event = record.event.as_ref().ok()?;
            if !event.is_on(key) || event.is_snapshot() {
                return None;
            }
            let sequence = event.sequence()?;
            if sequence <= at {
                continue;
            }
            if sequence == at + 1 {
                at = sequence;
                continue;
            }
            // From its `PARK_AFTER_RECEIVES`th delivery a gap is parked, as
            // it always was: what a fill could not close before is not
            // tried again (the first delivery always tries).
            let received = record.receive_count.unwrap_or(1);
            let parks = self.config.gap_policy == GapPolicy::Park
                && received > 1
                && received >= self.config.park_after_receives;
            if parks {
                return None;
            }
            let missing = sequence - at - 1;
            return Some((position, at, usize::try_from(missing).unwrap_or(usize::MAX)));
        }
        None
    }

    /// Stored events read as the records their messages would be: their
    /// personal data opened as a batch's is, an erasure's conflict
    /// records deleted as a batch's are.
    async fn records(
        &self,
        stream: &str,
        events: &[StoredEvent],
        invocation: &Invocation,
    ) -> Vec<Record> {
        let mut batch = SqsEvent::default();
        batch.records = events
            .iter()
            .map(|event| event.message(stream, fill_message_id(stream, event.sequence)))
            .collect();
        let mut records: Vec<Record> = batch
            .records
            .iter()
            .filter_map(|message| Record::read(message, &self.domain))
            .collect();
        self.open_sealed(&batch, &mut records).await;
        self.forget_conflicts(&records, invocation).await;
        records
    }
}
