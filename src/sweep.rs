//! The scheduled look at parked events.
//!
//! A stream whose missing event never comes sends nothing more, so nothing
//! in the message path would notice it waiting. Every few minutes (a
//! schedule in `template.yaml`) the function pages through the index of
//! entities with events parked, [`PAGE`] entries at a time (one query and one
//! read of their items per page), logs the longest waiting ones, and
//! records `ParkedEntities` and `OldestParkedAge`, which the parked-too-long
//! alarm watches. An entity whose next sequence is itself parked (a drain
//! that the deadline or an error cut short) is drained on the spot, wherever
//! it stands in the index.
//!
//! The walk stops at the invocation's deadline (less its margin). What it
//! drained stays drained; the next sweep walks the index again from its
//! start, passing quickly over what is only waiting, so a drain behind a
//! cut-short walk is finished by a later sweep. Memory holds one page and
//! the [`LOGGED`] longest waiting, however large the index.

use std::cmp::Reverse;

use tracing::{info, warn};

use crate::domain::Domain;
use crate::entity::{AnyEntity, EntityKey};
use crate::runner::{CallError, Invocation, ParkingReport, Runner, RunnerConfig};
use crate::store::{ParkedEntity, Store, StoreError};

/// How many of the longest waiting entities a sweep logs one by one.
pub const LOGGED: usize = 100;

/// Entries of the index read at a time.
pub const PAGE: usize = 100;

/// One entity with events parked on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParkedStream {
    /// The entity's key.
    pub key: EntityKey,
    /// How long it has had events parked, in seconds.
    pub parked_for_seconds: u64,
    /// Events parked on it.
    pub parked: usize,
    /// The sequence it waits for.
    pub waiting_for: u64,
    /// Whether that sequence, or one behind it, is parked itself: nothing
    /// is missing, a drain was cut short.
    pub drainable: bool,
}

/// What a sweep found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SweepReport {
    /// Entities with events parked (of those the walk reached).
    pub entities: usize,
    /// The longest waiting ones, at most [`LOGGED`], longest first.
    pub longest: Vec<ParkedStream>,
    /// `None` when nothing is parked.
    pub oldest_parked_age_seconds: Option<u64>,
    /// What the sweep drained (entities whose drain had been cut short).
    pub drained: Vec<ParkingReport>,
    /// Whether the walk reached the end of the index before the deadline.
    pub complete: bool,
}

/// The schedule's sweep: walks the whole index, drains what can be
/// drained, and reports what stays parked.
pub async fn sweep<S: Store>(
    runner: &Runner<S>,
    invocation: Invocation,
) -> Result<SweepReport, StoreError> {
    walk(runner, &invocation, true).await
}

/// Looks at every entity with events parked, as of `now` (epoch seconds),
/// and logs the longest waiting ones. Reads only.
pub async fn look<S: Store>(
    domain: &Domain,
    store: &S,
    now: u64,
) -> Result<SweepReport, StoreError> {
    let runner = Runner::new(domain.clone(), store, RunnerConfig::default());
    let invocation = Invocation {
        deadline: None,
        now,
    };
    walk(&runner, &invocation, false).await
}

/// Pages through the index; drains drainable entities when `drain`.
async fn walk<S: Store>(
    runner: &Runner<S>,
    invocation: &Invocation,
    drain: bool,
) -> Result<SweepReport, StoreError> {
    let store = runner.store();
    let now = invocation.now;
    let mut report = SweepReport {
        complete: true,
        ..SweepReport::default()
    };
    let mut longest: Vec<ParkedStream> = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let read = store.parked_entities(after.as_deref(), PAGE);
        let Some(page) = within_deadline(runner.timed("Query", invocation, read).await)? else {
            report.complete = false;
            break;
        };
        // Entries of kinds the domain does not register are left alone.
        let entries: Vec<(EntityKey, u64)> = page
            .entities
            .iter()
            .filter_map(|ParkedEntity { pk, since }| {
                let key = runner.domain().key_of_pk(pk);
                if key.is_none() {
                    warn!(entry = %pk, "an entity with events parked is of a kind this domain does not register: skipped");
                }
                Some((key?, *since))
            })
            .collect();
        let keys: Vec<EntityKey> = entries.iter().map(|(key, _)| key.clone()).collect();
        let loaded = if keys.is_empty() {
            Default::default()
        } else {
            let load = store.load(&keys, &[]);
            match within_deadline(runner.timed("BatchGetItem", invocation, load).await)? {
                Some(loaded) => loaded,
                None => {
                    report.complete = false;
                    break;
                }
            }
        };
        for (key, since) in entries {
            let at = match loaded.entities.get(&key) {
                Some(Ok(found)) => AnyEntity::sequence(found),
                _ => 0,
            };
            let sequences = loaded.parking.get(&key).map(|parking| &parking.sequences);
            let waiting_for = at.saturating_add(1);
            let mut stream = ParkedStream {
                key,
                parked_for_seconds: now.saturating_sub(since),
                parked: sequences.map_or(0, |sequences| sequences.len()),
                waiting_for,
                drainable: sequences
                    .and_then(|sequences| sequences.first())
                    .is_some_and(|first| *first <= waiting_for),
            };
            if drain && stream.drainable {
                match runner.drain(&stream.key, invocation).await {
                    Ok(parking) => {
                        if let Some(last) = parking.last() {
                            stream.parked = last.parked_now;
                            stream.waiting_for = last.waiting_for.unwrap_or(stream.waiting_for);
                            stream.drainable = false;
                        }
                        report.drained.extend(parking);
                    }
                    Err(err) => warn!(error = %err, "cannot drain parked events"),
                }
                if stream.parked == 0 {
                    continue; // drained empty: out of the index
                }
            }
            report.entities += 1;
            report.oldest_parked_age_seconds = report
                .oldest_parked_age_seconds
                .max(Some(stream.parked_for_seconds));
            longest.push(stream);
            if longest.len() >= 2 * LOGGED {
                keep_longest(&mut longest);
            }
        }
        match page.next {
            Some(next) => after = Some(next),
            None => break,
        }
    }
    keep_longest(&mut longest);
    for stream in &longest {
        warn!(
            stream = %stream.key.id(),
            entity = %stream.key.kind().label(),
            parked = stream.parked,
            waiting_for = stream.waiting_for,
            parked_for_seconds = stream.parked_for_seconds,
            drainable = stream.drainable,
            "events still parked"
        );
    }
    report.longest = longest;
    if !report.complete {
        warn!(
            entities = report.entities,
            "the sweep reached the deadline before the end of the index: the next one goes on"
        );
    }
    info!(
        entities = report.entities,
        oldest_parked_age_seconds = report.oldest_parked_age_seconds,
        drained = report
            .drained
            .iter()
            .map(|parking| parking.drained.len())
            .sum::<usize>(),
        complete = report.complete,
        "parked events checked"
    );
    Ok(report)
}

/// The [`LOGGED`] longest waiting, longest first.
fn keep_longest(streams: &mut Vec<ParkedStream>) {
    streams.sort_by(|a, b| {
        (Reverse(a.parked_for_seconds), &a.key).cmp(&(Reverse(b.parked_for_seconds), &b.key))
    });
    streams.truncate(LOGGED);
}

/// A call's result, `None` when the deadline stopped it (not started, or
/// cut by the time left): the walk ends there, without an error.
fn within_deadline<T>(result: Result<T, CallError>) -> Result<Option<T>, StoreError> {
    match result {
        Ok(value) => Ok(Some(value)),
        Err(CallError::Deadline) | Err(CallError::Store(StoreError::Timeout { .. })) => Ok(None),
        Err(CallError::Store(err)) => Err(err),
    }
}
