//! A commit's writes: the entity's conditional update alone when that is
//! all it holds, else one transaction of the entity's update, the parked
//! events put, the index entry, the drained events deleted and the
//! conflicts recorded; and, when the transaction is cancelled, what the
//! entity's item held.

use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::{
    AttributeValue, CancellationReason, ReturnValuesOnConditionCheckFailure, TransactWriteItem,
};
use serde_dynamo::aws_sdk_dynamodb_1::to_item;

use super::effects::OnItem;
use super::expression::{Expression, entity_update};
use super::items::{
    PARKED_SINCE, ParkedItem, conflict_sk, entity_pk, item_key, key_item, pending_sk,
    stored_from_item,
};
use super::{DynamoStore, parked_index};
use crate::entity::EntityKey;
use crate::producer::{Append, AppendError};
use crate::store::{Commit, Committed, Outbound, ParkedEvent, StoreError, Stored};
use crate::table::{build_error, cancelled, service_error};

impl DynamoStore {
    /// A commit that writes only the entity's item: one conditional UpdateItem.
    pub(super) async fn update_entity(&self, commit: &Commit) -> Result<Committed, StoreError> {
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
                    Ok(Committed::LostRace {
                        current: failed.item.map_or(Ok(Stored::default()), |item| {
                            stored_from_item(commit.key.kind(), item)
                        })?,
                    })
                }
                other => Err(service_error("UpdateItem", &other)),
            },
        }
    }

    /// The transaction's items, in the order the cancellation reasons come
    /// back: the entity's update first (when the commit touches it).
    pub(super) fn commit_items(
        &self,
        commit: &Commit,
    ) -> Result<Vec<TransactWriteItem>, StoreError> {
        let pk = entity_pk(&commit.key);
        let mut items = Vec::with_capacity(commit.items());
        if commit.touches_entity() {
            items.push(self.update(key_item(&commit.key), &entity_update(commit)?)?);
        }
        for event in &commit.park {
            items.push(self.put_new(parked_item(&pk, event)?)?);
        }
        if commit.changes_parking() {
            items.push(self.index_entry(&pk, commit)?);
        }
        for sequence in &commit.drain {
            items.push(self.delete(item_key(pk.clone(), pending_sk(*sequence)))?);
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
        Ok(items)
    }

    /// The entity's entry in the index of parked entities: deleted when no
    /// event stays parked, else written (`parkedSince` kept when present).
    fn index_entry(&self, pk: &str, commit: &Commit) -> Result<TransactWriteItem, StoreError> {
        let (key, long_pk) = parked_index::entry_key(pk);
        if commit.parked_after().is_empty() {
            return self.delete(key);
        }
        let mut expression = Expression::default();
        expression.set_if_absent(PARKED_SINCE, AttributeValue::N(commit.now.to_string()));
        if let Some(long_pk) = long_pk {
            expression.set(parked_index::INDEXED_PK, long_pk);
        }
        self.update(key, &expression)
    }

    /// What a cancelled transaction means: a conflict on the entity (its
    /// item as it was, or as read again when a parked event's slot was
    /// taken meanwhile), or an error.
    pub(super) async fn cancelled_commit(
        &self,
        commit: &Commit,
        reasons: &[CancellationReason],
    ) -> Result<Committed, StoreError> {
        let failed = |reason: &CancellationReason| reason.code() == Some("ConditionalCheckFailed");
        match reasons.first() {
            Some(first) if commit.touches_entity() && failed(first) => {
                let current = first
                    .item()
                    .cloned()
                    .map_or(Ok(Stored::default()), |item| {
                        stored_from_item(commit.key.kind(), item)
                    })?;
                Ok(Committed::LostRace { current })
            }
            // A parked event's slot was taken meanwhile.
            _ if reasons.iter().any(failed) => Ok(Committed::LostRace {
                current: self.stored(&commit.key).await?,
            }),
            _ => Err(cancelled(reasons)),
        }
    }

    /// A process's step: the commit's writes and its appends, one
    /// transaction across this table and the event store's (the event
    /// store's append, with the commit's writes as the caller's own).
    /// `None` when the events were appended before under the step's request
    /// id: by another table's step (a rebuild into a table of its own,
    /// reacting as the live process did), whose state is to be written
    /// alone; or by an earlier try of this one, whose state moved with them
    /// (written alone, its condition fails: a lost race, decided again).
    pub(super) async fn commit_with_outbox(
        &self,
        commit: &Commit,
        outbound: &Outbound,
        merged: &[OnItem<'_>],
    ) -> Result<Option<Committed>, StoreError> {
        let Some(events) = &self.events else {
            return Err(StoreError::Rejected {
                operation: "TransactWriteItems",
                message: "a process's step appends events, and the store was given no event store (set EVENT_STORE_TABLE)".to_owned(),
            });
        };
        let mut writes = self.commit_items(commit)?;
        writes.extend(self.effect_items(merged)?);
        self.note("TransactWriteItems");
        self.note("Query");
        if !commit.drain.is_empty() {
            self.note("TransactWriteItems/Delete");
        }
        let append = Append {
            stream_id: outbound.stream.clone(),
            events: outbound.events.clone(),
            expected: outbound.expected,
            request_id: Some(outbound.request_id.clone()),
            writes,
        };
        let answer = match events.append(append).await {
            Ok(appended) if !appended.duplicate_request => Committed::Written,
            // Appended before: the state is written alone, on its condition
            // (after an earlier try of this step, which wrote it, that is a
            // lost race).
            Ok(_) => return Ok(None),
            // A caller's write refused: the state moved meanwhile.
            Err(AppendError::Condition { .. }) => Committed::LostRace {
                current: self.stored(&commit.key).await?,
            },
            Err(AppendError::ExpectedSequence { expected, current }) => Committed::Moved {
                stream: outbound.stream.clone(),
                expected,
                current,
            },
            Err(AppendError::Store(err)) => return Err(err),
            Err(AppendError::Contention { attempts }) => {
                return Err(StoreError::Request {
                    operation: "TransactWriteItems",
                    message: format!(
                        "other writers kept appending to the stream {}: gave up after {attempts} tries",
                        outbound.stream
                    ),
                });
            }
            Err(other) => {
                return Err(StoreError::Rejected {
                    operation: "TransactWriteItems",
                    message: format!("the event store refused the process's append: {other}"),
                });
            }
        };
        Ok(Some(answer))
    }

    /// One entity's item, read again (after a transaction lost to a
    /// concurrent park of the same sequence).
    async fn stored(&self, key: &EntityKey) -> Result<Stored, StoreError> {
        let item = self.batch_get(vec![key_item(key)]).await?.pop();
        item.map_or(Ok(Stored::default()), |item| {
            stored_from_item(key.kind(), item)
        })
    }
}

/// A parked event's item, under the entity's `pk`.
fn parked_item(pk: &str, event: &ParkedEvent) -> Result<super::Item, StoreError> {
    to_item(ParkedItem {
        pk: pk.to_owned(),
        sk: pending_sk(event.sequence),
        event_id: event.event_id.clone(),
        event_type: event.event_type.clone(),
        body: event.body.clone(),
        message_id: event.message_id.clone(),
        parked_at: event.parked_at,
    })
    .map_err(|err| build_error("serialize parked event", err))
}
