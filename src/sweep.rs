//! The scheduled look at parked events.
//!
//! A stream whose missing event never comes sends nothing more, so nothing
//! in the message path would notice it waiting. Every few minutes (a
//! schedule in `template.yaml`) the function reads the index of entities
//! with events parked (one query), logs the longest waiting ones, and
//! records `ParkedEntities` and `OldestParkedAge`, which the parked-too-long
//! alarm watches. An entity whose next sequence is itself parked (a drain
//! that the deadline or an error cut short) is drained on the spot.

use tracing::{info, warn};

use crate::domain::{Entity, EntityKey};
use crate::runner::{Invocation, ParkingReport, Runner};
use crate::store::{Store, StoreError};

/// How many of the longest waiting entities a sweep logs one by one.
pub const LOGGED: usize = 100;

/// One entity with events parked on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParkedStream {
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
    /// Entities with events parked.
    pub entities: usize,
    /// The longest waiting ones, at most [`LOGGED`], longest first.
    pub longest: Vec<ParkedStream>,
    /// `None` when nothing is parked.
    pub oldest_parked_age_seconds: Option<u64>,
    /// What the sweep drained (entities whose drain had been cut short).
    pub drained: Vec<ParkingReport>,
}

/// The schedule's sweep: drains what can be drained, then looks at what
/// stays parked.
pub async fn sweep<S: Store>(
    runner: &Runner<S>,
    invocation: Invocation,
) -> Result<SweepReport, StoreError> {
    let seen = look(runner.store(), invocation.now).await?;
    let mut drained = Vec::new();
    for stream in seen.longest.iter().filter(|stream| stream.drainable) {
        match runner.drain(&stream.key, &invocation).await {
            Ok(parking) => drained.extend(parking),
            Err(err) => warn!(error = %err, "cannot drain parked events"),
        }
    }
    let mut report = if drained.is_empty() {
        seen
    } else {
        look(runner.store(), invocation.now).await?
    };
    report.drained = drained;
    Ok(report)
}

/// Looks at every entity with events parked, as of `now` (epoch seconds),
/// and logs the longest waiting ones. Reads only.
pub async fn look<S: Store>(store: &S, now: u64) -> Result<SweepReport, StoreError> {
    let parked = store.parked_entities().await?;
    let longest = &parked[..parked.len().min(LOGGED)];
    let keys: Vec<EntityKey> = longest.iter().map(|entity| entity.key.clone()).collect();
    let loaded = if keys.is_empty() {
        Default::default()
    } else {
        store.load(&keys, &[]).await?
    };
    let mut report = SweepReport {
        entities: parked.len(),
        longest: Vec::with_capacity(longest.len()),
        oldest_parked_age_seconds: parked
            .first()
            .map(|entity| now.saturating_sub(entity.since)),
        drained: Vec::new(),
    };
    for entity in longest {
        let at = match loaded.entities.get(&entity.key) {
            Some(Ok(found)) => Entity::sequence(found),
            _ => 0,
        };
        let sequences = loaded
            .parking
            .get(&entity.key)
            .map(|parking| &parking.sequences);
        let waiting_for = at.saturating_add(1);
        let stream = ParkedStream {
            key: entity.key.clone(),
            parked_for_seconds: now.saturating_sub(entity.since),
            parked: sequences.map_or(0, |sequences| sequences.len()),
            waiting_for,
            drainable: sequences
                .and_then(|sequences| sequences.first())
                .is_some_and(|first| *first <= waiting_for),
        };
        let (kind, id) = match &stream.key {
            EntityKey::Order(id) => ("order", id),
            EntityKey::Product(id) => ("product", id),
        };
        warn!(
            stream = %id,
            entity = kind,
            parked = stream.parked,
            waiting_for = stream.waiting_for,
            parked_for_seconds = stream.parked_for_seconds,
            drainable = stream.drainable,
            "events still parked"
        );
        report.longest.push(stream);
    }
    info!(
        entities = report.entities,
        oldest_parked_age_seconds = report.oldest_parked_age_seconds,
        "parked events checked"
    );
    Ok(report)
}
