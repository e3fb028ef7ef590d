//! One case: the simulated FIFO queue and event source mapping delivering
//! the producers' streams to the runner, then the invariants checked.

use super::sim_store::SimStore;
use super::*;

/// A message in the simulated queue.
#[derive(Debug, Clone)]
struct Queued {
    message_id: String,
    sent: Sent,
    /// Deliveries so far (`ApproximateReceiveCount` of the next is one more).
    received: u32,
}

pub(super) fn run_case(
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
    for (tag, &events) in scenario.tags.iter().enumerate() {
        expected.insert(
            EntityKey::of::<Tag>(format!("tag-{tag}")),
            (1..=events)
                .map(|s| expected_tag(tag, s))
                .collect::<Vec<_>>(),
        );
    }
    for (item, &events) in scenario.items.iter().enumerate() {
        expected.insert(
            EntityKey::of::<Item>(format!("item-{item}")),
            (1..=events)
                .map(|s| expected_item(item, s))
                .collect::<Vec<_>>(),
        );
    }
    // The event store: every sequenced stream's events, in order.
    let events = scenario.reads_store.then(|| {
        streams
            .iter()
            .map(|(name, sent)| {
                let stored = sent
                    .iter()
                    .filter_map(|sent| {
                        let body: serde_json::Value = serde_json::from_str(&sent.body).ok()?;
                        Some(StoredEvent {
                            sequence: body["sequence"].as_u64()?,
                            event_id: body["eventId"].as_str()?.to_owned(),
                            event_type: body["type"].as_str()?.to_owned(),
                            body: sent.body.clone(),
                            appended_at: 0,
                        })
                    })
                    .collect();
                (name.clone(), stored)
            })
            .collect()
    });
    let store = SimStore {
        inner: MemoryStore::new(),
        plan: Mutex::new((Rng(scenario.seed ^ 0x5EED), scenario.fault_percent, 12)),
        expected: expected.clone(),
        violations: Mutex::new(Vec::new()),
        faults: AtomicU64::new(0),
        events,
    };
    let runner = Runner::new(
        domain(),
        &store,
        RunnerConfig {
            park_after_receives: scenario.park_after_receives,
            ..RunnerConfig::default()
        },
    );

    let mut invocations = 0u64;
    let (mut parked, mut drained, mut filled) = (0u64, 0u64, 0u64);
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
            filled += report.filled_events();
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
                    Effect::Level(event_id) => store.inner.handled(event_id, LEVEL_HANDLER),
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
    for gauge in 0..3u8 {
        let sum: i64 = scenario
            .adjustments
            .iter()
            .filter(|(g, _)| *g == gauge)
            .map(|(_, delta)| delta)
            .sum();
        let any = scenario.adjustments.iter().any(|(g, _)| *g == gauge);
        let level = runtime
            .block_on(store.inner.counter(&LEVEL, &format!("gauge-{gauge}")))
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(
            level,
            any.then_some(sum),
            "gauge-{} adds each adjustment once",
            gauge
        );
    }
    totals.cases.fetch_add(1, Ordering::Relaxed);
    totals.messages.fetch_add(messages, Ordering::Relaxed);
    totals.invocations.fetch_add(invocations, Ordering::Relaxed);
    totals.parked.fetch_add(parked, Ordering::Relaxed);
    totals.drained.fetch_add(drained, Ordering::Relaxed);
    totals.filled.fetch_add(filled, Ordering::Relaxed);
    totals
        .faults
        .fetch_add(store.faults.load(Ordering::Relaxed), Ordering::Relaxed);
    Ok(())
}
