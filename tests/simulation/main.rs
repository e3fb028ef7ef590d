//! Property simulation: the batch runner and the in-memory store under a
//! simulated SQS FIFO queue and Lambda event source mapping that batch at
//! random, redeliver concurrently, crash between the write and the
//! acknowledgement, and meet transient store failures before or after a write
//! takes effect. Producers resend events under new message ids, and send
//! some of their events out of order; gaps are parked from a drawn delivery
//! on (`PARK_AFTER_RECEIVES` 1 to 3) and drained when the gap closes; in
//! half the cases the consumer reads the event store, and a gap's events
//! are read from it (with faults too) and applied at once.
//!
//! Invariants, checked on every case:
//! - the final state equals the in-order fold of each stream;
//! - nothing stays parked once every event has arrived, and no event is
//!   taken for a conflict;
//! - no effect lands twice (sequences that increment, levels that add);
//! - no message is acknowledged before its effect is durable (applied, or
//!   parked with its event id);
//! - every entity ever written is the fold of a prefix of its stream (no
//!   stream applies an event out of order).
//!
//! `SIMULATION_CASES` sets the number of cases (default 10,000).
//!
//! Here: the scenario, the streams and their folds, and the test;
//! `sim_store` holds the store with faults, `delivery` the queue that runs
//! one case.

#[path = "../support/mod.rs"]
mod support;

mod delivery;
mod sim_store;

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use sequence_guard::producer::StoredEvent;
use sequence_guard::runner::{Invocation, Outcome, Runner, RunnerConfig};
use sequence_guard::store::DedupAddition;
use sequence_guard::store::memory::MemoryStore;
use sequence_guard::store::{
    Added, Commit, Committed, DedupKey, Inspection, Loaded, ParkedEvent, Store, StoreError,
};
use sequence_guard::{AnyEntity, EntityKey};
use serde_json::json;
use support::rng::Rng;
use support::{Item, ItemStatus, LEVEL, LEVEL_HANDLER, Tag, batch, delivered, domain, message};

use delivery::run_case;

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
    /// The level adjustment with this event id was recorded.
    Level(String),
}

/// The shape of one case, drawn by proptest.
#[derive(Debug, Clone)]
struct Scenario {
    tags: Vec<u64>,
    items: Vec<u64>,
    adjustments: Vec<(u8, i64)>,
    resend_percent: u64,
    fault_percent: u64,
    crash_percent: u64,
    concurrent_percent: u64,
    /// Chance that a producer swaps two neighbouring events of its stream.
    reorder_percent: u64,
    park_after_receives: u32,
    /// Whether the consumer reads the event store (which holds every
    /// stream's events in order): a gap's events are read from it.
    reads_store: bool,
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
        (0u64..40, 1u32..4, any::<bool>(), any::<u64>()),
    )
        .prop_map(
            |(
                tags,
                items,
                adjustments,
                resend_percent,
                fault_percent,
                crash_percent,
                concurrent_percent,
                (reorder_percent, park_after_receives, reads_store, seed),
            )| {
                Scenario {
                    tags,
                    items,
                    adjustments,
                    resend_percent,
                    fault_percent,
                    crash_percent,
                    concurrent_percent,
                    reorder_percent,
                    park_after_receives,
                    reads_store,
                    seed,
                }
            },
        )
}

fn weight(tag: usize, sequence: u64) -> u64 {
    100 * tag as u64 + sequence
}

fn amount(item: usize, sequence: u64) -> u64 {
    1000 * item as u64 + sequence
}

/// The entity each stream should hold after its first `sequence` events.
fn expected_tag(tag: usize, sequence: u64) -> AnyEntity {
    AnyEntity::new(Tag {
        sequence,
        last_event_id: format!("tag-{tag}-{sequence}"),
        label: "Lamp".into(),
        weight: weight(tag, sequence),
    })
}

fn expected_item(item: usize, sequence: u64) -> AnyEntity {
    AnyEntity::new(Item {
        sequence,
        last_event_id: format!("item-{item}-{sequence}"),
        name: "Ada".into(),
        amount: amount(item, sequence),
        status: ItemStatus::Open,
        reason: None,
    })
}

/// The producers' streams: (group, events in order).
fn streams(scenario: &Scenario) -> Vec<(String, Vec<Sent>)> {
    let mut streams = Vec::new();
    for (tag, &events) in scenario.tags.iter().enumerate() {
        let id = format!("tag-{tag}");
        let sent = (1..=events)
            .map(|sequence| {
                let (event_type, data) = if sequence == 1 {
                    ("TagCreated", json!({ "label": "Lamp", "weight": weight(tag, 1) }))
                } else {
                    ("TagWeighed", json!({ "weight": weight(tag, sequence) }))
                };
                Sent {
                    body: json!({ "eventId": format!("{id}-{sequence}"), "type": event_type, "aggregateId": id,
                                  "sequence": sequence, "data": data })
                    .to_string(),
                    effect: Effect::Entity(EntityKey::of::<Tag>(id.clone()), sequence),
                }
            })
            .collect();
        streams.push((id, sent));
    }
    for (item, &events) in scenario.items.iter().enumerate() {
        let id = format!("item-{item}");
        let sent = (1..=events)
            .map(|sequence| {
                let event_type = if sequence == 1 { "ItemCreated" } else { "ItemUpdated" };
                let data = json!({ "name": "Ada", "amount": amount(item, sequence) });
                Sent {
                    body: json!({ "eventId": format!("{id}-{sequence}"), "type": event_type, "aggregateId": id,
                                  "sequence": sequence, "data": data })
                    .to_string(),
                    effect: Effect::Entity(EntityKey::of::<Item>(id.clone()), sequence),
                }
            })
            .collect();
        streams.push((id, sent));
    }
    let mut gauges: Vec<(String, Vec<Sent>)> = (0..3)
        .map(|gauge| (format!("gauge-{gauge}"), Vec::new()))
        .collect();
    for (index, (gauge, delta)) in scenario.adjustments.iter().enumerate() {
        let event_id = format!("adjust-{index}");
        let group = &mut gauges[*gauge as usize];
        group.1.push(Sent {
            body: json!({ "eventId": event_id, "type": "LevelAdjusted", "data": { "gauge": group.0, "delta": delta } })
                .to_string(),
            effect: Effect::Level(event_id.clone()),
        });
    }
    streams.extend(gauges.into_iter().filter(|(_, sent)| !sent.is_empty()));
    streams
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
    filled: AtomicU64,
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
        filled: AtomicU64::new(0),
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
         {} concurrent redeliveries, {} events parked, {} drained, {} read from the event store, {violations}",
        totals.cases.load(Ordering::Relaxed),
        totals.messages.load(Ordering::Relaxed),
        totals.invocations.load(Ordering::Relaxed),
        totals.faults.load(Ordering::Relaxed),
        totals.crashes.load(Ordering::Relaxed),
        totals.concurrent.load(Ordering::Relaxed),
        totals.parked.load(Ordering::Relaxed),
        totals.drained.load(Ordering::Relaxed),
        totals.filled.load(Ordering::Relaxed),
    );
    if let Err(err) = result {
        panic!("{err}");
    }
    // Half the cases read the event store, and reordered events make gaps:
    // a run of any size reads some (a store behind a pointer included).
    if cases >= 100 {
        assert!(
            totals.filled.load(Ordering::Relaxed) > 0,
            "no gap was closed from the event store"
        );
    }
}
