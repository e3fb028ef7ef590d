//! The index of parked entities: one entry per entity with events parked,
//! written in the commits that park and drain, read by the sweep with one
//! query a page instead of a scan.
//!
//! The entries are spread over [`SHARDS`] partitions, `PARKED#0` to
//! `PARKED#f` (by the entity's digest), each entry's sort key the entity's
//! `pk`: a parking storm (a producer's streams reordered at once) writes one
//! entry per park and per drain, and on one partition key it would reach a
//! partition's 1,000 write units a second at a few hundred commits a second
//! (the benchmark's parking storm).
//!
//! Entries written by an earlier release under the one partition `PARKED`
//! are read as the index's first partition (those whose entity has an entry
//! in its shard too are left to the shard), and moved to their shard by the
//! sweep alone ([`DynamoStore::upgrade_index`]): reading the index never
//! writes. During a rollout the earlier release may still write them, in the
//! same transactions as the entity's item: each move and each removal is
//! conditioned on the entity's item as read, so that it never takes an
//! entity that is still parked out of the index.

use aws_sdk_dynamodb::types::{AttributeValue, Delete, TransactWriteItem};

use super::DynamoStore;
use super::Item;
use super::expression::Expression;
use super::items::{PARKED, PARKED_SINCE, STATE, item_key};
use crate::digest::digest;
use crate::store::{ParkedEntity, ParkedPage, StoreError};

/// How many partitions the index is spread over.
pub(super) const SHARDS: usize = 16;
/// The one partition of the index before it was spread (read, and its
/// entries moved by the sweep; never written by this release).
const LEGACY: &str = "PARKED";
/// The most bytes DynamoDB takes in a sort key.
const MAX_SORT_KEY_BYTES: usize = 1024;
/// The entity's `pk` on an entry whose sort key is its digest.
pub(super) const INDEXED_PK: &str = "entity";

/// The partitions in the order the index is read: the earlier release's
/// first, then the shards.
fn partitions() -> impl Iterator<Item = String> {
    std::iter::once(LEGACY.to_owned()).chain((0..SHARDS).map(|shard| format!("{LEGACY}#{shard:x}")))
}

/// The key of an entity's entry: its shard and its `pk`; for a `pk` longer
/// than a sort key may be (an aggregate id of 256 four-byte characters), `#`
/// and its digest, with the `pk` itself in [`INDEXED_PK`] (no kind starts
/// with `#`).
pub(super) fn entry_key(pk: &str) -> (Item, Option<AttributeValue>) {
    let hash = digest(pk);
    let shard = format!("{LEGACY}#{}", &hash[..1]);
    if pk.len() <= MAX_SORT_KEY_BYTES {
        (item_key(shard, pk.to_owned()), None)
    } else {
        (
            item_key(shard, format!("#{hash}")),
            Some(AttributeValue::S(pk.to_owned())),
        )
    }
}

/// The entity's `pk` an entry stands for.
fn entity_of(entry: &Item) -> Option<String> {
    match entry.get(INDEXED_PK).or_else(|| entry.get("sk")) {
        Some(AttributeValue::S(pk)) => Some(pk.clone()),
        _ => None,
    }
}

fn number(item: &Item, attribute: &str) -> Option<u64> {
    match item.get(attribute) {
        Some(AttributeValue::N(number)) => number.parse().ok(),
        _ => None,
    }
}

/// A page's cursor: the partition, a newline, the last sort key read (empty:
/// the partition from its start). Partition names hold no newline.
fn cursor(partition: &str, sk: &str) -> String {
    format!("{partition}\n{sk}")
}

impl DynamoStore {
    /// One page of the index: the entries of one partition after the
    /// cursor, or of the next partitions that hold any.
    pub(super) async fn parked_page(
        &self,
        after: Option<&str>,
        limit: usize,
    ) -> Result<ParkedPage, StoreError> {
        let (from, mut start) = match after.and_then(|after| after.split_once('\n')) {
            Some((partition, "")) => (partition.to_owned(), None),
            Some((partition, sk)) => (
                partition.to_owned(),
                Some(item_key(partition.to_owned(), sk.to_owned())),
            ),
            None => (LEGACY.to_owned(), None),
        };
        let limit = i32::try_from(limit.max(1)).unwrap_or(i32::MAX);
        let mut rest = partitions().skip_while(|partition| *partition != from);
        let mut page = ParkedPage::default();
        while let Some(partition) = rest.next() {
            let (items, next) = self
                .query_page(&partition, start.take(), Some(limit))
                .await?;
            let items = if partition == LEGACY {
                self.unmoved(items).await?
            } else {
                items
            };
            page.entities.extend(items.iter().filter_map(entry));
            if let Some(AttributeValue::S(sk)) = next.as_ref().and_then(|last| last.get("sk")) {
                page.next = Some(cursor(&partition, sk));
                break;
            }
            if !page.entities.is_empty() {
                page.next = rest.next().map(|partition| cursor(&partition, ""));
                break;
            }
        }
        Ok(page)
    }

    /// The earlier release's entries whose entity has no entry in its shard
    /// (one that has is read there): one BatchGetItem.
    async fn unmoved(&self, items: Vec<Item>) -> Result<Vec<Item>, StoreError> {
        if items.is_empty() {
            return Ok(items);
        }
        let keys = items
            .iter()
            .filter_map(entity_of)
            .map(|pk| entry_key(&pk).0)
            .collect();
        let moved: Vec<String> = self
            .batch_get(keys)
            .await?
            .iter()
            .filter_map(entity_of)
            .collect();
        Ok(items
            .into_iter()
            .filter(|item| entity_of(item).is_none_or(|pk| !moved.contains(&pk)))
            .collect())
    }

    /// The sweep's upgrade of the index: reads at most `limit` entries of
    /// the earlier release's one partition and their entities' items, and
    /// settles each entry in a transaction of its own; answers how many it
    /// read. A cancelled transaction (the entity changed meanwhile) leaves
    /// its entry for a later sweep.
    pub(super) async fn upgrade_index(&self, limit: usize) -> Result<usize, StoreError> {
        let limit = i32::try_from(limit.max(1)).unwrap_or(i32::MAX);
        let (items, _) = self.query_page(LEGACY, None, Some(limit)).await?;
        let read = items.len();
        let entries: Vec<(&Item, String)> = items
            .iter()
            .filter_map(|item| Some((item, entity_of(item)?)))
            .collect();
        let keys = entries
            .iter()
            .map(|(_, pk)| item_key(pk.clone(), STATE.to_owned()))
            .collect();
        let entities = if entries.is_empty() {
            Vec::new()
        } else {
            self.batch_get(keys).await?
        };
        for (legacy, pk) in entries {
            let entity = entities.iter().find(
                |item| matches!(item.get("pk"), Some(AttributeValue::S(found)) if *found == pk),
            );
            let Some(writes) = self.settle_legacy(legacy, &pk, entity)? else {
                continue;
            };
            self.note("TransactWriteItems/Delete");
            // Cancelled: the entity changed meanwhile; a later sweep settles it.
            let _cancelled = self.transact(writes).await?;
        }
        Ok(read)
    }

    /// The writes that settle one entry of the earlier release, given its
    /// entity's item as read: moved to its shard while the entity is still
    /// parked since then; removed while the entity still has nothing
    /// parked; left alone (`None`) when the entity has no item (damaged by
    /// hand: no condition could keep a park of the earlier release).
    fn settle_legacy(
        &self,
        legacy: &Item,
        pk: &str,
        entity: Option<&Item>,
    ) -> Result<Option<Vec<TransactWriteItem>>, StoreError> {
        let Some(entity) = entity else {
            tracing::warn!(
                entry = %pk,
                "an entry of the earlier index names an entity without an item: left alone"
            );
            return Ok(None);
        };
        let since = Some(entity)
            .filter(
                |item| matches!(item.get(PARKED), Some(AttributeValue::Ns(set)) if !set.is_empty()),
            )
            .and_then(|item| number(item, PARKED_SINCE));
        let delete = self.delete(legacy_key(legacy))?;
        let entity_key = item_key(pk.to_owned(), STATE.to_owned());
        let writes = match since {
            Some(since) => vec![
                delete,
                self.update(entity_key, &still_parked_since(since))?,
                self.update(entry_key(pk).0, &shard_entry(pk, since))?,
            ],
            None => vec![delete, self.update(entity_key, &still_unparked())?],
        };
        Ok(Some(writes))
    }

    /// A transaction's delete of the item at `key`.
    pub(super) fn delete(&self, key: Item) -> Result<TransactWriteItem, StoreError> {
        let delete = Delete::builder()
            .table_name(&self.table)
            .set_key(Some(key))
            .build()
            .map_err(|err| super::build_error("TransactWriteItems", err))?;
        Ok(TransactWriteItem::builder().delete(delete).build())
    }
}

/// The entity's item unchanged, on condition that it is still parked since
/// `since` (a drain removes `parkedSince`; a park after it sets another).
fn still_parked_since(since: u64) -> Expression {
    let mut unchanged = Expression::default();
    let name = unchanged.name(PARKED_SINCE);
    let value = unchanged.value(AttributeValue::N(since.to_string()));
    unchanged.sets.push(format!("{name} = {value}"));
    unchanged.conditions.push(format!("{name} = {value}"));
    unchanged
}

/// The entity's item unchanged (it holds no `parkedSince` without parked
/// events), on condition that it exists and still has nothing parked: a
/// park by the earlier release, which writes the entity's `parked` set and
/// its entry in one transaction, cancels the removal of that entry.
fn still_unparked() -> Expression {
    let mut unchanged = Expression::default();
    unchanged.remove(PARKED_SINCE);
    let pk = unchanged.name("pk");
    let parked = unchanged.name(PARKED);
    unchanged.conditions.push(format!("attribute_exists({pk})"));
    unchanged
        .conditions
        .push(format!("attribute_not_exists({parked})"));
    unchanged
}

/// The entity's entry in its shard, parked since `since`.
fn shard_entry(pk: &str, since: u64) -> Expression {
    let (_, long_pk) = entry_key(pk);
    let mut entry = Expression::default();
    entry.set(PARKED_SINCE, AttributeValue::N(since.to_string()));
    if let Some(long_pk) = long_pk {
        entry.set(INDEXED_PK, long_pk);
    }
    entry
}

/// The key of an entry as read.
fn legacy_key(entry: &Item) -> Item {
    entry
        .iter()
        .filter(|(name, _)| *name == "pk" || *name == "sk")
        .map(|(name, value)| (name.clone(), value.clone()))
        .collect()
}

/// An entry of a shard as the sweep reads it; `None` for one damaged by
/// hand (the entity's own item still lists its parked events; one bad entry
/// does not hide the others).
fn entry(item: &Item) -> Option<ParkedEntity> {
    let pk = entity_of(item)?;
    let Some(since) = number(item, PARKED_SINCE) else {
        tracing::error!(
            entry = %pk,
            "an entry of the index of parked entities has no readable parkedSince: skipped"
        );
        return None;
    };
    Some(ParkedEntity { pk, since })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_spread_over_every_shard() {
        let mut shards = std::collections::BTreeSet::new();
        for n in 0..200 {
            let (key, long) = entry_key(&format!("ORDER#order-{n}"));
            assert!(long.is_none());
            if let Some(AttributeValue::S(shard)) = key.get("pk") {
                shards.insert(shard.clone());
            }
        }
        assert_eq!(shards.len(), SHARDS);
        assert_eq!(partitions().count(), SHARDS + 1);
        assert!(shards.iter().all(|shard| partitions().any(|p| p == *shard)));
    }
}
