//! One entity's share of a stream, written: planned ([`super::entity`]),
//! parked events fetched, committed, decided again after a lost race; and
//! the drain the sweep asks for.

use tracing::{debug, warn};

use super::deadline::CallError;
use super::parking::{log_parking, parking_report, stuck_event};
use super::plan::{self, Fetched, Planned, Step};
use super::verdict::{Verdict, fail_from, skipped, skipped_one};
use super::{Invocation, Outcome, ParkingReport, Runner, StuckEvent};
use crate::entity::{AnyEntity, EntityKey};
use crate::envelope::Record;
use crate::store::{Committed, Store, StoreError, Stored};

/// A run being settled: the verdicts so far (one per message of the run,
/// in order), what each commit parked and drained, the parked events read,
/// and the races lost.
struct Settling {
    verdicts: Vec<Verdict>,
    parking: Vec<ParkingReport>,
    fetched: Fetched,
    races: u32,
}

/// What follows a step: another, planned on the item as it is now, or
/// nothing (the run is settled, or cut short).
enum Next {
    Plan(Stored),
    Done,
}

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
                self.warm_forget(key);
                let (outcome, reason) = err.outcome();
                return (
                    fail_from(skipped(run.len()), 0, outcome, &reason),
                    Vec::new(),
                );
            }
        };
        let mut settling = Settling {
            // Most runs are one step: its verdicts become these.
            verdicts: Vec::new(),
            parking: Vec::new(),
            fetched: Fetched::new(),
            races: 0,
        };
        loop {
            let rest = &run[settling.verdicts.len()..];
            let now = invocation.now;
            let planned = plan::plan(
                &self.domain,
                key,
                stored,
                rest,
                &settling.fetched,
                &self.config,
                now,
            );
            let next = match planned {
                Planned::Fetch(sequences, back) => {
                    let read = self.fetch(key, sequences, invocation, &mut settling).await;
                    if let Err((outcome, reason)) = read {
                        let verdicts = fail_from(skipped(rest.len()), 0, outcome, &reason);
                        settling.verdicts.extend(verdicts);
                        Next::Done
                    } else {
                        Next::Plan(back)
                    }
                }
                Planned::Step(step) => {
                    self.write_step(key, stream, step, invocation, &mut settling)
                        .await
                }
            };
            match next {
                Next::Plan(next) => stored = next,
                Next::Done => break,
            }
        }
        // A step cut short by an error leaves the rest of the run unsettled.
        if settling.verdicts.len() < run.len() {
            settling.verdicts.resize_with(run.len(), skipped_one);
        }
        (settling.verdicts, settling.parking)
    }

    /// Reads parked events the plan asked for (`None` for one listed but
    /// not found); `Err`: the outcome of the messages not settled.
    async fn fetch(
        &self,
        key: &EntityKey,
        sequences: Vec<u64>,
        invocation: &Invocation,
        settling: &mut Settling,
    ) -> Result<(), (Outcome, String)> {
        let read = self.store.parked(key, &sequences);
        let events = Box::pin(self.timed("BatchGetItem", invocation, read))
            .await
            .map_err(|err| err.outcome())?;
        // Their personal data's keys, for the drain to read them.
        let keys = self
            .domain
            .fetch_keys(events.iter().map(|event| event.body.as_str()));
        Box::pin(keys).await.map_err(|err| {
            (
                Outcome::StorageError,
                format!("reading the parked events' keys: {err}"),
            )
        })?;
        for sequence in sequences {
            settling.fetched.insert(sequence, None);
        }
        for event in events {
            settling.fetched.insert(event.sequence, Some(event));
        }
        Ok(())
    }

    /// Writes one planned step, and settles its verdicts by the answer. The
    /// step stays in its box across the write: the future that awaits it
    /// is moved whole by the set of futures it is in.
    async fn write_step(
        &self,
        key: &EntityKey,
        stream: &str,
        step: Box<Step>,
        invocation: &Invocation,
        settling: &mut Settling,
    ) -> Next {
        let stuck = |step: &Step| step.stuck.as_ref().map(|stuck| stuck_event(stream, stuck));
        if step.commit.items() == 0 {
            if let Some(stuck) = stuck(&step) {
                let report = parking_report(stream, key, &step, invocation.now, Some(stuck));
                settling.parking.push(report);
            }
            let mut step = step;
            if settling.verdicts.is_empty() {
                settling.verdicts = std::mem::take(&mut step.verdicts);
            } else {
                settling.verdicts.append(&mut step.verdicts);
            }
            // Nothing to write: the item is as it was found, and kept so
            // (a warm one was taken out of the map for this run).
            let stored = step.into_stored();
            if stored.entity.is_some() {
                self.warm_put(key, stored);
            }
            return Next::Done;
        }
        let alone = step.effects.is_empty() && step.commit.items() == 1;
        let operation = if step.commit.touches_entity() && alone {
            "UpdateItem"
        } else {
            "TransactWriteItems"
        };
        // The store's call in a box of its own: an SDK request's future is
        // some 13 KB, and the set of entity runs it would sit in inline is
        // moved whole (in, and out of it when done); boxed, it is copied
        // once, and the run stays small.
        let commit = self.store.commit_with_effects(&step.commit, &step.effects);
        match Box::pin(self.timed(operation, invocation, commit)).await {
            Ok(Committed::Written) => {
                let stuck = stuck(&step);
                let (more, stored) = written(stream, key, *step, stuck, invocation.now, settling);
                if more {
                    self.warm_put(key, stored.clone());
                    Next::Plan(stored)
                } else {
                    self.warm_put(key, stored);
                    Next::Done
                }
            }
            Ok(Committed::LostRace { current }) => {
                self.warm_forget(key);
                self.lost_race(*step, current, settling)
            }
            Ok(Committed::Moved {
                stream: moved,
                expected,
                current,
            }) => {
                // A message's step that appends at an exact sequence: the
                // stream moved, nothing was written; decided again when the
                // message comes back.
                self.warm_forget(key);
                let reason = format!(
                    "the process's append to stream {moved} expected it at sequence {expected}, and it is at {current}: nothing written, decided again on redelivery"
                );
                fail_step(*step, Outcome::StorageError, &reason, settling);
                Next::Done
            }
            Err(err) => {
                self.warm_forget(key);
                let (outcome, reason) = err.outcome();
                if !step.drained.is_empty() {
                    warn!(
                        stream,
                        reason = %reason,
                        "draining parked events stopped: the next event of the stream, or the next sweep, goes on"
                    );
                }
                fail_step(*step, outcome, &reason, settling);
                Next::Done
            }
        }
    }

    /// A step whose conditional write lost a race: planned again on the item
    /// as it is now, a bounded number of times.
    fn lost_race(&self, step: Step, current: Stored, settling: &mut Settling) -> Next {
        settling.races += 1;
        let races = settling.races;
        if races > self.config.condition_retries {
            let reason = format!(
                "the conditional write lost the race {races} times: another invocation keeps writing this entity"
            );
            fail_step(step, Outcome::StorageError, &reason, settling);
            return Next::Done;
        }
        debug!(
            entity = %step.commit.key,
            expected = ?step.commit.expected.sequence,
            found = ?current.entity.as_ref().map(AnyEntity::sequence),
            parked = current.parking.sequences.len(),
            "conditional write lost a race; deciding again"
        );
        // What was read of parked events may be stale now.
        settling.fetched.clear();
        Next::Plan(current)
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
            due_at: loaded.due.remove(key),
        };
        let stream = key.id();
        let (_, parking) = self
            .run_entity(key, stream, &[], Ok(stored), invocation)
            .await;
        Ok(parking)
    }
}

/// A step written: its verdicts stand. Returns whether the run has more,
/// and the item as the step leaves it (the next step is planned on it).
fn written(
    stream: &str,
    key: &EntityKey,
    mut step: Step,
    stuck: Option<StuckEvent>,
    now: u64,
    settling: &mut Settling,
) -> (bool, Stored) {
    if step.commit.changes_parking() || stuck.is_some() {
        let report = parking_report(stream, key, &step, now, stuck);
        if step.commit.changes_parking() {
            log_parking(&report);
        }
        settling.parking.push(report);
    }
    // Parked events read before, still parked and not parked again now.
    settling.fetched.retain(|sequence, _| {
        step.parking.sequences.contains(sequence)
            && !step
                .commit
                .park
                .iter()
                .any(|parked| parked.sequence == *sequence)
    });
    if settling.verdicts.is_empty() {
        settling.verdicts = std::mem::take(&mut step.verdicts);
    } else {
        settling.verdicts.append(&mut step.verdicts);
    }
    let more = step.more;
    (more, step.into_stored())
}

/// A step not written: the verdicts before its first write stand (decided
/// on a consistent read), that one fails with `outcome`, the rest are
/// skipped.
fn fail_step(step: Step, outcome: Outcome, reason: &str, settling: &mut Settling) {
    let from = step
        .verdicts
        .iter()
        .position(|verdict| verdict.written)
        .unwrap_or(0);
    settling
        .verdicts
        .extend(fail_from(step.verdicts, from, outcome, reason));
}
