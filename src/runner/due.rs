//! Deadlines fired: the index of due deadlines read a partition at a time,
//! each due state read, its process's deadline handler called, and the
//! step written as a message's is (the state, the deadline, the appends:
//! one transaction), on the condition that the state and its deadline are
//! as read. A state that moved meanwhile is read again and the deadline
//! decided again: one that is no longer due is left alone.
//!
//! Each due state gets its turn: a sweep goes through the partitions in
//! turn, each earliest first, a page at a time from the entry after the
//! last it tried, and one whose time runs out hands back where it stopped
//! ([`DeadlineReport::resume_at`]); the next goes on from there, round
//! the index to where it began. Deadlines that keep being tried and not
//! fired (their streams moved, or failing) are passed over in turn like
//! any other, never retried ahead of the rest. No state is fired twice
//! in one sweep, even one whose handler set its next deadline in the past.

use std::collections::HashSet;

use futures::future::join_all;
use futures::stream::{self, StreamExt};

use tracing::{error, info, warn};

use super::DeadlineReport;
use super::answer::{deadline_problem, gathered};
use super::{CallError, Invocation, Runner};
use crate::answer::{Due, DueOutbox};
use crate::domain::{Cause, Process};
use crate::entity::{AnyEntity, EntityKey, Kind};
use crate::handling::HandlerFault;
use crate::store::DUE_SHARDS;
use crate::store::{Commit, Committed, DueCursor, DueEntry, Expected, Store, StoreError, Stored};

/// Due deadlines read at a time, per partition.
const DUE_PAGE: usize = 100;

/// Deadlines fired at once (each its own state's item).
const FIRED_AT_ONCE: usize = 8;

/// What became of one due deadline.
enum Firing {
    Done,
    /// Not due (any more), or its state gone.
    NotDue,
    Moved,
    /// The handler broke its rule: its fault.
    Failed(String),
}

/// A stretch of one partition of the index that a sweep goes through:
/// from the entry after `after` (the start: `None`), to the entries due
/// at `until` (the end: `None`).
struct Stretch {
    shard: u8,
    after: Option<DueEntry>,
    until: Option<u64>,
}

/// The stretches of a sweep that begins at `from`: from there to the end
/// of the index, then from its start round to `from` again.
fn stretches(from: Option<&DueCursor>) -> Vec<Stretch> {
    let whole = |shard: u8| Stretch {
        shard,
        after: None,
        until: None,
    };
    let Some(from) = from.filter(|from| from.shard < DUE_SHARDS) else {
        return (0..DUE_SHARDS).map(whole).collect();
    };
    let mut stretches = vec![Stretch {
        shard: from.shard,
        after: from.after.clone(),
        until: None,
    }];
    stretches.extend((1..DUE_SHARDS).map(|n| whole((from.shard + n) % DUE_SHARDS)));
    if let Some(after) = &from.after {
        // Those due at the same second as `after` are there too: the ones
        // already tried are in `seen`.
        stretches.push(Stretch {
            shard: from.shard,
            after: None,
            until: Some(after.at),
        });
    }
    stretches
}

/// Where a stretch left the sweep.
enum Went {
    /// Through it: on to the next.
    Through,
    /// The sweep's time ran out; the last entry tried (`None`: none of it).
    Cut(Option<DueEntry>),
}

/// One entry of a page, before it is fired.
enum Entry {
    /// Tried already in this sweep (its next deadline set in the past).
    Seen,
    /// Not this process's state: left alone.
    Foreign,
    /// A state of the process, to fire.
    State(EntityKey),
}

/// Whether a store's error is the sweep's time running out (a call cut
/// off); the other out of time is [`CallError::Deadline`].
fn timed_out(err: &StoreError) -> bool {
    matches!(err, StoreError::Timeout { .. })
}

impl<S: Store> Runner<S> {
    /// Fires every deadline due at `invocation.now`, each once, from the
    /// index's start, until the invocation's deadline (less its margin); a
    /// domain without a process that handles deadlines fires none.
    pub async fn fire_due(&self, invocation: &Invocation) -> DeadlineReport {
        self.fire_due_from(invocation, None).await
    }

    /// Fires every deadline due at `invocation.now`, each at most once,
    /// from `from` (where an earlier sweep's time ran out; the index's
    /// start: `None`) round the index, until the invocation's deadline
    /// (less its margin). The report's [`DeadlineReport::resume_at`] says
    /// where the next sweep goes on when the time ran out first.
    pub async fn fire_due_from(
        &self,
        invocation: &Invocation,
        from: Option<DueCursor>,
    ) -> DeadlineReport {
        let mut report = DeadlineReport::default();
        let Some(kind) = self.domain.process().and_then(|p| p.deadline_kind()) else {
            return report;
        };
        let stretches = stretches(from.as_ref());
        // The first page of every stretch at once: a sweep's queries are
        // most of its time.
        let firsts = stretches.iter().map(|stretch| {
            let read = self.store.due(
                stretch.shard,
                invocation.now,
                stretch.after.as_ref(),
                DUE_PAGE,
            );
            self.timed("Query", invocation, read)
        });
        let firsts = join_all(firsts).await;
        let mut seen: HashSet<String> = HashSet::new();
        for (stretch, first) in stretches.iter().zip(firsts) {
            let went = self
                .fire_stretch(stretch, first, kind, invocation, &mut seen, &mut report)
                .await;
            if let Went::Cut(after) = went {
                report.cut_short = true;
                report.resume_at = Some(DueCursor {
                    shard: stretch.shard,
                    after,
                });
                break;
            }
        }
        log_deadlines(&report);
        report
    }

    /// Fires the due deadlines of one stretch, a page at a time (`first`:
    /// its first page, read already).
    async fn fire_stretch(
        &self,
        stretch: &Stretch,
        first: Result<Vec<DueEntry>, CallError>,
        kind: &'static Kind,
        invocation: &Invocation,
        seen: &mut HashSet<String>,
        report: &mut DeadlineReport,
    ) -> Went {
        let mut after = stretch.after.clone();
        let mut first = Some(first);
        loop {
            let read = match first.take() {
                Some(page) => page,
                None => {
                    let read =
                        self.store
                            .due(stretch.shard, invocation.now, after.as_ref(), DUE_PAGE);
                    self.timed("Query", invocation, read).await
                }
            };
            let mut page = match read {
                Ok(page) => page,
                Err(CallError::Store(err)) if !timed_out(&err) => {
                    warn!(shard = stretch.shard, error = %err, "cannot read the due deadlines: the next sweep tries again");
                    report.failed += 1;
                    return Went::Through;
                }
                // Out of time: the next sweep goes on from here.
                Err(_) => return Went::Cut(after),
            };
            let full = page.len() >= DUE_PAGE;
            let within = page
                .iter()
                .take_while(|entry| stretch.until.is_none_or(|until| entry.at <= until))
                .count();
            let ended = !full || within < page.len();
            page.truncate(within);
            let mut entries = Vec::with_capacity(page.len());
            for entry in page {
                let sorted = self.sort(&entry, kind, seen);
                if matches!(sorted, Entry::Foreign) {
                    report.failed += 1;
                }
                entries.push((entry, sorted));
            }
            // Each state is its own item: fired a few at a time, in order.
            let fired: Vec<(DueEntry, Option<Result<Firing, CallError>>)> = stream::iter(entries)
                .map(|(entry, sorted)| async move {
                    let fired = match sorted {
                        Entry::State(key) => Some(self.fire_one(&key, invocation).await),
                        Entry::Seen | Entry::Foreign => None,
                    };
                    (entry, fired)
                })
                .buffered(FIRED_AT_ONCE)
                .collect()
                .await;
            let mut cut = false;
            for (entry, fired) in fired {
                match fired {
                    None => {}
                    Some(Ok(Firing::Done)) => report.fired += 1,
                    Some(Ok(Firing::NotDue)) => {}
                    Some(Ok(Firing::Moved)) => report.moved += 1,
                    Some(Ok(Firing::Failed(fault))) => {
                        report.failed += 1;
                        report.problem(format!("{}: {fault}", entry.pk));
                    }
                    Some(Err(CallError::Store(err))) if !timed_out(&err) => {
                        warn!(entity = %entry.pk, error = %err, "a deadline could not be fired: the next sweep tries again");
                        report.failed += 1;
                        report.problem(format!("{}: {err}", entry.pk));
                    }
                    // Out of time: this one and those after it wait.
                    Some(Err(_)) => cut = true,
                }
                if !cut {
                    after = Some(entry);
                }
            }
            if cut {
                return Went::Cut(after);
            }
            if ended {
                return Went::Through;
            }
        }
    }

    /// What a sweep does with an entry of the index: the state to fire, or
    /// why not (counted as failed when it is not the process's).
    fn sort(&self, entry: &DueEntry, kind: &'static Kind, seen: &mut HashSet<String>) -> Entry {
        if !seen.insert(entry.pk.clone()) {
            return Entry::Seen;
        }
        match self
            .domain
            .key_of_pk(&entry.pk)
            .filter(|key| key.kind().name == kind.name && entry.sk == crate::store::ENTITY_SK)
        {
            Some(key) => Entry::State(key),
            None => {
                warn!(
                    pk = entry.pk,
                    sk = entry.sk,
                    "a deadline on an item that is not this process's state: left alone"
                );
                Entry::Foreign
            }
        }
    }

    /// Fires one state's deadline if it is due: decided on the state as
    /// read, written on the condition that it is still so; decided again
    /// after a lost race.
    async fn fire_one(
        &self,
        key: &EntityKey,
        invocation: &Invocation,
    ) -> Result<Firing, CallError> {
        let Some(process) = self.domain.process() else {
            return Ok(Firing::NotDue);
        };
        for _ in 0..=self.config.condition_retries {
            let load = self.store.load(std::slice::from_ref(key), &[]);
            let mut loaded = self.timed("BatchGetItem", invocation, load).await?;
            let stored = Stored {
                entity: loaded
                    .entities
                    .remove(key)
                    .transpose()
                    .map_err(CallError::Store)?,
                parking: loaded.parking.remove(key).unwrap_or_default(),
                due_at: loaded.due.remove(key),
            };
            let Some(at) = stored.due_at.filter(|at| *at <= invocation.now) else {
                return Ok(Firing::NotDue);
            };
            let commit = match self.deadline_step(process, key, stored, at, invocation.now) {
                Ok(commit) => commit,
                Err(fault) => return Ok(Firing::Failed(fault)),
            };
            let write = self.store.commit(&commit);
            match Box::pin(self.timed("TransactWriteItems", invocation, write)).await? {
                Committed::Written => return Ok(Firing::Done),
                Committed::LostRace { .. } => continue,
                Committed::Moved {
                    stream,
                    expected,
                    current,
                } => {
                    info!(
                        entity = %key,
                        stream,
                        expected,
                        current,
                        "a deadline's append found its stream moved: nothing written; decided again at the next sweep"
                    );
                    return Ok(Firing::Moved);
                }
            }
        }
        Err(CallError::Store(StoreError::Request {
            operation: "TransactWriteItems",
            message: format!(
                "the deadline's write lost the race {} times: the state keeps moving",
                self.config.condition_retries + 1
            ),
        }))
    }

    /// The step of a deadline due at `at`: the handler's new state, its
    /// appends, and the deadline cleared (or set again, at any time); `Err`
    /// when the handler broke its rule (logged): its fault.
    fn deadline_step(
        &self,
        process: &Process,
        key: &EntityKey,
        stored: Stored,
        at: u64,
        now: u64,
    ) -> Result<Commit, String> {
        let (entity, parking) = (stored.entity, stored.parking);
        let mut slot: Option<AnyEntity> = entity.clone();
        let due = Due {
            stream: key.id().to_owned(),
            at,
            sequence: slot.as_ref().map_or(0, AnyEntity::sequence),
        };
        // A deadline left on an item without a state: cleared.
        let (asked, outbox) = fire_due(process, slot.as_mut(), &due, now);
        let deadline = asked.deadline();
        let outbox = match outbox {
            Ok(outbox) => outbox,
            Err(fault) => {
                error!(
                    entity = %key,
                    due_at = at,
                    handler = fault.handler,
                    problem = %fault.problem,
                    "a deadline's handler broke its rule: nothing written; tried again at the next sweep"
                );
                return Err(fault.to_string());
            }
        };
        // Set in the past (a periodic deadline behind after an outage), it
        // fires at the next sweep: never dropped.
        let next = deadline.flatten();
        let changed = slot != entity;
        Ok(Commit {
            key: key.clone(),
            expected: Expected {
                sequence: entity.as_ref().map(AnyEntity::sequence),
                parked: parking.sequences,
                entity: entity.clone(),
                due_at: Some(at),
            },
            entity: if changed { slot } else { None },
            park: Vec::new(),
            drain: Vec::new(),
            conflicts: Vec::new(),
            now,
            deadline: Some(next),
            outbox,
        })
    }
}

/// The sweep's deadlines in its log: what became of them, and, where some
/// keep being tried and not fired, the cause named.
fn log_deadlines(report: &DeadlineReport) {
    if report == &DeadlineReport::default() {
        return;
    }
    info!(
        fired = report.fired,
        moved = report.moved,
        failed = report.failed,
        cut_short = report.cut_short,
        "deadlines"
    );
    if report.moved > 0 {
        warn!(
            moved = report.moved,
            "deadlines found their streams moved: the process has not seen those streams' latest events; kept at every sweep, the process is behind its streams (look at its queue's backlog and its parked events); each fires once the process has seen what moved it"
        );
    }
    if report.cut_short {
        warn!(
            fired = report.fired,
            moved = report.moved,
            failed = report.failed,
            "the sweep's time for deadlines ran out before it tried every due one: the next sweep goes on where this one stopped"
        );
    }
}

/// Fires the deadline `due` on a process's state (none: nothing to fire)
/// at `now`, and checks the handler's answer as a message handler's is
/// checked: what it asked for (its appends and next deadline), and what
/// the sweep writes of it, or the rule it broke. The sweep's step and the
/// test kit's `when_due` both fire a deadline so.
pub(crate) fn fire_due(
    process: &Process,
    state: Option<&mut AnyEntity>,
    due: &Due,
    now: u64,
) -> (
    DueOutbox,
    Result<Option<crate::store::Outbound>, HandlerFault>,
) {
    let mut outbox = DueOutbox::new(due, now);
    let fired = match state {
        None => Ok(()),
        Some(state) => process.fire(state, due, &mut outbox),
    };
    let answer = fired.and_then(|()| {
        let cause = Cause::Deadline {
            stream: due.stream.clone(),
            at: due.at,
        };
        deadline_answer(
            process,
            &cause,
            outbox.appends().to_vec(),
            outbox.deadline(),
            now,
        )
        .map_err(|problem| process.deadline_fault(problem))
    });
    (outbox, answer)
}

/// A deadline handler's appends and next deadline, checked as a message
/// handler's are (`runner/answer.rs`): `Err`, the rest of its fault.
fn deadline_answer(
    process: &Process,
    cause: &Cause,
    appends: Vec<crate::answer::Outgoing>,
    deadline: Option<Option<u64>>,
    now: u64,
) -> Result<Option<crate::store::Outbound>, String> {
    if let Some(problem) = deadline_problem(process, deadline, now) {
        return Err(problem);
    }
    if appends.is_empty() {
        return Ok(None);
    }
    gathered(process, cause, appends).map(Some)
}
