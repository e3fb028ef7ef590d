//! The in-memory store: the same conditional semantics as the DynamoDB one.

use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, MutexGuard, PoisonError};

use super::{Adjusted, DedupKey, Loaded, Saved, Store, StoreError};
use crate::domain::{Entity, EntityKey, StockAdjustment};

#[derive(Debug, Default)]
struct Tables {
    entities: HashMap<EntityKey, Entity>,
    on_hand: HashMap<String, i64>,
    /// (event id, handler name) of every deduplication record.
    handled: HashSet<(String, &'static str)>,
}

/// An embedded table. Each operation is atomic, as a DynamoDB request is.
#[derive(Debug, Default)]
pub struct MemoryStore {
    tables: Mutex<Tables>,
}

impl MemoryStore {
    pub fn new() -> Self {
        Self::default()
    }

    fn tables(&self) -> MutexGuard<'_, Tables> {
        // A panic elsewhere while holding the lock leaves the maps whole:
        // every operation below completes its change before it returns.
        self.tables.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Every entity stored, ordered by key: for tests and `replay`.
    pub fn entities(&self) -> Vec<Entity> {
        let mut entities: Vec<Entity> = self.tables().entities.values().cloned().collect();
        entities.sort_by_key(Entity::key);
        entities
    }

    /// Whether a deduplication record exists for this event and handler.
    pub fn handled(&self, event_id: &str, handler: &str) -> bool {
        self.tables()
            .handled
            .iter()
            .any(|(handled, name)| handled == event_id && *name == handler)
    }

    /// Every sku's `onHand`, ordered by sku.
    pub fn stock(&self) -> Vec<(String, i64)> {
        let mut stock: Vec<(String, i64)> = self
            .tables()
            .on_hand
            .iter()
            .map(|(sku, on_hand)| (sku.clone(), *on_hand))
            .collect();
        stock.sort();
        stock
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
                .filter(|key| {
                    tables
                        .handled
                        .contains(&(key.event_id.clone(), key.handler))
                })
                .cloned()
                .collect(),
        })
    }

    async fn save(&self, entity: &Entity, expected: Option<u64>) -> Result<Saved, StoreError> {
        tokio::task::yield_now().await;
        let mut tables = self.tables();
        let key = entity.key();
        let current = tables.entities.get(&key);
        if current.map(Entity::sequence) != expected {
            return Ok(Saved::Conflict {
                current: current.cloned(),
            });
        }
        tables.entities.insert(key, entity.clone());
        Ok(Saved::Written)
    }

    async fn adjust_stock(&self, adjustments: &[StockAdjustment]) -> Result<Adjusted, StoreError> {
        tokio::task::yield_now().await;
        let mut tables = self.tables();
        // As a transaction: if any record exists, nothing changes.
        let existing: Vec<usize> = adjustments
            .iter()
            .enumerate()
            .filter(|(_, adjustment)| {
                tables
                    .handled
                    .contains(&(adjustment.event_id.clone(), adjustment.handler))
            })
            .map(|(index, _)| index)
            .collect();
        if !existing.is_empty() {
            return Ok(Adjusted::Duplicates(existing));
        }
        for adjustment in adjustments {
            tables
                .handled
                .insert((adjustment.event_id.clone(), adjustment.handler));
            let on_hand = tables.on_hand.entry(adjustment.sku.clone()).or_insert(0);
            *on_hand = on_hand.saturating_add(adjustment.delta);
        }
        Ok(Adjusted::Applied)
    }

    async fn on_hand(&self, sku: &str) -> Result<Option<i64>, StoreError> {
        Ok(self.tables().on_hand.get(sku).copied())
    }
}
