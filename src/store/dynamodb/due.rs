//! The index of due deadlines: a process's states with a deadline hold
//! `dueAt` and `dueShard` (`DUE#<0-f>`), the keys of the sparse global
//! secondary index `due`; a sweep reads each partition's deadlines due by
//! now, earliest first, a page at a time from the entry after the last it
//! tried. The index is eventually consistent: a deadline is read again,
//! strongly, from its state before it is fired.

use aws_sdk_dynamodb::types::AttributeValue;

use super::items::{DUE_AT, DUE_INDEX, DUE_SHARD, item_key};
use super::{DynamoStore, Item};
use crate::store::{DueEntry, StoreError};
use crate::table::request_error;

impl DynamoStore {
    /// The entries of partition `shard` due at or before `now`, after
    /// `after` (from the start: `None`), at most `limit`, earliest first.
    pub(super) async fn due_page(
        &self,
        shard: u8,
        now: u64,
        after: Option<&DueEntry>,
        limit: usize,
    ) -> Result<Vec<DueEntry>, StoreError> {
        let partition = format!("DUE#{shard:x}");
        // The index's key and the table's: where the query goes on.
        let start = after.map(|after| {
            let mut key = item_key(after.pk.clone(), after.sk.clone());
            key.insert(DUE_SHARD.to_owned(), AttributeValue::S(partition.clone()));
            key.insert(DUE_AT.to_owned(), AttributeValue::N(after.at.to_string()));
            key
        });
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
            .expression_attribute_values(":shard", AttributeValue::S(partition))
            .expression_attribute_values(":now", AttributeValue::N(now.to_string()))
            .set_exclusive_start_key(start)
            .limit(i32::try_from(limit.max(1)).unwrap_or(i32::MAX))
            .send()
            .await;
        self.subsegment_end("Query", started, result.is_err());
        let output = result.map_err(|err| request_error("Query", &err))?;
        Ok(output
            .items
            .unwrap_or_default()
            .iter()
            .filter_map(entry)
            .collect())
    }
}

/// An entry of the index, as the query answers it (its keys only).
fn entry(item: &Item) -> Option<DueEntry> {
    let text = |name: &str| match item.get(name) {
        Some(AttributeValue::S(text)) => Some(text.clone()),
        _ => None,
    };
    let at = match item.get(DUE_AT) {
        Some(AttributeValue::N(number)) => number.parse().ok()?,
        _ => return None,
    };
    Some(DueEntry {
        at,
        pk: text("pk")?,
        sk: text("sk")?,
    })
}
