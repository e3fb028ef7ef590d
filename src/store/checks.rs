//! What DynamoDB refuses of an entity's item, checked alike by both stores,
//! so that the embedded table refuses what DynamoDB would: an attribute of
//! the engine's, a sequence not in the attribute `sequence`, an item over
//! 400 KB.

use aws_sdk_dynamodb::types::AttributeValue;

use super::StoreError;
use crate::entity::{AnyEntity, ENGINE_ATTRIBUTES, Item};

/// The most bytes a DynamoDB item holds, its key and attributes included.
pub(crate) const MAX_ITEM_BYTES: usize = 400 * 1024;

/// The entity's attributes as it is written (its struct as serde_dynamo
/// writes it), or why DynamoDB would refuse them.
pub(crate) fn entity_item(entity: &AnyEntity) -> Result<Item, StoreError> {
    let item = entity.to_item().map_err(|err| StoreError::Request {
        operation: "serialize entity",
        message: err.to_string(),
    })?;
    // Registration refuses such a field where serde's derive lists the
    // fields; a flattened or hand-written struct is caught here.
    if let Some(name) = ENGINE_ATTRIBUTES
        .iter()
        .find(|name| item.contains_key(**name))
    {
        return Err(StoreError::Rejected {
            operation: "serialize entity",
            message: format!(
                "a {} entity writes the attribute `{name}`, which is the engine's own: rename its field",
                entity.kind().name
            ),
        });
    }
    // The guard's condition reads the sequence from this attribute.
    let sequence = AttributeValue::N(entity.sequence().to_string());
    if item.get("sequence") != Some(&sequence) {
        return Err(StoreError::Rejected {
            operation: "serialize entity",
            message: format!(
                "a {} entity must be written with its sequence in the attribute `sequence` (serialize its sequence field as `sequence`)",
                entity.kind().name
            ),
        });
    }
    Ok(item)
}

/// An entity written by the embedded table: refused as DynamoDB would
/// refuse its item ([`entity_item`] and [`fits`]), with `parked` events
/// recorded on it.
pub(crate) fn entity_fits(entity: &AnyEntity, pk: &str, parked: usize) -> Result<(), StoreError> {
    let item = entity_item(entity)?;
    fits(pk, &item, parked)
}

/// The item's size as DynamoDB counts it: each attribute's name and value
/// in bytes (a number about one byte per two digits, a list or map three
/// bytes and its elements).
pub(crate) fn item_bytes(item: &Item) -> usize {
    item.iter()
        .map(|(name, value)| name.len() + value_bytes(value))
        .sum()
}

fn value_bytes(value: &AttributeValue) -> usize {
    let number = |digits: &str| digits.len().div_ceil(2) + 1;
    match value {
        AttributeValue::S(text) => text.len(),
        AttributeValue::N(digits) => number(digits),
        AttributeValue::B(bytes) => bytes.as_ref().len(),
        AttributeValue::Ss(texts) => texts.iter().map(String::len).sum(),
        AttributeValue::Ns(numbers) => numbers.iter().map(|digits| number(digits)).sum(),
        AttributeValue::Bs(blobs) => blobs.iter().map(|blob| blob.as_ref().len()).sum(),
        AttributeValue::L(values) => {
            3 + values
                .iter()
                .map(|value| 1 + value_bytes(value))
                .sum::<usize>()
        }
        AttributeValue::M(map) => {
            3 + map
                .iter()
                .map(|(name, value)| 1 + name.len() + value_bytes(value))
                .sum::<usize>()
        }
        _ => 1, // BOOL, NULL
    }
}

/// An entity's whole item (its attributes, its key and what it records of
/// parked events), refused as DynamoDB refuses an item over 400 KB.
pub(crate) fn fits(pk: &str, item: &Item, parked: usize) -> Result<(), StoreError> {
    // The key, and the parked set (a number of up to 20 digits each) with
    // its `parkedSince`.
    let bytes = item_bytes(item) + 2 + pk.len() + 2 + 5 + parked * 11 + 11 + 6;
    if bytes > MAX_ITEM_BYTES {
        return Err(StoreError::Rejected {
            operation: "UpdateItem",
            message: format!(
                "ValidationException: Item size has exceeded the maximum allowed size: the item {pk} would be {bytes} bytes, more than DynamoDB's {MAX_ITEM_BYTES}"
            ),
        });
    }
    Ok(())
}
