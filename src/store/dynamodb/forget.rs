//! An erasure's part in the table: the entity's conflict records deleted.
//! They hold whole bodies of events of the entity's stream, sealed values
//! of a subject whose key is gone: unreadable already, and removed so that
//! no copy stays.

use aws_sdk_dynamodb::types::AttributeValue;

use super::DynamoStore;
use super::items::{CONFLICT_PREFIX, entity_pk};
use crate::entity::EntityKey;
use crate::store::StoreError;
use crate::table::request_error;

/// The most deletes one transaction holds.
const PER_TRANSACTION: usize = 100;

impl DynamoStore {
    /// Deletes the conflict records of `key`; answers how many there were.
    pub(super) async fn delete_conflicts(&self, key: &EntityKey) -> Result<usize, StoreError> {
        let mut keys = Vec::new();
        let mut start = None;
        loop {
            self.count("Query");
            let output = self
                .client
                .query()
                .table_name(&self.table)
                .key_condition_expression("pk = :pk AND begins_with(sk, :conflict)")
                .expression_attribute_values(":pk", AttributeValue::S(entity_pk(key)))
                .expression_attribute_values(
                    ":conflict",
                    AttributeValue::S(CONFLICT_PREFIX.to_owned()),
                )
                .projection_expression("pk, sk")
                .consistent_read(true)
                .set_exclusive_start_key(start.take())
                .send()
                .await
                .map_err(|err| request_error("Query", &err))?;
            keys.extend(output.items.unwrap_or_default());
            match output.last_evaluated_key.filter(|last| !last.is_empty()) {
                Some(next) => start = Some(next),
                None => break,
            }
        }
        let found = keys.len();
        for chunk in keys.chunks(PER_TRANSACTION) {
            let deletes = chunk
                .iter()
                .map(|item| self.delete(item.clone()))
                .collect::<Result<Vec<_>, _>>()?;
            // A delete of an item already gone succeeds: nothing to cancel.
            if let Err(reasons) = self.transact(deletes).await? {
                return Err(StoreError::Request {
                    operation: "TransactWriteItems",
                    message: format!("deleting conflict records was cancelled: {reasons:?}"),
                });
            }
        }
        Ok(found)
    }
}
