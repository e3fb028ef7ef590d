//! Deadlines fired: the index of due deadlines read a partition at a time,
//! each due state read, its process's deadline handler called, and the
//! step written as a message's is (the state, the deadline, the appends:
//! one transaction), on the condition that the state and its deadline are
//! as read. A state that moved meanwhile is read again and the deadline
//! decided again: one that is no longer due is left alone.

use std::collections::HashSet;

use futures::future::join_all;
use futures::stream::{self, StreamExt};

use tracing::{error, info, warn};

use super::plan::gathered;
use super::{CallError, Invocation, Runner};
use crate::entity::{AnyEntity, EntityKey};
use crate::process::{Cause, DUE_SHARDS, DeadlineReport, Due, Outbox};
use crate::store::{Commit, Committed, Expected, Store, StoreError, Stored};

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
    Failed,
}

impl<S: Store> Runner<S> {
    /// Fires every deadline due at `invocation.now`, each once, until the
    /// invocation's deadline (less its margin); a domain without a process
    /// that handles deadlines fires none.
    pub async fn fire_due(&self, invocation: &Invocation) -> DeadlineReport {
        let mut report = DeadlineReport::default();
        let Some(kind) = self.domain.process().and_then(|p| p.deadline_kind()) else {
            return report;
        };
        // The first page of every partition at once: a sweep's queries are
        // most of its time.
        let firsts = (0..DUE_SHARDS).map(|shard| {
            let read = self.store.due(shard, invocation.now, DUE_PAGE);
            self.timed("Query", invocation, read)
        });
        let mut firsts: Vec<Option<Result<Vec<String>, CallError>>> =
            join_all(firsts).await.into_iter().map(Some).collect();
        for (shard, first) in (0..DUE_SHARDS).zip(firsts.iter_mut()) {
            // Fired deadlines leave the index (eventually: it is a global
            // secondary index); each page is read again past the ones seen,
            // until it brings none not seen.
            let mut seen: HashSet<String> = HashSet::new();
            // Those seen that stay in the index: not fired.
            let mut kept = 0;
            loop {
                let limit = DUE_PAGE + kept;
                let read = match first.take() {
                    Some(page) => page,
                    None => {
                        let read = self.store.due(shard, invocation.now, limit);
                        self.timed("Query", invocation, read).await
                    }
                };
                let page = match read {
                    Ok(page) => page,
                    Err(CallError::Deadline) => {
                        report.cut_short = true;
                        return report;
                    }
                    Err(CallError::Store(err)) => {
                        warn!(shard, error = %err, "cannot read the due deadlines: the next sweep tries again");
                        report.failed += 1;
                        break;
                    }
                };
                let full = page.len() >= limit;
                let fresh: Vec<String> = page.into_iter().filter(|pk| !seen.contains(pk)).collect();
                if fresh.is_empty() {
                    break;
                }
                let mut keys = Vec::with_capacity(fresh.len());
                for pk in fresh {
                    seen.insert(pk.clone());
                    match self
                        .domain
                        .key_of_pk(&pk)
                        .filter(|key| key.kind().name == kind.name)
                    {
                        Some(key) => keys.push(key),
                        None => {
                            warn!(
                                pk,
                                "a deadline on an item that is not this process's state: left alone"
                            );
                            report.failed += 1;
                            kept += 1;
                        }
                    }
                }
                // Each state is its own item: fired a few at a time.
                let fired: Vec<(EntityKey, Result<Firing, CallError>)> = stream::iter(keys)
                    .map(|key| async move {
                        let fired = self.fire_one(&key, invocation).await;
                        (key, fired)
                    })
                    .buffer_unordered(FIRED_AT_ONCE)
                    .collect()
                    .await;
                let mut cut = false;
                for (key, fired) in fired {
                    if !matches!(fired, Ok(Firing::Done)) {
                        kept += 1;
                    }
                    match fired {
                        Ok(Firing::Done) => report.fired += 1,
                        Ok(Firing::NotDue) => {}
                        Ok(Firing::Moved) => report.moved += 1,
                        Ok(Firing::Failed) => report.failed += 1,
                        Err(CallError::Deadline) => cut = true,
                        Err(CallError::Store(err)) => {
                            warn!(entity = %key, error = %err, "a deadline could not be fired: the next sweep tries again");
                            report.failed += 1;
                        }
                    }
                }
                if cut {
                    report.cut_short = true;
                    return report;
                }
                if !full {
                    break;
                }
            }
        }
        if report != DeadlineReport::default() {
            info!(
                fired = report.fired,
                moved = report.moved,
                failed = report.failed,
                cut_short = report.cut_short,
                "deadlines"
            );
        }
        report
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
            let Some(commit) = self.deadline_step(process, key, stored, at, invocation.now) else {
                return Ok(Firing::Failed);
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
    /// appends, and the deadline cleared (or set later); `None` when the
    /// handler broke its rule (logged).
    fn deadline_step(
        &self,
        process: &crate::process::Process,
        key: &EntityKey,
        stored: Stored,
        at: u64,
        now: u64,
    ) -> Option<Commit> {
        let (entity, parking) = (stored.entity, stored.parking);
        let mut outbox = Outbox::at(now);
        let mut slot: Option<AnyEntity> = entity.clone();
        let fired = match &mut slot {
            // A deadline left on an item without a state: cleared.
            None => Ok(()),
            Some(state) => {
                let due = Due {
                    stream: key.id().to_owned(),
                    at,
                    sequence: state.sequence(),
                };
                process.fire(state, &due, &mut outbox)
            }
        };
        let (appends, deadline) = outbox.take();
        let outbox = match fired {
            Ok(()) if appends.is_empty() => Ok(None),
            Ok(()) => {
                let cause = Cause::Deadline {
                    stream: key.id().to_owned(),
                    at,
                };
                gathered(process, &cause, appends).map(Some)
            }
            Err(fault) => Err(fault.to_string()),
        };
        let outbox = match outbox {
            Ok(outbox) => outbox,
            Err(problem) => {
                error!(
                    entity = %key,
                    due_at = at,
                    problem = %problem,
                    "a deadline's handler broke its rule: nothing written; tried again at the next sweep"
                );
                return None;
            }
        };
        let later = deadline.flatten().filter(|later| *later > now);
        let changed = slot != entity;
        Some(Commit {
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
            deadline: Some(later),
            outbox,
        })
    }
}
