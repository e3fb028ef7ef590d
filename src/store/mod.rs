//! What touches the table: a narrow trait and its two adapters.
//!
//! - [`dynamodb::DynamoStore`]: DynamoDB, with the contract's item layout.
//! - [`memory::MemoryStore`]: in memory, with the same conditional semantics;
//!   the embedded default of `replay` and the engine of fast tests.
//!
//! Stores know entities, the events parked on them, conflicts and stock
//! adjustments; they know nothing of SQS.

pub mod dynamodb;
pub mod memory;

use std::collections::{BTreeSet, HashMap, HashSet};
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
    /// The sequences parked on the entities asked for, for those that have
    /// any (an item may hold parked sequences before its entity exists).
    pub parking: HashMap<EntityKey, Parking>,
}

/// What an entity's item records of the events parked on it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Parking {
    /// The parked sequences (the `parked` number set of the item).
    pub sequences: BTreeSet<u64>,
    /// Since when (epoch seconds) the item has held parked sequences without
    /// interruption (`parkedSince`); `None` when it holds none.
    pub since: Option<u64>,
}

/// An entity's item as stored: the entity (`None` while it has not been
/// created) and what is parked on it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stored {
    pub entity: Option<Entity>,
    pub parking: Parking,
}

/// An event that arrived before the one it follows, kept in the table until
/// its entity reaches the sequence before it (`sk` = `PENDING#<sequence>`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParkedEvent {
    pub sequence: u64,
    pub event_id: String,
    pub event_type: String,
    /// The message body, as received.
    pub body: String,
    pub message_id: String,
    /// Epoch seconds.
    pub parked_at: u64,
}

/// A second, different event for a sequence already applied or parked
/// (`sk` = `CONFLICT#<sequence>#<eventId>`). Recorded once; never overwrites.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConflictRecord {
    pub sequence: u64,
    pub event_id: String,
    pub body: String,
    /// Epoch seconds, when first seen.
    pub seen_at: u64,
}

/// The item state a commit was decided on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expected {
    /// The entity's sequence; `None` while it has not been created.
    pub sequence: Option<u64>,
    /// The sequences parked on the item (the commit writes the set it
    /// computed from these, so the stores check that it is still this one).
    pub parked: BTreeSet<u64>,
}

impl Commit {
    /// The sequences parked on the item once the commit is written.
    pub fn parked_after(&self) -> BTreeSet<u64> {
        let mut parked = self.expected.parked.clone();
        for sequence in &self.drain {
            parked.remove(sequence);
        }
        parked.extend(self.park.iter().map(|event| event.sequence));
        parked
    }
}

/// What one step of a stream's run writes, all or nothing: the entity's new
/// state, events parked, parked events drained (applied, so removed), and
/// conflicts. The entity's item is written only if it is still as
/// `expected`; conflict records are written only where none exists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Commit {
    pub key: EntityKey,
    pub expected: Expected,
    /// The entity as the step leaves it; `None`: unchanged.
    pub entity: Option<Entity>,
    pub park: Vec<ParkedEvent>,
    /// Sequences of parked events the step applied.
    pub drain: Vec<u64>,
    pub conflicts: Vec<ConflictRecord>,
    /// Epoch seconds (`parkedSince` when the item starts holding parked events).
    pub now: u64,
}

impl Commit {
    /// Whether the commit writes the entity's item (and so is conditional).
    pub fn touches_entity(&self) -> bool {
        self.entity.is_some() || !self.park.is_empty() || !self.drain.is_empty()
    }

    /// Whether the commit changes what is parked on the entity (and so
    /// the entity's entry in the index of parked entities).
    pub fn changes_parking(&self) -> bool {
        !self.park.is_empty() || !self.drain.is_empty()
    }

    /// Items the commit writes.
    pub fn items(&self) -> usize {
        usize::from(self.touches_entity())
            + usize::from(self.changes_parking())
            + self.park.len()
            + self.drain.len()
            + self.conflicts.len()
    }
}

/// The answer to a commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Committed {
    Written,
    /// The entity's item was no longer as expected: nothing was written.
    /// `current` is the item now (as returned by the failed condition).
    Conflict {
        current: Stored,
    },
}

/// An entity with events parked on it, from the index of parked entities.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParkedEntity {
    pub key: EntityKey,
    /// Since when (epoch seconds) it has had events parked without interruption.
    pub since: u64,
}

/// A page of the index of parked entities.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ParkedPage {
    pub entities: Vec<ParkedEntity>,
    /// Where the next page starts (an opaque cursor of the store); `None`
    /// when this page is the last.
    pub next: Option<String>,
}

/// One aggregate's entity item, parked events and conflicts: what an operator
/// looks at when a stream is stuck.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Inspection {
    pub stored: Stored,
    pub parked: Vec<ParkedEvent>,
    pub conflicts: Vec<ConflictRecord>,
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
    /// The table refused the request for good (DynamoDB's
    /// `ValidationException`: an item over 400 KB, say): nothing was
    /// written, and the same request will be refused again.
    #[error("{operation} refused by the table: {message}")]
    Rejected {
        operation: &'static str,
        message: String,
    },
}

/// The answer to a set of stock adjustments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Adjusted {
    /// Every `onHand` moved, and every deduplication record was written.
    Applied,
    /// Nothing changed: the deduplication records of these adjustments
    /// (positions in the slice given) existed already.
    Duplicates(Vec<usize>),
    /// Nothing changed: the adjustments of `sku` would take its `onHand`
    /// (`on_hand` now, `None` when never adjusted) outside the 64-bit range.
    OutOfRange { sku: String, on_hand: Option<i64> },
}

/// The sum of `deltas` added to `on_hand`, if it stays a 64-bit integer.
pub fn adjusted_on_hand(
    on_hand: Option<i64>,
    deltas: impl IntoIterator<Item = i64>,
) -> Option<i64> {
    let sum: i128 = deltas.into_iter().map(i128::from).sum();
    i64::try_from(i128::from(on_hand.unwrap_or(0)) + sum).ok()
}

/// The most adjustments one `adjust_stock` takes (a DynamoDB transaction
/// holds 100 actions: a record per adjustment and an update per sku).
pub const MAX_ADJUSTMENTS: usize = 50;

/// The most items one [`Commit`] writes (a DynamoDB transaction's limit).
pub const MAX_COMMIT_ITEMS: usize = 100;

/// The largest body that is parked or recorded as a conflict, in bytes: a
/// DynamoDB item holds at most 400 KB, key and other attributes included.
pub const MAX_STORED_BODY: usize = 350 * 1024;

/// The bodies one step of a run parks, drains or records, in bytes: a step
/// that reaches it is committed before the next body is taken, so a step
/// holds at most this plus one [`MAX_STORED_BODY`] (a DynamoDB transaction
/// holds 4 MB; a drain's bodies are held in memory until written).
pub const MAX_COMMIT_BYTES: usize = 2 * 1024 * 1024;

/// The most parked events one read asks for: at most 16 x
/// [`MAX_STORED_BODY`] (5.6 MB) in memory per stream at a time.
pub const MAX_PARKED_READ: usize = 16;

/// The table, as the batch runner sees it.
pub trait Store: Send + Sync {
    /// Loads the entities and looks up the deduplication records, with
    /// strongly consistent reads, in as few requests as the store allows.
    fn load(
        &self,
        keys: &[EntityKey],
        dedup: &[DedupKey],
    ) -> impl Future<Output = Result<Loaded, StoreError>> + Send;

    /// Writes everything the commit holds, atomically, if the entity's item
    /// is still as `commit.expected` says; otherwise writes nothing and
    /// answers with the item as it is.
    fn commit(&self, commit: &Commit)
    -> impl Future<Output = Result<Committed, StoreError>> + Send;

    /// The parked events of `key` at these sequences, with strongly
    /// consistent reads; sequences with nothing parked are left out.
    fn parked(
        &self,
        key: &EntityKey,
        sequences: &[u64],
    ) -> impl Future<Output = Result<Vec<ParkedEvent>, StoreError>> + Send;

    /// One page of the index of entities with events parked on them, in
    /// the store's key order: at most `limit` entries after the cursor
    /// `after` (from the start when `None`). Read a page at a time, the index
    /// is never held whole.
    fn parked_entities(
        &self,
        after: Option<&str>,
        limit: usize,
    ) -> impl Future<Output = Result<ParkedPage, StoreError>> + Send;

    /// Everything the table holds on one entity, for operators and tests.
    fn inspect(
        &self,
        key: &EntityKey,
    ) -> impl Future<Output = Result<Inspection, StoreError>> + Send;

    /// Adds every adjustment's `delta` to its sku's `onHand` and writes every
    /// deduplication record, all in one atomic step, unless one of those
    /// records exists or a sku's `onHand` would leave the 64-bit range (then
    /// nothing changes). At most
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

            fn commit(
                &self,
                commit: &Commit,
            ) -> impl Future<Output = Result<Committed, StoreError>> + Send {
                S::commit(self, commit)
            }

            fn parked(
                &self,
                key: &EntityKey,
                sequences: &[u64],
            ) -> impl Future<Output = Result<Vec<ParkedEvent>, StoreError>> + Send {
                S::parked(self, key, sequences)
            }

            fn parked_entities(
                &self,
                after: Option<&str>,
                limit: usize,
            ) -> impl Future<Output = Result<ParkedPage, StoreError>> + Send {
                S::parked_entities(self, after, limit)
            }

            fn inspect(
                &self,
                key: &EntityKey,
            ) -> impl Future<Output = Result<Inspection, StoreError>> + Send {
                S::inspect(self, key)
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
