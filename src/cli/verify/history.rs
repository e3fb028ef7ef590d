//! Whether the projection holds the event store's history: an entity the
//! table holds at a sequence the fold passed must hold the stored event of
//! that sequence as its `lastEventId`. A projection fed directly, and a
//! store that restarted its streams at 1 when the producer was switched on
//! over it, differ there (docs/event-store.md, "Switching the producer on
//! over a projection fed directly").

use super::compare::Difference;
use crate::domain::Domain;
use crate::producer::EventStore;
use crate::store::StoreError;

/// Marks as diverged each entity found behind the fold whose `lastEventId`
/// is not the stored event's at its sequence (one read of the store each).
/// Ahead and same-sequence differences are marked by the comparison.
pub(super) async fn mark_diverged(
    events: &EventStore,
    domain: &Domain,
    differences: &mut [Difference],
) -> Result<(), StoreError> {
    for difference in differences.iter_mut() {
        let Some((Some(expected), Some(found))) = difference.sequences() else {
            continue;
        };
        let (Some(event_id), Some(key)) = (
            difference.found_event_id.as_deref(),
            domain.key_of_pk(&difference.pk),
        ) else {
            continue;
        };
        if found == 0 || found >= expected {
            continue;
        }
        let stored = events.read(key.id(), found - 1, 1).await?;
        if let Some(event) = stored.first().filter(|event| event.sequence == found) {
            difference.diverged = event.event_id != event_id;
        }
    }
    Ok(())
}

/// The streams of the differences `pick` chooses, by name: an entity's id,
/// a counter's id.
pub(super) fn streams(
    domain: &Domain,
    differences: &[Difference],
    pick: impl Fn(&Difference) -> bool,
) -> Vec<String> {
    let mut streams: Vec<String> = differences
        .iter()
        .filter(|difference| pick(difference))
        .filter_map(|difference| stream(domain, &difference.pk, &difference.sk))
        .collect();
    streams.sort();
    streams.dedup();
    streams
}

/// The stream an item's key belongs to.
fn stream(domain: &Domain, pk: &str, sk: &str) -> Option<String> {
    if let Some(key) = domain.key_of_pk(pk).filter(|_| sk == super::compare::STATE) {
        return Some(key.id().to_owned());
    }
    domain
        .counters()
        .iter()
        .find_map(|counter| counter.id_of(pk, sk).map(str::to_owned))
}

/// `a, b and 3 more`: at most five names.
pub(super) fn named(streams: &[String]) -> String {
    const SHOWN: usize = 5;
    let mut text = streams
        .iter()
        .take(SHOWN)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if streams.len() > SHOWN {
        text.push_str(&format!(" and {} more", streams.len() - SHOWN));
    }
    text
}
