//! The events: one variant per event type of the contract.
//!
//! [`ShopEvent`] is the one list of event types: a serde enum tagged by the
//! envelope's `type`, its data structs declaring their limits
//! (`sequence_guard::limits`); sequence-guard's envelope reads the rest.
//! Its [`Events`] implementation is the registration: how each type is
//! handled, and by which handler; and which of its fields are personal
//! data ([`Events::personal`]): an order's `customerName` and `email`, in
//! `OrderCreated` and `OrderUpdated`, are its customer's, whose subject is
//! the order (the event's `aggregateId`). `append` seals them with the
//! subject's key; `erase --subject <order>` forgets them, and tells every
//! consumer with a `PersonalDataErased` event, which the order projection
//! applies by replacing them with `(erased)` ([`Handling::erasure`]).

use sequence_guard::limits::{integer, non_negative, text};
use sequence_guard::personal::{Erasure, Personal};
use sequence_guard::{Events, Handling};
use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize};

use crate::{order, product, stock};

/// `OrderCreated` and `OrderUpdated` data. `customerName` and `email` are
/// personal ([`ShopEvent::personal`]).
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

/// `OrderCancelled` data. (`Serialize` too: a process appends it.)
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrderCancellation {
    #[serde(deserialize_with = "text::<_, 0, 1024>")]
    pub reason: String,
}

/// `PaymentReceived` data: an amount paid for the order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PaymentDetails {
    #[serde(deserialize_with = "positive")]
    pub amount_cents: u64,
}

/// `RefundRequested` data: an amount to pay back, and why. (`Serialize`
/// too: the payments process appends it.)
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RefundRequest {
    #[serde(deserialize_with = "positive")]
    pub amount_cents: u64,
    #[serde(deserialize_with = "text::<_, 0, 1024>")]
    pub reason: String,
}

/// An integer from 1 to 2^63-1: an amount that cannot be nothing.
fn positive<'de, D: Deserializer<'de>>(deserializer: D) -> Result<u64, D::Error> {
    let value = integer(deserializer)?;
    u64::try_from(value)
        .ok()
        .filter(|amount| *amount >= 1)
        .ok_or_else(|| D::Error::custom(format_args!("must be >= 1, got {value}")))
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

/// The event types, by the envelope's `type`, each with its `data`; and
/// the one registration of how each is handled.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(tag = "type", content = "data")]
pub enum ShopEvent {
    OrderCreated(OrderDetails),
    OrderUpdated(OrderDetails),
    OrderCancelled(OrderCancellation),
    PaymentReceived(PaymentDetails),
    RefundRequested(RefundRequest),
    ProductCreated(NewProduct),
    ProductPriceChanged(PriceChange),
    InventoryAdjusted(StockChange),
    /// A subject's personal data forgotten (`erase`): on each of its
    /// streams, after its last event.
    PersonalDataErased(Erasure),
}

impl Events for ShopEvent {
    fn handling(self) -> Handling {
        match self {
            ShopEvent::OrderCreated(data) => Handling::sequenced(data, order::on_order_created),
            ShopEvent::OrderUpdated(data) => Handling::sequenced(data, order::on_order_updated),
            ShopEvent::OrderCancelled(data) => Handling::sequenced(data, order::on_order_cancelled),
            ShopEvent::PaymentReceived(data) => {
                Handling::sequenced(data, order::on_payment_received)
            }
            ShopEvent::RefundRequested(data) => {
                Handling::sequenced(data, order::on_refund_requested)
            }
            ShopEvent::ProductCreated(data) => {
                Handling::sequenced(data, product::on_product_created)
            }
            ShopEvent::ProductPriceChanged(data) => {
                Handling::sequenced(data, product::on_product_price_changed)
            }
            ShopEvent::InventoryAdjusted(change) => stock::on_inventory_adjusted(change),
            ShopEvent::PersonalDataErased(data) => Handling::erasure(data),
        }
    }

    /// An order's customer name and email, the order's own (the subject is
    /// the event's `aggregateId`).
    fn personal() -> Personal {
        Personal::new()
            .fields("OrderCreated", &["customerName", "email"])
            .fields("OrderUpdated", &["customerName", "email"])
    }
}
