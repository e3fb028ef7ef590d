//! The DynamoDB adapter: the contract's item layout and the conditional writes.
//!
//! | item   | pk                    | sk                     |
//! | ------ | --------------------- | ---------------------- |
//! | entity | `<KIND>#<aggregateId>` (`ORDER#order-42`) | `STATE` |
//! | counter | `<kind>#<id>` (`SKU#SKU-LAMP`) | its sort key (`STOCK`) |
//! | dedup  | `MESSAGE#<eventId>`   | `HANDLER#<handler>`    |
//! | parked event | the entity's pk | `PENDING#<sequence, 20 digits>` |
//! | conflict | the entity's pk   | `CONFLICT#<sequence, 20 digits>#<eventId>` |
//!
//! | parked-entity index | `PARKED#<0-f>` (a shard) | the entity's pk |
//! | where the last sweep stopped | `SWEEP` | `CURSOR` |
//!
//! A process's state also holds `dueAt` and `dueShard` (`DUE#<0-f>`) while
//! it has a deadline: the keys of the sparse index `due`.
//!
//! An entity item also holds `parked` (a number set: the sequences parked on
//! it) and `parkedSince` while it has any; an item with only those is not
//! an entity yet. The index holds one item (with `parkedSince`) per entity
//! with events parked, written in the same transactions, so that the parked
//! entities are found with one query instead of a scan.
//!
//! | file | what it holds |
//! | --- | --- |
//! | `mod.rs` | [`DynamoStore`]: the handle, and the [`Store`] trait's operations in their phases |
//! | `requests.rs` | the requests they are made of: batched reads, a partition's pages, one transaction |
//! | `commit.rs` | a commit's writes: the entity's update, parked events, the index entry, conflicts |
//! | `effects.rs` | a commit's effects on counters of other keys: one update per item, in its transaction |
//! | `counters.rs` | counters: the additions' transaction, what its cancellation means, a read |
//! | `items.rs` | the item layout: keys, attributes, items to and from entities (serde_dynamo) |
//! | `expression.rs` | update and condition expressions; a commit's conditional update |
//! | `errors.rs` | DynamoDB's errors as the store's (refusals for good apart) |
//! | `parked_index.rs` | the index of parked entities, spread over 16 partitions |
//! | `sweep_mark.rs` | where the last sweep stopped, for the next one |
//! | `due.rs` | the index of a process's due deadlines (the sparse index `due`) |
//! | `forget.rs` | an erasure's part: the entity's conflict records deleted |
//! | `admin.rs` | the table itself: connect, create if missing, check |

use std::collections::BTreeSet;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::AttributeValue;

mod admin;
mod commit;
mod counters;
mod due;
mod effects;

mod expression;
mod forget;
mod items;
mod parked_index;
mod requests;
mod sweep_mark;
mod xray;

use crate::table::*;
pub use admin::{
    TableError, check_table, connect, create_table, created_at, ensure_events_table, ensure_table,
    ready_table,
};
use items::*;

use super::{
    Added, Commit, Committed, ConflictRecord, DedupAddition, DedupKey, DueEntry, Inspection,
    Loaded, ParkedEvent, ParkedPage, Store, StoreError, SweepMark,
};
use crate::entity::EntityKey;
use crate::handling::{Counter, Effect};

use crate::entity::Item;

/// The TTL attribute of deduplication records.
pub const TTL_ATTRIBUTE: &str = "expiresAt";

/// The IAM actions a DynamoDB operation of this adapter needs: a
/// transaction is authorised by the actions it contains (a `Put` of the dedup
/// record and an `Update` of a counter).
pub fn iam_actions(operation: &str) -> &'static [&'static str] {
    match operation {
        "BatchGetItem" => &["dynamodb:BatchGetItem"],
        "UpdateItem" => &["dynamodb:UpdateItem"],
        "TransactWriteItems" => &["dynamodb:PutItem", "dynamodb:UpdateItem"],
        "TransactWriteItems/Delete" => &["dynamodb:DeleteItem"],
        "GetItem" => &["dynamodb:GetItem"],
        "Query" => &["dynamodb:Query"],
        _ => &[],
    }
}

/// The operations a store calls, as [`DynamoStore::operations`] names
/// them: each a bit of the store's set.
const OPERATIONS: [&str; 6] = [
    "BatchGetItem",
    "UpdateItem",
    "TransactWriteItems",
    "TransactWriteItems/Delete",
    "GetItem",
    "Query",
];

/// The table, through the AWS SDK. Cheap to clone; counts its requests.
#[derive(Debug, Clone)]
pub struct DynamoStore {
    client: Client,
    table: String,
    requests: Arc<AtomicU64>,
    /// The X-Ray daemon, when there is one: a subsegment per call.
    xray: Option<Arc<xray::XRay>>,
    /// The operations called, a bit each of [`OPERATIONS`] (for the
    /// policy test; one atomic `or` a call, the same in every build).
    operations: Arc<AtomicU32>,
    /// The event store: what a gap misses is read from it, and a process's
    /// steps append to it in their transactions.
    events: Option<crate::producer::EventStore>,
}

impl DynamoStore {
    /// A commit without appends: the entity's conditional update alone when
    /// that is all it writes, else one transaction with its effects.
    async fn commit_alone(
        &self,
        commit: &Commit,
        merged: &[effects::OnItem<'_>],
    ) -> Result<Committed, StoreError> {
        if merged.is_empty() && commit.touches_entity() && commit.items() == 1 {
            return self.update_entity(commit).await;
        }
        let mut items = self.commit_items(commit)?;
        let written = items.len();
        items.extend(self.effect_items(merged)?);
        if items.is_empty() {
            return Ok(Committed::Written);
        }
        if !commit.drain.is_empty() {
            // Drained events' items, and the index entry once none is left.
            self.note("TransactWriteItems/Delete");
        }
        match self.transact(items).await? {
            Ok(()) => Ok(Committed::Written),
            Err(reasons) => {
                // The guard's condition first: a lost race is decided again.
                let raced = commit.touches_entity()
                    && reasons
                        .first()
                        .is_some_and(|first| first.code() == Some("ConditionalCheckFailed"));
                match effects::refused_effect(merged, written, &reasons) {
                    Some(refused) if !raced => Err(refused),
                    _ => self.cancelled_commit(commit, &reasons).await,
                }
            }
        }
    }
}

impl DynamoStore {
    /// A store of `table` (a name or an ARN) through `client`, with X-Ray
    /// subsegments when `AWS_XRAY_DAEMON_ADDRESS` names a daemon.
    pub fn new(client: Client, table: impl Into<String>) -> Self {
        DynamoStore {
            client,
            table: table.into(),
            requests: Arc::new(AtomicU64::new(0)),
            xray: xray::XRay::from_env().map(Arc::new),
            operations: Arc::default(),
            events: None,
        }
    }

    /// The store of a consumer of `events` (the event store's table, in the
    /// same account and region): a gap's missing events are read from it
    /// ([`Store::stored_events`]), and a process's steps append to it in
    /// the same transaction as they write the state.
    #[must_use]
    pub fn with_event_store(mut self, events: crate::producer::EventStore) -> Self {
        self.events = Some(events);
        self
    }

    /// The event store it reads (and a process's steps append to), if any.
    pub fn event_store(&self) -> Option<&crate::producer::EventStore> {
        self.events.as_ref()
    }

    /// When a client call starts, if X-Ray is on (epoch seconds). The call
    /// is timed in place, not wrapped: a wrapping future would deepen the
    /// function's future past the compiler's layout limit.
    fn subsegment_start(&self) -> Option<f64> {
        self.xray.as_ref().map(|_| xray::now())
    }

    /// Ends a client call's X-Ray subsegment.
    fn subsegment_end(&self, operation: &'static str, started: Option<f64>, failed: bool) {
        if let (Some(xray), Some(start)) = (&self.xray, started) {
            xray.record(operation, &self.table, start, xray::now(), failed);
        }
    }

    fn count(&self, operation: &'static str) {
        self.requests.fetch_add(1, Ordering::Relaxed);
        self.note(operation);
    }

    /// Records an operation (for [`iam_actions`]) without counting a
    /// request.
    fn note(&self, operation: &'static str) {
        if let Some(bit) = OPERATIONS.iter().position(|known| *known == operation) {
            self.operations.fetch_or(1 << bit, Ordering::Relaxed);
        }
    }

    /// The DynamoDB operations called so far (see [`iam_actions`]).
    pub fn operations(&self) -> BTreeSet<&'static str> {
        let called = self.operations.load(Ordering::Relaxed);
        OPERATIONS
            .iter()
            .enumerate()
            .filter(|(bit, _)| called & (1 << bit) != 0)
            .map(|(_, operation)| *operation)
            .collect()
    }

    /// The SDK client it sends requests with.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The table's name or ARN.
    pub fn table(&self) -> &str {
        &self.table
    }
}

impl Store for DynamoStore {
    async fn load(&self, keys: &[EntityKey], dedup: &[DedupKey]) -> Result<Loaded, StoreError> {
        let wanted: Vec<Item> = keys
            .iter()
            .map(key_item)
            .chain(dedup.iter().map(dedup_key))
            .collect();
        let by_pk: HashMap<String, &EntityKey> =
            keys.iter().map(|key| (entity_pk(key), key)).collect();
        let mut loaded = Loaded::default();
        for item in self.batch_get(wanted).await? {
            let pk = match item.get("pk") {
                Some(AttributeValue::S(pk)) => pk.clone(),
                _ => continue,
            };
            if let Some(event_id) = pk.strip_prefix(DEDUP_PREFIX) {
                let handler = match item.get("sk") {
                    Some(AttributeValue::S(sk)) => sk.strip_prefix(HANDLER_PREFIX),
                    _ => None,
                };
                // Only the handlers asked for (they are 'static names).
                if let Some(asked) = dedup
                    .iter()
                    .find(|key| key.event_id == event_id && Some(key.handler) == handler)
                {
                    loaded.handled.insert(asked.clone(), dedup_stream(&item));
                }
                continue;
            }
            let Some(&key) = by_pk.get(&pk) else { continue };
            let key = key.clone();
            match stored_from_item(key.kind(), item) {
                Ok(stored) => {
                    if !stored.parking.sequences.is_empty() {
                        loaded.parking.insert(key.clone(), stored.parking);
                    }
                    if let Some(at) = stored.due_at {
                        loaded.due.insert(key.clone(), at);
                    }
                    if let Some(entity) = stored.entity {
                        loaded.entities.insert(key, Ok(entity));
                    }
                }
                Err(err) => {
                    loaded.entities.insert(key, Err(err));
                }
            }
        }
        Ok(loaded)
    }

    async fn commit(&self, commit: &Commit) -> Result<Committed, StoreError> {
        self.commit_with_effects(commit, &[]).await
    }

    async fn commit_with_effects(
        &self,
        commit: &Commit,
        effects: &[Effect],
    ) -> Result<Committed, StoreError> {
        if !effects.is_empty() && !commit.touches_entity() {
            return Err(crate::store::memory::effects::unguarded());
        }
        let merged = effects::merged(effects);
        if let Some(outbound) = &commit.outbox {
            if let Some(answer) = self.commit_with_outbox(commit, outbound, &merged).await? {
                return Ok(answer);
            }
            // Its events were appended before under its request id, by
            // this step on another table (a rebuild into a table of its
            // own): the state is written alone.
            let alone = Commit {
                outbox: None,
                ..commit.clone()
            };
            return self.commit_alone(&alone, &merged).await;
        }
        self.commit_alone(commit, &merged).await
    }

    async fn parked(
        &self,
        key: &EntityKey,
        sequences: &[u64],
    ) -> Result<Vec<ParkedEvent>, StoreError> {
        if sequences.is_empty() {
            return Ok(Vec::new());
        }
        let pk = entity_pk(key);
        let keys = sequences
            .iter()
            .map(|sequence| item_key(pk.clone(), pending_sk(*sequence)))
            .collect();
        let mut parked = self
            .batch_get(keys)
            .await?
            .into_iter()
            .map(parked_from_item)
            .collect::<Result<Vec<_>, _>>()?;
        parked.sort_by_key(|event| event.sequence);
        Ok(parked)
    }

    async fn parked_entities(
        &self,
        after: Option<&str>,
        limit: usize,
    ) -> Result<ParkedPage, StoreError> {
        self.parked_page(after, limit).await
    }

    async fn upgrade_parked_index(&self, limit: usize) -> Result<usize, StoreError> {
        self.upgrade_index(limit).await
    }

    async fn sweep_mark(&self) -> Result<Option<SweepMark>, StoreError> {
        self.read_sweep_mark().await
    }

    async fn save_sweep_mark(&self, mark: &SweepMark) -> Result<(), StoreError> {
        self.write_sweep_mark(mark).await
    }

    async fn forget_conflicts(&self, key: &EntityKey) -> Result<usize, StoreError> {
        self.delete_conflicts(key).await
    }

    async fn inspect(&self, key: &EntityKey) -> Result<Inspection, StoreError> {
        let mut inspection = Inspection::default();
        for item in self.partition(entity_pk(key)).await? {
            let sk = match item.get("sk") {
                Some(AttributeValue::S(sk)) => sk.clone(),
                _ => continue,
            };
            if sk == STATE {
                inspection.stored = stored_from_item(key.kind(), item)?;
            } else if sk.starts_with(PENDING_PREFIX) {
                inspection.parked.push(parked_from_item(item)?);
            } else if sk.starts_with(CONFLICT_PREFIX) {
                inspection.conflicts.push(conflict_from_item(item)?);
            }
        }
        Ok(inspection)
    }

    async fn add(&self, additions: &[DedupAddition]) -> Result<Added, StoreError> {
        if additions.is_empty() {
            return Ok(Added::Applied);
        }
        // One transaction: a conditional Put of each deduplication record, then
        // one ADD per counter with the sum of its deltas.
        let deltas = counters::deltas(additions);
        let items = self.addition_items(additions, &deltas)?;
        match self.transact(items).await? {
            Ok(()) => Ok(Added::Applied),
            Err(reasons) => counters::cancelled_additions(additions, &deltas, &reasons),
        }
    }

    async fn counter(
        &self,
        counter: &'static Counter,
        id: &str,
    ) -> Result<Option<i64>, StoreError> {
        self.read_counter(counter, id).await
    }

    async fn record_counter_conflicts(
        &self,
        counter: &'static Counter,
        id: &str,
        conflicts: &[ConflictRecord],
    ) -> Result<(), StoreError> {
        self.write_counter_conflicts(counter, id, conflicts).await
    }

    async fn due(
        &self,
        shard: u8,
        now: u64,
        after: Option<&DueEntry>,
        limit: usize,
    ) -> Result<Vec<DueEntry>, StoreError> {
        self.due_page(shard, now, after, limit).await
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
        let Some(events) = &self.events else {
            return Ok(None);
        };
        let limit = i32::try_from(limit).unwrap_or(i32::MAX);
        events.read(stream, after, limit).await.map(Some)
    }

    /// DynamoDB requests sent so far (each SDK call counts once, whatever
    /// the SDK retried inside it), a process's appends to the event store
    /// included.
    fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
            + self.events.as_ref().map_or(0, |events| events.requests())
    }
}
