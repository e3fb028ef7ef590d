//! A sealed body read: opened by the order projection with its subject's
//! key, read by the status consumer with none, and read as the placeholder
//! once its subject is erased.

use super::*;

/// The order projection opens a sealed body once it has fetched the
/// subject's key: before, the body is refused as needing it.
#[tokio::test]
async fn a_sealed_body_reads_as_its_plain_values_once_its_key_is_fetched() {
    let source = local_keys();
    let producer = keyring(&source);
    let body = sealed(&producer, "OrderCreated", "order-1", 1, NAME, 1250).await;
    let stored: Value = serde_json::from_str(&body).expect("json");
    for field in ["customerName", "email"] {
        assert!(
            stored["data"][field].as_str().is_some_and(is_sealed),
            "{field}: {body}"
        );
    }

    // A consumer's own keyring: nothing fetched yet.
    let consumer = keyring(&source);
    let domain = shop::domain().with_keys(consumer.clone());
    assert_eq!(
        domain.parse(&body).map(|_| ()),
        Err(InvalidMessage::KeyNeeded("order-1".to_owned()))
    );
    // Without a keyring at all, the same refusal.
    assert_eq!(
        shop::domain().parse(&body).map(|_| ()),
        Err(InvalidMessage::KeyNeeded("order-1".to_owned()))
    );

    let before = source.kms_requests();
    domain.fetch_keys([body.as_str()]).await.expect("fetched");
    assert_eq!(source.kms_requests(), before + 1, "one unwrap");
    let then = given(None::<Order>)
        .when_body(&domain, &body)
        .expect("opened");
    let order = then.entity().cloned().expect("created");
    assert_eq!(
        (order.customer_name.as_str(), order.email.as_str()),
        (NAME, EMAIL)
    );
    assert_eq!((order.total_cents, order.sequence), (1250, 1));
    then.then(Decision::Applied, Some(order.clone()));

    // The next event of the subject: its key is kept, nothing more read.
    let update = sealed(&producer, "OrderUpdated", "order-1", 2, "Ada King", 1500).await;
    let after = source.kms_requests();
    domain.fetch_keys([update.as_str()]).await.expect("kept");
    assert_eq!(source.kms_requests(), after, "the key was kept");
    let updated = given(Some(order))
        .when_body(&domain, &update)
        .expect("opened");
    let order = updated.entity().cloned().expect("kept");
    assert_eq!(
        (
            order.customer_name.as_str(),
            order.total_cents,
            order.sequence
        ),
        ("Ada King", 1500, 2)
    );

    // Sealed by hand as the engine documents it, and as an earlier release
    // sealed it: read the same.
    for (order, format) in [("order-3", Format::Now), ("order-4", Format::Earlier)] {
        let by_hand = by_hand(&producer, order, 1, NAME, format).await;
        domain
            .fetch_keys([by_hand.as_str()])
            .await
            .expect("fetched");
        let order = given(None::<Order>)
            .when_body(&domain, &by_hand)
            .expect("opened")
            .entity()
            .cloned()
            .expect("created");
        assert_eq!(
            (order.customer_name.as_str(), order.email.as_str()),
            (NAME, EMAIL)
        );
    }
}

/// The status consumer declares no personal data: it reads the sealed
/// bodies without any key, keeps nothing personal, and passes the erasure
/// (its sequence moves; a second delivery is a duplicate). Its keyring,
/// had it one, is never asked.
#[tokio::test]
async fn the_status_consumer_reads_sealed_bodies_without_a_key_and_passes_the_erasure() {
    let source = local_keys();
    let producer = keyring(&source);
    let created = sealed(&producer, "OrderCreated", "order-1", 1, NAME, 1250).await;
    let updated = sealed(&producer, "OrderUpdated", "order-1", 2, NAME, 1500).await;

    let no_keys = Arc::new(NoKeys::default());
    let refusing: Arc<dyn KeySource> = no_keys.clone();
    let domain = shop::status::domain().with_keys(Arc::new(Keyring::shared(refusing)));
    given(None::<Status>)
        .when_body(&domain, &created)
        .expect("read without a key")
        .then(
            Decision::Applied,
            Some(Status {
                sequence: 1,
                last_event_id: "order-1-1".into(),
                status: OrderStatus::Open,
                cancel_reason: None,
            }),
        );
    domain
        .fetch_keys([created.as_str(), updated.as_str()])
        .await
        .expect("nothing to fetch");

    let store = MemoryStore::new();
    let runner = Runner::new(domain, &store, RunnerConfig::default());
    let report = runner
        .run(
            &messages(&[("m1", "order-1", &created), ("m2", "order-1", &updated)]),
            invocation(),
        )
        .await
        .expect("run");
    assert_eq!(outcomes(&report), [Outcome::Applied, Outcome::Applied]);
    source.erase("order-1").await.expect("erased");
    let erase = erasure("order-1", 3);
    let report = runner
        .run(&messages(&[("m3", "order-1", &erase)]), invocation())
        .await
        .expect("run");
    assert_eq!(outcomes(&report), [Outcome::Applied], "a pass");
    let report = runner
        .run(&messages(&[("m3-again", "order-1", &erase)]), invocation())
        .await
        .expect("run");
    assert_eq!(outcomes(&report), [Outcome::Duplicate]);

    let status = typed::<Status, _>(&store, "order-1")
        .await
        .expect("order-1");
    assert_eq!(
        status,
        Status {
            sequence: 3,
            last_event_id: "erasure-order-1".into(),
            status: OrderStatus::Open,
            cancel_reason: None,
        }
    );
    let item = serde_json::to_string(&status).expect("json");
    for personal in ["customerName", "email", "sg:pd1:", NAME, EMAIL] {
        assert!(!item.contains(personal), "{item}");
    }
    assert_eq!(
        no_keys.calls.load(Ordering::Relaxed),
        0,
        "the status consumer asked for a key"
    );
}

/// Once the subject is erased, a keyring that did not hold its key reads
/// its values as the placeholder, and no new value of theirs can be
/// sealed; another subject's values still open.
#[tokio::test]
async fn once_erased_a_new_keyring_reads_the_placeholder() {
    let source = local_keys();
    let producer = keyring(&source);
    let forgotten = sealed(&producer, "OrderCreated", "order-1", 1, NAME, 1250).await;
    let kept = sealed(&producer, "OrderCreated", "order-2", 1, "Grace Hopper", 900).await;

    let before = producer
        .source()
        .erase("order-1")
        .await
        .expect("erased")
        .expect("it had a key item");
    assert!(before.wrapped.is_some());
    let item = source.item("order-1").expect("an erased item");
    assert_eq!(
        (item.wrapped, item.streams),
        (None, vec!["order-1".to_owned()]),
        "the key gone, its streams kept"
    );
    assert_eq!(
        producer.for_append("order-1", "order-1").await.map(|_| ()),
        Err(KeyError::Erased("order-1".to_owned())),
        "nothing of theirs is sealed again"
    );

    let domain = shop::domain().with_keys(keyring(&source));
    assert_eq!(
        domain.parse(&forgotten).map(|_| ()),
        Err(InvalidMessage::KeyNeeded("order-1".to_owned()))
    );
    domain
        .fetch_keys([forgotten.as_str(), kept.as_str()])
        .await
        .expect("fetched");
    let order = given(None::<Order>)
        .when_body(&domain, &forgotten)
        .expect("read")
        .entity()
        .cloned()
        .expect("created");
    assert_eq!(
        (order.customer_name.as_str(), order.email.as_str()),
        (PLACEHOLDER, PLACEHOLDER)
    );
    assert_eq!(order.total_cents, 1250, "the rest of the event as it was");
    let other = given(None::<Order>)
        .when_body(&domain, &kept)
        .expect("read")
        .entity()
        .cloned()
        .expect("created");
    assert_eq!(
        (other.customer_name.as_str(), other.email.as_str()),
        ("Grace Hopper", EMAIL)
    );
}
