//! The entities this process last committed (or read for a batch that
//! wrote nothing to them), kept so that a hot stream's next batch is decided
//! without reading its item first.
//!
//! The cache is only a guess. Every write stays conditioned exactly as
//! after a read: on the entity's `sequence`, on its `dueAt` and on its exact
//! `parked` set (`expression.rs`, and the memory store alike). So an entry
//! made stale by sequence-guard (another invocation, the sweep, `resend`,
//! `rebuild`: each moves `sequence` or deletes the item) costs one failed
//! condition, whose item comes back and is decided again as a lost race is.
//! What it cannot see is a change made by hand that leaves `sequence` as it
//! is: the next event is applied to the item as this process wrote it, over
//! that change (docs/behaviour.md says to edit an item by hand only with
//! `WARM_ENTITIES=0`).
//!
//! | what the load tells the planner | why a cached item is safe |
//! | ------------------------------- | ------------------------- |
//! | the entity | an entry is the item as this process's write left it, stored only after the write succeeded, or as a batch that wrote nothing found it |
//! | the parked sequences | the write requires the same `parked` set: another invocation that parked an event fails it, and the item returned lists it, so it is drained |
//! | `dueAt` | the write requires the same `dueAt`: a deadline fired elsewhere fails it |
//! | deduplication records | not cached: a batch that needs them is loaded |
//!
//! A batch whose messages are all at or below the cached sequence writes
//! nothing: its duplicates are answered without a request. A batch that
//! starts past the cached sequence's next one is read: a gap is never
//! failed on a guess. Under Lambda, a FIFO group's batches move between
//! environments; one that took none of the group's last batches finds its
//! entry behind, and failing the batch as a gap would hold the group for a
//! visibility timeout (`warm_split`). An event parked
//! meanwhile waits for the gap before it, whose write fails the condition
//! and drains it; the sweep drains the rest as before.
//!
//! An entry is dropped on a lost race, on any store error for its key, and
//! when the map is full (the oldest entry first). Its size is
//! `WARM_ENTITIES` (entries; `0`: no cache).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use crate::entity::EntityKey;
use crate::store::Stored;

/// A bounded map of entity items as this process last wrote them, shared by
/// concurrent invocations.
#[derive(Debug)]
pub(super) struct Warm {
    capacity: usize,
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    /// Each item (`None` while a run has it), with the stamp of its last
    /// put. A key is shared with its places in `order`: a hot entity put
    /// again and again allocates nothing.
    items: HashMap<Arc<EntityKey>, (Option<Stored>, u64)>,
    /// Keys in the order they were put, with the stamp of that put (a key
    /// may be listed more than once; only the place whose stamp is its
    /// item's counts when evicting).
    order: VecDeque<(Arc<EntityKey>, u64)>,
    next: u64,
}

impl Warm {
    pub(super) fn new(capacity: usize) -> Self {
        Warm {
            capacity,
            inner: Mutex::new(Inner::default()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // A panic while holding the lock leaves a map that is still a set of
        // guesses: every write is conditioned anyway.
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The item as this process last knew it, if it is known, taken out of
    /// the map for the run that decides on it (not copied): the run puts
    /// it back as its write, or its finding nothing to write, leaves it.
    /// A run that puts nothing back (an error, a lost race) leaves the key
    /// unknown, which is what it would forget anyway.
    pub(super) fn take(&self, key: &EntityKey) -> Option<Stored> {
        if self.capacity == 0 {
            return None;
        }
        // Its key and place stay, for the put that follows.
        self.lock()
            .items
            .get_mut(key)
            .and_then(|(stored, _)| stored.take())
    }

    /// Keeps the item as a write of this process left it.
    pub(super) fn put(&self, key: &EntityKey, stored: Stored) {
        if self.capacity == 0 {
            return;
        }
        let mut inner = self.lock();
        let Inner { items, order, next } = &mut *inner;
        let stamp = *next;
        *next = next.wrapping_add(1);
        // A hot entity is put again and again: its key is cloned once.
        let shared = match items.get_key_value(key) {
            Some((shared, _)) => Arc::clone(shared),
            None => Arc::new(key.clone()),
        };
        items.insert(Arc::clone(&shared), (Some(stored), stamp));
        order.push_back((shared, stamp));
        while items.len() > self.capacity {
            let Some((oldest, put)) = order.pop_front() else {
                break;
            };
            // Evict only at a key's last place in the order.
            if items.get(&oldest).is_some_and(|(_, last)| *last == put) {
                items.remove(&oldest);
            }
        }
        // The order list stays within a bound too: the stale places are
        // dropped when they pile up.
        if order.len() > 4 * self.capacity.max(16) {
            order.retain(|(key, put)| items.get(key).is_some_and(|(_, last)| last == put));
        }
    }

    /// Forgets the item (a lost race, a store error).
    pub(super) fn forget(&self, key: &EntityKey) {
        if self.capacity == 0 {
            return;
        }
        self.lock().items.remove(key);
    }

    /// How many items are kept (not counting those a run has now).
    pub(super) fn len(&self) -> usize {
        self.lock()
            .items
            .values()
            .filter(|(stored, _)| stored.is_some())
            .count()
    }
}

impl<S: crate::store::Store> super::Runner<S> {
    /// The batch's keys split: those to read, and the items known warm,
    /// beside `keys` (at each key's first place; `None` elsewhere).
    /// `sequences` gives each key's event's sequence, beside `keys` (in
    /// batch order). A kept item is trusted only when the batch's first
    /// event on it continues it or is behind it: one further on is a gap
    /// against what this process knows, which is what a process that has
    /// fallen behind sees (another process took the stream's batches
    /// meanwhile, as FIFO groups move between Lambda's environments). A
    /// gap must not fail on a guess, so its item is read. (A later event
    /// of the batch that is lower can only make a read that was not needed.)
    pub(super) fn warm_split(
        &self,
        keys: &[EntityKey],
        sequences: &[Option<u64>],
    ) -> (Vec<EntityKey>, Vec<Option<Stored>>) {
        let mut cold = Vec::new();
        let mut warm = Vec::with_capacity(keys.len());
        for (index, key) in keys.iter().enumerate() {
            if keys[..index].contains(key) {
                warm.push(None);
                continue;
            }
            let first = sequences.get(index).copied().flatten();
            match self.warm.take(key) {
                Some(stored) if continues(&stored, first) => warm.push(Some(stored)),
                _ => {
                    cold.push(key.clone());
                    warm.push(None);
                }
            }
        }
        (cold, warm)
    }

    /// Keeps the item as this process's write left it.
    pub(super) fn warm_put(&self, key: &EntityKey, stored: Stored) {
        self.warm.put(key, stored);
    }

    /// Forgets the item: a lost race or an error left it unknown.
    pub(super) fn warm_forget(&self, key: &EntityKey) {
        self.warm.forget(key);
    }

    /// How many items the runner keeps warm (for tests and metrics).
    pub fn warm_entities(&self) -> usize {
        self.warm.len()
    }
}

/// Whether a batch whose first sequence on the entity is `first` can be
/// decided on `stored` without reading it: the entity exists, and `first`
/// is at most its next sequence (an event without a sequence: yes).
fn continues(stored: &Stored, first: Option<u64>) -> bool {
    stored.entity.as_ref().is_some_and(|entity| {
        first.is_none_or(|first| first <= entity.sequence().saturating_add(1))
    })
}
