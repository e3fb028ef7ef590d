//! The typed events: one variant per event type of the contract.
//!
//! [`Payload`] is the one list of event types: a serde enum tagged by the
//! envelope's `type`, its data structs declaring their limits
//! ([`crate::limits`]); the envelope ([`crate::envelope`]) reads the rest.

use serde::Deserialize;

use crate::limits::{integer, non_negative, text};

/// The envelope fields every sequenced event carries, and its data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sequenced<T> {
    pub event_id: String,
    pub aggregate_id: String,
    /// 1 up to `i64::MAX`, checked when the message is parsed.
    pub sequence: u64,
    pub data: T,
}

/// `OrderCreated` and `OrderUpdated` data.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OrderDetails {
    #[serde(deserialize_with = "text::<_, 0, 1024>")]
    pub customer_name: String,
    #[serde(deserialize_with = "text::<_, 0, 1024>")]
    pub email: String,
    #[serde(deserialize_with = "non_negative")]
    pub total_cents: u64,
}

/// `OrderCancelled` data.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct OrderCancellation {
    #[serde(deserialize_with = "text::<_, 0, 1024>")]
    pub reason: String,
}

/// `ProductCreated` data.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NewProduct {
    #[serde(deserialize_with = "text::<_, 0, 1024>")]
    pub name: String,
    #[serde(deserialize_with = "non_negative")]
    pub price_cents: u64,
}

/// `ProductPriceChanged` data.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PriceChange {
    #[serde(deserialize_with = "non_negative")]
    pub price_cents: u64,
}

/// `InventoryAdjusted` data.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct StockChange {
    #[serde(deserialize_with = "text::<_, 1, 256>")]
    pub sku: String,
    #[serde(deserialize_with = "integer")]
    pub delta: i64,
}

/// The event types, by the envelope's `type`, each with its `data`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(tag = "type", content = "data")]
pub enum Payload {
    OrderCreated(OrderDetails),
    OrderUpdated(OrderDetails),
    OrderCancelled(OrderCancellation),
    ProductCreated(NewProduct),
    ProductPriceChanged(PriceChange),
    InventoryAdjusted(StockChange),
}

/// `InventoryAdjusted`: not sequenced, deduplicated by `event_id`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InventoryAdjusted {
    pub event_id: String,
    pub sku: String,
    pub delta: i64,
}

/// One event, as read from a message body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    OrderCreated(Sequenced<OrderDetails>),
    OrderUpdated(Sequenced<OrderDetails>),
    OrderCancelled(Sequenced<OrderCancellation>),
    ProductCreated(Sequenced<NewProduct>),
    ProductPriceChanged(Sequenced<PriceChange>),
    InventoryAdjusted(InventoryAdjusted),
}

impl Event {
    /// The contract's name of the event type.
    pub fn type_name(&self) -> &'static str {
        match self {
            Event::OrderCreated(_) => "OrderCreated",
            Event::OrderUpdated(_) => "OrderUpdated",
            Event::OrderCancelled(_) => "OrderCancelled",
            Event::ProductCreated(_) => "ProductCreated",
            Event::ProductPriceChanged(_) => "ProductPriceChanged",
            Event::InventoryAdjusted(_) => "InventoryAdjusted",
        }
    }

    pub fn event_id(&self) -> &str {
        match self {
            Event::OrderCreated(e) | Event::OrderUpdated(e) => &e.event_id,
            Event::OrderCancelled(e) => &e.event_id,
            Event::ProductCreated(e) => &e.event_id,
            Event::ProductPriceChanged(e) => &e.event_id,
            Event::InventoryAdjusted(e) => &e.event_id,
        }
    }

    /// The ordering key: the aggregate id, or the sku for `InventoryAdjusted`.
    pub fn stream(&self) -> &str {
        match self {
            Event::OrderCreated(e) | Event::OrderUpdated(e) => &e.aggregate_id,
            Event::OrderCancelled(e) => &e.aggregate_id,
            Event::ProductCreated(e) => &e.aggregate_id,
            Event::ProductPriceChanged(e) => &e.aggregate_id,
            Event::InventoryAdjusted(e) => &e.sku,
        }
    }

    /// The event's sequence; `None` for events that are not sequenced.
    pub fn sequence(&self) -> Option<u64> {
        match self {
            Event::OrderCreated(e) | Event::OrderUpdated(e) => Some(e.sequence),
            Event::OrderCancelled(e) => Some(e.sequence),
            Event::ProductCreated(e) => Some(e.sequence),
            Event::ProductPriceChanged(e) => Some(e.sequence),
            Event::InventoryAdjusted(_) => None,
        }
    }

    /// The entity the event is projected onto; `None` for `InventoryAdjusted`,
    /// which the store applies with its deduplication record.
    pub fn entity_key(&self) -> Option<super::EntityKey> {
        use super::EntityKey;
        match self {
            Event::OrderCreated(e) | Event::OrderUpdated(e) => {
                Some(EntityKey::Order(e.aggregate_id.clone()))
            }
            Event::OrderCancelled(e) => Some(EntityKey::Order(e.aggregate_id.clone())),
            Event::ProductCreated(e) => Some(EntityKey::Product(e.aggregate_id.clone())),
            Event::ProductPriceChanged(e) => Some(EntityKey::Product(e.aggregate_id.clone())),
            Event::InventoryAdjusted(_) => None,
        }
    }
}
