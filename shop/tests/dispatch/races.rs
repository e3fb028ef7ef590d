//! Racing writers and dispatchers: eight producers racing while the pipeline
//! runs, each event applied once; two dispatchers racing and a transaction's
//! items out of order, absorbed by the events read from the store, or by
//! parking.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_producers_end_with_the_projection_equal_to_the_fold_of_the_store() {
    let mut p = pipeline("producers", &Faults::default()).await;
    let order_ids = names("order", 3);
    orders(&p.events, &order_ids, 0).await;
    append(
        &p.events,
        Append::one(
            "product-0",
            NewEvent::new(
                "ProductCreated",
                json!({ "name": "Lamp", "priceCents": 10 }),
            ),
        ),
    )
    .await;
    // Eight producers, each with its own commands (request ids), racing on
    // three orders, one product and two skus, while the pipeline runs.
    let mut producers = Vec::new();
    for producer in 0..8u64 {
        let events = p.events.clone();
        let order_ids = order_ids.clone();
        producers.push(tokio::spawn(async move {
            for n in 0..12u64 {
                let (stream, event) = match (producer + n) % 4 {
                    0 | 1 => (
                        order_ids[((producer + n) % 3) as usize].clone(),
                        NewEvent::new("OrderUpdated", details(1_000 * producer + n)),
                    ),
                    2 => (
                        "product-0".to_owned(),
                        NewEvent::new("ProductPriceChanged", json!({ "priceCents": n })),
                    ),
                    _ => {
                        let sku = if n % 2 == 0 { "SKU-A" } else { "SKU-B" };
                        (
                            sku.to_owned(),
                            NewEvent::new(
                                "InventoryAdjusted",
                                json!({ "sku": sku, "delta": (producer as i64) - 3 }),
                            ),
                        )
                    }
                };
                let request = Append {
                    request_id: Some(format!("producer-{producer}-{n}")),
                    ..Append::one(stream, event)
                };
                append(&events, request.clone()).await;
                // A retried command: appends nothing more.
                if n % 5 == 0 {
                    append(&events, request).await;
                }
            }
        }));
    }
    while !producers.iter().all(|producer| producer.is_finished()) {
        p.source.drain(Duration::from_secs(5)).await;
        p.poller.drain(Duration::from_secs(5)).await;
    }
    for producer in producers {
        producer.await.expect("producer");
    }
    p.settle().await;
    let items = p.assert_projection_is_the_fold().await;
    let mut streams = order_ids.clone();
    streams.extend([
        "product-0".to_owned(),
        "SKU-A".to_owned(),
        "SKU-B".to_owned(),
    ]);
    let stored = p.stored_events(&streams).await;
    assert_eq!(stored, 4 + 8 * 12, "one event per command");
    assert!(items.len() >= 6, "{items:#?}");
    // Each event reached the queue once: every message applied, none a
    // duplicate (SQS deduplication and the stream read once).
    assert_eq!(
        p.projected("Applied") as usize,
        stored,
        "{}",
        p.projector.output()
    );
    assert_eq!(p.dispatched("Dispatched") as usize, stored);
    assert_eq!(p.dispatched("Corrupt"), 0.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn dispatchers_racing_and_a_transaction_out_of_order_are_absorbed() {
    let mut p = pipeline("racing", &Faults::default()).await;
    // One append of ten events: one transaction, ten event items.
    let mut events = vec![NewEvent::new("OrderCreated", details(1))];
    events.extend((2..=10).map(|n| NewEvent::new("OrderUpdated", details(n))));
    append(
        &p.events,
        Append {
            events,
            ..Append::one("order-tx", NewEvent::new("x", json!({})))
        },
    )
    .await;
    orders(&p.events, &names("order", 2), 5).await;
    // The events, one record each (no head); and the orders' key items,
    // each written once (the dispatchers skip them).
    let (records, subjects) = personal_data::part_key_records(p.source.read(100).await);
    assert_eq!(
        records.len(),
        10 + 2 * 6,
        "events, one record each (no head)"
    );
    assert_eq!(subjects, ["order-0", "order-1", "order-tx"]);

    // A second dispatcher, racing: it sends the second half first.
    let rival_api = RuntimeApi::start().await;
    let rival = start_dispatcher(&rival_api, &p.sqs_endpoint, &p.queues.url, &p.failure_url);
    let (first, second) = records.split_at(records.len() / 2);
    let ok = Answer::Response(r#"{"batchItemFailures":[]}"#.to_owned());
    assert_eq!(StreamSource::invoke(&rival_api, second).await, ok);
    // And the transaction's items reach the other one last first.
    let mut reversed = first.to_vec();
    reversed.reverse();
    assert_eq!(StreamSource::invoke(&p.source.api, &reversed).await, ok);
    p.settle().await;
    p.assert_projection_is_the_fold().await;
    // Read from the event store before the event that arrived ahead of
    // them, or held back (not created, a gap, parked): which, depends on
    // when the consumer polls.
    assert!(
        p.projected("Filled")
            + p.projected("Gap")
            + p.projected("NotCreated")
            + p.projected("Parked")
            > 0.0,
        "the order was broken: the guard read events in or held them back"
    );
    // Each event applied once: on arrival, read from the store before one
    // that came ahead of it, or drained from parking when its gap closed.
    assert_eq!(
        p.projected("Applied") + p.projected("Filled") + p.projected("Drained"),
        10.0 + 12.0
    );
    drop(rival);
}
