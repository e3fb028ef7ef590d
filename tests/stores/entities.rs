//! Entities on both stores: loads of missing keys, every attribute read back,
//! what DynamoDB refuses, the conditional writes of a creation and an update,
//! a load over more keys than one request takes.

use super::*;

pub async fn missing_entities_load_as_absent<S: Store>(store: S) {
    let loaded = store
        .load(
            &[
                EntityKey::of::<Item>("nobody"),
                EntityKey::of::<Tag>("nothing"),
            ],
            &[dedup("never-seen")],
        )
        .await
        .expect("load");
    assert_eq!(loaded, Loaded::default());
}

pub async fn entities_round_trip_with_every_attribute<S: Store>(store: S) {
    let mut closed = item_at(4);
    closed.status = ItemStatus::Closed;
    closed.reason = Some("customer request".into());
    let closed = Keyed::new("item-1", closed);
    assert_eq!(
        store.save(&closed, None).await.expect("save"),
        Saved::Written
    );
    assert_eq!(
        store.save(&tag("tag-1", 2), None).await.expect("save"),
        Saved::Written
    );
    assert_eq!(
        entity(&store, EntityKey::of::<Item>("item-1")).await,
        Some(closed.entity)
    );
    assert_eq!(
        entity(&store, EntityKey::of::<Tag>("tag-1")).await,
        Some(tag("tag-1", 2).entity)
    );
    // An item and a tag may share an aggregate id: they are different items.
    assert_eq!(entity(&store, EntityKey::of::<Tag>("item-1")).await, None);
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

    let mut huge = item_at(1);
    huge.name = "x".repeat(410 * 1024);
    let cart = Cart {
        sequence: 1,
        last_event_id: "e1".into(),
        window: Window { until: 1 },
    };
    for (keyed, named) in [
        (Keyed::new("i-huge", huge), "maximum allowed size"),
        (Keyed::new("cart-1", cart), "`expiresAt`"),
    ] {
        match store.save(&keyed, None).await {
            Err(StoreError::Rejected { message, .. }) => {
                assert!(message.contains(named), "{named}: {message}")
            }
            other => panic!("{named}: refused for good, not {other:?}"),
        }
    }
    assert_eq!(entity(&store, EntityKey::of::<Item>("i-huge")).await, None);
    // Just under the limit: written.
    let mut large = item_at(1);
    large.name = "x".repeat(390 * 1024);
    assert_eq!(
        store
            .save(&Keyed::new("i-large", large), None)
            .await
            .expect("save"),
        Saved::Written
    );
}

pub async fn a_new_entity_is_written_only_where_none_exists<S: Store>(store: S) {
    assert_eq!(
        store.save(&item("item-2", 1), None).await.expect("save"),
        Saved::Written
    );
    let again = store.save(&item("item-2", 7), None).await.expect("save");
    assert_eq!(
        again,
        Saved::LostRace {
            current: Some(item("item-2", 1).entity)
        }
    );
    assert_eq!(
        entity(&store, EntityKey::of::<Item>("item-2")).await,
        Some(item("item-2", 1).entity)
    );
}

pub async fn an_update_is_written_only_at_the_expected_sequence<S: Store>(store: S) {
    store.save(&item("item-3", 1), None).await.expect("save");
    assert_eq!(
        store.save(&item("item-3", 2), Some(1)).await.expect("save"),
        Saved::Written
    );
    // A writer that loaded sequence 1 lost the race: it gets what is stored now.
    let stale = store.save(&item("item-3", 2), Some(1)).await.expect("save");
    assert_eq!(
        stale,
        Saved::LostRace {
            current: Some(item("item-3", 2).entity)
        }
    );
    // Expecting an entity that does not exist is a conflict with nothing.
    let missing = store.save(&item("item-4", 2), Some(1)).await.expect("save");
    assert_eq!(missing, Saved::LostRace { current: None });
    assert_eq!(entity(&store, EntityKey::of::<Item>("item-4")).await, None);
}

pub async fn a_load_reads_more_keys_than_one_request_takes<S: Store>(store: S) {
    let keys: Vec<EntityKey> = (0..150)
        .map(|n| EntityKey::of::<Tag>(format!("tag-{n}")))
        .collect();
    for n in (0..150).step_by(2) {
        store
            .save(&tag(&format!("tag-{n}"), 1), None)
            .await
            .expect("save");
    }
    let loaded = store.load(&keys, &[]).await.expect("load").entities;
    assert_eq!(loaded.len(), 75);
    assert!(loaded.contains_key(&EntityKey::of::<Tag>("tag-148")));
    assert!(!loaded.contains_key(&EntityKey::of::<Tag>("tag-149")));
}
