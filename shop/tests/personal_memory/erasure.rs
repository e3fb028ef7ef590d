//! The erasure event through the runner on the embedded store, on each
//! consumer of the orders' streams, and the sample that carries one.

use super::*;

/// The erasure through the runner on the embedded store: the order's
/// `customerName` and `email` become the placeholder, every other attribute
/// is kept and the sequence moves; a second delivery is a duplicate, and so
/// is an earlier sealed event delivered again (read with the placeholder,
/// not refused for its key). Another order is untouched.
#[tokio::test]
async fn the_erasure_replaces_the_personal_fields_under_the_guard_and_keeps_the_rest() {
    let source = local_keys();
    let producer = keyring(&source);
    let created = sealed(&producer, "OrderCreated", "order-1", 1, NAME, 1250).await;
    let paid = body(
        "PaymentReceived",
        "order-1",
        2,
        json!({"amountCents": 1250}),
    );
    let updated = sealed(&producer, "OrderUpdated", "order-1", 3, NAME, 1500).await;
    let cancelled = body(
        "OrderCancelled",
        "order-1",
        4,
        json!({"reason": "too slow"}),
    );
    let other = sealed(&producer, "OrderCreated", "order-2", 1, "Grace Hopper", 900).await;

    let consumer = keyring(&source);
    let store = MemoryStore::new();
    let runner = Runner::new(
        shop::domain().with_keys(consumer.clone()),
        &store,
        RunnerConfig::default(),
    );
    // Nothing fetched beforehand: the runner fetches the batch's keys.
    let report = runner
        .run(
            &messages(&[
                ("m1", "order-1", &created),
                ("m2", "order-1", &paid),
                ("m3", "order-1", &updated),
                ("m4", "order-1", &cancelled),
                ("m5", "order-2", &other),
            ]),
            invocation(),
        )
        .await
        .expect("run");
    assert_eq!(outcomes(&report), [Outcome::Applied; 5]);
    let before = typed::<Order, _>(&store, "order-1").await.expect("order-1");
    assert_eq!(
        (before.customer_name.as_str(), before.email.as_str()),
        (NAME, EMAIL)
    );

    // `erase`: the key deleted, then the erasure appended to the stream.
    source.erase("order-1").await.expect("erased");
    let erase = erasure("order-1", 5);
    let report = runner
        .run(&messages(&[("m6", "order-1", &erase)]), invocation())
        .await
        .expect("run");
    assert_eq!(outcomes(&report), [Outcome::Applied]);
    let after = typed::<Order, _>(&store, "order-1").await.expect("order-1");
    let expected = Order {
        sequence: 5,
        last_event_id: "erasure-order-1".into(),
        customer_name: PLACEHOLDER.into(),
        email: PLACEHOLDER.into(),
        ..before.clone()
    };
    assert_eq!(after, expected);
    assert_eq!(
        (
            after.total_cents,
            after.paid_cents,
            after.status,
            after.cancel_reason.as_deref()
        ),
        (1500, 1250, OrderStatus::Cancelled, Some("too slow"))
    );

    // Delivered again, the erasure and an earlier sealed event: duplicates.
    let report = runner
        .run(&messages(&[("m6-again", "order-1", &erase)]), invocation())
        .await
        .expect("run");
    assert_eq!(outcomes(&report), [Outcome::Duplicate]);
    let report = runner
        .run(
            &messages(&[("m3-again", "order-1", &updated)]),
            invocation(),
        )
        .await
        .expect("run");
    assert_eq!(outcomes(&report), [Outcome::Duplicate], "{report:?}");
    assert_eq!(
        typed::<Order, _>(&store, "order-1").await,
        Some(expected),
        "nothing changed"
    );

    let untouched = typed::<Order, _>(&store, "order-2").await.expect("order-2");
    assert_eq!(
        (untouched.customer_name.as_str(), untouched.sequence),
        ("Grace Hopper", 1)
    );
}

/// The payments process reads an order's total, and nothing personal: a
/// sealed body, however long its sealed values, is read without any key
/// (a long name's sealed text is longer than the 1,024 characters a plain
/// value may hold). Its state holds nothing to erase: the erasure is a
/// pass, its deadline kept; a second delivery is a duplicate.
#[tokio::test]
async fn the_payments_process_reads_no_personal_field_and_passes_the_erasure() {
    let source = local_keys();
    let producer = keyring(&source);
    let long_name = "N".repeat(900);
    let created = sealed(&producer, "OrderCreated", "order-1", 1, &long_name, 1250).await;
    let stored: Value = serde_json::from_str(&created).expect("json");
    assert!(
        stored["data"]["customerName"]
            .as_str()
            .is_some_and(|sealed| sealed.chars().count() > 1024),
        "the sealed name is past the plain limit"
    );

    let runner = Runner::new(
        shop::payments::domain(),
        MemoryStore::new(),
        RunnerConfig::default(),
    );
    let report = runner
        .run(&messages(&[("m1", "order-1", &created)]), invocation())
        .await
        .expect("run");
    assert_eq!(outcomes(&report), [Outcome::Applied], "{report:?}");
    let key = EntityKey::of::<Payment>("order-1");
    let deadlines = runner.store().deadlines();
    assert!(
        deadlines.iter().any(|(due, _)| *due == key),
        "awaiting payment, with a deadline: {deadlines:?}"
    );

    let erase = erasure("order-1", 2);
    let report = runner
        .run(&messages(&[("m2", "order-1", &erase)]), invocation())
        .await
        .expect("run");
    assert_eq!(outcomes(&report), [Outcome::Applied], "a pass");
    let report = runner
        .run(&messages(&[("m2-again", "order-1", &erase)]), invocation())
        .await
        .expect("run");
    assert_eq!(outcomes(&report), [Outcome::Duplicate]);
    assert_eq!(
        typed::<Payment, _>(runner.store(), "order-1").await,
        Some(Payment {
            sequence: 2,
            last_event_id: "erasure-order-1".into(),
            state: PaymentState::AwaitingPayment,
            total_cents: 1250,
            paid_cents: 0,
        })
    );
    assert_eq!(runner.store().deadlines(), deadlines, "the deadline kept");
    assert!(runner.store().appended().is_empty(), "nothing appended");
}

/// `events/15-personal-data-erased.json`, after the payments' samples,
/// through each consumer of the orders' streams: the order projection
/// forgets order-300's customer, the status consumer and the payments
/// process pass it.
#[tokio::test]
async fn the_erasure_sample_runs_through_every_consumer_of_the_orders() {
    let orders = MemoryStore::new();
    let statuses = MemoryStore::new();
    let projector = Runner::new(shop::domain(), &orders, RunnerConfig::default());
    let status = Runner::new(shop::status::domain(), &statuses, RunnerConfig::default());
    let payments = Runner::new(
        shop::payments::domain(),
        MemoryStore::new(),
        RunnerConfig::default(),
    );
    for json in [samples::PAYMENT_RECEIVED, samples::PERSONAL_DATA_ERASED] {
        for report in [
            projector.run(&sample(json), invocation()).await,
            status.run(&sample(json), invocation()).await,
            payments.run(&sample(json), invocation()).await,
        ] {
            let report = report.expect("run");
            assert!(failed_ids(&report).is_empty(), "{report:?}");
        }
    }
    let order = typed::<Order, _>(&orders, "order-300")
        .await
        .expect("order-300");
    assert_eq!(
        (order.customer_name.as_str(), order.email.as_str()),
        (PLACEHOLDER, PLACEHOLDER)
    );
    assert_eq!(
        (
            order.sequence,
            order.total_cents,
            order.paid_cents,
            order.status
        ),
        (3, 2500, 2500, OrderStatus::Open)
    );
    let alan = typed::<Order, _>(&orders, "order-400")
        .await
        .expect("order-400");
    assert_eq!(alan.customer_name, "Alan Turing", "another subject kept");
    assert_eq!(
        typed::<Status, _>(&statuses, "order-300")
            .await
            .map(|status| status.sequence),
        Some(3)
    );
    let payment = typed::<Payment, _>(payments.store(), "order-300")
        .await
        .expect("order-300");
    assert_eq!(
        (payment.sequence, payment.state, payment.paid_cents),
        (3, PaymentState::Paid, 2500)
    );
}
