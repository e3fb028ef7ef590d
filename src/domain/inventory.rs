//! Inventory: `InventoryAdjusted` is not sequenced. Its guard is the
//! deduplication record: the store adds `delta` to the sku's `onHand` only if
//! no record of this event exists for this handler, and writes the record in
//! the same transaction.

use super::event::InventoryAdjusted;

/// The handler name under which `InventoryAdjusted` events are deduplicated.
pub const STOCK_HANDLER: &str = "StockOnHand";

/// What the store must do, atomically, for one `InventoryAdjusted` event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StockAdjustment {
    pub event_id: String,
    pub handler: &'static str,
    pub sku: String,
    pub delta: i64,
    /// Epoch seconds.
    pub handled_at: u64,
    /// Epoch seconds after which the deduplication record may expire.
    pub expires_at: u64,
}

/// `InventoryAdjusted`: the adjustment to make, deduplicated by event id.
pub fn on_inventory_adjusted(
    event: &InventoryAdjusted,
    now: u64,
    dedup_ttl_seconds: u64,
) -> StockAdjustment {
    StockAdjustment {
        event_id: event.event_id.clone(),
        handler: STOCK_HANDLER,
        sku: event.sku.clone(),
        delta: event.delta,
        handled_at: now,
        expires_at: now.saturating_add(dedup_ttl_seconds),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_adjustment_is_deduplicated_by_event_id_under_this_handler_until_its_ttl() {
        let event = InventoryAdjusted {
            event_id: "e1".into(),
            sku: "SKU-1".into(),
            delta: -3,
        };
        let adjustment = on_inventory_adjusted(&event, 1_000, 604_800);
        assert_eq!(
            adjustment,
            StockAdjustment {
                event_id: "e1".into(),
                handler: "StockOnHand",
                sku: "SKU-1".into(),
                delta: -3,
                handled_at: 1_000,
                expires_at: 605_800,
            }
        );
        assert_eq!(
            on_inventory_adjusted(&event, u64::MAX, 10).expires_at,
            u64::MAX
        );
    }
}
