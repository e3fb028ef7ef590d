//! The domain: events, entities and the handlers that hold the guard.
//!
//! Nothing here knows of SQS or DynamoDB. A handler takes the entity as it
//! stands and the event, and answers with a [`Decision`]; when it applies the
//! event it calls the entity's behaviour method, which is what moves the
//! entity's `sequence`.
//!
//! | event                 | handler (the guard)                    |
//! | --------------------- | -------------------------------------- |
//! | `OrderCreated`        | [`order::on_order_created`]            |
//! | `OrderUpdated`        | [`order::on_order_updated`]            |
//! | `OrderCancelled`      | [`order::on_order_cancelled`]          |
//! | `ProductCreated`      | [`product::on_product_created`]        |
//! | `ProductPriceChanged` | [`product::on_product_price_changed`]  |
//! | `InventoryAdjusted`   | [`inventory::on_inventory_adjusted`]   |

pub mod event;
pub mod inventory;
pub mod order;
pub mod product;

pub use event::{Event, Sequenced};
pub use inventory::StockAdjustment;
pub use order::{Order, OrderStatus};
pub use product::Product;

/// What a handler decided for one event.
///
/// `Applied` and `Duplicate` are the guard's `true` (done: acknowledge the
/// message); `Gap` and `NotCreated` are its `false` (retry later).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// The event was applied; the entity's `sequence` is now the event's.
    Applied,
    /// Already applied (or, for a creation, the entity already exists).
    Duplicate,
    /// An earlier event of the aggregate has not been applied yet.
    Gap,
    /// An update for an entity whose creation has not been processed yet.
    NotCreated,
}

impl Decision {
    /// The guard's answer: `true` means done, `false` means retry later.
    pub fn is_done(self) -> bool {
        matches!(self, Decision::Applied | Decision::Duplicate)
    }
}

/// Identifies one projected entity: its kind and its aggregate id.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EntityKey {
    Order(String),
    Product(String),
}

/// A projected entity, as loaded from and saved to a store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entity {
    Order(Order),
    Product(Product),
}

impl Entity {
    /// The sequence of the last event applied to this entity.
    pub fn sequence(&self) -> u64 {
        match self {
            Entity::Order(order) => order.sequence,
            Entity::Product(product) => product.sequence,
        }
    }

    pub fn key(&self) -> EntityKey {
        match self {
            Entity::Order(order) => EntityKey::Order(order.id.clone()),
            Entity::Product(product) => EntityKey::Product(product.id.clone()),
        }
    }
}

/// Routes an entity event to its handler, on the entity slot of its
/// [`Event::entity_key`] (`None` while the entity does not exist).
///
/// This is the one place that maps event types to handlers; adding an event
/// type adds an arm here. `InventoryAdjusted` has no entity slot: the store
/// applies it atomically with its deduplication record, see [`inventory`].
pub fn decide(slot: &mut Option<Entity>, event: &Event) -> Decision {
    match event {
        Event::OrderCreated(e) => with_order(slot, |order| order::on_order_created(order, e)),
        Event::OrderUpdated(e) => {
            with_order(slot, |order| order::on_order_updated(order.as_mut(), e))
        }
        Event::OrderCancelled(e) => {
            with_order(slot, |order| order::on_order_cancelled(order.as_mut(), e))
        }
        Event::ProductCreated(e) => {
            with_product(slot, |product| product::on_product_created(product, e))
        }
        Event::ProductPriceChanged(e) => with_product(slot, |product| {
            product::on_product_price_changed(product.as_mut(), e)
        }),
        // Not an entity event: never routed here by the runner. Retrying is the
        // answer that cannot lose it.
        Event::InventoryAdjusted(_) => Decision::NotCreated,
    }
}

fn with_order(
    slot: &mut Option<Entity>,
    handler: impl FnOnce(&mut Option<Order>) -> Decision,
) -> Decision {
    let mut order = match slot.take() {
        None => None,
        Some(Entity::Order(order)) => Some(order),
        Some(other) => {
            // Slots are keyed by entity kind, so this cannot be; leave it as it is.
            *slot = Some(other);
            return Decision::NotCreated;
        }
    };
    let decision = handler(&mut order);
    *slot = order.map(Entity::Order);
    decision
}

fn with_product(
    slot: &mut Option<Entity>,
    handler: impl FnOnce(&mut Option<Product>) -> Decision,
) -> Decision {
    let mut product = match slot.take() {
        None => None,
        Some(Entity::Product(product)) => Some(product),
        Some(other) => {
            *slot = Some(other);
            return Decision::NotCreated;
        }
    };
    let decision = handler(&mut product);
    *slot = product.map(Entity::Product);
    decision
}
