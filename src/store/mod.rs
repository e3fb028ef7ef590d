//! What touches the table: a narrow trait and its two adapters.
//!
//! - [`dynamodb::DynamoStore`]: DynamoDB, with the contract's item layout.
//! - [`memory::MemoryStore`]: in memory, with the same conditional semantics;
//!   the embedded default of `replay` and the engine of fast tests.
//!
//! Stores know entities (of any kind, as [`AnyEntity`]), the events parked
//! on them, conflicts and counters; they know nothing of SQS, nor of any
//! domain.

pub(crate) mod checks;
mod due;
pub mod dynamodb;
pub mod memory;
mod pointer;

pub use crate::table::StoreError;
pub use due::{DUE_SHARDS, DueCursor, DueEntry, due_shard};

/// The sort key of an entity's item (its `pk` is the entity's kind and id).
pub const ENTITY_SK: &str = "STATE";

use std::collections::{BTreeSet, HashMap};
use std::future::Future;

use crate::entity::{AnyEntity, EntityKey};
use crate::handling::{Counter, Effect};
use crate::producer::StoredEvent;

/// Identifies a deduplication record: an event handled by a handler.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DedupKey {
    /// The event's `eventId`.
    pub event_id: String,
    /// The handler name the record is kept under (`HANDLER#<name>`).
    pub handler: &'static str,
}

/// What a batch reads before it decides, in one go.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Loaded {
    /// A missing key is an entity that does not exist; an item that exists
    /// but cannot be read is an error for that key alone.
    pub entities: HashMap<EntityKey, Result<AnyEntity, StoreError>>,
    /// The deduplication records, of those asked for, that exist, with the
    /// stream each was written for (`None`: written by an earlier release,
    /// which did not record it).
    pub handled: HashMap<DedupKey, Option<String>>,
    /// The sequences parked on the entities asked for, for those that have
    /// any (an item may hold parked sequences before its entity exists).
    pub parking: HashMap<EntityKey, Parking>,
    /// The deadlines set on the entities asked for, for those that have
    /// one (a process's state: `dueAt`, epoch seconds).
    pub due: HashMap<EntityKey, u64>,
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
    /// The entity; `None` while it has not been created.
    pub entity: Option<AnyEntity>,
    /// What is parked on the item.
    pub parking: Parking,
    /// The deadline set on it (a process's state), epoch seconds.
    pub due_at: Option<u64>,
}

/// An event that arrived before the one it follows, kept in the table until
/// its entity reaches the sequence before it (`sk` = `PENDING#<sequence>`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParkedEvent {
    /// The event's sequence (in its sort key, `PENDING#<sequence>`).
    pub sequence: u64,
    /// The event's `eventId`.
    pub event_id: String,
    /// The envelope's `type`.
    pub event_type: String,
    /// The message body, as received.
    pub body: String,
    /// The SQS message id of the message that brought the event.
    pub message_id: String,
    /// Epoch seconds.
    pub parked_at: u64,
}

/// A second, different event for a sequence already applied or parked
/// (`sk` = `CONFLICT#<sequence>#<eventId>`), or a deduplicated event whose
/// `eventId` another stream's event was handled under (recorded on the
/// counter's item's partition, at sequence 0). Recorded once; never
/// overwrites.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConflictRecord {
    /// The sequence both events claim (0 for a deduplicated event, which
    /// has none).
    pub sequence: u64,
    /// The `eventId` of the second event (the one recorded here).
    pub event_id: String,
    /// The second event's message body, as received.
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
    /// The entity as loaded, when known: a write removes the attributes it
    /// had and the new state has not (an optional field that became empty).
    pub entity: Option<AnyEntity>,
    /// The deadline on the item (a deadline fired changes the state
    /// without moving its sequence, so the write checks this too).
    pub due_at: Option<u64>,
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
#[derive(Debug, Clone, PartialEq)]
pub struct Commit {
    /// The entity whose item the commit writes; parked events and conflicts go
    /// in its partition.
    pub key: EntityKey,
    /// The item as the step found it: the entity's item is written only if it
    /// is still so.
    pub expected: Expected,
    /// The entity as the step leaves it; `None`: unchanged.
    pub entity: Option<AnyEntity>,
    /// Events to park, each written as a new item where none exists yet.
    pub park: Vec<ParkedEvent>,
    /// Sequences of parked events the step applied.
    pub drain: Vec<u64>,
    /// Conflict records to write, each only where none exists yet.
    pub conflicts: Vec<ConflictRecord>,
    /// Epoch seconds (`parkedSince` when the item starts holding parked events).
    pub now: u64,
    /// The deadline set (`Some(Some(at))`) or cleared (`Some(None)`) on the
    /// entity's item; `None`: left as it is.
    pub deadline: Option<Option<u64>>,
    /// The events a process's step appends to the event store, in the same
    /// transaction as the rest of the commit.
    pub outbox: Option<Outbound>,
}

/// The events one step of a process appends: to one stream, under one
/// request id (so that a step tried again appends them once).
#[derive(Debug, Clone, PartialEq)]
pub struct Outbound {
    /// The stream they are appended to.
    pub stream: String,
    /// Where the stream must stand.
    pub expected: crate::producer::ExpectedSequence,
    /// The request id, derived from the process and what caused the step.
    pub request_id: String,
    /// The events, in order, each with its `eventId` (derived from the
    /// request id).
    pub events: Vec<crate::producer::NewEvent>,
}

impl Commit {
    /// Whether the commit writes the entity's item (and so is conditional).
    pub fn touches_entity(&self) -> bool {
        self.entity.is_some()
            || !self.park.is_empty()
            || !self.drain.is_empty()
            || self.deadline.is_some()
            || self.outbox.is_some()
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
            + self
                .outbox
                .as_ref()
                .map_or(0, |outbox| outbox.events.len() + 2)
    }
}

/// The answer to a commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Committed {
    /// Everything the commit holds was written.
    Written,
    /// The entity's item was no longer as expected (another invocation
    /// wrote it first: a lost race): nothing was written. `current` is the
    /// item now (as returned by the failed condition).
    LostRace {
        /// The entity's item as it is now.
        current: Stored,
    },
    /// A process's step appends at an exact sequence, and its stream has
    /// moved: nothing was written.
    Moved {
        /// The stream.
        stream: String,
        /// Where the step expected it.
        expected: u64,
        /// Where it is.
        current: u64,
    },
}

/// An entity with events parked on it, from the index of parked entities.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParkedEntity {
    /// Its item's partition key, `<KIND>#<id>` (the domain knows the kind).
    pub pk: String,
    /// Since when (epoch seconds) it has had events parked without interruption.
    pub since: u64,
}

/// A page of the index of parked entities.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ParkedPage {
    /// The entries of this page, in the store's key order.
    pub entities: Vec<ParkedEntity>,
    /// Where the next page starts (an opaque cursor of the store); `None`
    /// when this page is the last.
    pub next: Option<String>,
}

/// Where the sweep stopped in the index of parked entities, and what the
/// pass under way has seen so far (a pass: the sweeps from the index's
/// start to its end). Kept by the store between sweeps, so that each sweep
/// goes on where the last one stopped.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SweepMark {
    /// The cursor to go on after ([`ParkedPage::next`]); `None`: the start.
    pub after: Option<String>,
    /// Entities with events parked seen so far in this pass.
    pub entities: u64,
    /// The longest wait seen so far in this pass, in seconds (as seen).
    pub oldest_age_seconds: Option<u64>,
    /// Where the last sweep's firing of due deadlines stopped, its time run
    /// out; `None`: it tried every one.
    pub deadlines: Option<DueCursor>,
}

/// One aggregate's entity item, parked events and conflicts: what an operator
/// looks at when a stream is stuck.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Inspection {
    /// The entity's item: the entity, if created, and what is parked on it.
    pub stored: Stored,
    /// The parked events (`PENDING#` items), in sequence order.
    pub parked: Vec<ParkedEvent>,
    /// The conflict records (`CONFLICT#` items), by sequence, then event id.
    pub conflicts: Vec<ConflictRecord>,
}

/// What the store must do, atomically, for one deduplicated effect: add
/// `delta` to the counter `id`, and write the deduplication record of
/// (`event_id`, `handler`), which keeps `id` as the event's stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DedupAddition {
    /// The event's `eventId`.
    pub event_id: String,
    /// The handler name the deduplication record is kept under.
    pub handler: &'static str,
    /// The counter added to.
    pub counter: &'static Counter,
    /// The counter's id (its item's `pk` is `<kind>#<id>`).
    pub id: String,
    /// The amount added (negative to subtract).
    pub delta: i64,
    /// Epoch seconds.
    pub handled_at: u64,
    /// Epoch seconds after which the deduplication record may expire.
    pub expires_at: u64,
}

impl DedupAddition {
    /// The key of the addition's deduplication record.
    pub fn dedup_key(&self) -> DedupKey {
        DedupKey {
            event_id: self.event_id.clone(),
            handler: self.handler,
        }
    }
}

/// The answer to a set of additions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Added {
    /// Every counter moved, and every deduplication record was written.
    Applied,
    /// Nothing changed: the deduplication records of these additions
    /// existed already.
    Existing(Vec<Existing>),
    /// Nothing changed: the additions to the counter `id` would take it
    /// (`value` now, `None` when never added to) outside the 64-bit range.
    OutOfRange {
        /// The counter that would leave the range.
        counter: &'static Counter,
        /// The counter's id.
        id: String,
        /// The counter's value now; `None` when nothing was ever added to it.
        value: Option<i64>,
    },
}

/// A deduplication record found where an addition would write its own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Existing {
    /// The addition's position in the slice given.
    pub index: usize,
    /// The stream the record was written for (`None`: by an earlier
    /// release); another than the addition's `id` is another stream's
    /// event under the same `eventId`.
    pub stream: Option<String>,
}

/// The sum of `deltas` added to `value`, if it stays a 64-bit integer.
pub fn added(value: Option<i64>, deltas: impl IntoIterator<Item = i64>) -> Option<i64> {
    let sum: i128 = deltas.into_iter().map(i128::from).sum();
    i64::try_from(i128::from(value.unwrap_or(0)) + sum).ok()
}

/// The most additions one [`Store::add`] takes (a DynamoDB transaction
/// holds 100 actions: a record per addition and an update per counter).
pub const MAX_ADDITIONS: usize = 50;

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

    /// [`Store::commit`], with `effects` on counters of other keys in the
    /// same atomic write ([`crate::handling::Effects`]): the deltas on one
    /// item summed (a transaction touches an item once), each counter kept
    /// in the 64-bit range. Nothing is written, effects included, when the
    /// entity's item is not as expected (the guard: once per event); a
    /// counter that would leave the range refuses the whole write. Effects
    /// are only written with the entity's write. A store that does not
    /// write effects refuses them.
    fn commit_with_effects(
        &self,
        commit: &Commit,
        effects: &[Effect],
    ) -> impl Future<Output = Result<Committed, StoreError>> + Send {
        async move {
            if effects.is_empty() {
                return self.commit(commit).await;
            }
            Err(StoreError::Rejected {
                operation: "TransactWriteItems",
                message: "this store does not write effects on other keys".to_owned(),
            })
        }
    }

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

    /// Brings at most `limit` entries that an earlier release left in the
    /// index of parked entities to the current layout, each only while its
    /// entity is as read; answers how many it read (0: nothing left to
    /// bring). The sweep's alone: the tools that look never write. A store
    /// without an earlier layout answers 0.
    fn upgrade_parked_index(
        &self,
        limit: usize,
    ) -> impl Future<Output = Result<usize, StoreError>> + Send {
        let _ = limit;
        async { Ok(0) }
    }

    /// Where the last sweep stopped ([`Store::save_sweep_mark`]); `None`
    /// when none was kept (a store that keeps none starts every sweep at
    /// the index's start).
    fn sweep_mark(&self) -> impl Future<Output = Result<Option<SweepMark>, StoreError>> + Send {
        async { Ok(None) }
    }

    /// Keeps where this sweep stopped, for the next one.
    fn save_sweep_mark(
        &self,
        mark: &SweepMark,
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        let _ = mark;
        async { Ok(()) }
    }

    /// Deletes the conflict records of `key` (an erasure's: they hold
    /// bodies of a forgotten subject's events); answers how many there
    /// were. A store without conflict records answers 0.
    fn forget_conflicts(
        &self,
        key: &EntityKey,
    ) -> impl Future<Output = Result<usize, StoreError>> + Send {
        let _ = key;
        async { Ok(0) }
    }

    /// Everything the table holds on one entity, for operators and tests.
    fn inspect(
        &self,
        key: &EntityKey,
    ) -> impl Future<Output = Result<Inspection, StoreError>> + Send;

    /// Adds every addition's `delta` to its counter and writes every
    /// deduplication record, all in one atomic step, unless one of those
    /// records exists or a counter would leave the 64-bit range (then
    /// nothing changes). At most [`MAX_ADDITIONS`] additions at a time.
    fn add(
        &self,
        additions: &[DedupAddition],
    ) -> impl Future<Output = Result<Added, StoreError>> + Send;

    /// A counter's value, `None` when nothing was ever added to it.
    fn counter(
        &self,
        counter: &'static Counter,
        id: &str,
    ) -> impl Future<Output = Result<Option<i64>, StoreError>> + Send;

    /// Records a conflict on the counter `id`'s stream (`CONFLICT#` items
    /// in the counter's item's partition), each only where none exists: a
    /// deduplicated event whose `eventId` another stream's event was
    /// handled under. A store that does not implement it refuses.
    fn record_counter_conflicts(
        &self,
        counter: &'static Counter,
        id: &str,
        conflicts: &[ConflictRecord],
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        let _ = (counter, id, conflicts);
        std::future::ready(Err(StoreError::Rejected {
            operation: "record_counter_conflicts",
            message: "this store does not record conflicts on counters".to_owned(),
        }))
    }

    /// One page of the index of due deadlines: the entries of `shard` (0
    /// to [`DUE_SHARDS`] - 1) due at or before `now`,
    /// earliest first, from the one after `after` (the start: `None`), at
    /// most `limit`. A store without deadlines answers none.
    fn due(
        &self,
        shard: u8,
        now: u64,
        after: Option<&DueEntry>,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<DueEntry>, StoreError>> + Send {
        let _ = (shard, now, after, limit);
        async { Ok(Vec::new()) }
    }

    /// Whether it reads the event store ([`Store::stored_events`]): a
    /// consumer of an event store, not one fed directly.
    fn reads_event_store(&self) -> bool {
        false
    }

    /// A stream's stored events after `after`, in order, at most `limit`,
    /// read from the event store with a strongly consistent read: what a
    /// gap waits for, read instead of waited for. `None` when it reads no
    /// event store.
    fn stored_events(
        &self,
        stream: &str,
        after: u64,
        limit: usize,
    ) -> impl Future<Output = Result<Option<Vec<StoredEvent>>, StoreError>> + Send {
        let _ = (stream, after, limit);
        async { Ok(None) }
    }

    /// Requests sent to the table so far, for the invocation summary; a
    /// store that sends none answers 0.
    fn requests(&self) -> u64 {
        0
    }
}
