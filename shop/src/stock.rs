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

#[cfg(test)]
mod tests {
    use sequence_guard::testkit::{when_effect, when_effect_body};

    use super::*;
    use crate::ShopEvent;

    #[test]
    fn an_adjustment_adds_its_delta_to_its_skus_stock() {
        when_effect(ShopEvent::InventoryAdjusted(StockChange {
            sku: "SKU-LAMP".into(),
            delta: -2,
        }))
        .adds(&STOCK, "SKU-LAMP", -2);
        let body =
            r#"{"eventId":"e-9","type":"InventoryAdjusted","data":{"sku":"SKU-DESK","delta":5}}"#;
        when_effect_body(&crate::domain(), body)
            .expect("valid")
            .adds(&STOCK, "SKU-DESK", 5);
        let refused = when_effect_body(
            &crate::domain(),
            r#"{"eventId":"e-9","type":"InventoryAdjusted","sequence":3,"data":{"sku":"SKU-DESK","delta":5}}"#,
        )
        .expect_err("a sequence on an unsequenced type");
        assert!(refused.to_string().contains("sequence"), "{refused}");
    }
}
