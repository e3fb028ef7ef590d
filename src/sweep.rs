//! The scheduled look at parked events (and, first, a process's due
//! deadlines fired: `runner/due.rs`).
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
//! The walk stops at the invocation's deadline (less its margin). Each
//! sweep goes on where the last one stopped (the store keeps a
//! [`SweepMark`]), and at the end of the index the next one starts again
//! from the top: a **pass** is the sweeps from the index's start to its
//! end, one sweep when the index is short. The mark carries what the pass
//! has seen so far, so that its last sweep reports the whole index's
//! count. What was drained stays drained. Memory holds one page and the
//! [`LOGGED`] longest waiting, however large the index.
//!
//! Before it walks, a sweep brings one page of what an earlier release left
//! in the index to the current layout ([`Store::upgrade_parked_index`]):
//! the sweep is the only one that writes there; [`look`] reads only.

use std::cmp::Reverse;

use tracing::{info, warn};

use crate::domain::Domain;
use crate::entity::{AnyEntity, EntityKey};
use crate::runner::DeadlineReport;
use crate::runner::{CallError, Invocation, ParkingReport, Runner, RunnerConfig};
use crate::store::{DueCursor, Loaded, ParkedEntity, Store, StoreError, SweepMark};

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
    /// Entities with events parked in the pass this sweep belongs to: those
    /// it saw and those the earlier sweeps of the pass saw. When
    /// `complete`, the whole index's.
    pub entities: usize,
    /// Entities with events parked that this sweep saw itself.
    pub seen: usize,
    /// The longest waiting ones this sweep saw, at most [`LOGGED`],
    /// longest first.
    pub longest: Vec<ParkedStream>,
    /// The longest wait seen in the pass (as it was when seen); `None` when
    /// the pass has seen nothing parked.
    pub oldest_parked_age_seconds: Option<u64>,
    /// What the sweep drained (entities whose drain had been cut short).
    pub drained: Vec<ParkingReport>,
    /// Whether the walk reached the end of the index, ending its pass;
    /// `false`: the deadline stopped it, and the next sweep goes on there.
    pub complete: bool,
    /// A process's deadlines that were due, fired first.
    pub deadlines: DeadlineReport,
}

/// The schedule's sweep: fires a process's due deadlines from where the
/// last sweep's stopped, within half its time; upgrades a page of the
/// index's earlier layout, walks the index from where the last sweep
/// stopped until its end or the deadline, drains what can be drained,
/// reports what stays parked, and keeps where both stopped for the next
/// sweep.
pub async fn sweep<S: Store>(
    runner: &Runner<S>,
    invocation: Invocation,
) -> Result<SweepReport, StoreError> {
    let mark = resume(runner, &invocation).await;
    // A process's due deadlines first (the schedule's period is their
    // precision), within half the time: deadlines that keep being tried and
    // not fired (a process behind its streams) never leave the parked
    // events unwatched.
    let share = runner.first_half(&invocation);
    let deadlines = runner.fire_due_from(&share, mark.deadlines.clone()).await;
    upgrade(runner, &invocation).await;
    let resume_at = deadlines.resume_at.clone();
    let (mut report, after) = match walk(runner, &invocation, true, mark.after.clone()).await {
        Ok(walked) => walked,
        Err(err) => {
            // The deadlines went on all the same: the next sweep goes on
            // from where they stopped, and walks the index from where it was.
            let next = SweepMark {
                deadlines: resume_at,
                ..mark.clone()
            };
            keep(runner, &mark, &next).await;
            return Err(err);
        }
    };
    report.deadlines = deadlines;
    let (report, next) = close(report, &mark, after, resume_at);
    keep(runner, &mark, &next).await;
    Ok(log_report(report))
}

/// Saves where this sweep stopped, when it is not where the last one did.
async fn keep<S: Store>(runner: &Runner<S>, mark: &SweepMark, next: &SweepMark) {
    if next != mark {
        // Within the margin kept before the deadline: not cut by it.
        if let Err(err) = runner.store().save_sweep_mark(next).await {
            warn!(error = %err, "cannot keep where the sweep stopped: the next one starts again from the same place");
        }
    }
}

/// Looks at every entity with events parked, as of `now` (epoch seconds),
/// from the index's start to its end, and logs the longest waiting ones.
/// Reads only: neither the sweep's mark nor the index's earlier layout is
/// touched (entries of that layout are read as they are).
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
    let (report, _) = walk(&runner, &invocation, false, None).await?;
    Ok(log_report(report))
}

/// One page of the index's earlier layout brought to the current one; a
/// failure is logged, and the walk goes on.
async fn upgrade<S: Store>(runner: &Runner<S>, invocation: &Invocation) {
    let call = runner.store().upgrade_parked_index(PAGE);
    match runner.timed("TransactWriteItems", invocation, call).await {
        Ok(0) | Err(CallError::Deadline) => {}
        Ok(read) => info!(
            entries = read,
            "entries of the earlier index layout brought to the current one"
        ),
        Err(CallError::Store(err)) => {
            warn!(error = %err, "cannot bring the earlier index layout to the current one: the next sweep tries again")
        }
    }
}

/// Where the last sweep stopped; the index's start when no mark is kept
/// or it cannot be read (logged).
async fn resume<S: Store>(runner: &Runner<S>, invocation: &Invocation) -> SweepMark {
    let read = runner.store().sweep_mark();
    match runner.timed("BatchGetItem", invocation, read).await {
        Ok(mark) => mark.unwrap_or_default(),
        Err(CallError::Deadline) => SweepMark::default(),
        Err(CallError::Store(err)) => {
            warn!(error = %err, "cannot read where the last sweep stopped: this one starts at the index's start");
            SweepMark::default()
        }
    }
}

/// The pass's figures in the report, and the mark for the next sweep:
/// the pass so far and where this walk stopped (`after`), or a new pass
/// from the start once the walk reached the end (the deadlines' cursor
/// left for the caller).
fn close(
    mut report: SweepReport,
    mark: &SweepMark,
    after: Option<String>,
    deadlines: Option<DueCursor>,
) -> (SweepReport, SweepMark) {
    // A walk from the start begins a pass: the mark's figures were another's.
    let (before, oldest) = match mark.after {
        Some(_) => (mark.entities, mark.oldest_age_seconds),
        None => (0, None),
    };
    let entities = before.saturating_add(report.seen as u64);
    report.entities = usize::try_from(entities).unwrap_or(usize::MAX);
    report.oldest_parked_age_seconds = report.oldest_parked_age_seconds.max(oldest);
    let next = if report.complete {
        SweepMark {
            deadlines,
            ..SweepMark::default()
        }
    } else {
        SweepMark {
            after,
            entities,
            oldest_age_seconds: report.oldest_parked_age_seconds,
            deadlines,
        }
    };
    (report, next)
}

/// Pages through the index from the cursor `from` (the start when `None`)
/// to its end or the deadline; drains drainable entities when `drain`. With
/// the report, the cursor to go on after (`None` once at the end).
async fn walk<S: Store>(
    runner: &Runner<S>,
    invocation: &Invocation,
    drain: bool,
    from: Option<String>,
) -> Result<(SweepReport, Option<String>), StoreError> {
    let mut walk = Walk {
        runner,
        invocation,
        drain,
        report: SweepReport {
            complete: true,
            ..SweepReport::default()
        },
        longest: Vec::new(),
    };
    let mut after = from;
    loop {
        let Some(page) = walk.read_page(after.as_deref()).await? else {
            walk.report.complete = false;
            break;
        };
        for stream in page.streams {
            walk.settle(stream).await;
        }
        after = page.next;
        if after.is_none() {
            break;
        }
    }
    Ok((walk.finish(), after))
}

/// One walk through the index: what it has found so far.
struct Walk<'a, S: Store> {
    runner: &'a Runner<S>,
    invocation: &'a Invocation,
    drain: bool,
    report: SweepReport,
    /// The longest waiting so far, at most `2 * LOGGED` between trims.
    longest: Vec<ParkedStream>,
}

/// One page of the index, read with the entities' items.
struct Page {
    streams: Vec<ParkedStream>,
    next: Option<String>,
}

impl<S: Store> Walk<'_, S> {
    /// Next request: the page of the index after `after`, and the items of
    /// its entities; `None` when the deadline stopped either read.
    async fn read_page(&self, after: Option<&str>) -> Result<Option<Page>, StoreError> {
        let store = self.runner.store();
        let read = store.parked_entities(after, PAGE);
        let timed = self.runner.timed("Query", self.invocation, read).await;
        let Some(page) = within_deadline(timed)? else {
            return Ok(None);
        };
        let entries = self.known_entries(&page.entities);
        let loaded = if entries.is_empty() {
            Loaded::default()
        } else {
            let keys: Vec<EntityKey> = entries.iter().map(|(key, _)| key.clone()).collect();
            let load = store.load(&keys, &[]);
            let timed = self
                .runner
                .timed("BatchGetItem", self.invocation, load)
                .await;
            match within_deadline(timed)? {
                Some(loaded) => loaded,
                None => return Ok(None),
            }
        };
        let now = self.invocation.now;
        let streams = entries
            .into_iter()
            .map(|(key, since)| stream_of(key, since, &loaded, now))
            .collect();
        Ok(Some(Page {
            streams,
            next: page.next,
        }))
    }

    /// The entries of kinds the domain registers; the others are left alone.
    fn known_entries(&self, entries: &[ParkedEntity]) -> Vec<(EntityKey, u64)> {
        entries
            .iter()
            .filter_map(|ParkedEntity { pk, since }| {
                let key = self.runner.domain().key_of_pk(pk);
                if key.is_none() {
                    warn!(entry = %pk, "an entity with events parked is of a kind this domain does not register: skipped");
                }
                Some((key?, *since))
            })
            .collect()
    }

    /// Absorbs one entity: drains it when it can and should be drained,
    /// then counts it if events stay parked on it (an entry whose entity
    /// has nothing parked was drained since the index was read, or left by
    /// an earlier release: not counted).
    async fn settle(&mut self, mut stream: ParkedStream) {
        if stream.parked == 0 {
            return;
        }
        if self.drain && stream.drainable {
            match self.runner.drain(&stream.key, self.invocation).await {
                Ok(parking) => {
                    if let Some(last) = parking.last() {
                        stream.parked = last.parked_now;
                        stream.waiting_for = last.waiting_for.unwrap_or(stream.waiting_for);
                        stream.drainable = false;
                    }
                    self.report.drained.extend(parking);
                }
                Err(err) => warn!(error = %err, "cannot drain parked events"),
            }
            if stream.parked == 0 {
                return; // drained empty: out of the index
            }
        }
        self.report.seen += 1;
        self.report.entities += 1;
        self.report.oldest_parked_age_seconds = self
            .report
            .oldest_parked_age_seconds
            .max(Some(stream.parked_for_seconds));
        self.longest.push(stream);
        if self.longest.len() >= 2 * LOGGED {
            keep_longest(&mut self.longest);
        }
    }

    /// Logs the longest waiting the walk found and hands back its report.
    fn finish(self) -> SweepReport {
        let mut report = self.report;
        let mut longest = self.longest;
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
        report
    }
}

/// Logs what a sweep or a look found, and hands its report back.
fn log_report(report: SweepReport) -> SweepReport {
    if !report.complete {
        warn!(
            seen = report.seen,
            "the sweep reached the deadline before the end of the index: the next one goes on there"
        );
    }
    info!(
        entities = report.entities,
        seen = report.seen,
        oldest_parked_age_seconds = report.oldest_parked_age_seconds,
        drained = report
            .drained
            .iter()
            .map(|parking| parking.drained.len())
            .sum::<usize>(),
        complete = report.complete,
        "parked events checked"
    );
    report
}

/// One entry of the index as the walk sees it: where its entity stands
/// (`loaded`), what is parked on it, and for how long as of `now`.
fn stream_of(key: EntityKey, since: u64, loaded: &Loaded, now: u64) -> ParkedStream {
    let at = match loaded.entities.get(&key) {
        Some(Ok(found)) => AnyEntity::sequence(found),
        _ => 0,
    };
    let sequences = loaded.parking.get(&key).map(|parking| &parking.sequences);
    let waiting_for = at.saturating_add(1);
    ParkedStream {
        parked_for_seconds: now.saturating_sub(since),
        parked: sequences.map_or(0, |sequences| sequences.len()),
        waiting_for,
        drainable: sequences
            .and_then(|sequences| sequences.first())
            .is_some_and(|first| *first <= waiting_for),
        key,
    }
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
