//! The memory test's property on DynamoDB Local: for random interleavings
//! of payments, customer cancels, updates (totals raised, and lowered to
//! what was paid or below), deadlines, duplicate deliveries and batch
//! splits, every order ends paid (and not cancelled) or cancelled, none
//! paid in full is cancelled for non-payment, every payment that needs it
//! is requested back once, nothing is appended twice, and the process's
//! state is the fold of the stream.

use std::collections::HashSet;

use support::rng::Rng;

use super::*;

/// An event without its body: sequence, id, type, data.
pub(super) type Event = (u64, String, String, Value);

/// An order as a world holds it: its id, state, deadline and events.
pub(super) type OrderView = (String, Option<Payment>, Option<u64>, Vec<Event>);

/// What a world holds at the end: each order's state, deadline and events
/// (without their bodies), and the sweeps' reports.
#[derive(Debug, PartialEq)]
pub(super) struct Snapshot {
    pub orders: Vec<OrderView>,
    pub sweeps: Vec<(u64, u64, u64)>,
}

pub(super) async fn snapshot<S: Store, L: Log<S>>(
    world: &World<S, L>,
    sweeps: Vec<(u64, u64, u64)>,
) -> Snapshot {
    let mut orders = Vec::new();
    for order in &world.orders {
        let events = world
            .events(order)
            .await
            .into_iter()
            .map(|event| (event.sequence, event.event_id, event.event_type, event.data))
            .collect();
        orders.push((
            order.clone(),
            world.state(order).await,
            world.deadline(order).await,
            events,
        ));
    }
    Snapshot { orders, sweeps }
}

/// The memory test's scenario on `world` (4 orders): the sweeps' reports.
pub(super) async fn scenario<S: Store, L: Log<S>>(
    world: &mut World<S, L>,
    seed: u64,
) -> Vec<(u64, u64, u64)> {
    let mut rng = Rng(seed);
    let mut now = BASE;
    let mut sweeps = Vec::new();
    for _ in 0..60 {
        let order = world.orders[rng.below(4) as usize].clone();
        match rng.below(10) {
            0..=2 => {
                let amount = [300, 700, 1000][rng.below(3) as usize];
                world.produce(&order, "PaymentReceived", paid(amount)).await;
            }
            3 => world.produce(&order, "OrderCancelled", cancelled()).await,
            4 => {
                // Up, or down to what was paid or below it.
                let total = [0, 300, 700, 1000, 1200, 1400][rng.below(6) as usize];
                world.produce(&order, "OrderUpdated", created(total)).await;
            }
            5 => {
                // Time passes: deadlines come due, and the sweep fires them.
                now += 400;
                sweep(world, now, &mut sweeps).await;
            }
            _ => {
                let (count, again) = (1 + rng.below(3), rng.below(3));
                world.deliver(&order, count, again, now).await;
            }
        }
    }
    // The end: everything delivered, every deadline fired, and delivered again.
    for _ in 0..3 {
        world.drain(now).await;
        now += 1000;
        sweep(world, now, &mut sweeps).await;
    }
    world.drain(now).await;
    sweeps
}

/// Fires what is due at `now`, its report kept.
pub(super) async fn sweep<S: Store, L: Log<S>>(
    world: &World<S, L>,
    now: u64,
    sweeps: &mut Vec<(u64, u64, u64)>,
) {
    let report = world.runner.fire_due(&at(now)).await;
    sweeps.push((report.fired, report.moved, report.failed));
}

/// The property, on a world the scenario ran on.
pub(super) async fn assert_property<S: Store, L: Log<S>>(world: &World<S, L>, seed: u64) {
    let what = format!("seed {seed}");
    let mut ids = HashSet::new();
    for order in &world.orders {
        assert_eq!(
            world.deadline(order).await,
            None,
            "{what}: {order}: deadline left"
        );
        let events = world.events(order).await;
        let payment = world.state(order).await;
        assert_settled(&what, order, &events, payment.as_ref(), &mut ids);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_order_ends_paid_or_cancelled_and_refunded_once_on_dynamodb() {
    for seed in 1..=10 {
        let tables = Tables::new().await;
        let mut world = tables.world(4).await;
        let sweeps = scenario(&mut world, seed).await;
        assert_property(&world, seed).await;
        let fired: u64 = sweeps.iter().map(|sweep| sweep.0).sum();
        eprintln!("seed {seed}: {fired} deadlines fired");
    }
}
