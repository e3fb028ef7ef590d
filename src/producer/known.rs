//! What an event store knows of its streams: for each stream it wrote to or
//! read, an event it saw there (the last one) and the kind of its events.
//! Events are never changed nor removed, so what it knows stays true; only
//! the stream may have moved on since (another writer), which the next
//! conditional put finds. An append after a known event needs no read and
//! no check in a transaction: one conditional `PutItem` (1 write unit).
//! (A table replaced under a running producer, by a restore in place,
//! breaks "never removed": restart the producer with it.)
//!
//! It also knows, for each stream, the subjects whose key item it read
//! (holding a key) while the stream held an event, with every event since
//! its own: their keys are vouched for, and an append right after its last
//! event seals with the kept key instead of reading the item again. An
//! erasure deletes the key and then appends to each of the subject's
//! streams that holds an event, so it always breaks the chain: the next put
//! finds its slot taken, and the key is read again before another try.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// The most streams remembered; past it, everything is forgotten at once
/// (a stream forgotten costs one read at its next append, as before).
const MAX_STREAMS: usize = 100_000;

/// The most subjects vouched for on one stream.
const MAX_VOUCHED: usize = 16;

/// A stream's event seen to exist, and its kind (`None`: of a type the
/// domain ignores, or of an earlier release).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Seen {
    pub(super) sequence: u64,
    pub(super) kind: Option<String>,
    /// Subjects whose key is vouched for at `sequence` (see the module's
    /// documentation).
    pub(super) vouched: Vec<String>,
}

/// The streams an event store (and its clones) knows.
#[derive(Debug, Clone, Default)]
pub(super) struct KnownStreams(Arc<Mutex<HashMap<String, Seen>>>);

impl KnownStreams {
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
    /// note), of `kind`; a later one known already stays. An event past the
    /// one known is another writer's: no key is vouched for any more.
    pub(super) fn note(&self, stream: &str, sequence: u64, kind: Option<&str>) {
        if sequence == 0 {
            return;
        }
        self.with(stream, |seen| {
            if sequence > seen.sequence {
                seen.vouched.clear();
            }
            if sequence >= seen.sequence {
                seen.sequence = sequence;
                if kind.is_some() {
                    seen.kind = kind.map(str::to_owned);
                }
            }
        });
    }

    /// Notes this store's own append of events `first..=last` to `stream`,
    /// of `kind`, whose keys of `subjects` were read while event
    /// `first - 1` existed (or vouched for there). Right after the last
    /// event known, the keys vouched for before stay so; otherwise only
    /// `subjects` are.
    pub(super) fn appended(
        &self,
        stream: &str,
        (first, last): (u64, u64),
        kind: Option<&str>,
        subjects: &[String],
    ) {
        if last == 0 {
            return;
        }
        self.with(stream, |seen| {
            if seen.sequence + 1 != first {
                seen.vouched.clear();
            }
            for subject in subjects {
                if !seen.vouched.contains(subject) {
                    seen.vouched.push(subject.clone());
                }
            }
            seen.vouched.truncate(MAX_VOUCHED);
            seen.sequence = seen.sequence.max(last);
            if kind.is_some() {
                seen.kind = kind.map(str::to_owned);
            }
        });
    }

    fn with(&self, stream: &str, change: impl FnOnce(&mut Seen)) {
        let mut streams = self.streams();
        if streams.len() >= MAX_STREAMS && !streams.contains_key(stream) {
            streams.clear();
        }
        let seen = streams.entry(stream.to_owned()).or_insert(Seen {
            sequence: 0,
            kind: None,
            vouched: Vec::new(),
        });
        change(seen);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_latest_event_is_kept_with_its_kind() {
        let known = KnownStreams::default();
        assert_eq!(known.get("s"), None);
        known.note("s", 0, Some("ORDER"));
        assert_eq!(known.get("s"), None, "0 is no event");
        known.note("s", 3, Some("ORDER"));
        known.note("s", 2, None);
        assert_eq!(
            known.get("s"),
            Some(Seen {
                sequence: 3,
                kind: Some("ORDER".to_owned()),
                vouched: Vec::new(),
            })
        );
        known.note("s", 4, None);
        assert_eq!(
            known.get("s").map(|seen| (seen.sequence, seen.kind)),
            Some((4, Some("ORDER".to_owned())))
        );
    }

    #[test]
    fn keys_stay_vouched_for_while_every_event_is_the_stores_own() {
        let known = KnownStreams::default();
        let vouched =
            |known: &KnownStreams| known.get("s").map(|seen| seen.vouched).unwrap_or_default();
        known.note("s", 2, Some("ORDER"));
        known.appended("s", (3, 3), Some("ORDER"), &["ada".to_owned()]);
        assert_eq!(vouched(&known), ["ada"]);
        // Its own next events, with or without a key: still vouched for.
        known.appended("s", (4, 5), None, &[]);
        known.appended("s", (6, 6), None, &["bob".to_owned()]);
        assert_eq!(vouched(&known), ["ada", "bob"]);
        known.note("s", 6, None);
        assert_eq!(vouched(&known), ["ada", "bob"], "its own event read back");
        // Another writer's event: nothing is vouched for.
        known.note("s", 7, None);
        assert!(vouched(&known).is_empty());
        known.appended("s", (8, 8), None, &["ada".to_owned()]);
        assert_eq!(vouched(&known), ["ada"]);
        // An append that did not follow the last event known (a race lost
        // to another writer): only its own subjects.
        known.appended("s", (10, 10), None, &[]);
        assert!(vouched(&known).is_empty());
    }
}
