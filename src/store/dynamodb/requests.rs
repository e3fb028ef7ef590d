//! The requests the store's operations are made of: reads by key in
//! batches, a partition page by page, one transaction, and the items a
//! transaction is built of.

use std::time::Duration;

use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::{
    AttributeValue, CancellationReason, KeysAndAttributes, Put,
    ReturnValuesOnConditionCheckFailure, TransactWriteItem, Update,
};

use super::expression::Expression;
use super::items::key_text;
use super::{DynamoStore, Item};
use crate::store::StoreError;
use crate::table::{build_error, request_error, service_error};

/// BatchGetItem takes at most 100 keys a request.
const BATCH_GET_LIMIT: usize = 100;
/// How often unprocessed keys of a BatchGetItem are asked for again.
const UNPROCESSED_RETRIES: u32 = 5;

impl DynamoStore {
    /// Reads items by key with strongly consistent reads, in chunks of
    /// [`BATCH_GET_LIMIT`], asking again for unprocessed keys.
    pub(super) async fn batch_get(&self, mut keys: Vec<Item>) -> Result<Vec<Item>, StoreError> {
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

    /// A transaction's update of the item at `key`, as `expression` says;
    /// with its condition, the item as it was when the condition fails.
    pub(super) fn update(
        &self,
        key: Item,
        expression: &Expression,
    ) -> Result<TransactWriteItem, StoreError> {
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
    pub(super) fn put_new(&self, item: Item) -> Result<TransactWriteItem, StoreError> {
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
    pub(super) async fn transact(
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
    pub(super) async fn query_page(
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
    pub(super) async fn partition(&self, pk: String) -> Result<Vec<Item>, StoreError> {
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
}
