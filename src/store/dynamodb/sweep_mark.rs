//! Where the last sweep stopped: one item of the engine's own, `SWEEP` /
//! `CURSOR` (no entity's or counter's `pk` lacks a `#`), read with one
//! BatchGetItem at the start of a sweep and written with one UpdateItem at
//! its end: in the index of parked entities, and in the index of due
//! deadlines (a map, `deadlines`: never the index's own `dueShard` and
//! `dueAt`, which would put the mark in it).

use aws_sdk_dynamodb::types::AttributeValue;

use super::expression::Expression;
use super::items::item_key;
use super::{DynamoStore, Item};
use crate::store::{DueCursor, DueEntry, StoreError, SweepMark};
use crate::table::request_error;

/// The mark's partition key.
const PK: &str = "SWEEP";
/// The mark's sort key.
const SK: &str = "CURSOR";
/// The cursor to go on after (absent: the index's start).
const AFTER: &str = "after";
/// Entities with events parked seen so far in the pass under way.
const ENTITIES: &str = "entities";
/// The longest wait seen so far in the pass under way, in seconds.
const OLDEST_AGE: &str = "oldestAge";
/// Where the last sweep's firing of deadlines stopped (absent: nowhere):
/// a map of `shard` and, once an entry of it was tried, `at`, `pk`, `sk`.
const DEADLINES: &str = "deadlines";

fn key() -> Item {
    item_key(PK.to_owned(), SK.to_owned())
}

impl DynamoStore {
    /// The mark, with a strongly consistent read; `None` when none was kept.
    pub(super) async fn read_sweep_mark(&self) -> Result<Option<SweepMark>, StoreError> {
        let item = self.batch_get(vec![key()]).await?.pop();
        item.map(|item| mark_of(&item)).transpose()
    }

    /// Writes the mark over the last one.
    pub(super) async fn write_sweep_mark(&self, mark: &SweepMark) -> Result<(), StoreError> {
        let expression = mark_update(mark);
        self.count("UpdateItem");
        let started = self.subsegment_start();
        let result = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(key()))
            .update_expression(expression.update())
            .set_expression_attribute_names(Some(expression.names.clone()))
            .set_expression_attribute_values(expression.values())
            .send()
            .await;
        self.subsegment_end("UpdateItem", started, result.is_err());
        result.map_err(|err| request_error("UpdateItem", &err))?;
        Ok(())
    }
}

/// The update that writes `mark` (an attribute it has not is removed).
fn mark_update(mark: &SweepMark) -> Expression {
    let mut expression = Expression::default();
    expression.set(ENTITIES, AttributeValue::N(mark.entities.to_string()));
    match &mark.after {
        Some(after) => expression.set(AFTER, AttributeValue::S(after.clone())),
        None => expression.remove(AFTER),
    }
    match mark.oldest_age_seconds {
        Some(age) => expression.set(OLDEST_AGE, AttributeValue::N(age.to_string())),
        None => expression.remove(OLDEST_AGE),
    }
    match &mark.deadlines {
        Some(cursor) => expression.set(DEADLINES, cursor_value(cursor)),
        None => expression.remove(DEADLINES),
    }
    expression
}

/// The deadlines' cursor as the mark holds it.
fn cursor_value(cursor: &DueCursor) -> AttributeValue {
    let mut map = Item::from([(
        "shard".to_owned(),
        AttributeValue::N(cursor.shard.to_string()),
    )]);
    if let Some(after) = &cursor.after {
        map.insert("at".to_owned(), AttributeValue::N(after.at.to_string()));
        map.insert("pk".to_owned(), AttributeValue::S(after.pk.clone()));
        map.insert("sk".to_owned(), AttributeValue::S(after.sk.clone()));
    }
    AttributeValue::M(map)
}

/// The deadlines' cursor a mark's map holds; `None` when it is not one.
fn cursor_of(map: &Item) -> Option<DueCursor> {
    let number = |name: &str| match map.get(name) {
        Some(AttributeValue::N(number)) => number.parse::<u64>().ok(),
        _ => None,
    };
    let text = |name: &str| match map.get(name) {
        Some(AttributeValue::S(text)) => Some(text.clone()),
        _ => None,
    };
    let shard = u8::try_from(number("shard")?).ok()?;
    let after = match (number("at"), text("pk"), text("sk")) {
        (Some(at), Some(pk), Some(sk)) => Some(DueEntry { at, pk, sk }),
        (None, None, None) => None,
        _ => return None,
    };
    (shard < crate::store::DUE_SHARDS).then_some(DueCursor { shard, after })
}

/// The mark an item holds.
fn mark_of(item: &Item) -> Result<SweepMark, StoreError> {
    let corrupt = |attribute: &str| StoreError::Corrupt {
        key: format!("{PK}/{SK}"),
        message: format!("`{attribute}` is not what the sweep writes"),
    };
    let number = |attribute: &'static str| match item.get(attribute) {
        None => Ok(None),
        Some(AttributeValue::N(number)) => number
            .parse::<u64>()
            .map(Some)
            .map_err(|_| corrupt(attribute)),
        Some(_) => Err(corrupt(attribute)),
    };
    let after = match item.get(AFTER) {
        None => None,
        Some(AttributeValue::S(after)) => Some(after.clone()),
        Some(_) => return Err(corrupt(AFTER)),
    };
    let deadlines = match item.get(DEADLINES) {
        None => None,
        Some(AttributeValue::M(map)) => Some(cursor_of(map).ok_or_else(|| corrupt(DEADLINES))?),
        Some(_) => return Err(corrupt(DEADLINES)),
    };
    Ok(SweepMark {
        after,
        entities: number(ENTITIES)?.unwrap_or(0),
        oldest_age_seconds: number(OLDEST_AGE)?,
        deadlines,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mark_reads_back_as_written() {
        let written = |mark: &SweepMark| {
            let expression = mark_update(mark);
            let mut item = key();
            for (alias, name) in &expression.names {
                let set = expression
                    .sets
                    .iter()
                    .find_map(|set| set.strip_prefix(&format!("{alias} = ")));
                if let Some(value) = set.and_then(|value| expression.values.get(value)) {
                    item.insert(name.clone(), value.clone());
                }
            }
            item
        };
        let mut mark = SweepMark {
            after: Some("PARKED#3\nORDER#order-7".to_owned()),
            entities: 120,
            oldest_age_seconds: Some(3600),
            deadlines: Some(DueCursor {
                shard: 11,
                after: Some(DueEntry {
                    at: 1_800_000_000,
                    pk: "PAYMENT#order 7".to_owned(),
                    sk: "STATE".to_owned(),
                }),
            }),
        };
        assert_eq!(mark_of(&written(&mark)), Ok(mark.clone()));
        mark.deadlines = Some(DueCursor {
            shard: 3,
            after: None,
        });
        assert_eq!(mark_of(&written(&mark)), Ok(mark));
        assert_eq!(mark_of(&key()), Ok(SweepMark::default()));
        let mut odd = key();
        odd.insert(
            DEADLINES.to_owned(),
            AttributeValue::M(Item::from([(
                "shard".to_owned(),
                AttributeValue::N("16".to_owned()),
            )])),
        );
        assert!(mark_of(&odd).is_err(), "no partition 16");
    }
}
