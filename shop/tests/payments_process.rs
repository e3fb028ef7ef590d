//! The payments process on the embedded store, which is also its event
//! store here: the process's table and what it appends are one store, so
//! a step's state and appends are one atomic write, as on DynamoDB.
//!
//! Property: for random interleavings of payments, customer cancels,
//! updates, deadlines, duplicate deliveries and batch splits, every order
//! ends paid (and not cancelled) or cancelled, every payment of a cancelled
//! order is requested back exactly once, nothing is appended twice, and the
//! process's state is the fold of the order's stream.

mod support;

use std::collections::{BTreeMap, HashSet};

use sequence_guard::runner::{Invocation, Outcome, Runner, RunnerConfig};
use sequence_guard::store::memory::{LoggedEvent, MemoryStore};
use shop::payments::{Payment, PaymentState};
use support::rng::Rng;
use support::*;

const BASE: u64 = 1_800_000_000;

fn at(now: u64) -> Invocation {
    Invocation {
        deadline: None,
        now,
    }
}

fn body_of(event: &LoggedEvent) -> String {
    serde_json::json!({
        "eventId": event.event_id,
        "type": event.event_type,
        "aggregateId": event.stream,
        "sequence": event.sequence,
        "data": event.data,
    })
    .to_string()
}

/// The shop's producers and the dispatcher, over the embedded event store.
struct World {
    runner: Runner<MemoryStore>,
    orders: Vec<String>,
    /// Per order, how many of its events were delivered (in order) so far.
    delivered: BTreeMap<String, u64>,
    next_id: u64,
    messages: u64,
}

impl World {
    fn new(orders: usize) -> Self {
        let runner = Runner::new(
            shop::payments::domain(),
            MemoryStore::new(),
            RunnerConfig::default(),
        );
        let orders: Vec<String> = (0..orders).map(|n| format!("order-{n}")).collect();
        let mut world = World {
            runner,
            orders: orders.clone(),
            delivered: BTreeMap::new(),
            next_id: 0,
            messages: 0,
        };
        // The last order has nothing to pay: it is paid at once.
        for (n, order) in orders.iter().enumerate() {
            let total = if n + 1 == orders.len() && n > 0 {
                0
            } else {
                1000
            };
            world.produce(order, "OrderCreated", serde_json::json!({"customerName": "A", "email": "a@example.com", "totalCents": total}));
        }
        world
    }

    fn produce(&mut self, order: &str, event_type: &str, data: serde_json::Value) {
        self.next_id += 1;
        let id = format!("p-{}", self.next_id);
        self.runner
            .store()
            .append_event(order, &id, event_type, data);
    }

    /// Delivers up to `count` next events of `order`, in one batch, with
    /// `again` events before them delivered once more (duplicates).
    async fn deliver(&mut self, order: &str, count: u64, again: u64, now: u64) {
        let events = self.runner.store().stream_events(order);
        let from = *self.delivered.get(order).unwrap_or(&0);
        let start = from.saturating_sub(again);
        let end = (from + count).min(events.len() as u64);
        if start >= end {
            return;
        }
        let records: Vec<_> = events[start as usize..end as usize]
            .iter()
            .map(|event| {
                self.messages += 1;
                message(&format!("m-{}", self.messages), order, &body_of(event))
            })
            .collect();
        let report = self
            .runner
            .run(&batch(records), at(now))
            .await
            .expect("a batch");
        // What applied (or was a duplicate) counts as delivered, in order.
        let mut done = start;
        for message in &report.messages {
            match message.outcome {
                Outcome::Applied | Outcome::Duplicate => done += 1,
                other => {
                    assert!(
                        matches!(other, Outcome::Gap | Outcome::NotCreated | Outcome::Skipped),
                        "{order}: {other:?} {:?}",
                        message.reason
                    );
                    break;
                }
            }
        }
        self.delivered.insert(order.to_owned(), done.max(from));
    }

    /// Delivers everything, stream by stream, until nothing is left.
    async fn drain(&mut self, now: u64) {
        loop {
            let mut moved = false;
            for order in self.orders.clone() {
                let before = *self.delivered.get(&order).unwrap_or(&0);
                self.deliver(&order, 10, 0, now).await;
                moved |= *self.delivered.get(&order).unwrap_or(&0) > before;
            }
            if !moved {
                return;
            }
        }
    }

    fn state(&self, order: &str) -> Option<Payment> {
        self.runner
            .store()
            .entities()
            .into_iter()
            .find(|(key, _)| key.id() == order)
            .and_then(|(_, entity)| entity.get::<Payment>().cloned())
    }
}

/// What the order's stream says: its payments, refunds, and whether and
/// when it was cancelled; and each cancel for non-payment that found the
/// order paid in full (what was paid before it covered the total then).
struct Fold {
    cancelled_paid_in_full: Vec<u64>,
    paid: u64,
    payments_after_cancel: Vec<u64>,
    paid_before_cancel: u64,
    refunds: Vec<u64>,
    cancelled: bool,
    total: u64,
}

fn fold(events: &[LoggedEvent]) -> Fold {
    let mut fold = Fold {
        cancelled_paid_in_full: Vec::new(),
        paid: 0,
        payments_after_cancel: Vec::new(),
        paid_before_cancel: 0,
        refunds: Vec::new(),
        cancelled: false,
        total: 0,
    };
    for event in events {
        let amount = event.data["amountCents"].as_u64().unwrap_or(0);
        match event.event_type.as_str() {
            "OrderCreated" | "OrderUpdated" => {
                fold.total = event.data["totalCents"].as_u64().unwrap_or(0);
            }
            "PaymentReceived" => {
                fold.paid += amount;
                if fold.cancelled {
                    fold.payments_after_cancel.push(amount);
                } else {
                    fold.paid_before_cancel += amount;
                }
            }
            "RefundRequested" => fold.refunds.push(amount),
            "OrderCancelled" => {
                if event.data["reason"] == shop::payments::NOT_PAID
                    && !fold.cancelled
                    && fold.paid >= fold.total
                {
                    fold.cancelled_paid_in_full.push(event.sequence);
                }
                fold.cancelled = true;
            }
            _ => {}
        }
    }
    fold
}

async fn scenario(seed: u64) {
    let mut rng = Rng(seed);
    let mut world = World::new(4);
    let mut now = BASE;
    for _ in 0..60 {
        let order = world.orders[rng.below(4) as usize].clone();
        match rng.below(10) {
            0..=2 => {
                let amount = [300, 700, 1000][rng.below(3) as usize];
                world.produce(
                    &order,
                    "PaymentReceived",
                    serde_json::json!({"amountCents": amount}),
                );
            }
            3 => world.produce(
                &order,
                "OrderCancelled",
                serde_json::json!({"reason": "changed mind"}),
            ),
            4 => {
                // Up, or down to what was paid or below it.
                let total = [0, 300, 700, 1000, 1200, 1400][rng.below(6) as usize];
                world.produce(&order, "OrderUpdated", serde_json::json!({"customerName": "A", "email": "a@example.com", "totalCents": total}));
            }
            5 => {
                // Time passes: deadlines come due, and the sweep fires them.
                now += 400;
                world.runner.fire_due(&at(now)).await;
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
        world.runner.fire_due(&at(now)).await;
    }
    world.drain(now).await;
    assert!(
        world.runner.store().deadlines().is_empty(),
        "seed {seed}: deadlines left"
    );

    let mut ids = HashSet::new();
    for order in world.orders.clone() {
        let events = world.runner.store().stream_events(&order);
        for (index, event) in events.iter().enumerate() {
            assert_eq!(
                event.sequence,
                index as u64 + 1,
                "seed {seed}: {order} gapless"
            );
            assert!(
                ids.insert(event.event_id.clone()),
                "seed {seed}: {} appended twice",
                event.event_id
            );
        }
        let fold = fold(&events);
        let state = world.state(&order).expect("a state per order");
        assert_eq!(
            state.sequence,
            events.len() as u64,
            "seed {seed}: {order} followed its stream"
        );
        assert_eq!(state.paid_cents, fold.paid, "seed {seed}: {order} paid");
        assert_eq!(state.total_cents, fold.total, "seed {seed}: {order} total");
        // Paid is paid: no order paid in full is cancelled for non-payment.
        assert_eq!(
            fold.cancelled_paid_in_full,
            Vec::<u64>::new(),
            "seed {seed}: {order} cancelled for non-payment (at these sequences) while paid in full"
        );
        if fold.cancelled {
            assert_eq!(state.state, PaymentState::Cancelled, "seed {seed}: {order}");
            // Each payment that needs it refunded exactly once.
            let mut wanted: Vec<u64> = fold.payments_after_cancel.clone();
            if fold.paid_before_cancel > 0 {
                wanted.push(fold.paid_before_cancel);
            }
            let (mut wanted, mut refunds) = (wanted, fold.refunds.clone());
            wanted.sort_unstable();
            refunds.sort_unstable();
            assert_eq!(refunds, wanted, "seed {seed}: {order} refunds");
        } else {
            assert_eq!(
                state.state,
                PaymentState::Paid,
                "seed {seed}: {order} not cancelled, so paid"
            );
            assert!(
                fold.refunds.is_empty(),
                "seed {seed}: {order} refunded while not cancelled"
            );
        }
    }
}

#[tokio::test]
async fn every_order_ends_paid_or_cancelled_and_refunded_once_whatever_the_timing() {
    for seed in 1..=200 {
        scenario(seed).await;
    }
}

#[tokio::test]
async fn an_unpaid_order_is_cancelled_by_its_deadline_and_a_late_payment_refunded() {
    let mut world = World::new(1);
    world.deliver("order-0", 1, 0, BASE).await;
    assert_eq!(
        world
            .runner
            .store()
            .deadlines()
            .iter()
            .map(|(_, at)| *at)
            .collect::<Vec<_>>(),
        vec![BASE + 900],
        "the window's deadline set with the state"
    );
    // Not yet due: nothing.
    let early = world.runner.fire_due(&at(BASE + 899)).await;
    assert_eq!(early.fired, 0);
    let fired = world.runner.fire_due(&at(BASE + 900)).await;
    assert_eq!(fired.fired, 1);
    let events = world.runner.store().stream_events("order-0");
    assert_eq!(events.len(), 2);
    assert_eq!(events[1].event_type, "OrderCancelled");
    assert_eq!(events[1].data["reason"], "payment not received");
    assert_eq!(
        world.state("order-0").expect("state").state,
        PaymentState::Cancelling
    );
    // Fired once: the deadline is gone.
    assert_eq!(world.runner.fire_due(&at(BASE + 2000)).await.fired, 0);
    world.produce(
        "order-0",
        "PaymentReceived",
        serde_json::json!({"amountCents": 1000}),
    );
    world.drain(BASE + 2000).await;
    let events = world.runner.store().stream_events("order-0");
    let types: Vec<&str> = events.iter().map(|e| e.event_type.as_str()).collect();
    assert_eq!(
        types,
        [
            "OrderCreated",
            "OrderCancelled",
            "PaymentReceived",
            "RefundRequested"
        ]
    );
    assert_eq!(events[3].data["amountCents"], 1000);
    assert_eq!(
        world.state("order-0").expect("state").state,
        PaymentState::Cancelled
    );
}

#[tokio::test]
async fn a_payment_that_lands_before_the_deadline_fires_wins_and_nothing_is_appended() {
    let mut world = World::new(1);
    world.deliver("order-0", 1, 0, BASE).await;
    // Paid at sequence 2, not yet delivered: the deadline's cancel at 1 is refused.
    world.produce(
        "order-0",
        "PaymentReceived",
        serde_json::json!({"amountCents": 1000}),
    );
    let report = world.runner.fire_due(&at(BASE + 900)).await;
    assert_eq!((report.fired, report.moved), (0, 1));
    assert_eq!(world.runner.store().stream_events("order-0").len(), 2);
    assert_eq!(
        world.state("order-0").expect("state").state,
        PaymentState::AwaitingPayment
    );
    world.drain(BASE + 901).await;
    assert_eq!(
        world.state("order-0").expect("state").state,
        PaymentState::Paid
    );
    // The deadline was cleared with the payment: nothing fires.
    assert_eq!(
        world.runner.fire_due(&at(BASE + 5000)).await,
        Default::default()
    );
    assert_eq!(world.runner.store().stream_events("order-0").len(), 2);
}

#[tokio::test]
async fn a_duplicate_delivery_appends_nothing_more() {
    let mut world = World::new(1);
    world.produce(
        "order-0",
        "PaymentReceived",
        serde_json::json!({"amountCents": 1000}),
    );
    world.produce(
        "order-0",
        "OrderCancelled",
        serde_json::json!({"reason": "changed mind"}),
    );
    world.drain(BASE).await;
    assert_eq!(
        world.runner.store().stream_events("order-0").len(),
        4,
        "one refund"
    );
    // Every event delivered again, in one batch and one by one.
    world.delivered.insert("order-0".to_owned(), 0);
    world.drain(BASE).await;
    for _ in 0..4 {
        world.deliver("order-0", 1, 4, BASE).await;
    }
    let events = world.runner.store().stream_events("order-0");
    assert_eq!(events.len(), 4, "still one refund");
    assert_eq!(events[3].event_type, "RefundRequested");
    assert_eq!(events[3].data["amountCents"], 1000);
}

#[tokio::test]
async fn an_update_down_to_what_was_paid_ends_it_paid_and_its_deadline_cancels_nothing() {
    let mut world = World::new(1);
    world.produce(
        "order-0",
        "PaymentReceived",
        serde_json::json!({"amountCents": 700}),
    );
    world.produce(
        "order-0",
        "OrderUpdated",
        serde_json::json!({"customerName": "A", "email": "a@example.com", "totalCents": 700}),
    );
    world.drain(BASE).await;
    assert_eq!(
        world.state("order-0").expect("state").state,
        PaymentState::Paid
    );
    assert!(
        world.runner.store().deadlines().is_empty(),
        "the deadline cleared with the update"
    );
    assert_eq!(
        world.runner.fire_due(&at(BASE + 5000)).await,
        Default::default()
    );
    let types: Vec<String> = world
        .runner
        .store()
        .stream_events("order-0")
        .into_iter()
        .map(|event| event.event_type)
        .collect();
    assert_eq!(types, ["OrderCreated", "PaymentReceived", "OrderUpdated"]);
}

#[tokio::test]
async fn an_order_with_nothing_to_pay_is_paid_at_once_and_never_cancelled() {
    let mut world = World::new(2);
    // World::new(2) creates order-1 with a total of 0.
    world.drain(BASE).await;
    let state = world.state("order-1").expect("state");
    assert_eq!((state.state, state.total_cents), (PaymentState::Paid, 0));
    let due: Vec<String> = world
        .runner
        .store()
        .deadlines()
        .into_iter()
        .map(|(key, _)| key.id().to_owned())
        .collect();
    assert_eq!(
        due,
        ["order-0"],
        "a deadline for the order with a total only"
    );
    world.runner.fire_due(&at(BASE + 5000)).await;
    world.drain(BASE + 5000).await;
    assert_eq!(
        world.runner.store().stream_events("order-1").len(),
        1,
        "nothing appended to the order with nothing to pay"
    );
    assert_eq!(
        world.state("order-1").expect("state").state,
        PaymentState::Paid
    );
}

#[tokio::test]
async fn a_payment_past_the_largest_sum_fails_alone_and_a_refund_of_the_largest_is_appended() {
    let max = i64::MAX as u64;
    let runner = Runner::new(
        shop::payments::domain(),
        MemoryStore::new(),
        RunnerConfig::default(),
    );
    let store = runner.store();
    let created =
        serde_json::json!({"customerName": "A", "email": "a@example.com", "totalCents": 1000});
    let cancel = serde_json::json!({"reason": "changed mind"});
    // order-a: paid the largest sum, then cancelled: all of it asked back.
    store.append_event("order-a", "a1", "OrderCreated", created.clone());
    store.append_event(
        "order-a",
        "a2",
        "PaymentReceived",
        serde_json::json!({"amountCents": max}),
    );
    store.append_event("order-a", "a3", "OrderCancelled", cancel.clone());
    // order-b: one cent more than the largest sum, then cancelled.
    store.append_event("order-b", "b1", "OrderCreated", created);
    store.append_event(
        "order-b",
        "b2",
        "PaymentReceived",
        serde_json::json!({"amountCents": max}),
    );
    store.append_event(
        "order-b",
        "b3",
        "PaymentReceived",
        serde_json::json!({"amountCents": 1}),
    );
    store.append_event("order-b", "b4", "OrderCancelled", cancel);
    let mut outcomes = BTreeMap::new();
    for order in ["order-a", "order-b"] {
        let records: Vec<_> = store
            .stream_events(order)
            .iter()
            .map(|event| message(&format!("m-{}", event.event_id), order, &body_of(event)))
            .collect();
        let report = runner
            .run(&batch(records), at(BASE))
            .await
            .expect("a batch");
        for message in &report.messages {
            outcomes.insert(
                message.message_id.clone(),
                (message.outcome, message.reason.clone()),
            );
        }
    }
    let outcome = |id: &str| outcomes[&format!("m-{id}")].0;
    assert_eq!(
        ["a1", "a2", "a3"].map(outcome),
        [Outcome::Applied; 3],
        "{outcomes:?}"
    );
    let events = store.stream_events("order-a");
    assert_eq!(events.len(), 4);
    assert_eq!(events[3].event_type, "RefundRequested");
    assert_eq!(events[3].data["amountCents"], max);
    // The payment that would pass the largest sum is the message that
    // fails, with nothing written; the cancel behind it waits.
    assert_eq!(
        ["b1", "b2", "b3", "b4"].map(outcome),
        [
            Outcome::Applied,
            Outcome::Applied,
            Outcome::Invalid,
            Outcome::Skipped
        ],
        "{outcomes:?}"
    );
    let (_, reason) = &outcomes["m-b3"];
    assert!(
        reason
            .as_deref()
            .is_some_and(|reason| reason.contains("shop::payments::on_payment_received")),
        "{reason:?}"
    );
    let state = runner
        .store()
        .entities()
        .into_iter()
        .find(|(key, _)| key.id() == "order-b")
        .and_then(|(_, entity)| entity.get::<Payment>().cloned())
        .expect("state");
    assert_eq!((state.sequence, state.paid_cents), (2, max));
    assert_eq!(store.stream_events("order-b").len(), 4, "nothing appended");
}
