//! One suite, two stores: every store behaviour and the runner's stories run
//! on the in-memory store and on DynamoDB Local (started by the suite).

mod support;

use std::sync::Arc;

use sequence_guard::EntityKey;
use sequence_guard::runner::{Invocation, Outcome, Runner, RunnerConfig};
use sequence_guard::store::Addition;
use sequence_guard::store::memory::MemoryStore;
use sequence_guard::store::{Added, DedupKey, Existing, Loaded, Store};
use sequence_guard::testing::Keyed;
use sequence_guard::testing::{SaveExt, Saved};
use shop::{Order, OrderStatus, Product, STOCK};
use support::*;

// The real clock: DynamoDB Local deletes items whose TTL attribute
// (`expiresAt` = now + 35 days) is in the past, as DynamoDB does.
fn now() -> u64 {
    sequence_guard::lambda::epoch_seconds()
}

fn invocation() -> Invocation {
    Invocation {
        deadline: None,
        now: now(),
    }
}

fn order(id: &str, sequence: u64) -> Keyed {
    Keyed::new(id, order_at(sequence))
}

fn order_at(sequence: u64) -> Order {
    Order {
        sequence,
        last_event_id: format!("e{sequence}"),
        customer_name: "Ada Lovelace".to_owned(),
        email: "ada@example.com".to_owned(),
        total_cents: 100 * sequence,
        status: OrderStatus::Open,
        cancel_reason: None,
        paid_cents: 0,
        refund_cents: 0,
    }
}

fn product(id: &str, sequence: u64) -> Keyed {
    Keyed::new(
        id,
        Product {
            sequence,
            last_event_id: format!("p{sequence}"),
            name: "Desk lamp".to_owned(),
            price_cents: 3999,
        },
    )
}

fn adjustment(event_id: &str, sku: &str, delta: i64) -> Addition {
    Addition {
        event_id: event_id.to_owned(),
        handler: "StockOnHand",
        counter: &STOCK,
        id: sku.to_owned(),
        delta,
        handled_at: now(),
        expires_at: now() + 604_800,
    }
}

fn existing(index: usize, stream: &str) -> Existing {
    Existing {
        index,
        stream: Some(stream.to_owned()),
    }
}

fn dedup(event_id: &str) -> DedupKey {
    DedupKey {
        event_id: event_id.to_owned(),
        handler: "StockOnHand",
    }
}

mod suite {
    use super::*;
    use Outcome::*;

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

    pub async fn a_stock_adjustment_applies_once_per_event<S: Store>(store: S) {
        assert_eq!(
            store.counter(&shop::STOCK, "SKU-1").await.expect("read"),
            None
        );
        let adjust = async |adjustments: &[Addition]| store.add(adjustments).await.expect("adjust");
        assert_eq!(
            adjust(&[adjustment("a", "SKU-1", 10)]).await,
            Added::Applied
        );
        assert_eq!(
            adjust(&[adjustment("b", "SKU-1", -3)]).await,
            Added::Applied
        );
        assert_eq!(
            adjust(&[adjustment("a", "SKU-1", 10)]).await,
            Added::Existing(vec![existing(0, "SKU-1")])
        );
        assert_eq!(
            store.counter(&shop::STOCK, "SKU-1").await.expect("read"),
            Some(7)
        );
        assert_eq!(
            store.counter(&shop::STOCK, "SKU-2").await.expect("read"),
            None
        );
        // The load sees which records exist.
        let loaded = store
            .load(&[], &[dedup("a"), dedup("b"), dedup("c")])
            .await
            .expect("load");
        let mut handled: Vec<(String, Option<String>)> = loaded
            .handled
            .into_iter()
            .map(|(key, stream)| (key.event_id, stream))
            .collect();
        handled.sort();
        let sku_1 = Some("SKU-1".to_owned());
        assert_eq!(
            handled,
            [("a".to_owned(), sku_1.clone()), ("b".to_owned(), sku_1)],
            "each record knows its stream"
        );
    }

    /// Several adjustments, several skus, one atomic step; one known record
    /// cancels all of it and says which.
    pub async fn stock_adjustments_apply_together_or_not_at_all<S: Store>(store: S) {
        let first = [
            adjustment("x1", "SKU-X", 5),
            adjustment("y1", "SKU-Y", 2),
            adjustment("x2", "SKU-X", -1),
        ];
        assert_eq!(store.add(&first).await.expect("adjust"), Added::Applied);
        assert_eq!(
            store.counter(&shop::STOCK, "SKU-X").await.expect("read"),
            Some(4)
        );
        assert_eq!(
            store.counter(&shop::STOCK, "SKU-Y").await.expect("read"),
            Some(2)
        );
        let mixed = [
            adjustment("x3", "SKU-X", 100),
            adjustment("y1", "SKU-Y", 2),
            adjustment("x2", "SKU-X", -1),
        ];
        assert_eq!(
            store.add(&mixed).await.expect("adjust"),
            Added::Existing(vec![existing(1, "SKU-Y"), existing(2, "SKU-X")])
        );
        assert_eq!(
            store.counter(&shop::STOCK, "SKU-X").await.expect("read"),
            Some(4),
            "nothing of a cancelled step lands"
        );
        let rest = [adjustment("x3", "SKU-X", 100)];
        assert_eq!(store.add(&rest).await.expect("adjust"), Added::Applied);
        assert_eq!(
            store.counter(&shop::STOCK, "SKU-X").await.expect("read"),
            Some(104)
        );
    }

    /// `onHand` stays a 64-bit integer on both stores: an adjustment that
    /// would take it outside is refused whole (no record, no change), with
    /// the value it found; DynamoDB's ADD alone would store a number no
    /// reader can take, the memory store used to clamp it.
    pub async fn stock_never_leaves_the_64_bit_range<S: Store>(store: S) {
        let adjust = async |adjustments: &[Addition]| store.add(adjustments).await.expect("adjust");
        assert_eq!(
            adjust(&[adjustment("m1", "SKU-MAX", i64::MAX - 10)]).await,
            Added::Applied
        );
        assert_eq!(
            adjust(&[
                adjustment("m2", "SKU-MAX", 6),
                adjustment("m3", "SKU-MAX", 6)
            ])
            .await,
            Added::OutOfRange {
                counter: &shop::STOCK,
                id: "SKU-MAX".into(),
                value: Some(i64::MAX - 10)
            }
        );
        assert_eq!(
            store.counter(&shop::STOCK, "SKU-MAX").await.expect("read"),
            Some(i64::MAX - 10)
        );
        let loaded = store
            .load(&[], &[dedup("m2"), dedup("m3")])
            .await
            .expect("load");
        assert!(loaded.handled.is_empty(), "no record of a refused step");
        assert_eq!(
            adjust(&[adjustment("m2", "SKU-MAX", 10)]).await,
            Added::Applied
        );
        assert_eq!(
            store.counter(&shop::STOCK, "SKU-MAX").await.expect("read"),
            Some(i64::MAX)
        );

        assert_eq!(
            adjust(&[adjustment("n1", "SKU-MIN", i64::MIN)]).await,
            Added::Applied
        );
        assert_eq!(
            adjust(&[adjustment("n2", "SKU-MIN", -1)]).await,
            Added::OutOfRange {
                counter: &shop::STOCK,
                id: "SKU-MIN".into(),
                value: Some(i64::MIN)
            }
        );
        assert_eq!(
            store.counter(&shop::STOCK, "SKU-MIN").await.expect("read"),
            Some(i64::MIN)
        );
        // Out of range from nothing; an in-range sum of out-of-range steps is taken.
        assert_eq!(
            adjust(&[
                adjustment("z1", "SKU-NEW", i64::MAX),
                adjustment("z2", "SKU-NEW", 1)
            ])
            .await,
            Added::OutOfRange {
                counter: &shop::STOCK,
                id: "SKU-NEW".into(),
                value: None
            }
        );
        assert_eq!(
            store.counter(&shop::STOCK, "SKU-NEW").await.expect("read"),
            None
        );
        assert_eq!(
            adjust(&[
                adjustment("z1", "SKU-NEW", i64::MAX),
                adjustment("z3", "SKU-NEW", -5)
            ])
            .await,
            Added::Applied
        );
        assert_eq!(
            store.counter(&shop::STOCK, "SKU-NEW").await.expect("read"),
            Some(i64::MAX - 5)
        );
    }

    /// Through the runner: adjustments summing past `i64::MAX` in one
    /// stream: those before the one that crosses are applied, that one is
    /// rejected for good (reported failed with a reason), the rest wait, and
    /// the sku stays readable. (Within one step the stores add the sum, so
    /// a stream that only passes through the edge, ending inside, is taken.)
    pub async fn an_adjustment_past_the_64_bit_range_is_rejected<S: Store>(store: S) {
        let runner = Runner::new(shop::domain(), store, RunnerConfig::default());
        let messages = vec![
            message(
                "r1",
                "SKU-R",
                &inventory_adjusted("r1", "SKU-R", i64::MAX - 5),
            ),
            message("r2", "SKU-R", &inventory_adjusted("r2", "SKU-R", 3)),
            message("r3", "SKU-R", &inventory_adjusted("r3", "SKU-R", 3)),
            message("r4", "SKU-R", &inventory_adjusted("r4", "SKU-R", 1)),
        ];
        let report = runner
            .run(&batch(messages), invocation())
            .await
            .expect("run");
        assert_eq!(outcomes(&report), [Applied, Applied, Rejected, Skipped]);
        let reason = report.messages[2].reason.as_deref().unwrap_or_default();
        assert!(
            reason.contains("SKU-R")
                && reason.contains("64-bit")
                && reason.contains("will not help"),
            "{reason}"
        );
        assert_eq!(failed_ids(&report), ["r3", "r4"]);
        let store = runner.store();
        assert_eq!(
            store.counter(&shop::STOCK, "SKU-R").await.expect("read"),
            Some(i64::MAX - 2)
        );
        // The stream goes on past the refused event once it is gone.
        let later = vec![message(
            "r4",
            "SKU-R",
            &inventory_adjusted("r4", "SKU-R", 1),
        )];
        let report = runner.run(&batch(later), invocation()).await.expect("run");
        assert_eq!(outcomes(&report), [Applied]);
        assert_eq!(
            store.counter(&shop::STOCK, "SKU-R").await.expect("read"),
            Some(i64::MAX - 1)
        );
    }

    /// The sample events, replayed in order, tell the story the README tells.
    pub async fn the_sample_events_tell_their_story<S: Store>(store: S) {
        let runner = Runner::new(shop::domain(), store, RunnerConfig::default());
        let expected: [&[Outcome]; 13] = [
            &[Applied, Applied, Applied],
            &[Duplicate, Duplicate, Duplicate],
            &[Gap, Skipped],
            &[Applied, Applied, Applied],
            &[NotCreated, Skipped],
            &[Applied, Applied, Applied, Gap, Applied, Skipped],
            &[
                Invalid, Skipped, Invalid, Invalid, Invalid, Invalid, Invalid, Applied,
            ],
            &[Applied, Applied, Applied, Duplicate],
            &[Applied, Applied, Applied, Duplicate],
            &[Parked, Parked],
            &[Applied, Conflict],
            &[Applied; 5],
            &[Applied, Duplicate],
        ];
        for ((file, json), expected) in samples::ALL.iter().zip(expected) {
            let event = sample(json);
            let report = runner
                .run(&event, invocation())
                .await
                .expect("every sample has message ids");
            assert_eq!(outcomes(&report), expected, "{file}");
            let failed: Vec<String> = event
                .records
                .iter()
                .zip(expected)
                .filter(|(_, outcome)| outcome.is_failure())
                .filter_map(|(record, _)| record.message_id.clone())
                .collect();
            let listed: Vec<String> = report
                .response()
                .batch_item_failures
                .into_iter()
                .map(|failure| failure.item_identifier)
                .collect();
            assert_eq!(listed, failed, "{file}: batchItemFailures");
        }
        let store = runner.store();
        match typed::<shop::Order, _>(store, "order-42").await {
            Some(order) => {
                assert_eq!(
                    (order.sequence, order.total_cents, order.status),
                    (6, 2000, OrderStatus::Cancelled)
                );
                assert_eq!(order.cancel_reason.as_deref(), Some("customer request"));
            }
            other => panic!("order-42: {other:?}"),
        }
        // Its events 5 and 6 were parked, and drained when 4 arrived.
        match typed::<shop::Order, _>(store, "order-100").await {
            Some(order) => {
                assert_eq!(
                    (order.sequence, order.total_cents, order.status),
                    (6, 500, OrderStatus::Cancelled)
                );
                assert_eq!(order.cancel_reason.as_deref(), Some("out of stock"));
            }
            other => panic!("order-100: {other:?}"),
        }
        let inspection = store
            .inspect(&EntityKey::of::<shop::Order>("order-100"))
            .await
            .expect("inspect");
        assert!(inspection.parked.is_empty());
        assert_eq!(inspection.conflicts.len(), 1);
        assert_eq!(inspection.conflicts[0].sequence, 6);
        assert_eq!(
            entity(store, EntityKey::of::<shop::Order>("order-200"))
                .await
                .map(|e| e.sequence()),
            Some(1)
        );
        assert_eq!(
            entity(store, EntityKey::of::<shop::Order>("order-505"))
                .await
                .map(|e| e.sequence()),
            Some(1)
        );
        assert_eq!(
            entity(store, EntityKey::of::<shop::Order>("order-77")).await,
            None
        );
        assert_eq!(
            entity(store, EntityKey::of::<shop::Order>("order-500")).await,
            None
        );
        match typed::<shop::Product, _>(store, "product-7").await {
            Some(product) => {
                assert_eq!((product.sequence, product.price_cents), (3, 2999))
            }
            other => panic!("product-7: {other:?}"),
        }
        assert_eq!(
            store.counter(&shop::STOCK, "SKU-LAMP").await.expect("read"),
            Some(7)
        );
        assert_eq!(
            store.counter(&shop::STOCK, "SKU-DESK").await.expect("read"),
            Some(5)
        );
    }

    /// Two invocations race on one product with overlapping batches of
    /// `ProductPriceChanged`, whose behaviour increments the sequence: a double
    /// apply would show as a second `applied` and a sequence too far.
    pub async fn concurrent_invocations_apply_each_event_exactly_once<S: Store + Clone>(store: S) {
        let first = Runner::new(shop::domain(), store.clone(), RunnerConfig::default());
        let second = Runner::new(shop::domain(), store.clone(), RunnerConfig::default());
        let created = batch(vec![message(
            "create",
            "product-race",
            &product_created("product-race"),
        )]);
        first.run(&created, invocation()).await.expect("run");

        let last = 61;
        let mut applied = vec![0u32; last as usize + 1];
        let mut next = 2; // the head of the stream: the first sequence not yet applied
        let mut round = 0;
        while next <= last {
            round += 1;
            assert!(round < 100, "no progress: stuck at {next}");
            // Both invocations start at the head; one runs ahead further.
            let ahead = (round % 3) as u64;
            let batch_of = |from: u64, count: u64| {
                batch(
                    (from..(from + count).min(last + 1))
                        .map(|sequence| {
                            message(
                                &format!("m{sequence}"),
                                "product-race",
                                &price_changed("product-race", sequence),
                            )
                        })
                        .collect(),
                )
            };
            let (longer, shorter) = (batch_of(next, 10), batch_of(next, 10 - ahead));
            let (a, b) = futures::join!(
                first.run(&longer, invocation()),
                second.run(&shorter, invocation())
            );
            for report in [a.expect("run"), b.expect("run")] {
                for message in &report.messages {
                    if message.outcome == Outcome::Applied {
                        applied[message.sequence.expect("sequenced") as usize] += 1;
                    }
                }
            }
            // The messages not done are redelivered from the head of the stream.
            next = entity(&store, EntityKey::of::<shop::Product>("product-race"))
                .await
                .map_or(0, |e| e.sequence())
                + 1;
        }
        for sequence in 2..=last {
            assert_eq!(
                applied[sequence as usize], 1,
                "event {sequence} applied {} times",
                applied[sequence as usize]
            );
        }
        match typed::<shop::Product, _>(&store, "product-race").await {
            Some(product) => {
                assert_eq!(
                    product.sequence, last,
                    "a sequence too far means an event was applied twice"
                );
                assert_eq!(product.price_cents, 1000 + last);
            }
            other => panic!("product-race: {other:?}"),
        }
    }

    /// Ten invocations carry the same `InventoryAdjusted` at once (producer
    /// resends under new message ids): `onHand` moves once.
    pub async fn concurrent_duplicate_adjustments_apply_once<S: Store + Clone>(store: S) {
        let runners: Vec<Runner<S>> = (0..10)
            .map(|_| Runner::new(shop::domain(), store.clone(), RunnerConfig::default()))
            .collect();
        let body = inventory_adjusted("adjust-once", "SKU-RACE", 25);
        let events: Vec<_> = (0..10)
            .map(|n| batch(vec![message(&format!("copy-{n}"), "SKU-RACE", &body)]))
            .collect();
        let mut pending: Vec<usize> = (0..10).collect();
        let mut applied = 0;
        for _round in 0..5 {
            let reports = futures::future::join_all(
                pending
                    .iter()
                    .map(|&n| runners[n].run(&events[n], invocation())),
            )
            .await;
            let mut failed = Vec::new();
            for (&n, report) in pending.iter().zip(reports) {
                let outcome = report.expect("run").messages[0].outcome;
                match outcome {
                    Outcome::Applied => applied += 1,
                    Outcome::Duplicate => {}
                    // A transaction that collided with another is failed and redelivered.
                    Outcome::StorageError => failed.push(n),
                    other => panic!("unexpected {other:?}"),
                }
            }
            pending = failed;
            if pending.is_empty() {
                break;
            }
        }
        assert!(
            pending.is_empty(),
            "still failing after 5 deliveries: {pending:?}"
        );
        assert_eq!(applied, 1);
        assert_eq!(
            store.counter(&shop::STOCK, "SKU-RACE").await.expect("read"),
            Some(25)
        );
    }
}

macro_rules! store_suite {
    ($module:ident, $store:expr) => {
        mod $module {
            use super::*;

            #[tokio::test]
            async fn missing_entities_load_as_absent() {
                suite::missing_entities_load_as_absent($store).await
            }
            #[tokio::test]
            async fn entities_round_trip_with_every_attribute() {
                suite::entities_round_trip_with_every_attribute($store).await
            }
            #[tokio::test]
            async fn what_dynamodb_refuses_is_refused() {
                suite::what_dynamodb_refuses_is_refused($store).await
            }
            #[tokio::test]
            async fn a_new_entity_is_written_only_where_none_exists() {
                suite::a_new_entity_is_written_only_where_none_exists($store).await
            }
            #[tokio::test]
            async fn an_update_is_written_only_at_the_expected_sequence() {
                suite::an_update_is_written_only_at_the_expected_sequence($store).await
            }
            #[tokio::test]
            async fn a_load_reads_more_keys_than_one_request_takes() {
                suite::a_load_reads_more_keys_than_one_request_takes($store).await
            }
            #[tokio::test]
            async fn a_stock_adjustment_applies_once_per_event() {
                suite::a_stock_adjustment_applies_once_per_event($store).await
            }
            #[tokio::test]
            async fn stock_adjustments_apply_together_or_not_at_all() {
                suite::stock_adjustments_apply_together_or_not_at_all($store).await
            }
            #[tokio::test]
            async fn stock_never_leaves_the_64_bit_range() {
                suite::stock_never_leaves_the_64_bit_range($store).await
            }
            #[tokio::test]
            async fn an_adjustment_past_the_64_bit_range_is_rejected() {
                suite::an_adjustment_past_the_64_bit_range_is_rejected($store).await
            }
            #[tokio::test]
            async fn the_sample_events_tell_their_story() {
                suite::the_sample_events_tell_their_story($store).await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn concurrent_invocations_apply_each_event_exactly_once() {
                suite::concurrent_invocations_apply_each_event_exactly_once($store).await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn concurrent_duplicate_adjustments_apply_once() {
                suite::concurrent_duplicate_adjustments_apply_once($store).await
            }
        }
    };
}

store_suite!(memory, Arc::new(MemoryStore::new()));
store_suite!(dynamodb, fresh_table().await);

/// What readers of the table depend on: the contract's keys, attribute names
/// and types, read back raw from DynamoDB Local.
#[tokio::test]
async fn dynamodb_items_have_the_contract_layout() {
    use aws_sdk_dynamodb::types::AttributeValue;
    use std::collections::HashMap;

    let store = fresh_table().await;
    let runner = Runner::new(shop::domain(), store.clone(), RunnerConfig::default());
    let before = now();
    // The samples until 11-gap-closed.json, which closes the gap of 10-gap-parked.json.
    let (story, closing_sample) = samples::until_the_gap_closes();
    for (_, json) in story {
        runner.run(&sample(json), invocation()).await.expect("run");
    }
    let item = |pk: String, sk: &str| {
        let store = store.clone();
        let sk = sk.to_owned();
        async move {
            store
                .client()
                .get_item()
                .table_name(store.table())
                .key("pk", AttributeValue::S(pk.clone()))
                .key("sk", AttributeValue::S(sk.clone()))
                .consistent_read(true)
                .send()
                .await
                .expect("GetItem")
                .item
                .unwrap_or_else(|| panic!("no item {pk} / {sk}"))
        }
    };
    let s = |item: &HashMap<String, AttributeValue>, name: &str| match item.get(name) {
        Some(AttributeValue::S(text)) => text.clone(),
        other => panic!("{name}: expected S, got {other:?}"),
    };
    let n = |item: &HashMap<String, AttributeValue>, name: &str| match item.get(name) {
        Some(AttributeValue::N(number)) => number.parse::<i64>().expect("integer"),
        other => panic!("{name}: expected N, got {other:?}"),
    };
    let names = |item: &HashMap<String, AttributeValue>| {
        let mut names: Vec<String> = item.keys().cloned().collect();
        names.sort();
        names
    };

    let order = item("ORDER#order-42".into(), "STATE").await;
    assert_eq!(
        names(&order),
        [
            "cancelReason",
            "customerName",
            "email",
            "lastEventId",
            "pk",
            "sequence",
            "sk",
            "status",
            "totalCents"
        ]
    );
    assert_eq!((n(&order, "sequence"), n(&order, "totalCents")), (6, 2000));
    assert_eq!(s(&order, "status"), "CANCELLED");
    assert_eq!(s(&order, "cancelReason"), "customer request");
    let open = item("ORDER#order-200".into(), "STATE").await;
    assert_eq!(s(&open, "status"), "OPEN");
    assert!(!open.contains_key("cancelReason"));

    let product = item("PRODUCT#product-7".into(), "STATE").await;
    assert_eq!(
        names(&product),
        ["lastEventId", "name", "pk", "priceCents", "sequence", "sk"]
    );
    assert_eq!(
        (n(&product, "sequence"), n(&product, "priceCents")),
        (3, 2999)
    );

    let stock = item("SKU#SKU-LAMP".into(), "STOCK").await;
    assert_eq!(n(&stock, "onHand"), 7);

    // The dedup record of the first SKU-LAMP adjustment.
    let inventory = sample(samples::INVENTORY);
    let body: serde_json::Value =
        serde_json::from_str(inventory.records[0].body.as_deref().expect("body")).expect("json");
    let event_id = body["eventId"].as_str().expect("eventId");
    let record = item(format!("MESSAGE#{event_id}"), "HANDLER#StockOnHand").await;
    let handled_at = n(&record, "handledAt");
    assert!(handled_at >= before as i64 && handled_at <= now() as i64);
    assert_eq!(n(&record, "expiresAt"), handled_at + 35 * 24 * 60 * 60);

    // Parked: events 5 and 6 of order-100, listed on its item, and the item in
    // the index of parked entities.
    let waiting = item("ORDER#order-100".into(), "STATE").await;
    assert_eq!(n(&waiting, "sequence"), 3);
    match waiting.get("parked") {
        Some(AttributeValue::Ns(numbers)) => {
            let mut numbers = numbers.clone();
            numbers.sort();
            assert_eq!(numbers, ["5", "6"]);
        }
        other => panic!("parked: expected NS, got {other:?}"),
    }
    let since = n(&waiting, "parkedSince");
    assert!(since >= before as i64 && since <= now() as i64);
    let parked_sample = sample(samples::GAP_PARKED);
    let sent = parked_sample.records[0].body.clone().expect("body");
    let sent_event: serde_json::Value = serde_json::from_str(&sent).expect("json");
    let pending = item("ORDER#order-100".into(), "PENDING#00000000000000000005").await;
    assert_eq!(
        names(&pending),
        [
            "body",
            "eventId",
            "messageId",
            "parkedAt",
            "pk",
            "sk",
            "type"
        ]
    );
    assert_eq!(s(&pending, "body"), sent, "the body as received");
    assert_eq!(
        s(&pending, "eventId"),
        sent_event["eventId"].as_str().expect("id")
    );
    assert_eq!(s(&pending, "type"), "OrderUpdated");
    assert_eq!(
        Some(s(&pending, "messageId")),
        parked_sample.records[0].message_id
    );
    assert_eq!(n(&pending, "parkedAt"), since);
    // The index's entry, in one of its 16 shards.
    let entries = index_entries(&store, "ORDER#order-100").await;
    assert_eq!(entries.len(), 1, "{entries:?}");
    let index = entries[0].clone();
    let shard = s(&index, "pk");
    assert!(
        shard.len() == "PARKED#0".len() && shard.starts_with("PARKED#"),
        "{shard}"
    );
    assert_eq!(names(&index), ["parkedSince", "pk", "sk"]);
    assert_eq!(n(&index, "parkedSince"), since);

    // The gap closes: drained, and a conflict recorded for sequence 6.
    runner
        .run(&sample(closing_sample), invocation())
        .await
        .expect("run");
    let done = item("ORDER#order-100".into(), "STATE").await;
    assert_eq!(n(&done, "sequence"), 6);
    assert!(!done.contains_key("parked") && !done.contains_key("parkedSince"));
    let inspection = store
        .inspect(&EntityKey::of::<shop::Order>("order-100"))
        .await
        .expect("inspect");
    assert!(inspection.parked.is_empty());
    let closing = sample(closing_sample);
    let conflicting: serde_json::Value =
        serde_json::from_str(closing.records[1].body.as_deref().expect("body")).expect("json");
    let conflict_id = conflicting["eventId"].as_str().expect("eventId");
    let conflict = item(
        "ORDER#order-100".into(),
        &format!("CONFLICT#00000000000000000006#{conflict_id}"),
    )
    .await;
    assert_eq!(names(&conflict), ["body", "pk", "seenAt", "sk"]);
    assert_eq!(Some(s(&conflict, "body")), closing.records[1].body.clone());
    assert!(n(&conflict, "seenAt") >= before as i64);
    assert!(
        index_entries(&store, "ORDER#order-100").await.is_empty(),
        "out of the index once drained"
    );
}

/// The entries of the index of parked entities (any shard, or the one
/// partition of the earlier release) whose sort key is `sk`.
async fn index_entries(
    store: &sequence_guard::store::dynamodb::DynamoStore,
    sk: &str,
) -> Vec<std::collections::HashMap<String, aws_sdk_dynamodb::types::AttributeValue>> {
    use aws_sdk_dynamodb::types::AttributeValue;

    let scan = store
        .client()
        .scan()
        .table_name(store.table())
        .filter_expression("begins_with(pk, :index) AND sk = :sk")
        .expression_attribute_values(":index", AttributeValue::S("PARKED".into()))
        .expression_attribute_values(":sk", AttributeValue::S(sk.into()))
        .consistent_read(true)
        .send()
        .await
        .expect("Scan");
    scan.items.unwrap_or_default()
}

/// Entries an earlier release wrote in the index's one partition `PARKED`
/// are moved to their shard by the sweep, with their entity's own
/// `parkedSince`; one whose entity has nothing parked any more is deleted.
#[tokio::test]
async fn the_sweep_moves_entries_of_the_one_partition_index_to_their_shards() {
    use aws_sdk_dynamodb::types::AttributeValue;

    let store = fresh_table().await;
    let runner = Runner::new(shop::domain(), store.clone(), RunnerConfig::default());
    let order = |id: &str, sequence: u64, receives: u32| {
        let mut message = support::message(
            &format!("{id}-{sequence}"),
            id,
            &support::order_event(
                if sequence == 1 {
                    "OrderCreated"
                } else {
                    "OrderUpdated"
                },
                id,
                sequence,
                &format!("{id}-{sequence}"),
            ),
        );
        message
            .attributes
            .insert("ApproximateReceiveCount".into(), receives.to_string());
        message
    };
    let parked_at = now() - 600;
    let at = |now| Invocation {
        deadline: None,
        now,
    };
    for id in ["old-1", "old-2"] {
        runner
            .run(&support::batch(vec![order(id, 1, 1)]), at(parked_at))
            .await
            .expect("run");
        runner
            .run(&support::batch(vec![order(id, 3, 3)]), at(parked_at))
            .await
            .expect("run");
    }
    // As the earlier release left them: the entries in `PARKED`, and old-2's
    // gap closed since (its entity has nothing parked, its entry stale).
    for id in ["old-1", "old-2"] {
        let pk = format!("ORDER#{id}");
        let entry = index_entries(&store, &pk).await.remove(0);
        store
            .client()
            .delete_item()
            .table_name(store.table())
            .set_key(Some(
                entry
                    .iter()
                    .filter(|(name, _)| *name == "pk" || *name == "sk")
                    .map(|(name, value)| (name.clone(), value.clone()))
                    .collect(),
            ))
            .send()
            .await
            .expect("DeleteItem");
        store
            .client()
            .put_item()
            .table_name(store.table())
            .item("pk", AttributeValue::S("PARKED".into()))
            .item("sk", AttributeValue::S(pk))
            .item("parkedSince", AttributeValue::N(parked_at.to_string()))
            .send()
            .await
            .expect("PutItem");
    }
    runner
        .run(&support::batch(vec![order("old-2", 2, 1)]), at(parked_at))
        .await
        .expect("run");

    let report = sequence_guard::sweep::sweep(&runner, at(now()))
        .await
        .expect("sweep");
    assert_eq!(report.entities, 1, "{report:?}");
    assert_eq!(report.longest[0].key, EntityKey::of::<Order>("old-1"));
    assert!(report.longest[0].parked_for_seconds >= 600);
    let old_1 = index_entries(&store, "ORDER#old-1").await;
    assert_eq!(old_1.len(), 1, "{old_1:?}");
    assert_ne!(
        old_1[0].get("pk"),
        Some(&AttributeValue::S("PARKED".into()))
    );
    assert_eq!(
        old_1[0].get("parkedSince"),
        Some(&AttributeValue::N(parked_at.to_string()))
    );
    assert!(index_entries(&store, "ORDER#old-2").await.is_empty());
    // Moved once: the next sweep finds the same.
    let again = sequence_guard::sweep::sweep(&runner, at(now()))
        .await
        .expect("sweep");
    assert_eq!(again.entities, 1);
}

/// DynamoDB's ValidationException (here: an item over 400 KB, as unbounded
/// strings once made) is a refusal for good, told apart from a storage error,
/// for the single conditional write and for a transaction.
#[tokio::test]
async fn dynamodb_refusals_for_good_are_told_apart_from_storage_errors() {
    use sequence_guard::store::{Commit, Expected, ParkedEvent, StoreError};

    let store = fresh_table().await;
    let mut huge = order_at(1);
    huge.customer_name = "x".repeat(410 * 1024);
    let huge = Keyed::new("huge", huge);
    match store.save(&huge, None).await {
        Err(StoreError::Rejected { operation, message }) => {
            assert_eq!(operation, "UpdateItem");
            assert!(message.contains("ValidationException"), "{message}");
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    let parked = |sequence: u64| ParkedEvent {
        sequence,
        event_id: format!("e{sequence}"),
        event_type: "OrderUpdated".into(),
        body: "y".repeat(420 * 1024),
        message_id: format!("m{sequence}"),
        parked_at: now(),
    };
    let commit = Commit {
        key: EntityKey::of::<shop::Order>("huge"),
        expected: Expected {
            sequence: None,
            parked: Default::default(),
            entity: None,
            due_at: None,
        },
        entity: None,
        park: vec![parked(3)],
        drain: vec![],
        conflicts: vec![],
        now: now(),
        deadline: None,
        outbox: None,
    };
    match store.commit(&commit).await {
        Err(StoreError::Rejected { operation, .. }) => assert_eq!(operation, "TransactWriteItems"),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

/// An entity must be written with its sequence in the attribute `sequence`
/// (the guard's condition reads it there): one that names it otherwise is
/// refused, not written without its guard.
#[tokio::test]
async fn an_entity_without_a_sequence_attribute_is_refused() {
    use sequence_guard::store::StoreError;

    #[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
    struct Misnamed {
        #[serde(rename = "version")]
        sequence: u64,
        last_event_id: String,
    }

    impl sequence_guard::Entity for Misnamed {
        const KIND: &'static str = "MISNAMED";
        fn sequence(&self) -> u64 {
            self.sequence
        }
        fn last_event_id(&self) -> &str {
            &self.last_event_id
        }
    }

    let store = fresh_table().await;
    let entity = Misnamed {
        sequence: 1,
        last_event_id: "e1".into(),
    };
    match store.save(&Keyed::new("m-1", entity), None).await {
        Err(StoreError::Rejected { message, .. }) => {
            assert!(message.contains("in the attribute `sequence`"), "{message}")
        }
        other => panic!("{other:?}"),
    }
}

/// An entity item that cannot be read is named by its key and attribute,
/// never by the value stored there: the reason is logged, and a stored
/// value may be personal data.
#[tokio::test]
async fn an_unreadable_entity_is_told_without_its_values() {
    use aws_sdk_dynamodb::types::AttributeValue;

    let store = fresh_table().await;
    let runner = Runner::new(shop::domain(), store.clone(), RunnerConfig::default());
    store
        .client()
        .put_item()
        .table_name(store.table())
        .item("pk", AttributeValue::S("ORDER#o-1".into()))
        .item("sk", AttributeValue::S("STATE".into()))
        .item("sequence", AttributeValue::N("1".into()))
        .item("lastEventId", AttributeValue::S("e1".into()))
        .item("customerName", AttributeValue::S("Ada Lovelace".into()))
        .item("email", AttributeValue::S("ada@example.com".into()))
        .item("totalCents", AttributeValue::S("ada@example.com".into()))
        .item("status", AttributeValue::S("OPEN".into()))
        .send()
        .await
        .expect("PutItem");
    let loaded = store
        .load(&[EntityKey::of::<Order>("o-1")], &[])
        .await
        .expect("load");
    let message = match loaded.entities.get(&EntityKey::of::<Order>("o-1")) {
        Some(Err(err)) => err.to_string(),
        other => panic!("unreadable, not {other:?}"),
    };
    assert!(
        message.contains("ORDER#o-1") && message.contains("`totalCents`"),
        "{message}"
    );
    assert!(!message.contains("ada@example.com"), "{message}");
    let batch = support::batch(vec![support::message(
        "m2",
        "o-1",
        &support::order_event("OrderUpdated", "o-1", 2, "e2"),
    )]);
    let report = runner.run(&batch, invocation()).await.expect("run");
    let reason = report.messages[0].reason.clone().unwrap_or_default();
    assert!(reason.contains("`totalCents`"), "{reason}");
    assert!(
        !reason.contains("ada@example.com") && !reason.contains("1815"),
        "{reason}"
    );
}
