//! The scheduled look at parked events.
//!
//! A stream whose missing event never comes sends nothing more, so nothing
//! in the message path would notice it waiting. Every few minutes (a
//! schedule in `template.yaml`) the function reads the index of entities
//! with events parked (one query), logs the longest waiting ones, and
//! records `ParkedEntities` and `OldestParkedAge`, which the stuck-parking
//! alarm watches.

use tracing::{info, warn};

use crate::domain::{Entity, EntityKey};
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
}

/// Looks at every entity with events parked, as of `now` (epoch seconds).
pub async fn sweep<S: Store>(store: &S, now: u64) -> Result<SweepReport, StoreError> {
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
    };
    for entity in longest {
        let at = match loaded.entities.get(&entity.key) {
            Some(Ok(found)) => Entity::sequence(found),
            _ => 0,
        };
        let stream = ParkedStream {
            key: entity.key.clone(),
            parked_for_seconds: now.saturating_sub(entity.since),
            parked: loaded
                .parking
                .get(&entity.key)
                .map_or(0, |parking| parking.sequences.len()),
            waiting_for: at.saturating_add(1),
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
