//! The item layout: keys, attribute names, and the mapping of entities,
//! parked events, conflicts and deduplication records to items (serde_dynamo).

use std::collections::{BTreeSet, HashMap};

use aws_sdk_dynamodb::types::AttributeValue;
use serde::{Deserialize, Serialize};
use serde_dynamo::aws_sdk_dynamodb_1::{from_item, to_item};

use super::Item;
use super::errors::build_error;
use crate::domain::{Entity, EntityKey, Order, OrderStatus, Product};
use crate::store::{ConflictRecord, DedupKey, ParkedEvent, Parking, StoreError, Stored};

pub(super) const ORDER_PREFIX: &str = "ORDER#";
pub(super) const DEDUP_PREFIX: &str = "MESSAGE#";
pub(super) const HANDLER_PREFIX: &str = "HANDLER#";
pub(super) const PRODUCT_PREFIX: &str = "PRODUCT#";
pub(super) const STATE: &str = "STATE";
pub(super) const PENDING_PREFIX: &str = "PENDING#";
pub(super) const CONFLICT_PREFIX: &str = "CONFLICT#";
/// The entity item's number set of parked sequences, and since when it has any.
pub(super) const PARKED: &str = "parked";
pub(super) const PARKED_SINCE: &str = "parkedSince";
/// The partition of the parked-entity index.
pub(super) const PARKED_INDEX: &str = "PARKED";

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

pub(super) fn entity_pk(key: &EntityKey) -> String {
    match key {
        EntityKey::Order(id) => format!("{ORDER_PREFIX}{id}"),
        EntityKey::Product(id) => format!("{PRODUCT_PREFIX}{id}"),
    }
}

pub(super) fn stock_key(sku: &str) -> Item {
    HashMap::from([
        ("pk".to_owned(), AttributeValue::S(format!("SKU#{sku}"))),
        ("sk".to_owned(), AttributeValue::S("STOCK".to_owned())),
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
pub(super) struct OrderItem {
    pub(super) pk: String,
    pub(super) sk: String,
    pub(super) sequence: u64,
    pub(super) last_event_id: String,
    pub(super) customer_name: String,
    pub(super) email: String,
    pub(super) total_cents: u64,
    pub(super) status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) cancel_reason: Option<String>,
}

/// Attributes an item may lack; a save removes them when the entity has none.
pub(super) const OPTIONAL_ATTRIBUTES: [&str; 1] = ["cancelReason"];

#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct ProductItem {
    pub(super) pk: String,
    pub(super) sk: String,
    pub(super) sequence: u64,
    pub(super) last_event_id: String,
    pub(super) name: String,
    pub(super) price_cents: u64,
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
}

pub(super) fn entity_to_item(entity: &Entity) -> Result<Item, StoreError> {
    let pk = entity_pk(&entity.key());
    let item = match entity {
        Entity::Order(order) => to_item(OrderItem {
            pk,
            sk: STATE.to_owned(),
            sequence: order.sequence,
            last_event_id: order.last_event_id.clone(),
            customer_name: order.customer_name.clone(),
            email: order.email.clone(),
            total_cents: order.total_cents,
            status: match order.status {
                OrderStatus::Open => "OPEN",
                OrderStatus::Cancelled => "CANCELLED",
            }
            .to_owned(),
            cancel_reason: order.cancel_reason.clone(),
        }),
        Entity::Product(product) => to_item(ProductItem {
            pk,
            sk: STATE.to_owned(),
            sequence: product.sequence,
            last_event_id: product.last_event_id.clone(),
            name: product.name.clone(),
            price_cents: product.price_cents,
        }),
    };
    item.map_err(|err| build_error("serialize entity", err))
}

/// Reads an entity item; `Ok(None)` for an item that is not an entity.
pub(super) fn entity_from_item(item: Item) -> Result<Option<Entity>, StoreError> {
    let pk = match item.get("pk") {
        Some(AttributeValue::S(pk)) => pk.clone(),
        _ => return Ok(None),
    };
    let corrupt = |err: serde_dynamo::Error| StoreError::Corrupt {
        key: pk.clone(),
        message: err.to_string(),
    };
    if !item.contains_key("sequence") {
        // An item that only records parked events: not created yet.
        return Ok(None);
    }
    if let Some(id) = pk.strip_prefix(ORDER_PREFIX) {
        let order: OrderItem = from_item(item).map_err(corrupt)?;
        let status = match order.status.as_str() {
            "OPEN" => OrderStatus::Open,
            "CANCELLED" => OrderStatus::Cancelled,
            other => {
                return Err(StoreError::Corrupt {
                    key: pk.clone(),
                    message: format!("unknown status `{other}`"),
                });
            }
        };
        return Ok(Some(Entity::Order(Order {
            id: id.to_owned(),
            sequence: order.sequence,
            last_event_id: order.last_event_id,
            customer_name: order.customer_name,
            email: order.email,
            total_cents: order.total_cents,
            status,
            cancel_reason: order.cancel_reason,
        })));
    }
    if let Some(id) = pk.strip_prefix(PRODUCT_PREFIX) {
        let product: ProductItem = from_item(item).map_err(corrupt)?;
        return Ok(Some(Entity::Product(Product {
            id: id.to_owned(),
            sequence: product.sequence,
            last_event_id: product.last_event_id,
            name: product.name,
            price_cents: product.price_cents,
        })));
    }
    Ok(None)
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
pub(super) fn stored_from_item(item: Item) -> Result<Stored, StoreError> {
    let parking = parking_from_item(&item)?;
    Ok(Stored {
        entity: entity_from_item(item)?,
        parking,
    })
}

pub(super) fn parked_from_item(item: Item) -> Result<ParkedEvent, StoreError> {
    let parked: ParkedItem = from_item(item).map_err(|err| StoreError::Corrupt {
        key: "a parked event".to_owned(),
        message: err.to_string(),
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
        message: err.to_string(),
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

pub(super) fn key_of_pk(pk: &str) -> Option<EntityKey> {
    if let Some(id) = pk.strip_prefix(ORDER_PREFIX) {
        return Some(EntityKey::Order(id.to_owned()));
    }
    pk.strip_prefix(PRODUCT_PREFIX)
        .map(|id| EntityKey::Product(id.to_owned()))
}

/// The `onHand` of a stock item (`None`: no item, or none adjusted yet).
pub(super) fn on_hand_of(sku: &str, item: Option<&Item>) -> Result<Option<i64>, StoreError> {
    match item.and_then(|item| item.get("onHand")) {
        None => Ok(None),
        Some(AttributeValue::N(number)) => {
            number.parse().map(Some).map_err(|_| StoreError::Corrupt {
                key: format!("SKU#{sku}"),
                message: format!("onHand `{number}` is not a 64-bit integer"),
            })
        }
        Some(_) => Err(StoreError::Corrupt {
            key: format!("SKU#{sku}"),
            message: "onHand is not a number".into(),
        }),
    }
}
