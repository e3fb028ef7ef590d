//! Stock: `InventoryAdjusted` is not sequenced. Its guard is the
//! deduplication record: the store adds `delta` to the sku's `onHand` only if
//! no record of this event exists for this handler, and writes the record in
//! the same transaction.

use sequence_guard::{Counter, Handling};

use crate::events::StockChange;

/// The handler name under which `InventoryAdjusted` events are deduplicated.
pub const STOCK_HANDLER: &str = "StockOnHand";

/// A sku's stock: the item `SKU#<sku>` / `STOCK`, its `onHand`.
pub const STOCK: Counter = Counter {
    kind: "SKU",
    sort_key: "STOCK",
    attribute: "onHand",
};

/// `InventoryAdjusted`: `delta` added to the sku's `onHand`, once per event.
/// The sku is the event's stream.
pub fn on_inventory_adjusted(change: StockChange) -> Handling {
    Handling::add(STOCK_HANDLER, &STOCK, change.sku, change.delta)
}
