//! The item layout: keys, attribute names, and the mapping of entities,
//! parked events, conflicts and deduplication records to items (serde_dynamo;
//! an entity's attributes are its struct as serde_dynamo writes it).

use std::collections::{BTreeSet, HashMap};

use aws_sdk_dynamodb::types::AttributeValue;
use serde::{Deserialize, Serialize};
use serde_dynamo::aws_sdk_dynamodb_1::from_item;

use super::Item;
use crate::entity::{AnyEntity, EntityKey, Kind};
use crate::handling::Counter;
use crate::store::{ConflictRecord, DedupKey, ParkedEvent, Parking, StoreError, Stored};

pub(super) const DEDUP_PREFIX: &str = "MESSAGE#";
pub(super) const HANDLER_PREFIX: &str = "HANDLER#";
pub(super) const STATE: &str = crate::store::ENTITY_SK;
pub(super) const PENDING_PREFIX: &str = "PENDING#";
pub(super) const CONFLICT_PREFIX: &str = "CONFLICT#";
/// A deduplication record's attribute naming the stream of its event.
pub(super) const DEDUP_STREAM: &str = "stream";
/// The entity item's number set of parked sequences, and since when it has any.
pub(super) const PARKED: &str = "parked";
pub(super) const PARKED_SINCE: &str = "parkedSince";
/// A process's state's deadline (epoch seconds), and its partition of the
/// index of due deadlines (`DUE#<0-f>`, the sparse index `due`).
pub(super) const DUE_AT: &str = "dueAt";
pub(super) const DUE_SHARD: &str = "dueShard";
/// The index of due deadlines.
pub(super) const DUE_INDEX: &str = "due";

/// The partition of the index of due deadlines of the item `pk`.
pub(super) fn due_shard_key(pk: &str) -> String {
    format!("DUE#{:x}", crate::store::due_shard(pk))
}

pub(super) fn pending_sk(sequence: u64) -> String {
    format!("{PENDING_PREFIX}{sequence:020}")
}

pub(super) fn conflict_sk(sequence: u64, event_id: &str) -> String {
    format!("{CONFLICT_PREFIX}{sequence:020}#{event_id}")
}

pub(super) fn item_key(pk: String, sk: String) -> Item {
    HashMap::from([
        ("pk".to_owned(), AttributeValue::S(pk)),
        ("sk".to_owned(), AttributeValue::S(sk)),
    ])
}

/// Attributes of an entity's item that are not the entity's: an entity
/// struct must not have fields of these names.
pub(super) use crate::entity::ENGINE_ATTRIBUTES as RESERVED;

pub(super) fn entity_pk(key: &EntityKey) -> String {
    key.pk()
}

pub(super) fn counter_key(counter: &Counter, id: &str) -> Item {
    HashMap::from([
        ("pk".to_owned(), AttributeValue::S(counter.pk(id))),
        (
            "sk".to_owned(),
            AttributeValue::S(counter.sort_key.to_owned()),
        ),
    ])
}

pub(super) fn dedup_key(key: &DedupKey) -> Item {
    HashMap::from([
        (
            "pk".to_owned(),
            AttributeValue::S(format!("{DEDUP_PREFIX}{}", key.event_id)),
        ),
        (
            "sk".to_owned(),
            AttributeValue::S(format!("{HANDLER_PREFIX}{}", key.handler)),
        ),
    ])
}

/// A key item as text, to sort and deduplicate keys.
pub(super) fn key_text(key: &Item) -> (String, String) {
    let part = |name: &str| match key.get(name) {
        Some(AttributeValue::S(text)) => text.clone(),
        _ => String::new(),
    };
    (part("pk"), part("sk"))
}

pub(super) fn key_item(key: &EntityKey) -> Item {
    HashMap::from([
        ("pk".to_owned(), AttributeValue::S(entity_pk(key))),
        ("sk".to_owned(), AttributeValue::S(STATE.to_owned())),
    ])
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct ParkedItem {
    pub(super) pk: String,
    pub(super) sk: String,
    pub(super) event_id: String,
    #[serde(rename = "type")]
    pub(super) event_type: String,
    pub(super) body: String,
    pub(super) message_id: String,
    pub(super) parked_at: u64,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct ConflictItem {
    pub(super) sk: String,
    pub(super) body: String,
    pub(super) seen_at: u64,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct DedupItem {
    pub(super) pk: String,
    pub(super) sk: String,
    pub(super) handled_at: u64,
    pub(super) expires_at: u64,
    /// The stream of the event handled (the counter's id): another stream's
    /// event under the same `eventId` is a conflict, not a duplicate.
    pub(super) stream: String,
}

/// The stream a deduplication record was written for; `None` for one
/// written by an earlier release, which did not record it.
pub(super) fn dedup_stream(item: &Item) -> Option<String> {
    match item.get(DEDUP_STREAM) {
        Some(AttributeValue::S(stream)) => Some(stream.clone()),
        _ => None,
    }
}

/// An entity's attributes, the keys and the parking attributes aside.
pub(super) fn entity_attributes(entity: &AnyEntity) -> Result<Item, StoreError> {
    crate::store::checks::entity_item(entity)
}

/// Reads an entity item of `kind`; `Ok(None)` for an item that only
/// records parked events (not created yet).
pub(super) fn entity_from_item(
    kind: &'static Kind,
    mut item: Item,
) -> Result<Option<AnyEntity>, StoreError> {
    if !item.contains_key("sequence") {
        return Ok(None);
    }
    let pk = match item.get("pk") {
        Some(AttributeValue::S(pk)) => pk.clone(),
        _ => String::new(),
    };
    item.retain(|name, _| !RESERVED.contains(&name.as_str()));
    kind.decode(item)
        .map(Some)
        .map_err(|message| StoreError::Corrupt { key: pk, message })
}

/// Reads what an entity item records of parked events.
pub(super) fn parking_from_item(item: &Item) -> Result<Parking, StoreError> {
    let corrupt = |message: String| StoreError::Corrupt {
        key: match item.get("pk") {
            Some(AttributeValue::S(pk)) => pk.clone(),
            _ => String::new(),
        },
        message,
    };
    let sequences = match item.get(PARKED) {
        None => BTreeSet::new(),
        Some(AttributeValue::Ns(numbers)) => numbers
            .iter()
            .map(|number| {
                number
                    .parse()
                    .map_err(|_| corrupt(format!("parked sequence `{number}` is not a sequence")))
            })
            .collect::<Result<_, _>>()?,
        Some(_) => return Err(corrupt("`parked` is not a number set".to_owned())),
    };
    let since = match item.get(PARKED_SINCE) {
        None => None,
        Some(AttributeValue::N(number)) => Some(
            number
                .parse()
                .map_err(|_| corrupt(format!("`parkedSince` `{number}` is not a time")))?,
        ),
        Some(_) => return Err(corrupt("`parkedSince` is not a number".to_owned())),
    };
    Ok(Parking { sequences, since })
}

/// Reads an entity item whole: the entity, if created, and its parking.
pub(super) fn stored_from_item(kind: &'static Kind, item: Item) -> Result<Stored, StoreError> {
    let parking = parking_from_item(&item)?;
    let due_at = match item.get(DUE_AT) {
        None => None,
        Some(AttributeValue::N(number)) => {
            Some(number.parse().map_err(|_| StoreError::Corrupt {
                key: match item.get("pk") {
                    Some(AttributeValue::S(pk)) => pk.clone(),
                    _ => String::new(),
                },
                message: format!("`{DUE_AT}` `{number}` is not a time"),
            })?)
        }
        Some(_) => {
            return Err(StoreError::Corrupt {
                key: match item.get("pk") {
                    Some(AttributeValue::S(pk)) => pk.clone(),
                    _ => String::new(),
                },
                message: format!("`{DUE_AT}` is not a number"),
            });
        }
    };
    Ok(Stored {
        entity: entity_from_item(kind, item)?,
        parking,
        due_at,
    })
}

pub(super) fn parked_from_item(item: Item) -> Result<ParkedEvent, StoreError> {
    let parked: ParkedItem = from_item(item).map_err(|err| StoreError::Corrupt {
        key: "a parked event".to_owned(),
        message: unreadable(&err),
    })?;
    let sequence = parked
        .sk
        .strip_prefix(PENDING_PREFIX)
        .and_then(|digits| digits.parse().ok())
        .ok_or_else(|| StoreError::Corrupt {
            key: format!("{} {}", parked.pk, parked.sk),
            message: "the sort key holds no sequence".to_owned(),
        })?;
    Ok(ParkedEvent {
        sequence,
        event_id: parked.event_id,
        event_type: parked.event_type,
        body: parked.body,
        message_id: parked.message_id,
        parked_at: parked.parked_at,
    })
}

pub(super) fn conflict_from_item(item: Item) -> Result<ConflictRecord, StoreError> {
    let conflict: ConflictItem = from_item(item).map_err(|err| StoreError::Corrupt {
        key: "a conflict record".to_owned(),
        message: unreadable(&err),
    })?;
    let parsed = conflict
        .sk
        .strip_prefix(CONFLICT_PREFIX)
        .and_then(|rest| rest.split_once('#'))
        .and_then(|(digits, event_id)| Some((digits.parse().ok()?, event_id.to_owned())));
    let Some((sequence, event_id)) = parsed else {
        return Err(StoreError::Corrupt {
            key: conflict.sk,
            message: "the sort key holds no sequence and event id".to_owned(),
        });
    };
    Ok(ConflictRecord {
        sequence,
        event_id,
        body: conflict.body,
        seen_at: conflict.seen_at,
    })
}

/// serde_dynamo's error on an engine's item, without the value it quotes
/// (a body is data).
fn unreadable(err: &serde_dynamo::Error) -> String {
    crate::reason::without_value(&err.to_string()).naming("the item")
}

/// A counter's value on its item (`None`: no item, or nothing added yet).
pub(super) fn counter_of(
    counter: &Counter,
    id: &str,
    item: Option<&Item>,
) -> Result<Option<i64>, StoreError> {
    let corrupt = |message: String| StoreError::Corrupt {
        key: counter.pk(id),
        message,
    };
    match item.and_then(|item| item.get(counter.attribute)) {
        None => Ok(None),
        Some(AttributeValue::N(number)) => number.parse().map(Some).map_err(|_| {
            corrupt(format!(
                "{} `{number}` is not a 64-bit integer",
                counter.attribute
            ))
        }),
        Some(_) => Err(corrupt(format!("{} is not a number", counter.attribute))),
    }
}

#[cfg(test)]
mod tests {
    use serde::{Deserialize, Serialize};

    use super::*;
    use crate::entity::Entity;

    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    struct Window {
        #[serde(rename = "expiresAt")]
        until: u64,
    }

    /// Flattened: serde's derive does not list its fields, so registration
    /// cannot see `expiresAt`; the write does.
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    struct Cart {
        sequence: u64,
        #[serde(rename = "lastEventId")]
        last_event_id: String,
        #[serde(flatten)]
        window: Window,
    }

    impl Entity for Cart {
        const KIND: &'static str = "CART";
        fn sequence(&self) -> u64 {
            self.sequence
        }
        fn last_event_id(&self) -> &str {
            &self.last_event_id
        }
    }

    #[test]
    fn an_entity_that_writes_an_engine_attribute_is_refused_not_written_without_it() {
        let cart = AnyEntity::new(Cart {
            sequence: 1,
            last_event_id: "e1".to_owned(),
            window: Window { until: 1 },
        });
        match entity_attributes(&cart) {
            Err(StoreError::Rejected { message, .. }) => {
                assert!(message.contains("`expiresAt`"), "{message}");
            }
            other => panic!("refused, not {other:?}"),
        }
    }
}
