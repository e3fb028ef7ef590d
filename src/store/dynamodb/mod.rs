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
//!
//! An entity item also holds `parked` (a number set: the sequences parked on
//! it) and `parkedSince` while it has any; an item with only those is not
//! an entity yet. The index holds one item (with `parkedSince`) per entity
//! with events parked, written in the same transactions, so that the parked
//! entities are found with one query instead of a scan.
//!
//! | file | what it holds |
//! | --- | --- |
//! | `mod.rs` | [`DynamoStore`]: the client calls behind the [`Store`] trait |
//! | `items.rs` | the item layout: keys, attributes, items to and from entities (serde_dynamo) |
//! | `expression.rs` | update and condition expressions; a commit's conditional update |
//! | `errors.rs` | DynamoDB's errors as the store's (refusals for good apart) |
//! | `parked_index.rs` | the index of parked entities, spread over 16 partitions |
//! | `admin.rs` | the table itself: connect, create if missing, check |

#[cfg(feature = "test-support")]
use std::collections::BTreeSet;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::{
    AttributeValue, CancellationReason, Delete, KeysAndAttributes, Put,
    ReturnValuesOnConditionCheckFailure, TransactWriteItem, Update,
};
use serde_dynamo::aws_sdk_dynamodb_1::to_item;

mod admin;
pub(crate) mod errors;
mod expression;
mod items;
mod parked_index;
mod xray;

pub use admin::{
    TableError, check_table, connect, create_table, ensure_events_table, ensure_table,
};
use errors::*;
use expression::*;
use items::*;

use super::{
    Added, Addition, Commit, Committed, DedupKey, Inspection, Loaded, ParkedEvent, ParkedPage,
    Store, StoreError, Stored,
};
use crate::entity::EntityKey;
use crate::handling::Counter;

use crate::entity::Item;

/// The TTL attribute of deduplication records.
pub const TTL_ATTRIBUTE: &str = "expiresAt";
/// BatchGetItem takes at most 100 keys a request.
const BATCH_GET_LIMIT: usize = 100;
/// How often unprocessed keys of a BatchGetItem are asked for again.
const UNPROCESSED_RETRIES: u32 = 5;

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

/// The table, through the AWS SDK. Cheap to clone; counts its requests.
#[derive(Debug, Clone)]
pub struct DynamoStore {
    client: Client,
    table: String,
    requests: Arc<AtomicU64>,
    /// The X-Ray daemon, when there is one: a subsegment per call.
    xray: Option<Arc<xray::XRay>>,
    /// The operations called, for the policy test (`test-support` only).
    #[cfg(feature = "test-support")]
    operations: Arc<std::sync::Mutex<BTreeSet<&'static str>>>,
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
            #[cfg(feature = "test-support")]
            operations: Arc::default(),
        }
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
    /// request; only with the `test-support` feature (the function pays no
    /// lock for it).
    #[cfg(feature = "test-support")]
    fn note(&self, operation: &'static str) {
        self.operations
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(operation);
    }

    #[cfg(not(feature = "test-support"))]
    fn note(&self, _operation: &'static str) {}

    /// The DynamoDB operations called so far (see [`iam_actions`]);
    /// `test-support` only.
    #[cfg(feature = "test-support")]
    pub fn operations(&self) -> BTreeSet<&'static str> {
        self.operations
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
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

impl DynamoStore {
    /// Reads items by key with strongly consistent reads, in chunks of
    /// [`BATCH_GET_LIMIT`], asking again for unprocessed keys.
    async fn batch_get(&self, mut keys: Vec<Item>) -> Result<Vec<Item>, StoreError> {
        keys.sort_by_key(key_text);
        keys.dedup_by(|a, b| key_text(a) == key_text(b));
        let mut items = Vec::new();
        for chunk in keys.chunks(BATCH_GET_LIMIT) {
            let mut pending = KeysAndAttributes::builder()
                .set_keys(Some(chunk.to_vec()))
                .consistent_read(true)
                .build()
                .map_err(|err| build_error("BatchGetItem", err))?;
            for attempt in 0..=UNPROCESSED_RETRIES {
                self.count("BatchGetItem");
                let output = {
                    let started = self.subsegment_start();
                    let result = self
                        .client
                        .batch_get_item()
                        .request_items(&self.table, pending)
                        .send()
                        .await;
                    self.subsegment_end("BatchGetItem", started, result.is_err());
                    result
                }
                .map_err(|err| request_error("BatchGetItem", &err))?;
                items.extend(
                    output
                        .responses
                        .and_then(|mut tables| tables.remove(&self.table))
                        .unwrap_or_default(),
                );
                match output
                    .unprocessed_keys
                    .and_then(|mut tables| tables.remove(&self.table))
                {
                    Some(rest) if !rest.keys.is_empty() => {
                        if attempt == UNPROCESSED_RETRIES {
                            return Err(StoreError::Request {
                                operation: "BatchGetItem",
                                message: format!(
                                    "{} keys still unprocessed after retries",
                                    rest.keys.len()
                                ),
                            });
                        }
                        tokio::time::sleep(Duration::from_millis(20 << attempt)).await;
                        pending = rest;
                    }
                    _ => break,
                }
            }
        }
        Ok(items)
    }

    /// One entity's item, read again (after a transaction lost to a
    /// concurrent park of the same sequence).
    async fn stored(&self, key: &EntityKey) -> Result<Stored, StoreError> {
        let item = self.batch_get(vec![key_item(key)]).await?.pop();
        item.map_or(Ok(Stored::default()), |item| {
            stored_from_item(key.kind(), item)
        })
    }

    /// A transaction's update of the item at `key`, as `expression` says;
    /// with its condition, the item as it was when the condition fails.
    fn update(&self, key: Item, expression: &Expression) -> Result<TransactWriteItem, StoreError> {
        let mut update = Update::builder()
            .table_name(&self.table)
            .set_key(Some(key))
            .update_expression(expression.update())
            .set_condition_expression(expression.condition())
            .set_expression_attribute_names(Some(expression.names.clone()))
            .set_expression_attribute_values(expression.values());
        if expression.condition().is_some() {
            update = update.return_values_on_condition_check_failure(
                ReturnValuesOnConditionCheckFailure::AllOld,
            );
        }
        let update = update
            .build()
            .map_err(|err| build_error("TransactWriteItems", err))?;
        Ok(TransactWriteItem::builder().update(update).build())
    }

    /// A transaction's put of `item` where none is (`attribute_not_exists`).
    fn put_new(&self, item: Item) -> Result<TransactWriteItem, StoreError> {
        let put = Put::builder()
            .table_name(&self.table)
            .set_item(Some(item))
            .condition_expression("attribute_not_exists(pk)")
            .build()
            .map_err(|err| build_error("TransactWriteItems", err))?;
        Ok(TransactWriteItem::builder().put(put).build())
    }

    /// Sends one transaction. `Ok(Err(reasons))`: it was cancelled, with a
    /// reason per item; other failures are errors.
    async fn transact(
        &self,
        items: Vec<TransactWriteItem>,
    ) -> Result<Result<(), Vec<CancellationReason>>, StoreError> {
        self.count("TransactWriteItems");
        let result = {
            let started = self.subsegment_start();
            let result = self
                .client
                .transact_write_items()
                .set_transact_items(Some(items))
                .send()
                .await;
            self.subsegment_end("TransactWriteItems", started, result.is_err());
            result
        };
        match result {
            Ok(_) => Ok(Ok(())),
            Err(err) => match err.into_service_error() {
                TransactWriteItemsError::TransactionCanceledException(cancelled) => {
                    Ok(Err(cancelled.cancellation_reasons.unwrap_or_default()))
                }
                other => Err(service_error("TransactWriteItems", &other)),
            },
        }
    }

    /// One page of a partition's items, in sort key order, with strongly
    /// consistent reads, after `start` and of at most `limit` items (as many
    /// as fit in 1 MB when `None`); with where the next page starts.
    async fn query_page(
        &self,
        pk: &str,
        start: Option<Item>,
        limit: Option<i32>,
    ) -> Result<(Vec<Item>, Option<Item>), StoreError> {
        self.count("Query");
        let started = self.subsegment_start();
        let result = self
            .client
            .query()
            .table_name(&self.table)
            .key_condition_expression("pk = :pk")
            .expression_attribute_values(":pk", AttributeValue::S(pk.to_owned()))
            .consistent_read(true)
            .set_limit(limit)
            .set_exclusive_start_key(start)
            .send()
            .await;
        self.subsegment_end("Query", started, result.is_err());
        let output = result.map_err(|err| request_error("Query", &err))?;
        let next = output.last_evaluated_key.filter(|last| !last.is_empty());
        Ok((output.items.unwrap_or_default(), next))
    }

    /// Every item of one partition, in sort key order, page after page.
    async fn partition(&self, pk: String) -> Result<Vec<Item>, StoreError> {
        let mut items = Vec::new();
        let mut start: Option<Item> = None;
        loop {
            let (page, next) = self.query_page(&pk, start.take(), None).await?;
            items.extend(page);
            match next {
                Some(next) => start = Some(next),
                None => return Ok(items),
            }
        }
    }

    /// A commit that writes only the entity's item: one conditional UpdateItem.
    async fn update_entity(&self, commit: &Commit) -> Result<Committed, StoreError> {
        let expression = entity_update(commit)?;
        self.count("UpdateItem");
        let result = {
            let started = self.subsegment_start();
            let result = self
                .client
                .update_item()
                .table_name(&self.table)
                .set_key(Some(key_item(&commit.key)))
                .update_expression(expression.update())
                .set_condition_expression(expression.condition())
                .set_expression_attribute_names(Some(expression.names.clone()))
                .set_expression_attribute_values(expression.values())
                .return_values_on_condition_check_failure(
                    ReturnValuesOnConditionCheckFailure::AllOld,
                )
                .send()
                .await;
            self.subsegment_end("UpdateItem", started, result.is_err());
            result
        };
        match result {
            Ok(_) => Ok(Committed::Written),
            Err(err) => match err.into_service_error() {
                UpdateItemError::ConditionalCheckFailedException(failed) => {
                    Ok(Committed::Conflict {
                        current: failed.item.map_or(Ok(Stored::default()), |item| {
                            stored_from_item(commit.key.kind(), item)
                        })?,
                    })
                }
                other => Err(service_error("UpdateItem", &other)),
            },
        }
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
                    loaded.handled.insert(asked.clone());
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
        if commit.touches_entity() && commit.items() == 1 {
            return self.update_entity(commit).await;
        }
        let pk = entity_pk(&commit.key);
        let transaction = |err| build_error("TransactWriteItems", err);
        let mut items = Vec::with_capacity(commit.items());
        if commit.touches_entity() {
            items.push(self.update(key_item(&commit.key), &entity_update(commit)?)?);
        }
        for event in &commit.park {
            let item = to_item(ParkedItem {
                pk: pk.clone(),
                sk: pending_sk(event.sequence),
                event_id: event.event_id.clone(),
                event_type: event.event_type.clone(),
                body: event.body.clone(),
                message_id: event.message_id.clone(),
                parked_at: event.parked_at,
            })
            .map_err(|err| build_error("serialize parked event", err))?;
            items.push(self.put_new(item)?);
        }
        if commit.changes_parking() {
            // The entity's entry in the index of parked entities.
            let (key, long_pk) = parked_index::entry_key(&pk);
            let item = if commit.parked_after().is_empty() {
                self.delete(key)?
            } else {
                let mut expression = Expression::default();
                expression.set_if_absent(PARKED_SINCE, AttributeValue::N(commit.now.to_string()));
                if let Some(long_pk) = long_pk {
                    expression.set(parked_index::INDEXED_PK, long_pk);
                }
                self.update(key, &expression)?
            };
            items.push(item);
        }
        for sequence in &commit.drain {
            let delete = Delete::builder()
                .table_name(&self.table)
                .set_key(Some(item_key(pk.clone(), pending_sk(*sequence))))
                .build()
                .map_err(transaction)?;
            items.push(TransactWriteItem::builder().delete(delete).build());
        }
        for conflict in &commit.conflicts {
            // Recorded once: a conflict seen again keeps its first record.
            let mut expression = Expression::default();
            expression.set_if_absent("body", AttributeValue::S(conflict.body.clone()));
            expression.set_if_absent("seenAt", AttributeValue::N(conflict.seen_at.to_string()));
            let key = item_key(
                pk.clone(),
                conflict_sk(conflict.sequence, &conflict.event_id),
            );
            items.push(self.update(key, &expression)?);
        }
        if items.is_empty() {
            return Ok(Committed::Written);
        }
        if !commit.drain.is_empty() {
            // Drained events' items, and the index entry once none is left.
            self.note("TransactWriteItems/Delete");
        }
        let Err(reasons) = self.transact(items).await? else {
            return Ok(Committed::Written);
        };
        let failed = |reason: &CancellationReason| reason.code() == Some("ConditionalCheckFailed");
        match reasons.first() {
            Some(first) if commit.touches_entity() && failed(first) => {
                let current = first
                    .item()
                    .cloned()
                    .map_or(Ok(Stored::default()), |item| {
                        stored_from_item(commit.key.kind(), item)
                    })?;
                Ok(Committed::Conflict { current })
            }
            // A parked event's slot was taken meanwhile.
            _ if reasons.iter().any(failed) => Ok(Committed::Conflict {
                current: self.stored(&commit.key).await?,
            }),
            _ => Err(cancelled(&reasons)),
        }
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

    async fn add(&self, additions: &[Addition]) -> Result<Added, StoreError> {
        if additions.is_empty() {
            return Ok(Added::Applied);
        }
        // One transaction: a conditional Put of each deduplication record, then
        // one ADD per counter with the sum of its deltas (a transaction may
        // touch an item only once).
        let mut items = Vec::with_capacity(additions.len() + 1);
        for addition in additions {
            let record = to_item(DedupItem {
                pk: format!("{DEDUP_PREFIX}{}", addition.event_id),
                sk: format!("{HANDLER_PREFIX}{}", addition.handler),
                handled_at: addition.handled_at,
                expires_at: addition.expires_at,
            })
            .map_err(|err| build_error("serialize dedup record", err))?;
            items.push(self.put_new(record)?);
        }
        let mut deltas: Vec<((&'static Counter, &str), i128)> = Vec::new();
        for addition in additions {
            let target = (addition.counter, addition.id.as_str());
            match deltas.iter_mut().find(|(at, _)| *at == target) {
                Some((_, sum)) => *sum += i128::from(addition.delta),
                None => deltas.push((target, i128::from(addition.delta))),
            }
        }
        for ((counter, id), delta) in &deltas {
            // DynamoDB's numbers go far past 64 bits, so ADD alone would
            // store a number that no reader can take: the condition keeps
            // the sum in range (an absent number counts as 0).
            let (bound, limit) = if *delta >= 0 {
                ("<=", i128::from(i64::MAX) - delta)
            } else {
                (">=", i128::from(i64::MIN) - delta)
            };
            let in_range = if i64::try_from(*delta).is_ok() {
                format!("attribute_not_exists(#counter) OR #counter {bound} :limit")
            } else {
                // Even from 0 the sum leaves the range.
                format!("#counter {bound} :limit")
            };
            let update = Update::builder()
                .table_name(&self.table)
                .set_key(Some(counter_key(counter, id)))
                .update_expression("ADD #counter :delta")
                .condition_expression(in_range)
                .expression_attribute_names("#counter", counter.attribute)
                .expression_attribute_values(":delta", AttributeValue::N(delta.to_string()))
                .expression_attribute_values(":limit", AttributeValue::N(limit.to_string()))
                .return_values_on_condition_check_failure(
                    ReturnValuesOnConditionCheckFailure::AllOld,
                )
                .build()
                .map_err(|err| build_error("TransactWriteItems", err))?;
            items.push(TransactWriteItem::builder().update(update).build());
        }
        let Err(reasons) = self.transact(items).await? else {
            return Ok(Added::Applied);
        };
        let failed = |reason: &&CancellationReason| reason.code() == Some("ConditionalCheckFailed");
        let existing: Vec<usize> = reasons
            .iter()
            .take(additions.len())
            .enumerate()
            .filter(|(_, reason)| failed(reason))
            .map(|(index, _)| index)
            .collect();
        if !existing.is_empty() {
            return Ok(Added::Duplicates(existing));
        }
        let out_of_range = reasons
            .iter()
            .skip(additions.len())
            .zip(&deltas)
            .find(|(reason, _)| failed(reason));
        match out_of_range {
            Some((reason, ((counter, id), _))) => Ok(Added::OutOfRange {
                counter,
                id: (*id).to_owned(),
                value: counter_of(counter, id, reason.item())?,
            }),
            None => Err(cancelled(&reasons)),
        }
    }

    async fn counter(
        &self,
        counter: &'static Counter,
        id: &str,
    ) -> Result<Option<i64>, StoreError> {
        self.count("GetItem");
        let output = {
            let started = self.subsegment_start();
            let result = self
                .client
                .get_item()
                .table_name(&self.table)
                .set_key(Some(counter_key(counter, id)))
                .consistent_read(true)
                .send()
                .await;
            self.subsegment_end("GetItem", started, result.is_err());
            result
        }
        .map_err(|err| request_error("GetItem", &err))?;
        counter_of(counter, id, output.item.as_ref())
    }

    /// DynamoDB requests sent so far (each SDK call counts once, whatever
    /// the SDK retried inside it).
    fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }
}
