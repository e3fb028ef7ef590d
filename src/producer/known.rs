//! What an event store knows of its streams: for each stream it wrote to or
//! read, an event it saw there (the last one) and the kind of its events.
//! Events are never changed nor removed, so what it knows stays true; only
//! the stream may have moved on since (another writer), which the next
//! conditional put finds. An append after a known event needs no read and
//! no check in a transaction: one conditional `PutItem` (1 write unit).
//! (A table replaced under a running producer, by a restore in place,
//! breaks "never removed": restart the producer with it.)

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// The most streams remembered; past it, everything is forgotten at once
/// (a stream forgotten costs one read at its next append, as before).
const MAX_STREAMS: usize = 100_000;

/// A stream's event seen to exist, and its kind (`None`: of a type the
/// domain ignores, or of an earlier release).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Seen {
    pub(super) sequence: u64,
    pub(super) kind: Option<String>,
}

/// The streams an event store (and its clones) knows.
#[derive(Debug, Clone, Default)]
pub(super) struct Known(Arc<Mutex<HashMap<String, Seen>>>);

impl Known {
    fn streams(&self) -> std::sync::MutexGuard<'_, HashMap<String, Seen>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The latest event known of `stream`.
    pub(super) fn get(&self, stream: &str) -> Option<Seen> {
        self.streams().get(stream).cloned()
    }

    /// Notes that `stream` holds an event at `sequence` (0: nothing to
    /// note), of `kind`; a later one known already stays.
    pub(super) fn note(&self, stream: &str, sequence: u64, kind: Option<&str>) {
        if sequence == 0 {
            return;
        }
        let mut streams = self.streams();
        if streams.len() >= MAX_STREAMS && !streams.contains_key(stream) {
            streams.clear();
        }
        let seen = streams.entry(stream.to_owned()).or_insert(Seen {
            sequence: 0,
            kind: None,
        });
        if sequence >= seen.sequence {
            seen.sequence = sequence;
            if kind.is_some() {
                seen.kind = kind.map(str::to_owned);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_latest_event_is_kept_with_its_kind() {
        let known = Known::default();
        assert_eq!(known.get("s"), None);
        known.note("s", 0, Some("ORDER"));
        assert_eq!(known.get("s"), None, "0 is no event");
        known.note("s", 3, Some("ORDER"));
        known.note("s", 2, None);
        assert_eq!(
            known.get("s"),
            Some(Seen {
                sequence: 3,
                kind: Some("ORDER".to_owned())
            })
        );
        known.note("s", 4, None);
        assert_eq!(
            known.get("s").map(|seen| (seen.sequence, seen.kind)),
            Some((4, Some("ORDER".to_owned())))
        );
    }
}
