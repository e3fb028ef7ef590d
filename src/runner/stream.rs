//! A batch's streams, each planned first (its dry run, see `dry_run.rs`),
//! then settled all at once (each entity of each stream with one write, each
//! stream's deduplicated effects with one transaction), and reported (one
//! verdict per message, every one after its stream's first failure failed
//! too).

use std::borrow::Cow;

use futures::future::join_all;
use tracing::{error, warn};

use super::batch::Streams;
use super::dry_run::{EntityJob, Positions};
use super::fill::Settled;
use super::verdict::{SETTLED_AFTER_FAILURE_REASON, Verdict, skipped_one};
use super::{FilledReport, Invocation, Outcome, ParkingReport, Runner};
use crate::envelope::{Event, Record};
use crate::store::{DedupAddition, Store};

/// A batch's streams after their dry runs.
pub(super) struct Planned<'a> {
    /// The batch's records, stream after stream (as [`Streams::order`]).
    pub(super) records: &'a [&'a Record],
    pub(super) streams: &'a Streams,
    /// One per record, laid out as `records`: those the dry runs decided.
    pub(super) verdicts: Vec<Option<Verdict>>,
    /// Every entity's run, stream after stream.
    pub(super) entities: Vec<EntityJob>,
    /// Each stream's deduplicated effects, with their positions.
    pub(super) additions: Vec<(usize, Vec<(usize, DedupAddition)>)>,
}

/// One entity's run settled: its stream's index, its positions in the
/// stream, and their verdicts and parking reports.
type EntitySettled = (usize, Positions, Settled);

impl<S: Store> Runner<S> {
    /// Settles every stream of a batch: every entity's run and every
    /// stream's additions at once, one future each (not a future per stream
    /// holding its own: fewer and smaller futures to move). Returns one
    /// verdict per record, laid out as `planned.records`, what was parked,
    /// and what was read from the event store.
    pub(super) async fn settle_streams(
        &self,
        planned: Planned<'_>,
        invocation: &Invocation,
    ) -> (Vec<Verdict>, Vec<ParkingReport>, Vec<FilledReport>) {
        let Planned {
            records,
            streams,
            verdicts,
            mut entities,
            additions,
        } = planned;
        let run_entity = |(index, entity): EntityJob| async move {
            let stream: &[&Record] = &records[streams.range(index)];
            // Most entities have all of their stream's first messages: their
            // run is a slice of the stream, not a list of its own.
            let run: Cow<'_, [&Record]> = match &entity.positions {
                Positions::First(count) => Cow::Borrowed(&stream[..*count]),
                Positions::List(positions) => {
                    positions.iter().map(|&position| stream[position]).collect()
                }
            };
            let name = run.first().map_or("", |record| record.stream.as_str());
            let settled = self
                .settle_entity(&entity.key, name, &run, entity.base, invocation)
                .await;
            (index, entity.positions, settled)
        };
        let entity_runs = async {
            // Most batches of a few streams have one entity each: a single
            // run is awaited without a set of futures.
            if entities.len() == 1
                && let Some(only) = entities.pop()
            {
                vec![run_entity(only).await]
            } else {
                join_all(entities.into_iter().map(run_entity)).await
            }
        };
        let settle_additions = |(index, additions): (usize, _)| async move {
            let stream: &[&Record] = &records[streams.range(index)];
            let settled = self.settle_additions(additions, stream, invocation).await;
            (index, settled)
        };
        let (settled, added) = futures::join!(
            entity_runs,
            join_all(additions.into_iter().map(settle_additions))
        );
        self.finish(records, streams, verdicts, settled, added)
    }

    /// Each stream's verdicts from its dry run, its entities' runs and its
    /// additions, put in order (and logged), with what was parked and what
    /// was read from the event store.
    fn finish(
        &self,
        records: &[&Record],
        streams: &Streams,
        mut verdicts: Vec<Option<Verdict>>,
        settled: Vec<EntitySettled>,
        added: Vec<(usize, Vec<(usize, Verdict)>)>,
    ) -> (Vec<Verdict>, Vec<ParkingReport>, Vec<FilledReport>) {
        let mut parking = Vec::new();
        let mut filled = Vec::new();
        for (index, positions, entity) in settled {
            let start = streams.range(index).start;
            for (position, verdict) in positions.iter().zip(entity.verdicts) {
                verdicts[start + position] = Some(verdict);
            }
            parking.extend(entity.parking);
            filled.extend(entity.filled);
        }
        for (index, added) in added {
            let start = streams.range(index).start;
            for (position, verdict) in added {
                verdicts[start + position] = Some(verdict);
            }
        }
        let mut ordered = Vec::with_capacity(verdicts.len());
        let mut verdicts = verdicts.into_iter();
        for range in streams.ranges() {
            let start = ordered.len();
            in_order(verdicts.by_ref().take(range.len()), &mut ordered);
            let stream = &records[range];
            for (record, verdict) in stream.iter().zip(&ordered[start..]) {
                self.log_recorded(record, verdict);
            }
            for (record, verdict) in stream.iter().zip(&ordered[start..]) {
                log_failed(record, verdict);
            }
        }
        (ordered, parking, filled)
    }

    /// Logs a conflict recorded, and a gap not parked for want of room.
    fn log_recorded(&self, record: &Record, verdict: &Verdict) {
        let sequence = record.event.as_ref().ok().and_then(Event::sequence);
        let reason = verdict.reason.as_deref().unwrap_or("");
        if verdict.outcome == Outcome::Conflict {
            error!(
                message_id = %record.message_id,
                trace_id = record.trace_id.as_deref(),
                stream = %record.stream,
                sequence,
                decision = verdict.outcome.as_str(),
                reason,
                "conflicting event recorded"
            );
        }
        if verdict.parking_full {
            error!(
                message_id = %record.message_id,
                trace_id = record.trace_id.as_deref(),
                stream = %record.stream,
                sequence,
                waiting_for = verdict.waiting_for,
                max_parked_per_entity = self.config.max_parked_per_entity,
                "parking full: the gap is failed instead"
            );
        }
    }
}

/// Logs a failed message (an invalid one was logged as it was read).
fn log_failed(record: &Record, verdict: &Verdict) {
    if verdict.outcome.is_failure() && verdict.outcome != Outcome::Invalid {
        warn!(
            message_id = %record.message_id,
            trace_id = record.trace_id.as_deref(),
            stream = %record.stream,
            sequence = record.event.as_ref().ok().and_then(Event::sequence),
            waiting_for = verdict.waiting_for,
            decision = verdict.outcome.as_str(),
            reason = verdict.reason.as_deref().unwrap_or(""),
            "message failed"
        );
    }
}

/// One verdict per message: after the first failure in stream order, every
/// message is failed (one settled concurrently with the failure before it is
/// done, but reported failed: its redelivery will find it done), and one
/// not attempted is skipped.
fn in_order(verdicts: impl Iterator<Item = Option<Verdict>>, into: &mut Vec<Verdict>) {
    let mut failed = false;
    into.extend(verdicts.map(|verdict| {
        let verdict = match verdict {
            Some(verdict) if failed && !verdict.outcome.is_failure() => Verdict::new(
                Outcome::Skipped,
                Some(SETTLED_AFTER_FAILURE_REASON.to_owned()),
            ),
            Some(verdict) => verdict,
            None => skipped_one(),
        };
        failed |= verdict.outcome.is_failure();
        verdict
    }));
}
