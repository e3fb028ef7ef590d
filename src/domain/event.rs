//! The typed events: one variant per event type of the contract.

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
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrderDetails {
    pub customer_name: String,
    pub email: String,
    pub total_cents: u64,
}

/// `OrderCancelled` data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrderCancellation {
    pub reason: String,
}

/// `ProductCreated` data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewProduct {
    pub name: String,
    pub price_cents: u64,
}

/// `ProductPriceChanged` data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PriceChange {
    pub price_cents: u64,
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
