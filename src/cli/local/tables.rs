//! What `show` reads of a consumer's table besides the entities of the
//! streams it was given: every counter the table holds. A deduplicated
//! addition's counter is keyed by its event's stream, but an effect's by
//! whatever its handler chose (a member, a day): only the table knows
//! them. In memory, the store lists them; on DynamoDB, one scan of the
//! table (a local run's, small) finds each counter item of the domain.

use std::future::Future;

use aws_sdk_dynamodb::types::AttributeValue;

use crate::cli::counters::CounterValue;
use crate::domain::Domain;
use crate::store::Store;
use crate::store::dynamodb::DynamoStore;
use crate::store::memory::MemoryStore;
use crate::table::{StoreError, request_error};

/// A table whose counters can be listed.
pub(super) trait Counters: Store {
    /// Every counter of `domain` that the table holds, with its id and
    /// value, in no particular order.
    fn every_counter(
        &self,
        domain: &Domain,
    ) -> impl Future<Output = Result<Vec<CounterValue>, StoreError>> + Send;
}

impl Counters for MemoryStore {
    async fn every_counter(&self, _: &Domain) -> Result<Vec<CounterValue>, StoreError> {
        Ok(self.counters())
    }
}

impl Counters for DynamoStore {
    async fn every_counter(&self, domain: &Domain) -> Result<Vec<CounterValue>, StoreError> {
        let mut found = Vec::new();
        let mut start = None;
        loop {
            let output = self
                .client()
                .scan()
                .table_name(self.table())
                .consistent_read(true)
                .set_exclusive_start_key(start)
                .send()
                .await
                .map_err(|err| request_error("Scan", &err))?;
            for item in output.items.unwrap_or_default() {
                let text = |name: &str| match item.get(name) {
                    Some(AttributeValue::S(text)) => Some(text.as_str()),
                    _ => None,
                };
                let (Some(pk), Some(sk)) = (text("pk"), text("sk")) else {
                    continue;
                };
                for counter in domain.counters() {
                    let id = counter.id_of(pk, sk);
                    let value = match item.get(counter.attribute) {
                        Some(AttributeValue::N(number)) => number.parse::<i64>().ok(),
                        _ => None,
                    };
                    if let (Some(id), Some(value)) = (id, value) {
                        found.push((*counter, id.to_owned(), value));
                    }
                }
            }
            start = output.last_evaluated_key.filter(|key| !key.is_empty());
            if start.is_none() {
                return Ok(found);
            }
        }
    }
}
