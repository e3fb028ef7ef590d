//! Property simulation: the batch runner and the in-memory store under a
//! simulated SQS FIFO queue and Lambda event source mapping that batch at
//! random, redeliver concurrently, crash between the write and the
//! acknowledgement, and meet transient store failures before or after a write
//! takes effect. Producers resend events under new message ids, and send
//! some of their events out of order; gaps are parked from a drawn delivery
//! on (`PARK_AFTER_RECEIVES` 1 to 3) and drained when the gap closes.
//!
//! Invariants, checked on every case:
//! - the final state equals the in-order fold of each stream;
//! - nothing stays parked once every event has arrived, and no event is
//!   taken for a conflict;
//! - no effect lands twice (sequences that increment, stock that adds);
//! - no message is acknowledged before its effect is durable (applied, or
//!   parked with its event id);
//! - every entity ever written is the fold of a prefix of its stream (no
//!   stream applies an event out of order).
//!
//! `SIMULATION_CASES` sets the number of cases (default 10,000).

mod support;

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use sequence_guard::runner::{Invocation, Outcome, Runner, RunnerConfig};
use sequence_guard::store::Addition;
use sequence_guard::store::memory::MemoryStore;
use sequence_guard::store::{
    Added, Commit, Committed, DedupKey, Inspection, Loaded, ParkedEvent, Store, StoreError,
};
use sequence_guard::{AnyEntity, EntityKey};
use serde_json::json;
use shop::stock::STOCK_HANDLER;
use shop::{Order, OrderStatus, Product};
use support::rng::Rng;
use support::{batch, delivered, message};

/// One event a producer sends: its body, and how to check its effect.
#[derive(Debug, Clone)]
struct Sent {
    body: String,
    effect: Effect,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Effect {
    /// The entity reached this sequence.
    Entity(EntityKey, u64),
    /// The stock adjustment with this event id was recorded.
    Stock(String),
}

/// The shape of one case, drawn by proptest.
#[derive(Debug, Clone)]
struct Scenario {
    products: Vec<u64>,
    orders: Vec<u64>,
    adjustments: Vec<(u8, i64)>,
    resend_percent: u64,
    fault_percent: u64,
    crash_percent: u64,
    concurrent_percent: u64,
    /// Chance that a producer swaps two neighbouring events of its stream.
    reorder_percent: u64,
    park_after_receives: u32,
    seed: u64,
}

fn scenario() -> impl Strategy<Value = Scenario> {
    (
        prop::collection::vec(1u64..8, 0..4),
        prop::collection::vec(1u64..6, 0..3),
        prop::collection::vec((0u8..3, -5i64..10), 0..6),
        0u64..30,
        0u64..25,
        0u64..20,
        0u64..25,
        (0u64..40, 1u32..4, any::<u64>()),
    )
        .prop_map(
            |(
                products,
                orders,
                adjustments,
                resend_percent,
                fault_percent,
                crash_percent,
                concurrent_percent,
                (reorder_percent, park_after_receives, seed),
            )| {
                Scenario {
                    products,
                    orders,
                    adjustments,
                    resend_percent,
                    fault_percent,
                    crash_percent,
                    concurrent_percent,
                    reorder_percent,
                    park_after_receives,
                    seed,
                }
            },
        )
}

fn price(product: usize, sequence: u64) -> u64 {
    100 * product as u64 + sequence
}

fn total(order: usize, sequence: u64) -> u64 {
    1000 * order as u64 + sequence
}

/// The entity each stream should hold after its first `sequence` events.
fn expected_product(product: usize, sequence: u64) -> AnyEntity {
    AnyEntity::new(Product {
        sequence,
        last_event_id: format!("product-{product}-{sequence}"),
        name: "Lamp".into(),
        price_cents: price(product, sequence),
    })
}

fn expected_order(order: usize, sequence: u64) -> AnyEntity {
    AnyEntity::new(Order {
        sequence,
        last_event_id: format!("order-{order}-{sequence}"),
        customer_name: "Ada".into(),
        email: "ada@example.com".into(),
        total_cents: total(order, sequence),
        status: OrderStatus::Open,
        cancel_reason: None,
        paid_cents: 0,
        refund_cents: 0,
    })
}

/// The producers' streams: (group, events in order).
fn streams(scenario: &Scenario) -> Vec<(String, Vec<Sent>)> {
    let mut streams = Vec::new();
    for (product, &events) in scenario.products.iter().enumerate() {
        let id = format!("product-{product}");
        let sent = (1..=events)
            .map(|sequence| {
                let (event_type, data) = if sequence == 1 {
                    ("ProductCreated", json!({ "name": "Lamp", "priceCents": price(product, 1) }))
                } else {
                    ("ProductPriceChanged", json!({ "priceCents": price(product, sequence) }))
                };
                Sent {
                    body: json!({ "eventId": format!("{id}-{sequence}"), "type": event_type, "aggregateId": id,
                                  "sequence": sequence, "data": data })
                    .to_string(),
                    effect: Effect::Entity(EntityKey::of::<shop::Product>(id.clone()), sequence),
                }
            })
            .collect();
        streams.push((id, sent));
    }
    for (order, &events) in scenario.orders.iter().enumerate() {
        let id = format!("order-{order}");
        let sent = (1..=events)
            .map(|sequence| {
                let event_type = if sequence == 1 { "OrderCreated" } else { "OrderUpdated" };
                let data = json!({ "customerName": "Ada", "email": "ada@example.com", "totalCents": total(order, sequence) });
                Sent {
                    body: json!({ "eventId": format!("{id}-{sequence}"), "type": event_type, "aggregateId": id,
                                  "sequence": sequence, "data": data })
                    .to_string(),
                    effect: Effect::Entity(EntityKey::of::<shop::Order>(id.clone()), sequence),
                }
            })
            .collect();
        streams.push((id, sent));
    }
    let mut skus: Vec<(String, Vec<Sent>)> = (0..3)
        .map(|sku| (format!("SKU-{sku}"), Vec::new()))
        .collect();
    for (index, (sku, delta)) in scenario.adjustments.iter().enumerate() {
        let event_id = format!("adjust-{index}");
        let group = &mut skus[*sku as usize];
        group.1.push(Sent {
            body: json!({ "eventId": event_id, "type": "InventoryAdjusted", "data": { "sku": group.0, "delta": delta } })
                .to_string(),
            effect: Effect::Stock(event_id.clone()),
        });
    }
    streams.extend(skus.into_iter().filter(|(_, sent)| !sent.is_empty()));
    streams
}

/// Faults injected around the in-memory store, and the prefix check.
struct SimStore {
    inner: MemoryStore,
    plan: Mutex<(Rng, u64, u32)>, // (rng, fault percent, faults left)
    expected: HashMap<EntityKey, Vec<AnyEntity>>,
    violations: Mutex<Vec<String>>,
    faults: AtomicU64,
}

#[derive(Clone, Copy, PartialEq)]
enum Fault {
    None,
    Before,
    After,
}

impl SimStore {
    fn fault(&self) -> Fault {
        let mut plan = self.plan.lock().expect("plan");
        let (rng, percent, left) = &mut *plan;
        if *left == 0 || !rng.chance(*percent) {
            return Fault::None;
        }
        *left -= 1;
        self.faults.fetch_add(1, Ordering::Relaxed);
        if rng.chance(50) {
            Fault::Before
        } else {
            Fault::After
        }
    }

    fn injected(operation: &'static str) -> StoreError {
        StoreError::Request {
            operation,
            message: "injected transient fault".into(),
        }
    }
}

impl Store for SimStore {
    async fn load(&self, keys: &[EntityKey], dedup: &[DedupKey]) -> Result<Loaded, StoreError> {
        if self.fault() != Fault::None {
            return Err(Self::injected("BatchGetItem"));
        }
        self.inner.load(keys, dedup).await
    }

    async fn commit(&self, commit: &Commit) -> Result<Committed, StoreError> {
        let fault = self.fault();
        if fault == Fault::Before {
            return Err(Self::injected("UpdateItem"));
        }
        let committed = self.inner.commit(commit).await?;
        if let (Committed::Written, Some(entity)) = (&committed, &commit.entity) {
            let prefix = self.expected.get(&commit.key).and_then(|states| {
                states.get(usize::try_from(entity.sequence()).ok()?.checked_sub(1)?)
            });
            if prefix != Some(entity) {
                self.violations.lock().expect("violations").push(format!(
                    "written entity is not the fold of a prefix of its stream: {entity:?}"
                ));
            }
        }
        if fault == Fault::After {
            return Err(Self::injected("UpdateItem"));
        }
        Ok(committed)
    }

    async fn parked(
        &self,
        key: &EntityKey,
        sequences: &[u64],
    ) -> Result<Vec<ParkedEvent>, StoreError> {
        if self.fault() != Fault::None {
            return Err(Self::injected("BatchGetItem"));
        }
        self.inner.parked(key, sequences).await
    }

    async fn inspect(&self, key: &EntityKey) -> Result<Inspection, StoreError> {
        self.inner.inspect(key).await
    }

    async fn parked_entities(
        &self,
        after: Option<&str>,
        limit: usize,
    ) -> Result<sequence_guard::store::ParkedPage, StoreError> {
        self.inner.parked_entities(after, limit).await
    }

    async fn add(&self, adjustments: &[Addition]) -> Result<Added, StoreError> {
        let fault = self.fault();
        if fault == Fault::Before {
            return Err(Self::injected("TransactWriteItems"));
        }
        let adjusted = self.inner.add(adjustments).await?;
        if fault == Fault::After {
            return Err(Self::injected("TransactWriteItems"));
        }
        Ok(adjusted)
    }

    async fn counter(
        &self,
        counter: &'static sequence_guard::Counter,
        id: &str,
    ) -> Result<Option<i64>, StoreError> {
        self.inner.counter(counter, id).await
    }
}

/// A message in the simulated queue.
#[derive(Debug, Clone)]
struct Queued {
    message_id: String,
    sent: Sent,
    /// Deliveries so far (`ApproximateReceiveCount` of the next is one more).
    received: u32,
}

struct Totals {
    cases: AtomicU64,
    messages: AtomicU64,
    invocations: AtomicU64,
    faults: AtomicU64,
    crashes: AtomicU64,
    concurrent: AtomicU64,
    parked: AtomicU64,
    drained: AtomicU64,
}

fn run_case(
    scenario: &Scenario,
    runtime: &tokio::runtime::Runtime,
    totals: &Totals,
) -> Result<(), TestCaseError> {
    let mut rng = Rng(scenario.seed);
    let streams = streams(scenario);

    // The queue: one group per stream, with producer resends appended later in the group.
    let mut groups: Vec<VecDeque<Queued>> = Vec::new();
    let mut next_id = 0u64;
    let mut new_id = || {
        next_id += 1;
        format!("m{next_id}")
    };
    for (_, sent) in &streams {
        // The producer's send order: neighbours swapped at random.
        let mut order: Vec<&Sent> = sent.iter().collect();
        for i in 1..order.len() {
            if rng.chance(scenario.reorder_percent) {
                order.swap(i - 1, i);
            }
        }
        let mut group: VecDeque<Queued> = order
            .into_iter()
            .map(|s| Queued {
                message_id: new_id(),
                sent: s.clone(),
                received: 0,
            })
            .collect();
        for s in sent {
            if rng.chance(scenario.resend_percent) {
                group.push_back(Queued {
                    message_id: new_id(),
                    sent: s.clone(),
                    received: 0,
                });
            }
        }
        groups.push(group);
    }
    let group_names: Vec<String> = streams.iter().map(|(name, _)| name.clone()).collect();
    let messages: u64 = groups.iter().map(|g| g.len() as u64).sum();

    let mut expected = HashMap::new();
    for (product, &events) in scenario.products.iter().enumerate() {
        expected.insert(
            EntityKey::of::<shop::Product>(format!("product-{product}")),
            (1..=events)
                .map(|s| expected_product(product, s))
                .collect::<Vec<_>>(),
        );
    }
    for (order, &events) in scenario.orders.iter().enumerate() {
        expected.insert(
            EntityKey::of::<shop::Order>(format!("order-{order}")),
            (1..=events)
                .map(|s| expected_order(order, s))
                .collect::<Vec<_>>(),
        );
    }
    let store = SimStore {
        inner: MemoryStore::new(),
        plan: Mutex::new((Rng(scenario.seed ^ 0x5EED), scenario.fault_percent, 12)),
        expected: expected.clone(),
        violations: Mutex::new(Vec::new()),
        faults: AtomicU64::new(0),
    };
    let runner = Runner::new(
        shop::domain(),
        &store,
        RunnerConfig {
            park_after_receives: scenario.park_after_receives,
            ..RunnerConfig::default()
        },
    );

    let mut invocations = 0u64;
    let (mut parked, mut drained) = (0u64, 0u64);
    while groups.iter().any(|group| !group.is_empty()) {
        invocations += 1;
        prop_assert!(invocations < 1000, "no convergence after 1000 invocations");
        // A batch: up to 10 messages, heads of groups in a random order, several per group in order.
        let limit = 1 + rng.below(10) as usize;
        let mut order: Vec<usize> = (0..groups.len())
            .filter(|&g| !groups[g].is_empty())
            .collect();
        for i in (1..order.len()).rev() {
            order.swap(i, rng.below(i as u64 + 1) as usize);
        }
        let mut picked: Vec<(usize, Queued)> = Vec::new();
        for g in order {
            let take = 1 + rng.below(4) as usize;
            for queued in groups[g].iter_mut().take(take) {
                if picked.len() < limit {
                    queued.received += 1;
                    picked.push((g, queued.clone()));
                }
            }
        }
        let event_of = |picked: &[(usize, Queued)]| {
            batch(
                picked
                    .iter()
                    .map(|(g, q)| {
                        delivered(
                            message(&q.message_id, &group_names[*g], &q.sent.body),
                            q.received,
                        )
                    })
                    .collect(),
            )
        };
        let first = event_of(&picked);
        let invocation = Invocation {
            deadline: None,
            now: 1_700_000_000,
        };

        // Sometimes the visibility timeout expires mid-run: a second invocation gets a
        // prefix of the same messages and runs concurrently.
        let concurrent = rng.chance(scenario.concurrent_percent);
        let reports = if concurrent {
            totals.concurrent.fetch_add(1, Ordering::Relaxed);
            let again = event_of(&picked[..1 + rng.below(picked.len() as u64) as usize]);
            let (a, b) = runtime.block_on(async {
                futures::join!(
                    runner.run(&first, invocation),
                    runner.run(&again, invocation)
                )
            });
            vec![a, b]
        } else {
            vec![runtime.block_on(runner.run(&first, invocation))]
        };

        let crashed = rng.chance(scenario.crash_percent);
        for report in reports {
            let report = report.map_err(|err| TestCaseError::fail(err.to_string()))?;
            parked += report.count(Outcome::Parked) as u64;
            drained += report.drained() as u64;
            prop_assert_eq!(
                report.count(Outcome::Conflict),
                0,
                "no event conflicts here"
            );
            for message in &report.messages {
                if message.outcome.is_failure() {
                    continue;
                }
                // Acknowledged: its effect must be durable now.
                let queued = picked
                    .iter()
                    .find(|(_, q)| q.message_id == message.message_id)
                    .map(|(_, q)| q.clone())
                    .ok_or_else(|| TestCaseError::fail("acknowledged an unknown message"))?;
                let durable = match &queued.sent.effect {
                    Effect::Entity(key, sequence) => {
                        let inspection = runtime
                            .block_on(store.inner.inspect(key))
                            .map_err(|err| TestCaseError::fail(err.to_string()))?;
                        let applied = inspection
                            .stored
                            .entity
                            .as_ref()
                            .is_some_and(|entity| entity.sequence() >= *sequence);
                        let id = key.id();
                        let event_id = format!("{id}-{sequence}");
                        let parked = inspection.parked.iter().any(|parked| {
                            parked.sequence == *sequence && parked.event_id == event_id
                        });
                        applied || parked
                    }
                    Effect::Stock(event_id) => store.inner.handled(event_id, STOCK_HANDLER),
                };
                prop_assert!(
                    durable,
                    "acknowledged before its effect was durable: {queued:?}"
                );
                if crashed {
                    continue; // the invocation died before answering: nothing is deleted
                }
                for group in groups.iter_mut() {
                    group.retain(|q| q.message_id != message.message_id);
                }
            }
        }
        if crashed {
            totals.crashes.fetch_add(1, Ordering::Relaxed);
        }
    }

    let violations = store.violations.lock().expect("violations").clone();
    prop_assert!(violations.is_empty(), "{violations:?}");
    // The final state is the in-order fold of every stream.
    for (key, states) in &expected {
        let loaded = runtime
            .block_on(store.inner.load(std::slice::from_ref(key), &[]))
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        let stored = loaded
            .entities
            .get(key)
            .and_then(|e| e.as_ref().ok())
            .cloned();
        prop_assert_eq!(stored.as_ref(), states.last(), "{:?}", key);
        let inspection = runtime
            .block_on(store.inner.inspect(key))
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert!(
            inspection.parked.is_empty() && inspection.stored.parking.sequences.is_empty(),
            "{:?}: still parked: {:?}",
            key,
            inspection
        );
    }
    for sku in 0..3u8 {
        let sum: i64 = scenario
            .adjustments
            .iter()
            .filter(|(s, _)| *s == sku)
            .map(|(_, delta)| delta)
            .sum();
        let any = scenario.adjustments.iter().any(|(s, _)| *s == sku);
        let on_hand = runtime
            .block_on(store.inner.counter(&shop::STOCK, &format!("SKU-{sku}")))
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(
            on_hand,
            any.then_some(sum),
            "SKU-{} adds each adjustment once",
            sku
        );
    }
    totals.cases.fetch_add(1, Ordering::Relaxed);
    totals.messages.fetch_add(messages, Ordering::Relaxed);
    totals.invocations.fetch_add(invocations, Ordering::Relaxed);
    totals.parked.fetch_add(parked, Ordering::Relaxed);
    totals.drained.fetch_add(drained, Ordering::Relaxed);
    totals
        .faults
        .fetch_add(store.faults.load(Ordering::Relaxed), Ordering::Relaxed);
    Ok(())
}

#[test]
fn delivery_chaos_never_loses_or_repeats_an_effect() {
    let cases: u32 = std::env::var("SIMULATION_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    let totals = Totals {
        cases: AtomicU64::new(0),
        messages: AtomicU64::new(0),
        invocations: AtomicU64::new(0),
        faults: AtomicU64::new(0),
        crashes: AtomicU64::new(0),
        concurrent: AtomicU64::new(0),
        parked: AtomicU64::new(0),
        drained: AtomicU64::new(0),
    };
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    let result = runner.run(&scenario(), |scenario| {
        run_case(&scenario, &runtime, &totals)
    });
    let violations = if result.is_ok() {
        "0 violations"
    } else {
        "a violation (below)"
    };
    eprintln!(
        "simulation: {} cases, {} messages, {} invocations, {} store faults injected, {} crashes before the answer, \
         {} concurrent redeliveries, {} events parked, {} drained, {violations}",
        totals.cases.load(Ordering::Relaxed),
        totals.messages.load(Ordering::Relaxed),
        totals.invocations.load(Ordering::Relaxed),
        totals.faults.load(Ordering::Relaxed),
        totals.crashes.load(Ordering::Relaxed),
        totals.concurrent.load(Ordering::Relaxed),
        totals.parked.load(Ordering::Relaxed),
        totals.drained.load(Ordering::Relaxed),
    );
    if let Err(err) = result {
        panic!("{err}");
    }
}
