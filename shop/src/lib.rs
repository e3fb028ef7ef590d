//! The worked example of sequence-guard: orders, products and stock, built on
//! its public API only.
//!
//! | event                 | handler (the guard)                    | handled as |
//! | --------------------- | -------------------------------------- | ---------- |
//! | `OrderCreated`        | [`order::on_order_created`]            | sequenced (a creation: checks existence) |
//! | `OrderUpdated`        | [`order::on_order_updated`]            | sequenced  |
//! | `OrderCancelled`      | [`order::on_order_cancelled`]          | sequenced  |
//! | `PaymentReceived`     | [`order::on_payment_received`]         | sequenced  |
//! | `RefundRequested`     | [`order::on_refund_requested`]         | sequenced  |
//! | `ProductCreated`      | [`product::on_product_created`]        | sequenced (a creation) |
//! | `ProductPriceChanged` | [`product::on_product_price_changed`]  | sequenced  |
//! | `InventoryAdjusted`   | [`stock::on_inventory_adjusted`]       | a deduplicated effect: `ADD onHand` |
//! | `PersonalDataErased`  | `Handling::erasure`                    | sequenced: the order's `customerName` and `email` become `(erased)` |
//!
//! An order's `customerName` and `email` are personal data
//! ([`ShopEvent`]'s `personal()`): sealed in the store with a key of the
//! order, opened by the consumers that project them (this one), and
//! forgotten with `erase --subject <order>`.
//! - `events.rs`: the events ([`ShopEvent`]) and the registration.
//! - `order.rs`, `product.rs`: the entities and their handlers.
//! - `money.rs`: an order's sums of payments and refunds, at most 2^63-1
//!   cents, and the answer to an event that would pass it.
//! - `stock.rs`: the stock counter.
//! - `status.rs`: the second consumer's domain: each order's status, no
//!   personal data (`status-projector`, `status-replay`, `status-rebuild`,
//!   `status-verify`, `status-inspect`: every tool the first consumer has).
//! - `src/bin/`: the Lambda function, `replay` and `inspect`, one line each;
//!   `local`, the whole [`system`] run on one machine from a script
//!   (`shop/local/`).

pub mod events;
pub mod money;
pub mod order;
pub mod payments;
pub mod product;
pub mod status;
pub mod stock;

pub use events::ShopEvent;
pub use order::{Order, OrderStatus};
pub use product::Product;
pub use stock::STOCK;

use sequence_guard::Domain;
use sequence_guard::domain::System;

/// The shop, registered: its events, its entity kinds and its counter.
pub fn domain() -> Domain {
    Domain::new::<ShopEvent>()
        .entity::<Order>()
        .entity::<Product>()
        .counter(&STOCK)
        .with_crate_version(env!("CARGO_PKG_VERSION"))
}

/// The shop's whole system, as the template deploys it: its event store of
/// the shop's events, and its three consumers (`orders`, the projector;
/// `status`; `payments`, the process). What `local` runs on one machine,
/// and what its test checks before any message.
pub fn system() -> System {
    System::new(domain())
        .consumer("orders", domain())
        .consumer("status", status::domain())
        .consumer("payments", payments::domain())
}

// The Rust blocks of the README and of docs/ are compiled and run as this
// crate's doctests (the walk-through's, of the bank's), so they cannot drift.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct Readme;
#[cfg(doctest)]
#[doc = include_str!("../../docs/behaviour.md")]
pub struct Behaviour;
#[cfg(doctest)]
#[doc = include_str!("../../docs/event-store.md")]
pub struct EventStoreDoc;
#[cfg(doctest)]
#[doc = include_str!("../../docs/deploy.md")]
pub struct Deploy;
#[cfg(doctest)]
#[doc = include_str!("../../docs/operate.md")]
pub struct Operate;
#[cfg(doctest)]
#[doc = include_str!("../../docs/performance.md")]
pub struct Performance;
#[cfg(doctest)]
#[doc = include_str!("../../docs/processes.md")]
pub struct Processes;
#[cfg(doctest)]
#[doc = include_str!("../../docs/processes-compared.md")]
pub struct ProcessesCompared;
#[cfg(doctest)]
#[doc = include_str!("../../docs/personal-data.md")]
pub struct PersonalData;
#[cfg(doctest)]
#[doc = include_str!("../../docs/testing.md")]
pub struct Testing;
