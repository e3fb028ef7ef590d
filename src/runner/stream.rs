//! A batch's streams, each planned first (its dry run, see `dry_run.rs`),
//! then settled all at once (each entity of each stream with one write, each
//! stream's deduplicated effects with one transaction), and reported (one
//! verdict per message, every one after its stream's first failure failed
//! too).

use std::borrow::Cow;

use futures::future::join_all;
use tracing::{error, warn};

use super::dry_run::{EntityPlan, StreamPlan};
use super::verdict::{SETTLED_AFTER_FAILURE_REASON, Verdict, skipped_one};
use super::{Invocation, Outcome, ParkingReport, Runner};
use crate::envelope::{Event, Record};
use crate::store::{Addition, Store};

/// One stream of a batch: its records in stream order, and its plan.
pub(super) struct Planned<'a> {
    pub(super) records: Vec<&'a Record>,
    pub(super) plan: StreamPlan,
}

/// One entity's run to settle: its stream's index and its plan.
type EntityJob = (usize, EntityPlan);

/// One entity's run settled: its stream's index, its positions in the
/// stream, and their verdicts and parking reports.
type EntitySettled = (usize, Vec<usize>, (Vec<Verdict>, Vec<ParkingReport>));

/// A batch's planned streams taken apart: each stream's records and the
/// verdicts its dry run had, every entity's run, every stream's additions.
struct Gathered<'a> {
    records: Vec<Vec<&'a Record>>,
    verdicts: Vec<Vec<Option<Verdict>>>,
    entities: Vec<EntityJob>,
    additions: Vec<(usize, Vec<(usize, Addition)>)>,
}

fn gather(streams: Vec<Planned<'_>>) -> Gathered<'_> {
    let mut gathered = Gathered {
        records: Vec::with_capacity(streams.len()),
        verdicts: Vec::with_capacity(streams.len()),
        entities: Vec::new(),
        additions: Vec::new(),
    };
    for (index, Planned { records, plan }) in streams.into_iter().enumerate() {
        gathered.records.push(records);
        gathered.verdicts.push(plan.verdicts);
        let entities = plan.entities.into_iter().map(|entity| (index, entity));
        gathered.entities.extend(entities);
        if !plan.additions.is_empty() {
            gathered.additions.push((index, plan.additions));
        }
    }
    gathered
}

impl<S: Store> Runner<S> {
    /// Settles every stream of a batch: every entity's run and every
    /// stream's additions at once, one future each (not a future per stream
    /// holding its own: fewer and smaller futures to move). Returns each
    /// stream's verdicts, in stream order, and what it parked.
    pub(super) async fn settle_streams(
        &self,
        streams: Vec<Planned<'_>>,
        invocation: &Invocation,
    ) -> Vec<(Vec<Verdict>, Vec<ParkingReport>)> {
        let Gathered {
            records,
            verdicts,
            mut entities,
            additions,
        } = gather(streams);
        let records = &records;
        let run_entity = |(index, entity): EntityJob| async move {
            let stream: &[&Record] = &records[index];
            // Most entities have all of their stream's first messages: their
            // run is a slice of the stream, not a list of its own.
            let run: Cow<'_, [&Record]> = match contiguous(&entity.positions) {
                Some(count) => Cow::Borrowed(&stream[..count]),
                None => entity
                    .positions
                    .iter()
                    .map(|&position| stream[position])
                    .collect(),
            };
            let name = run.first().map_or("", |record| record.stream.as_str());
            let settled = self
                .run_entity(&entity.key, name, &run, entity.base, invocation)
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
            let stream: &[&Record] = &records[index];
            let settled = self.settle_additions(additions, stream, invocation).await;
            (index, settled)
        };
        let (settled, added) = futures::join!(
            entity_runs,
            join_all(additions.into_iter().map(settle_additions))
        );
        self.finish(records, verdicts, settled, added)
    }

    /// Each stream's verdicts from its dry run, its entities' runs and its
    /// additions, put in order (and logged), with what it parked.
    fn finish(
        &self,
        records: &[Vec<&Record>],
        mut verdicts: Vec<Vec<Option<Verdict>>>,
        settled: Vec<EntitySettled>,
        added: Vec<(usize, Vec<(usize, Verdict)>)>,
    ) -> Vec<(Vec<Verdict>, Vec<ParkingReport>)> {
        let mut parking: Vec<Vec<ParkingReport>> = std::iter::repeat_with(Vec::new)
            .take(records.len())
            .collect();
        for (index, positions, (outcomes, parked)) in settled {
            for (position, verdict) in positions.into_iter().zip(outcomes) {
                verdicts[index][position] = Some(verdict);
            }
            parking[index].extend(parked);
        }
        for (index, added) in added {
            for (position, verdict) in added {
                verdicts[index][position] = Some(verdict);
            }
        }
        records
            .iter()
            .zip(verdicts)
            .zip(parking)
            .map(|((stream, verdicts), parking)| {
                let verdicts = in_order(verdicts);
                for (record, verdict) in stream.iter().zip(&verdicts) {
                    self.log_recorded(record, verdict);
                }
                for (record, verdict) in stream.iter().zip(&verdicts) {
                    log_failed(record, verdict);
                }
                (verdicts, parking)
            })
            .collect()
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

/// `Some(n)` when `positions` are the stream's first `n` messages, in order.
fn contiguous(positions: &[usize]) -> Option<usize> {
    positions
        .iter()
        .enumerate()
        .all(|(index, &position)| index == position)
        .then_some(positions.len())
}

/// One verdict per message: after the first failure in stream order, every
/// message is failed (one settled concurrently with the failure before it is
/// done, but reported failed: its redelivery will find it done), and one
/// not attempted is skipped.
fn in_order(verdicts: Vec<Option<Verdict>>) -> Vec<Verdict> {
    let mut failed = false;
    verdicts
        .into_iter()
        .map(|verdict| {
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
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::contiguous;

    #[test]
    fn a_run_is_a_slice_only_when_it_is_the_streams_first_messages() {
        assert_eq!(contiguous(&[0, 1, 2]), Some(3));
        assert_eq!(contiguous(&[0]), Some(1));
        assert_eq!(contiguous(&[]), Some(0));
        assert_eq!(contiguous(&[1, 2]), None);
        assert_eq!(contiguous(&[0, 2]), None);
        assert_eq!(contiguous(&[1, 0]), None);
    }
}
