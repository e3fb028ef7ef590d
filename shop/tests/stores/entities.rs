//! Entities on both stores: loads of missing keys, every attribute read back,
//! what DynamoDB refuses, the conditional writes of a creation and an update,
//! a load over more keys than one request takes.

use super::*;

pub async fn missing_entities_load_as_absent<S: Store>(store: S) {
    let loaded = store
        .load(
            &[
                EntityKey::of::<shop::Order>("nobody"),
                EntityKey::of::<shop::Product>("nothing"),
            ],
            &[dedup("never-seen")],
        )
        .await
        .expect("load");
    assert_eq!(loaded, Loaded::default());
}

pub async fn entities_round_trip_with_every_attribute<S: Store>(store: S) {
    let mut cancelled = order_at(4);
    cancelled.status = OrderStatus::Cancelled;
    cancelled.cancel_reason = Some("customer request".into());
    let cancelled = Keyed::new("order-1", cancelled);
    assert_eq!(
        store.save(&cancelled, None).await.expect("save"),
        Saved::Written
    );
    assert_eq!(
        store
            .save(&product("product-1", 2), None)
            .await
            .expect("save"),
        Saved::Written
    );
    assert_eq!(
        entity(&store, EntityKey::of::<shop::Order>("order-1")).await,
        Some(cancelled.entity)
    );
    assert_eq!(
        entity(&store, EntityKey::of::<shop::Product>("product-1")).await,
        Some(product("product-1", 2).entity)
    );
    // An order and a product may share an aggregate id: they are different items.
    assert_eq!(
        entity(&store, EntityKey::of::<shop::Product>("order-1")).await,
        None
    );
}

/// The embedded table refuses what DynamoDB refuses: an item over
/// 400 KB, an entity that writes an attribute of the engine's (a
/// flattened struct registration cannot see), a sequence not in
/// `sequence`. Each a refusal for good, nothing written.
pub async fn what_dynamodb_refuses_is_refused<S: Store>(store: S) {
    use sequence_guard::store::StoreError;

    #[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
    struct Window {
        #[serde(rename = "expiresAt")]
        until: u64,
    }

    #[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Cart {
        sequence: u64,
        last_event_id: String,
        #[serde(flatten)]
        window: Window,
    }

    impl sequence_guard::Entity for Cart {
        const KIND: &'static str = "CART";
        fn sequence(&self) -> u64 {
            self.sequence
        }
        fn last_event_id(&self) -> &str {
            &self.last_event_id
        }
    }

    let mut huge = order_at(1);
    huge.customer_name = "x".repeat(410 * 1024);
    let cart = Cart {
        sequence: 1,
        last_event_id: "e1".into(),
        window: Window { until: 1 },
    };
    for (keyed, named) in [
        (Keyed::new("o-huge", huge), "maximum allowed size"),
        (Keyed::new("cart-1", cart), "`expiresAt`"),
    ] {
        match store.save(&keyed, None).await {
            Err(StoreError::Rejected { message, .. }) => {
                assert!(message.contains(named), "{named}: {message}")
            }
            other => panic!("{named}: refused for good, not {other:?}"),
        }
    }
    assert_eq!(
        entity(&store, EntityKey::of::<shop::Order>("o-huge")).await,
        None
    );
    // Just under the limit: written.
    let mut large = order_at(1);
    large.customer_name = "x".repeat(390 * 1024);
    assert_eq!(
        store
            .save(&Keyed::new("o-large", large), None)
            .await
            .expect("save"),
        Saved::Written
    );
}

pub async fn a_new_entity_is_written_only_where_none_exists<S: Store>(store: S) {
    assert_eq!(
        store.save(&order("order-2", 1), None).await.expect("save"),
        Saved::Written
    );
    let again = store.save(&order("order-2", 7), None).await.expect("save");
    assert_eq!(
        again,
        Saved::LostRace {
            current: Some(order("order-2", 1).entity)
        }
    );
    assert_eq!(
        entity(&store, EntityKey::of::<shop::Order>("order-2")).await,
        Some(order("order-2", 1).entity)
    );
}

pub async fn an_update_is_written_only_at_the_expected_sequence<S: Store>(store: S) {
    store.save(&order("order-3", 1), None).await.expect("save");
    assert_eq!(
        store
            .save(&order("order-3", 2), Some(1))
            .await
            .expect("save"),
        Saved::Written
    );
    // A writer that loaded sequence 1 lost the race: it gets what is stored now.
    let stale = store
        .save(&order("order-3", 2), Some(1))
        .await
        .expect("save");
    assert_eq!(
        stale,
        Saved::LostRace {
            current: Some(order("order-3", 2).entity)
        }
    );
    // Expecting an entity that does not exist is a conflict with nothing.
    let missing = store
        .save(&order("order-4", 2), Some(1))
        .await
        .expect("save");
    assert_eq!(missing, Saved::LostRace { current: None });
    assert_eq!(
        entity(&store, EntityKey::of::<shop::Order>("order-4")).await,
        None
    );
}

pub async fn a_load_reads_more_keys_than_one_request_takes<S: Store>(store: S) {
    let keys: Vec<EntityKey> = (0..150)
        .map(|n| EntityKey::of::<shop::Product>(format!("product-{n}")))
        .collect();
    for n in (0..150).step_by(2) {
        store
            .save(&product(&format!("product-{n}"), 1), None)
            .await
            .expect("save");
    }
    let loaded = store.load(&keys, &[]).await.expect("load").entities;
    assert_eq!(loaded.len(), 75);
    assert!(loaded.contains_key(&EntityKey::of::<shop::Product>("product-148")));
    assert!(!loaded.contains_key(&EntityKey::of::<shop::Product>("product-149")));
}
