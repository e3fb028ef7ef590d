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

    /// The id of the last event applied (the one at [`Entity::sequence`]).
    pub fn last_event_id(&self) -> &str {
        match self {
            Entity::Order(order) => &order.last_event_id,
            Entity::Product(product) => &product.last_event_id,
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
        Event::OrderCreated(e) => with(slot, |order| order::on_order_created(order, e)),
        Event::OrderUpdated(e) => with(slot, |order| order::on_order_updated(order.as_mut(), e)),
        Event::OrderCancelled(e) => {
            with(slot, |order| order::on_order_cancelled(order.as_mut(), e))
        }
        Event::ProductCreated(e) => with(slot, |product| product::on_product_created(product, e)),
        Event::ProductPriceChanged(e) => with(slot, |product| {
            product::on_product_price_changed(product.as_mut(), e)
        }),
        // Not an entity event: never routed here by the runner. Retrying is the
        // answer that cannot lose it.
        Event::InventoryAdjusted(_) => Decision::NotCreated,
    }
}

/// Runs `handler` on the slot as the entity type it takes.
fn with<T>(slot: &mut Option<Entity>, handler: impl FnOnce(&mut Option<T>) -> Decision) -> Decision
where
    T: TryFrom<Entity, Error = Entity> + Into<Entity>,
{
    let mut typed = match slot.take().map(T::try_from) {
        None => None,
        Some(Ok(typed)) => Some(typed),
        Some(Err(other)) => {
            // Slots are keyed by entity kind, so this cannot be; leave it as it is.
            *slot = Some(other);
            return Decision::NotCreated;
        }
    };
    let decision = handler(&mut typed);
    *slot = typed.map(Into::into);
    decision
}

impl From<Order> for Entity {
    fn from(order: Order) -> Self {
        Entity::Order(order)
    }
}

impl From<Product> for Entity {
    fn from(product: Product) -> Self {
        Entity::Product(product)
    }
}

impl TryFrom<Entity> for Order {
    type Error = Entity;
    fn try_from(entity: Entity) -> Result<Self, Entity> {
        match entity {
            Entity::Order(order) => Ok(order),
            other => Err(other),
        }
    }
}

impl TryFrom<Entity> for Product {
    type Error = Entity;
    fn try_from(entity: Entity) -> Result<Self, Entity> {
        match entity {
            Entity::Product(product) => Ok(product),
            other => Err(other),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::event::{OrderDetails, PriceChange};
    use super::*;

    fn updated(sequence: u64) -> Event {
        Event::OrderUpdated(Sequenced {
            event_id: format!("e{sequence}"),
            aggregate_id: "x".into(),
            sequence,
            data: OrderDetails {
                customer_name: "A".into(),
                email: "a@x".into(),
                total_cents: 1,
            },
        })
    }

    #[test]
    fn decide_routes_to_the_handler_and_keeps_the_slot_typed() {
        let created = Event::OrderCreated(Sequenced {
            event_id: "e1".into(),
            aggregate_id: "x".into(),
            sequence: 1,
            data: OrderDetails {
                customer_name: "A".into(),
                email: "a@x".into(),
                total_cents: 1,
            },
        });
        let mut slot = None;
        assert_eq!(decide(&mut slot, &updated(2)), Decision::NotCreated);
        assert_eq!(decide(&mut slot, &created), Decision::Applied);
        assert_eq!(decide(&mut slot, &updated(2)), Decision::Applied);
        assert_eq!(slot.as_ref().map(Entity::sequence), Some(2));
        assert!(matches!(slot, Some(Entity::Order(_))));
    }

    #[test]
    fn an_event_on_a_slot_of_another_kind_changes_nothing_and_is_retried() {
        let product = Product {
            id: "x".into(),
            sequence: 1,
            last_event_id: "p1".into(),
            name: "Lamp".into(),
            price_cents: 5,
        };
        let mut slot = Some(Entity::Product(product.clone()));
        assert_eq!(decide(&mut slot, &updated(2)), Decision::NotCreated);
        assert_eq!(slot, Some(Entity::Product(product.clone())));
        let price = Event::ProductPriceChanged(Sequenced {
            event_id: "p2".into(),
            aggregate_id: "x".into(),
            sequence: 2,
            data: PriceChange { price_cents: 7 },
        });
        assert_eq!(decide(&mut slot, &price), Decision::Applied);
    }
}
