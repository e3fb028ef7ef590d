//! One stream of a batch, in three phases: planned (its dry run, see
//! `dry_run.rs`), settled (each entity with one write and the deduplicated
//! effects with one transaction, all at once), and reported (one verdict
//! per message, every one after the first failure failed too).

use std::borrow::Cow;
use std::collections::HashSet;

use futures::future::join_all;
use tracing::{error, warn};

use super::batch::Share;
use super::dry_run::{EntityPlan, StreamPlan};
use super::verdict::{SETTLED_AFTER_FAILURE_REASON, Verdict, skipped_one};
use super::{Invocation, Outcome, ParkingReport, Runner};
use crate::envelope::{Event, Record};
use crate::store::{DedupKey, Store};

impl<S: Store> Runner<S> {
    /// Runs one stream: decides its messages in order up to the first that
    /// cannot be done, then settles them with at most one write per entity and
    /// one transaction for its deduplicated effects, all at once. Returns one
    /// verdict per message, in stream order.
    pub(super) async fn run_stream(
        &self,
        stream: &[&Record],
        share: Share,
        handled: &HashSet<DedupKey>,
        invocation: &Invocation,
    ) -> (Vec<Verdict>, Vec<ParkingReport>) {
        let plan = self.dry_run(stream, share, handled, invocation);
        let (verdicts, parking) = self.settle_stream(stream, plan, invocation).await;
        let verdicts = in_order(verdicts);
        for (record, verdict) in stream.iter().zip(&verdicts) {
            self.log_recorded(record, verdict);
        }
        for (record, verdict) in stream.iter().zip(&verdicts) {
            log_failed(record, verdict);
        }
        (verdicts, parking)
    }

    /// Settles every entity and the additions of a stream concurrently;
    /// the verdicts the plan had and the settled ones together.
    async fn settle_stream(
        &self,
        stream: &[&Record],
        plan: StreamPlan,
        invocation: &Invocation,
    ) -> (Vec<Option<Verdict>>, Vec<ParkingReport>) {
        let StreamPlan {
            mut verdicts,
            entities,
            additions,
        } = plan;
        let run_entity = |EntityPlan {
                              key,
                              base,
                              positions,
                              ..
                          }| async move {
            // Most entities have all of their stream's first messages: their
            // run is a slice of the stream, not a list of its own.
            let run: Cow<'_, [&Record]> = match contiguous(&positions) {
                Some(count) => Cow::Borrowed(&stream[..count]),
                None => positions.iter().map(|&position| stream[position]).collect(),
            };
            let name = run.first().map_or("", |record| record.stream.as_str());
            let settled = self.run_entity(&key, name, &run, base, invocation).await;
            (positions, settled)
        };
        let entity_runs = async move {
            // Most streams are one entity's: run without a set of futures.
            let mut entities = entities.into_iter();
            match (entities.next(), entities.len()) {
                (Some(only), 0) => (Some(run_entity(only).await), Vec::new()),
                (first, _) => {
                    let all = first.into_iter().chain(entities);
                    (None, join_all(all.map(run_entity)).await)
                }
            }
        };
        let ((only, settled), added) =
            futures::join!(entity_runs, self.settle_additions(additions, invocation));
        let mut parking = Vec::new();
        for (positions, (outcomes, parked)) in only.into_iter().chain(settled) {
            for (position, verdict) in positions.into_iter().zip(outcomes) {
                verdicts[position] = Some(verdict);
            }
            parking.extend(parked);
        }
        for (position, verdict) in added {
            verdicts[position] = Some(verdict);
        }
        (verdicts, parking)
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
