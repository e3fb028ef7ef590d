//! Counters: the additions of a batch in one transaction (a conditional
//! put of each deduplication record, one bounded ADD per counter), what a
//! cancelled one means, and a counter read.

use aws_sdk_dynamodb::types::{
    AttributeValue, CancellationReason, Put, ReturnValuesOnConditionCheckFailure,
    TransactWriteItem, Update,
};
use serde_dynamo::aws_sdk_dynamodb_1::to_item;

use super::expression::Expression;
use super::items::{
    DEDUP_PREFIX, DedupItem, HANDLER_PREFIX, conflict_sk, counter_key, counter_of, dedup_stream,
    item_key,
};
use super::{DynamoStore, Item};
use crate::handling::Counter;
use crate::store::{Added, ConflictRecord, DedupAddition, Existing, StoreError};
use crate::table::{build_error, cancelled, request_error};

/// The sum of the deltas of each counter, in the order first added to.
pub(super) type Deltas<'a> = Vec<((&'static Counter, &'a str), i128)>;

/// Sums the additions' deltas by counter (a transaction may touch an item
/// only once).
pub(super) fn deltas(additions: &[DedupAddition]) -> Deltas<'_> {
    let mut deltas: Deltas = Vec::new();
    for addition in additions {
        let target = (addition.counter, addition.id.as_str());
        match deltas.iter_mut().find(|(at, _)| *at == target) {
            Some((_, sum)) => *sum += i128::from(addition.delta),
            None => deltas.push((target, i128::from(addition.delta))),
        }
    }
    deltas
}

impl DynamoStore {
    /// The transaction's items: a conditional Put of each deduplication
    /// record, in the additions' order, then one ADD per counter.
    pub(super) fn addition_items(
        &self,
        additions: &[DedupAddition],
        deltas: &Deltas<'_>,
    ) -> Result<Vec<TransactWriteItem>, StoreError> {
        let mut items = Vec::with_capacity(additions.len() + 1);
        for addition in additions {
            let record = to_item(DedupItem {
                pk: format!("{DEDUP_PREFIX}{}", addition.event_id),
                sk: format!("{HANDLER_PREFIX}{}", addition.handler),
                handled_at: addition.handled_at,
                expires_at: addition.expires_at,
                stream: addition.id.clone(),
            })
            .map_err(|err| build_error("serialize dedup record", err))?;
            items.push(self.record_put(record)?);
        }
        for ((counter, id), delta) in deltas {
            items.push(self.counter_update(counter, id, *delta)?);
        }
        Ok(items)
    }

    /// A deduplication record's put, on the condition that none exists; a
    /// failed condition answers with the record found (`ALL_OLD`: the
    /// stream it was written for).
    fn record_put(&self, record: Item) -> Result<TransactWriteItem, StoreError> {
        let put = Put::builder()
            .table_name(&self.table)
            .set_item(Some(record))
            .condition_expression("attribute_not_exists(pk)")
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .build()
            .map_err(|err| build_error("TransactWriteItems", err))?;
        Ok(TransactWriteItem::builder().put(put).build())
    }

    /// Conflicts on a counter's stream, each its `CONFLICT#` item in the
    /// counter's item's partition, written only where none exists (one
    /// `UpdateItem` each: they are rare).
    pub(super) async fn write_counter_conflicts(
        &self,
        counter: &Counter,
        id: &str,
        conflicts: &[ConflictRecord],
    ) -> Result<(), StoreError> {
        for conflict in conflicts {
            let mut expression = Expression::default();
            expression.set_if_absent("body", AttributeValue::S(conflict.body.clone()));
            expression.set_if_absent("seenAt", AttributeValue::N(conflict.seen_at.to_string()));
            let key = item_key(
                counter.pk(id),
                conflict_sk(conflict.sequence, &conflict.event_id),
            );
            self.count("UpdateItem");
            let started = self.subsegment_start();
            let result = self
                .client
                .update_item()
                .table_name(&self.table)
                .set_key(Some(key))
                .update_expression(expression.update())
                .set_condition_expression(expression.condition())
                .set_expression_attribute_names(Some(expression.names.clone()))
                .set_expression_attribute_values(expression.values())
                .send()
                .await;
            self.subsegment_end("UpdateItem", started, result.is_err());
            result.map_err(|err| request_error("UpdateItem", &err))?;
        }
        Ok(())
    }

    /// The ADD of `delta` to one counter. DynamoDB's numbers go far past 64
    /// bits, so ADD alone would store a number that no reader can take: the
    /// condition keeps the sum in range (an absent number counts as 0).
    fn counter_update(
        &self,
        counter: &Counter,
        id: &str,
        delta: i128,
    ) -> Result<TransactWriteItem, StoreError> {
        let (bound, limit) = if delta >= 0 {
            ("<=", i128::from(i64::MAX) - delta)
        } else {
            (">=", i128::from(i64::MIN) - delta)
        };
        let in_range = if i64::try_from(delta).is_ok() {
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
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .build()
            .map_err(|err| build_error("TransactWriteItems", err))?;
        Ok(TransactWriteItem::builder().update(update).build())
    }

    /// A counter's value, with a strongly consistent GetItem.
    pub(super) async fn read_counter(
        &self,
        counter: &'static Counter,
        id: &str,
    ) -> Result<Option<i64>, StoreError> {
        let item = self.counter_item(counter, id).await?;
        counter_of(counter, id, item.as_ref())
    }

    /// The values of `counters`, all kept on one item (the first's kind and
    /// sort key, `id`), with one strongly consistent GetItem: read together,
    /// as they were written. `None` for a counter nothing was added to.
    pub(crate) async fn counters_on_item(
        &self,
        counters: &[&'static Counter],
        id: &str,
    ) -> Result<Vec<Option<i64>>, StoreError> {
        let Some(first) = counters.first() else {
            return Ok(Vec::new());
        };
        if let Some(other) = counters
            .iter()
            .find(|counter| (counter.kind, counter.sort_key) != (first.kind, first.sort_key))
        {
            return Err(build_error(
                "GetItem",
                format!(
                    "the counters {} and {} are not kept on one item",
                    first.attribute, other.attribute
                ),
            ));
        }
        let item = self.counter_item(first, id).await?;
        counters
            .iter()
            .map(|counter| counter_of(counter, id, item.as_ref()))
            .collect()
    }

    /// A counter's item, with a strongly consistent GetItem.
    async fn counter_item(&self, counter: &Counter, id: &str) -> Result<Option<Item>, StoreError> {
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
        Ok(output.item)
    }
}

/// What a cancelled transaction of additions means: the additions already
/// handled (their records exist), else the counter the sum would take out
/// of range, else an error.
pub(super) fn cancelled_additions(
    additions: &[DedupAddition],
    deltas: &Deltas<'_>,
    reasons: &[CancellationReason],
) -> Result<Added, StoreError> {
    let failed = |reason: &&CancellationReason| reason.code() == Some("ConditionalCheckFailed");
    let existing: Vec<Existing> = reasons
        .iter()
        .take(additions.len())
        .enumerate()
        .filter(|(_, reason)| failed(reason))
        .map(|(index, reason)| Existing {
            index,
            stream: reason.item().and_then(dedup_stream),
        })
        .collect();
    if !existing.is_empty() {
        return Ok(Added::Existing(existing));
    }
    let out_of_range = reasons
        .iter()
        .skip(additions.len())
        .zip(deltas)
        .find(|(reason, _)| failed(reason));
    match out_of_range {
        Some((reason, ((counter, id), _))) => Ok(Added::OutOfRange {
            counter,
            id: (*id).to_owned(),
            value: counter_of(counter, id, reason.item())?,
        }),
        None => Err(cancelled(reasons)),
    }
}
