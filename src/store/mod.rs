//! What touches the table: a narrow trait and its two adapters.
//!
//! - [`dynamodb::DynamoStore`]: DynamoDB, with the contract's item layout.
//! - [`memory::MemoryStore`]: in memory, with the same conditional semantics;
//!   the embedded default of `replay` and the engine of fast tests.
//!
//! Stores know entities and stock adjustments; they know nothing of SQS.

pub mod dynamodb;
pub mod memory;

use std::collections::{HashMap, HashSet};
use std::future::Future;

use crate::domain::{Entity, EntityKey, StockAdjustment};

/// Identifies a deduplication record: an event handled by a handler.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DedupKey {
    pub event_id: String,
    pub handler: &'static str,
}

/// What a batch reads before it decides, in one go.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Loaded {
    /// A missing key is an entity that does not exist; an item that exists
    /// but cannot be read is an error for that key alone.
    pub entities: HashMap<EntityKey, Result<Entity, StoreError>>,
    /// The deduplication records, of those asked for, that exist.
    pub handled: HashSet<DedupKey>,
}

/// A store operation that did not complete. The table may or may not hold
/// its effect (a timeout, a lost answer): the caller reports the messages
/// failed, and the guard sorts it out on redelivery.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    #[error("{operation} failed: {message}")]
    Request {
        operation: &'static str,
        message: String,
    },
    #[error("{operation} did not answer within {millis} ms")]
    Timeout {
        operation: &'static str,
        millis: u128,
    },
    #[error("item {key} cannot be read: {message}")]
    Corrupt { key: String, message: String },
}

/// The answer to a conditional save.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Saved {
    /// The entity was written.
    Written,
    /// The stored entity was no longer at the expected sequence: another
    /// invocation wrote it first. `current` is what is stored now (`None`:
    /// nothing), as returned by the failed condition itself.
    Conflict { current: Option<Entity> },
}

/// The answer to a set of stock adjustments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Adjusted {
    /// Every `onHand` moved, and every deduplication record was written.
    Applied,
    /// Nothing changed: the deduplication records of these adjustments
    /// (positions in the slice given) existed already.
    Duplicates(Vec<usize>),
}

/// The most adjustments one `adjust_stock` takes (a DynamoDB transaction
/// holds 100 actions: a record per adjustment and an update per sku).
pub const MAX_ADJUSTMENTS: usize = 50;

/// The table, as the batch runner sees it.
pub trait Store: Send + Sync {
    /// Loads the entities and looks up the deduplication records, with
    /// strongly consistent reads, in as few requests as the store allows.
    fn load(
        &self,
        keys: &[EntityKey],
        dedup: &[DedupKey],
    ) -> impl Future<Output = Result<Loaded, StoreError>> + Send;

    /// Writes `entity` only if the stored one is still at `expected`
    /// (`None`: only if there is none).
    fn save(
        &self,
        entity: &Entity,
        expected: Option<u64>,
    ) -> impl Future<Output = Result<Saved, StoreError>> + Send;

    /// Adds every adjustment's `delta` to its sku's `onHand` and writes every
    /// deduplication record, all in one atomic step, unless one of those
    /// records exists (then nothing changes). At most
    /// [`MAX_ADJUSTMENTS`] adjustments at a time.
    fn adjust_stock(
        &self,
        adjustments: &[StockAdjustment],
    ) -> impl Future<Output = Result<Adjusted, StoreError>> + Send;

    /// The sku's `onHand`, `None` when no adjustment was ever applied.
    fn on_hand(&self, sku: &str) -> impl Future<Output = Result<Option<i64>, StoreError>> + Send;

    /// Requests sent to the table so far, for the invocation summary; a
    /// store that sends none answers 0.
    fn requests(&self) -> u64 {
        0
    }
}

/// A store behind a pointer is a store: `Arc<S>` (two runners on one table, as
/// two concurrent invocations are) and `&S`.
macro_rules! delegate_store {
    ($($pointer:ty),+) => {$(
        impl<S: Store> Store for $pointer {
            fn load(
                &self,
                keys: &[EntityKey],
                dedup: &[DedupKey],
            ) -> impl Future<Output = Result<Loaded, StoreError>> + Send {
                S::load(self, keys, dedup)
            }

            fn save(
                &self,
                entity: &Entity,
                expected: Option<u64>,
            ) -> impl Future<Output = Result<Saved, StoreError>> + Send {
                S::save(self, entity, expected)
            }

            fn adjust_stock(
                &self,
                adjustments: &[StockAdjustment],
            ) -> impl Future<Output = Result<Adjusted, StoreError>> + Send {
                S::adjust_stock(self, adjustments)
            }

            fn on_hand(&self, sku: &str) -> impl Future<Output = Result<Option<i64>, StoreError>> + Send {
                S::on_hand(self, sku)
            }

            fn requests(&self) -> u64 {
                S::requests(self)
            }
        }
    )+};
}

delegate_store!(std::sync::Arc<S>, &S);
