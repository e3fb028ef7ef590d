//! The in-memory store: the same conditional semantics as the DynamoDB one.
//!
//! | file | what it holds |
//! | --- | --- |
//! | `mod.rs` | [`MemoryStore`]: entities, parked events, conflicts, counters, deadlines, and the [`Store`] operations |
//! | `effects.rs` | a commit's effects on counters of other keys: summed, kept in range |
//! | `log.rs` | the embedded event store a process appends to ([`LoggedEvent`]) |

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use super::{
    Added, Commit, Committed, ConflictRecord, DedupAddition, DedupKey, DueEntry, Existing,
    Inspection, Loaded, MAX_COMMIT_ITEMS, ParkedEntity, ParkedEvent, ParkedPage, Parking, Store,
    StoreError, Stored, SweepMark, added, checks,
};
use crate::entity::{AnyEntity, EntityKey};
use crate::handling::{Counter, Effect, effect_items};
use crate::producer::MemoryEvents;
use crate::store::due_shard;

pub(crate) mod effects;
mod log;

pub use log::LoggedEvent;

#[derive(Debug, Default)]
struct Tables {
    entities: HashMap<EntityKey, AnyEntity>,
    /// Parked events by entity and sequence; an entity is in this map only
    /// while it has some (as the item's `parked` set is removed when empty).
    parked: HashMap<EntityKey, BTreeMap<u64, ParkedEvent>>,
    parked_since: HashMap<EntityKey, u64>,
    conflicts: HashMap<EntityKey, BTreeMap<(u64, String), ConflictRecord>>,
    /// Counters by (counter, id).
    counters: HashMap<(&'static Counter, String), i64>,
    /// (event id, handler name) of every deduplication record, and the
    /// stream it was written for.
    handled: HashMap<(String, &'static str), String>,
    /// Conflicts recorded on counters' streams, by (counter, id).
    counter_conflicts: HashMap<(&'static Counter, String), BTreeMap<String, ConflictRecord>>,
    /// Where the last sweep stopped.
    sweep_mark: Option<SweepMark>,
    /// Deadlines set on entities (a process's states), epoch seconds.
    due: HashMap<EntityKey, u64>,
    /// The embedded event store a process appends to: each stream's
    /// events, in order from sequence 1.
    streams: HashMap<String, Vec<LoggedEvent>>,
    /// The request ids of the appends written.
    requests: HashSet<String>,
    /// The (stream, sequence) of the events a process appended.
    appended: HashSet<(String, u64)>,
    /// The last sequence of each stream seen elsewhere (`replay`'s
    /// input): the embedded event store does not hold those events, and a
    /// stream stands at least there.
    observed: HashMap<String, u64>,
}

impl Tables {
    fn parking(&self, key: &EntityKey) -> Parking {
        Parking {
            sequences: self
                .parked
                .get(key)
                .map(|parked| parked.keys().copied().collect())
                .unwrap_or_default(),
            since: self.parked_since.get(key).copied(),
        }
    }

    fn inspection(&self, key: &EntityKey) -> Inspection {
        Inspection {
            stored: self.stored(key),
            parked: self
                .parked
                .get(key)
                .map(|parked| parked.values().cloned().collect())
                .unwrap_or_default(),
            conflicts: self
                .conflicts
                .get(key)
                .map(|conflicts| conflicts.values().cloned().collect())
                .unwrap_or_default(),
        }
    }

    /// The commit's events parked and drained, and `parkedSince` with them.
    fn change_parking(&mut self, commit: &Commit) {
        let key = &commit.key;
        let parked = self.parked.entry(key.clone()).or_default();
        for sequence in &commit.drain {
            parked.remove(sequence);
        }
        for event in &commit.park {
            parked.insert(event.sequence, event.clone());
        }
        if parked.is_empty() {
            self.parked.remove(key);
            self.parked_since.remove(key);
        } else {
            self.parked_since.entry(key.clone()).or_insert(commit.now);
        }
    }

    fn stored(&self, key: &EntityKey) -> Stored {
        Stored {
            entity: self.entities.get(key).cloned(),
            parking: self.parking(key),
            due_at: self.due.get(key).copied(),
        }
    }
}

/// An embedded table. Each operation is atomic, as a DynamoDB request is.
#[derive(Debug, Default)]
pub struct MemoryStore {
    tables: Mutex<Tables>,
    /// The event store a process's steps append to, when it is not the
    /// table's own embedded one ([`MemoryStore::with_event_store`]).
    events: Option<Arc<MemoryEvents>>,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// The store of a consumer of `events` (an event store in memory that
    /// others read too: a system run on one machine): a gap's missing
    /// events are read from it, and a process's steps append to it, each
    /// step's state and appends at once, or neither.
    #[must_use]
    pub fn with_event_store(mut self, events: Arc<MemoryEvents>) -> Self {
        self.events = Some(events);
        self
    }

    fn tables(&self) -> MutexGuard<'_, Tables> {
        // A panic elsewhere while holding the lock leaves the maps whole:
        // every operation below completes its change before it returns.
        self.tables.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Every entity stored, ordered by key: for tests and `replay`.
    pub fn entities(&self) -> Vec<(EntityKey, AnyEntity)> {
        let mut entities: Vec<(EntityKey, AnyEntity)> = self
            .tables()
            .entities
            .iter()
            .map(|(key, entity)| (key.clone(), entity.clone()))
            .collect();
        entities.sort_by(|a, b| a.0.cmp(&b.0));
        entities
    }

    /// Whether a deduplication record exists for this event and handler.
    pub fn handled(&self, event_id: &str, handler: &str) -> bool {
        self.tables()
            .handled
            .keys()
            .any(|(handled, name)| handled == event_id && *name == handler)
    }

    /// Every conflict recorded on a counter's stream, ordered by counter,
    /// id and event id: for tests.
    pub fn counter_conflicts(&self) -> Vec<(&'static Counter, String, ConflictRecord)> {
        let tables = self.tables();
        let mut conflicts: Vec<(&'static Counter, String, ConflictRecord)> = tables
            .counter_conflicts
            .iter()
            .flat_map(|((counter, id), records)| {
                records
                    .values()
                    .map(|record| (*counter, id.clone(), record.clone()))
            })
            .collect();
        conflicts.sort_by(|a, b| (a.0, &a.1, &a.2.event_id).cmp(&(b.0, &b.1, &b.2.event_id)));
        conflicts
    }

    /// Every entity item with events parked on it or conflicts recorded,
    /// ordered by key: for tests and `replay`.
    pub fn parking(&self) -> Vec<(EntityKey, Inspection)> {
        let tables = self.tables();
        let mut keys: Vec<&EntityKey> = tables
            .parked
            .keys()
            .chain(tables.conflicts.keys())
            .collect();
        keys.sort();
        keys.dedup();
        keys.into_iter()
            .map(|key| (key.clone(), tables.inspection(key)))
            .collect()
    }

    /// Every counter's value, ordered by counter and id.
    pub fn counters(&self) -> Vec<(&'static Counter, String, i64)> {
        let mut counters: Vec<(&'static Counter, String, i64)> = self
            .tables()
            .counters
            .iter()
            .map(|((counter, id), value)| (*counter, id.clone(), *value))
            .collect();
        counters.sort();
        counters
    }
}

// Each operation first yields, as a request to a server would: concurrent
// invocations on one store interleave between operations, never within one.
impl Store for MemoryStore {
    async fn load(&self, keys: &[EntityKey], dedup: &[DedupKey]) -> Result<Loaded, StoreError> {
        tokio::task::yield_now().await;
        let tables = self.tables();
        Ok(Loaded {
            entities: keys
                .iter()
                .filter_map(|key| {
                    tables
                        .entities
                        .get(key)
                        .map(|entity| (key.clone(), Ok(entity.clone())))
                })
                .collect(),
            handled: dedup
                .iter()
                .filter_map(|key| {
                    let stream = tables.handled.get(&(key.event_id.clone(), key.handler))?;
                    Some((key.clone(), Some(stream.clone())))
                })
                .collect(),
            parking: keys
                .iter()
                .filter(|key| tables.parked.contains_key(key))
                .map(|key| (key.clone(), tables.parking(key)))
                .collect(),
            due: keys
                .iter()
                .filter_map(|key| Some((key.clone(), *tables.due.get(key)?)))
                .collect(),
        })
    }

    async fn commit(&self, commit: &Commit) -> Result<Committed, StoreError> {
        self.commit_with_effects(commit, &[]).await
    }

    async fn commit_with_effects(
        &self,
        commit: &Commit,
        effects: &[Effect],
    ) -> Result<Committed, StoreError> {
        tokio::task::yield_now().await;
        let items = commit.items() + effect_items(effects);
        if items > MAX_COMMIT_ITEMS {
            // As DynamoDB refuses a transaction of more than 100 items.
            return Err(StoreError::Request {
                operation: "TransactWriteItems",
                message: format!(
                    "{items} items, more than the {MAX_COMMIT_ITEMS} a transaction holds"
                ),
            });
        }
        if !effects.is_empty() && !commit.touches_entity() {
            return Err(effects::unguarded());
        }
        let mut tables = self.tables();
        let key = &commit.key;
        if commit.touches_entity() {
            // Checked where it is stored: the item is copied only to answer a
            // conflict with it.
            let parked = tables.parked.get(key);
            let as_expected = tables.entities.get(key).map(AnyEntity::sequence)
                == commit.expected.sequence
                && tables.due.get(key).copied() == commit.expected.due_at
                && parked.map_or(0, BTreeMap::len) == commit.expected.parked.len()
                && parked.is_none_or(|parked| parked.keys().eq(commit.expected.parked.iter()));
            // As DynamoDB's transaction: a parked event is put only where none is.
            let taken = parked.is_some_and(|parked| {
                commit
                    .park
                    .iter()
                    .any(|event| parked.contains_key(&event.sequence))
            });
            if !as_expected || taken {
                return Ok(Committed::LostRace {
                    current: tables.stored(key),
                });
            }
            // As DynamoDB's conditional ADD of each counter's sum.
            let sums = effects::sums(&tables.counters, effects)?;
            if let Some(entity) = &commit.entity {
                // As DynamoDB would refuse it.
                checks::entity_fits(entity, &key.pk(), commit.parked_after().len())?;
            }
            if let Some(outbound) = &commit.outbox {
                let appended = match &self.events {
                    Some(events) => log::append_to(events, outbound)?,
                    None => tables
                        .outbox_fits(outbound)
                        .map(|()| tables.append(outbound)),
                };
                match appended {
                    Ok(()) => {}
                    Err(Committed::LostRace { .. }) => {
                        return Ok(Committed::LostRace {
                            current: tables.stored(key),
                        });
                    }
                    Err(answer) => return Ok(answer),
                }
            }
            if let Some(entity) = &commit.entity {
                tables.entities.insert(key.clone(), entity.clone());
            }
            if commit.changes_parking() {
                tables.change_parking(commit);
            }
            match commit.deadline {
                Some(Some(at)) => {
                    tables.due.insert(key.clone(), at);
                }
                Some(None) => {
                    tables.due.remove(key);
                }
                None => {}
            }
            tables.counters.extend(sums);
        }
        if !commit.conflicts.is_empty() {
            let conflicts = tables.conflicts.entry(key.clone()).or_default();
            for conflict in &commit.conflicts {
                conflicts
                    .entry((conflict.sequence, conflict.event_id.clone()))
                    .or_insert_with(|| conflict.clone());
            }
        }
        Ok(Committed::Written)
    }

    async fn parked(
        &self,
        key: &EntityKey,
        sequences: &[u64],
    ) -> Result<Vec<ParkedEvent>, StoreError> {
        tokio::task::yield_now().await;
        let tables = self.tables();
        let Some(parked) = tables.parked.get(key) else {
            return Ok(Vec::new());
        };
        Ok(sequences
            .iter()
            .filter_map(|sequence| parked.get(sequence).cloned())
            .collect())
    }

    async fn parked_entities(
        &self,
        after: Option<&str>,
        limit: usize,
    ) -> Result<ParkedPage, StoreError> {
        tokio::task::yield_now().await;
        // In the order of the index's sort key, as DynamoDB pages it.
        let mut index: Vec<(String, ParkedEntity)> = self
            .tables()
            .parked_since
            .iter()
            .map(|(key, since)| {
                let pk = key.pk();
                let entry = ParkedEntity {
                    pk: pk.clone(),
                    since: *since,
                };
                (pk, entry)
            })
            .filter(|(sort_key, _)| after.is_none_or(|after| sort_key.as_str() > after))
            .collect();
        index.sort_by(|a, b| a.0.cmp(&b.0));
        let limit = limit.max(1);
        let more = index.len() > limit;
        index.truncate(limit);
        Ok(ParkedPage {
            next: if more {
                index.last().map(|(sort_key, _)| sort_key.clone())
            } else {
                None
            },
            entities: index.into_iter().map(|(_, entry)| entry).collect(),
        })
    }

    async fn sweep_mark(&self) -> Result<Option<SweepMark>, StoreError> {
        tokio::task::yield_now().await;
        Ok(self.tables().sweep_mark.clone())
    }

    async fn save_sweep_mark(&self, mark: &SweepMark) -> Result<(), StoreError> {
        tokio::task::yield_now().await;
        self.tables().sweep_mark = Some(mark.clone());
        Ok(())
    }

    async fn due(
        &self,
        shard: u8,
        now: u64,
        after: Option<&DueEntry>,
        limit: usize,
    ) -> Result<Vec<DueEntry>, StoreError> {
        tokio::task::yield_now().await;
        let mut due: Vec<DueEntry> = self
            .tables()
            .due
            .iter()
            .map(|(key, at)| DueEntry {
                at: *at,
                pk: key.pk(),
                // An entity's item, as DynamoDB keys it.
                sk: "STATE".to_owned(),
            })
            .filter(|entry| entry.at <= now && due_shard(&entry.pk) == shard)
            .filter(|entry| after.is_none_or(|after| entry > after))
            .collect();
        due.sort();
        due.truncate(limit.max(1));
        Ok(due)
    }

    async fn inspect(&self, key: &EntityKey) -> Result<Inspection, StoreError> {
        Ok(self.tables().inspection(key))
    }

    async fn forget_conflicts(&self, key: &EntityKey) -> Result<usize, StoreError> {
        tokio::task::yield_now().await;
        Ok(self
            .tables()
            .conflicts
            .remove(key)
            .map_or(0, |conflicts| conflicts.len()))
    }

    async fn add(&self, additions: &[DedupAddition]) -> Result<Added, StoreError> {
        tokio::task::yield_now().await;
        let mut tables = self.tables();
        // As a transaction: if any record exists, nothing changes.
        let existing: Vec<Existing> = additions
            .iter()
            .enumerate()
            .filter_map(|(index, addition)| {
                let stream = tables
                    .handled
                    .get(&(addition.event_id.clone(), addition.handler))?;
                Some(Existing {
                    index,
                    stream: Some(stream.clone()),
                })
            })
            .collect();
        if !existing.is_empty() {
            return Ok(Added::Existing(existing));
        }
        // As DynamoDB's conditional ADD of each counter's sum: refused whole
        // when a counter would leave the 64-bit range.
        type Target<'a> = (&'static Counter, &'a str);
        let mut deltas: Vec<(Target<'_>, Vec<i64>)> = Vec::new();
        for addition in additions {
            let target = (addition.counter, addition.id.as_str());
            match deltas.iter_mut().find(|(at, _)| *at == target) {
                Some((_, target_deltas)) => target_deltas.push(addition.delta),
                None => deltas.push((target, vec![addition.delta])),
            }
        }
        let mut sums: Vec<(Target<'_>, i64)> = Vec::with_capacity(deltas.len());
        for ((counter, id), target_deltas) in deltas {
            let current = tables.counters.get(&(counter, id.to_owned())).copied();
            match added(current, target_deltas) {
                Some(after) => sums.push(((counter, id), after)),
                None => {
                    return Ok(Added::OutOfRange {
                        counter,
                        id: id.to_owned(),
                        value: current,
                    });
                }
            }
        }
        for addition in additions {
            tables.handled.insert(
                (addition.event_id.clone(), addition.handler),
                addition.id.clone(),
            );
        }
        for ((counter, id), value) in sums {
            tables.counters.insert((counter, id.to_owned()), value);
        }
        Ok(Added::Applied)
    }

    async fn counter(
        &self,
        counter: &'static Counter,
        id: &str,
    ) -> Result<Option<i64>, StoreError> {
        Ok(self
            .tables()
            .counters
            .get(&(counter, id.to_owned()))
            .copied())
    }

    async fn record_counter_conflicts(
        &self,
        counter: &'static Counter,
        id: &str,
        conflicts: &[ConflictRecord],
    ) -> Result<(), StoreError> {
        tokio::task::yield_now().await;
        let mut tables = self.tables();
        let recorded = tables
            .counter_conflicts
            .entry((counter, id.to_owned()))
            .or_default();
        for conflict in conflicts {
            recorded
                .entry(conflict.event_id.clone())
                .or_insert_with(|| conflict.clone());
        }
        Ok(())
    }

    fn reads_event_store(&self) -> bool {
        self.events.is_some()
    }

    async fn stored_events(
        &self,
        stream: &str,
        after: u64,
        limit: usize,
    ) -> Result<Option<Vec<crate::producer::StoredEvent>>, StoreError> {
        tokio::task::yield_now().await;
        Ok(self
            .events
            .as_ref()
            .map(|events| events.read(stream, after, limit)))
    }
}
