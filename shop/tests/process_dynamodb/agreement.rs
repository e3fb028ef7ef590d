//! The embedded store and DynamoDB agree: the same scenario, run on both,
//! leaves the same states, deadlines and events (types, ids and data), and
//! the sweeps fire and find moved the same deadlines.

use sequence_guard::store::memory::MemoryStore;

use super::property::{Snapshot, assert_property, scenario, snapshot, sweep};
use super::*;

fn embedded(orders: usize) -> impl std::future::Future<Output = World<MemoryStore, Embedded>> {
    let runner = Runner::new(
        shop::payments::domain(),
        MemoryStore::new(),
        RunnerConfig::default(),
    );
    World::new(runner, Embedded, orders)
}

/// Every row of the table: a paid order, one the deadline cancels and then
/// paid late, one paid and cancelled by its customer, one whose deadline
/// finds a payment landed, and one updated and paid in two parts.
async fn scripted<S: Store, L: Log<S>>(world: &mut World<S, L>) -> Vec<Snapshot> {
    let mut sweeps = Vec::new();
    let mut snapshots = Vec::new();
    world.drain(BASE).await;
    snapshots.push(snapshot(world, Vec::new()).await);

    world
        .produce("order-0", "PaymentReceived", paid(1000))
        .await;
    world
        .produce("order-2", "PaymentReceived", paid(1000))
        .await;
    world
        .produce("order-2", "OrderCancelled", cancelled())
        .await;
    world.produce("order-3", "PaymentReceived", paid(400)).await;
    world
        .produce("order-4", "OrderUpdated", created(1500))
        .await;
    world
        .produce("order-4", "PaymentReceived", paid(1000))
        .await;
    world.drain(BASE + 10).await;
    world.produce("order-3", "PaymentReceived", paid(600)).await;
    snapshots.push(snapshot(world, Vec::new()).await);

    // Due: order-1 cancelled, order-3's stream moved (its payment not yet
    // delivered), order-4 cancelled though partly paid.
    sweep(world, BASE + WINDOW - 1, &mut sweeps).await;
    sweep(world, BASE + WINDOW, &mut sweeps).await;
    snapshots.push(snapshot(world, sweeps.clone()).await);

    world.drain(BASE + WINDOW + 1).await;
    world
        .produce("order-1", "PaymentReceived", paid(1000))
        .await;
    world.drain(BASE + WINDOW + 2).await;
    sweep(world, BASE + 3 * WINDOW, &mut sweeps).await;
    world.drain(BASE + 3 * WINDOW).await;
    // Every event delivered again, in one batch each: nothing more.
    world.delivered.clear();
    world.drain(BASE + 3 * WINDOW).await;
    snapshots.push(snapshot(world, sweeps).await);
    snapshots
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_embedded_store_and_dynamodb_agree_step_by_step() {
    let mut memory = embedded(5).await;
    let on_memory = scripted(&mut memory).await;
    let tables = Tables::new().await;
    let mut dynamo = tables.world(5).await;
    let on_dynamodb = scripted(&mut dynamo).await;
    for (step, (memory, dynamodb)) in on_memory.iter().zip(&on_dynamodb).enumerate() {
        assert_eq!(memory, dynamodb, "step {step}");
    }
    assert_eq!(on_memory.len(), on_dynamodb.len());

    // And what it is: the table's rows.
    let last = on_dynamodb.last().expect("a snapshot");
    assert_eq!(last.sweeps, [(0, 0, 0), (2, 1, 0), (0, 0, 0)]);
    let ended: Vec<(&str, Option<PaymentState>, Vec<&str>)> = last
        .orders
        .iter()
        .map(|(order, payment, due, events)| {
            assert_eq!(*due, None, "{order}");
            (
                order.as_str(),
                payment.as_ref().map(|payment| payment.state),
                events.iter().map(|event| event.2.as_str()).collect(),
            )
        })
        .collect();
    use PaymentState::{Cancelled, Paid};
    assert_eq!(
        ended,
        [
            (
                "order-0",
                Some(Paid),
                vec!["OrderCreated", "PaymentReceived"]
            ),
            (
                "order-1",
                Some(Cancelled),
                vec![
                    "OrderCreated",
                    "OrderCancelled",
                    "PaymentReceived",
                    "RefundRequested"
                ]
            ),
            (
                "order-2",
                Some(Cancelled),
                vec![
                    "OrderCreated",
                    "PaymentReceived",
                    "OrderCancelled",
                    "RefundRequested"
                ]
            ),
            (
                "order-3",
                Some(Paid),
                vec!["OrderCreated", "PaymentReceived", "PaymentReceived"]
            ),
            (
                "order-4",
                Some(Cancelled),
                vec![
                    "OrderCreated",
                    "OrderUpdated",
                    "PaymentReceived",
                    "OrderCancelled",
                    "RefundRequested"
                ]
            ),
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_embedded_store_and_dynamodb_agree_on_random_scenarios() {
    for seed in [3, 17, 42] {
        let mut memory = embedded(4).await;
        let memory_sweeps = scenario(&mut memory, seed).await;
        assert_property(&memory, seed).await;
        let tables = Tables::new().await;
        let mut dynamo = tables.world(4).await;
        let dynamo_sweeps = scenario(&mut dynamo, seed).await;
        assert_property(&dynamo, seed).await;
        assert_eq!(
            snapshot(&memory, memory_sweeps).await,
            snapshot(&dynamo, dynamo_sweeps).await,
            "seed {seed}"
        );
    }
}
