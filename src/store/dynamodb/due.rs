//! The index of due deadlines: a process's states with a deadline hold
//! `dueAt` and `dueShard` (`DUE#<0-f>`), the keys of the sparse global
//! secondary index `due`; a sweep reads each partition's deadlines due by
//! now, earliest first. The index is eventually consistent: a deadline is
//! read again, strongly, from its state before it is fired.

use aws_sdk_dynamodb::types::AttributeValue;

use super::DynamoStore;
use super::errors::request_error;
use super::items::{DUE_AT, DUE_INDEX, DUE_SHARD};
use crate::store::StoreError;

impl DynamoStore {
    /// The `pk`s of the states of partition `shard` due at or before `now`,
    /// at most `limit`, earliest first.
    pub(super) async fn due_page(
        &self,
        shard: u8,
        now: u64,
        limit: usize,
    ) -> Result<Vec<String>, StoreError> {
        self.count("Query");
        let started = self.subsegment_start();
        let result = self
            .client
            .query()
            .table_name(&self.table)
            .index_name(DUE_INDEX)
            .key_condition_expression("#shard = :shard AND #at <= :now")
            .expression_attribute_names("#shard", DUE_SHARD)
            .expression_attribute_names("#at", DUE_AT)
            .expression_attribute_values(":shard", AttributeValue::S(format!("DUE#{shard:x}")))
            .expression_attribute_values(":now", AttributeValue::N(now.to_string()))
            .limit(i32::try_from(limit.max(1)).unwrap_or(i32::MAX))
            .send()
            .await;
        self.subsegment_end("Query", started, result.is_err());
        let output = result.map_err(|err| request_error("Query", &err))?;
        Ok(output
            .items
            .unwrap_or_default()
            .into_iter()
            .filter_map(|item| match item.get("pk") {
                Some(AttributeValue::S(pk)) => Some(pk.clone()),
                _ => None,
            })
            .collect())
    }
}
