//! Deadlines on DynamoDB Local: found through the index `due`, fired once
//! by sweeps that race, refused whole when the order's stream moved, a
//! no-op once the state moved on, and a payment racing a deadline.

use aws_sdk_dynamodb::types::AttributeValue;
use sequence_guard::store::due_shard;

use super::*;

/// `orders` orders created and delivered at `BASE`: each awaits payment
/// until `BASE + WINDOW`.
async fn awaiting(tables: &Tables, orders: usize) -> World<DynamoStore, EventStore> {
    let mut world = tables.world(orders).await;
    world.drain(BASE).await;
    for order in world.orders.clone() {
        assert_eq!(world.deadline(&order).await, Some(BASE + WINDOW), "{order}");
    }
    world
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_sweeps_at_once_fire_each_deadline_once() {
    let tables = Tables::new().await;
    let world = awaiting(&tables, 6).await;
    // Two functions whose transactions are held on the way: both read each
    // due state before either writes.
    let (proxy, first, second) = racing(&tables).await;

    // Not yet due: nothing fires.
    let early = world.runner.fire_due(&at(BASE + WINDOW - 1)).await;
    assert_eq!(early, Default::default());

    // Two sweeps at once.
    let due = at(BASE + WINDOW);
    let (one, two) = tokio::join!(first.fire_due(&due), second.fire_due(&due));
    eprintln!(
        "racing sweeps: {one:?} {two:?}; {} transactions",
        proxy.seen()
    );
    assert_eq!(one.failed + two.failed, 0, "{one:?} {two:?}");
    let mut fired = one.fired + two.fired;
    if fired < 6 {
        // The index had not caught up yet: a later sweep.
        fired += fire_until(&first, BASE + WINDOW, 6 - fired).await;
    }
    assert_eq!(fired, 6, "each deadline fired once");
    assert!(
        proxy.seen() > 6,
        "both wrote at once, for some deadline: {} transactions",
        proxy.seen()
    );

    for order in &world.orders {
        let events = world.events(order).await;
        let types: Vec<&str> = events.iter().map(|e| e.event_type.as_str()).collect();
        assert_eq!(
            types,
            ["OrderCreated", "OrderCancelled"],
            "{order}: one cancel"
        );
        assert_eq!(
            events[1].event_id,
            format!("process-payments-due-{order}-{}-0", BASE + WINDOW)
        );
        assert_eq!(events[1].data["reason"], "payment not received");
        let payment = world.state(order).await.expect("a state");
        assert_eq!(
            (payment.state, payment.sequence),
            (PaymentState::Cancelling, 1),
            "{order}"
        );
        assert_eq!(world.deadline(order).await, None, "{order}: fired once");
    }
    let later_on = at(BASE + 3 * WINDOW);
    let later = tokio::join!(first.fire_due(&later_on), second.fire_due(&later_on));
    assert_eq!(later, Default::default(), "nothing left to fire");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deadline_whose_stream_moved_writes_nothing_and_the_payment_ends_it_paid() {
    let tables = Tables::new().await;
    let mut world = awaiting(&tables, 1).await;
    // Paid at sequence 2, not yet delivered: the cancel at 1 is refused.
    world
        .produce("order-0", "PaymentReceived", paid(1000))
        .await;
    for sweep in 0..2 {
        let mut report = Default::default();
        for _ in 0..50 {
            report = world.runner.fire_due(&at(BASE + WINDOW)).await;
            if report != Default::default() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert_eq!(
            (report.fired, report.moved, report.failed),
            (0, 1, 0),
            "sweep {sweep}: {report:?}"
        );
        assert_eq!(world.events("order-0").await.len(), 2, "nothing appended");
        let payment = world.state("order-0").await.expect("a state");
        assert_eq!(
            (payment.state, payment.sequence),
            (PaymentState::AwaitingPayment, 1),
            "nothing written"
        );
        assert_eq!(world.deadline("order-0").await, Some(BASE + WINDOW));
    }
    world.drain(BASE + WINDOW + 1).await;
    let payment = world.state("order-0").await.expect("a state");
    assert_eq!(
        (payment.state, payment.sequence, payment.paid_cents),
        (PaymentState::Paid, 2, 1000)
    );
    assert_eq!(
        world.deadline("order-0").await,
        None,
        "cleared with the payment"
    );
    assert_eq!(
        world.runner.fire_due(&at(BASE + 5 * WINDOW)).await,
        Default::default()
    );
    assert_eq!(world.events("order-0").await.len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deadline_of_a_state_that_moved_on_is_a_no_op() {
    let tables = Tables::new().await;
    let mut world = awaiting(&tables, 1).await;
    world
        .produce("order-0", "PaymentReceived", paid(1000))
        .await;
    world.drain(BASE + 10).await;
    let before = world.state("order-0").await.expect("a state");
    assert_eq!(before.state, PaymentState::Paid);
    assert_eq!(world.deadline("order-0").await, None);

    // A deadline left on the paid state (as an index entry read before the
    // payment's step would show it): it fires, and does nothing.
    let pk = "PAYMENT#order-0";
    tables
        .client
        .update_item()
        .table_name(&tables.table)
        .key("pk", AttributeValue::S(pk.to_owned()))
        .key("sk", AttributeValue::S("STATE".to_owned()))
        .update_expression("SET dueAt = :at, dueShard = :shard")
        .expression_attribute_values(":at", AttributeValue::N((BASE + WINDOW).to_string()))
        .expression_attribute_values(
            ":shard",
            AttributeValue::S(format!("DUE#{:x}", due_shard(pk))),
        )
        .send()
        .await
        .expect("a deadline set by hand");
    assert_eq!(world.deadline("order-0").await, Some(BASE + WINDOW));
    let fired = fire_until(&world.runner, BASE + WINDOW, 1).await;
    assert_eq!(fired, 1, "seen, and done with");
    assert_eq!(world.events("order-0").await.len(), 2, "nothing appended");
    assert_eq!(
        world.state("order-0").await.as_ref(),
        Some(&before),
        "the state unchanged"
    );
    assert_eq!(
        world.deadline("order-0").await,
        None,
        "the deadline cleared"
    );
    assert_eq!(
        world.runner.fire_due(&at(BASE + 5 * WINDOW)).await,
        Default::default()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_payment_racing_the_deadline_ends_paid_or_cancelled_and_refunded() {
    let tables = Tables::new().await;
    let mut world = awaiting(&tables, 8).await;
    let producer = tables.producer();
    let orders = world.orders.clone();
    let payments = async {
        for (n, order) in orders.iter().enumerate() {
            produce(
                &producer,
                order,
                &format!("pay-{n}"),
                "PaymentReceived",
                paid(1000),
            )
            .await;
        }
    };
    let due = at(BASE + WINDOW);
    let (_, report) = tokio::join!(payments, world.runner.fire_due(&due));
    eprintln!("racing a payment: {report:?}");
    assert_eq!(report.failed, 0, "{report:?}");
    // Everything delivered, the deadlines still due fired, and delivered.
    for round in 1..=3 {
        world.drain(BASE + WINDOW + round).await;
        world.runner.fire_due(&at(BASE + WINDOW + round)).await;
    }
    world.drain(BASE + 2 * WINDOW).await;
    let mut ids = std::collections::HashSet::new();
    let (mut paid_orders, mut cancelled_orders) = (0, 0);
    for order in &orders {
        let events = world.events(order).await;
        let payment = world.state(order).await;
        assert_settled("payment racing", order, &events, payment.as_ref(), &mut ids);
        assert_eq!(world.deadline(order).await, None, "{order}");
        match payment.map(|payment| payment.state) {
            Some(PaymentState::Paid) => paid_orders += 1,
            _ => cancelled_orders += 1,
        }
    }
    eprintln!("{paid_orders} paid, {cancelled_orders} cancelled and refunded");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_deadline_of_a_state_awaiting_although_paid_in_full_ends_it_paid() {
    // GIVEN a state an earlier release left awaiting payment although what
    // was paid covers its total (an update had lowered the total to it).
    let tables = Tables::new().await;
    let world = awaiting(&tables, 1).await;
    tables
        .client
        .update_item()
        .table_name(&tables.table)
        .key("pk", AttributeValue::S("PAYMENT#order-0".into()))
        .key("sk", AttributeValue::S("STATE".into()))
        .update_expression("SET paidCents = :paid")
        .expression_attribute_values(":paid", AttributeValue::N("1000".into()))
        .send()
        .await
        .expect("UpdateItem");
    let before = world.state("order-0").await.expect("a state");
    assert_eq!(
        (before.state, before.paid_cents, before.total_cents),
        (PaymentState::AwaitingPayment, 1000, 1000)
    );

    // WHEN its deadline passes.
    let fired = fire_until(&world.runner, BASE + WINDOW, 1).await;

    // THEN it ends paid: nothing appended, the deadline gone.
    assert_eq!(fired, 1);
    let types: Vec<String> = world
        .events("order-0")
        .await
        .into_iter()
        .map(|event| event.event_type)
        .collect();
    assert_eq!(types, ["OrderCreated"], "no cancel appended");
    let after = world.state("order-0").await.expect("a state");
    assert_eq!(
        (after.state, after.sequence),
        (PaymentState::Paid, before.sequence)
    );
    assert_eq!(world.deadline("order-0").await, None);
}
