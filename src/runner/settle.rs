//! One entity's share of a stream, written: planned ([`super::entity`]),
//! parked events fetched, committed, decided again after a lost race; and
//! the drain the sweep asks for.

use tracing::{debug, error, info, warn};

use super::deadline::CallError;
use super::entity::{self, Fetched, Planned, Stuck, StuckWhy};
use super::verdict::{Verdict, fail_from, skipped, skipped_one};
use super::{DrainedEvent, Invocation, Outcome, ParkingReport, Runner, StuckEvent};
use crate::entity::{AnyEntity, EntityKey};
use crate::envelope::Record;
use crate::store::{Committed, Store, StoreError, Stored};

impl<S: Store> Runner<S> {
    /// Decides a run of messages on one entity and writes it: one
    /// conditional write in the common case; a transaction when it parks,
    /// drains or records conflicts, in steps of at most one transaction's
    /// size. Returns one verdict per message of the run, and what each
    /// commit parked and drained.
    pub(super) async fn run_entity(
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
            let planned = entity::plan(
                &self.domain,
                key,
                &stored,
                rest,
                &fetched,
                &self.config,
                invocation.now,
            );
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
            let stuck = step.stuck.as_ref().map(|stuck| stuck_event(stream, stuck));
            if step.commit.items() == 0 {
                if let Some(stuck) = stuck {
                    parking.push(parking_report(
                        stream,
                        key,
                        &step,
                        invocation.now,
                        Some(stuck),
                    ));
                }
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
                    if step.commit.changes_parking() || stuck.is_some() {
                        let report = parking_report(stream, key, &step, invocation.now, stuck);
                        if step.commit.changes_parking() {
                            log_parking(&report);
                        }
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
                        found = ?current.entity.as_ref().map(AnyEntity::sequence),
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
        let stream = key.id();
        let (_, parking) = self
            .run_entity(key, stream, &[], Ok(stored), invocation)
            .await;
        Ok(parking)
    }
}

/// A parked event that cannot be applied, logged with why: it stays parked
/// (the next event of its stream, or the next sweep, tries it again).
fn stuck_event(stream: &str, stuck: &Stuck) -> StuckEvent {
    let sequence = stuck.sequence;
    let (reason, handler_error) = match &stuck.why {
        StuckWhy::Missing => ("its item is not in the table".to_owned(), false),
        StuckWhy::Unreadable(reason) => (format!("its body cannot be read: {reason}"), false),
        StuckWhy::Refused(decision) => {
            (format!("its handler answered {}", decision.as_str()), false)
        }
        StuckWhy::Fault(fault) => (fault.to_string(), true),
    };
    if handler_error {
        error!(
            stream,
            sequence,
            reason = %reason,
            "a handler broke its rule on a parked event that follows the entity: nothing written, it stays parked"
        );
    } else {
        error!(
            stream,
            sequence,
            reason = %reason,
            "a parked event that follows the entity cannot be applied: it stays parked"
        );
    }
    StuckEvent {
        sequence,
        reason,
        handler_error,
    }
}

/// What a written step parked and drained.
fn parking_report(
    stream: &str,
    key: &EntityKey,
    step: &entity::Step,
    now: u64,
    stuck: Option<StuckEvent>,
) -> ParkingReport {
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
        stuck,
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
