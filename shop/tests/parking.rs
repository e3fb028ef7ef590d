//! Parking, draining, conflicts and their bounds: the decision rows of the
//! contract that need the table, on the in-memory store and on DynamoDB Local.

mod support;

use std::sync::Arc;

use aws_lambda_events::event::sqs::SqsMessage;
use sequence_guard::runner::{BatchReport, GapPolicy, Invocation, Outcome, Runner, RunnerConfig};
use sequence_guard::store::memory::MemoryStore;
use sequence_guard::store::{Inspection, Store};
use sequence_guard::{AnyEntity, EntityKey};
use shop::{Order, OrderStatus};
use support::*;

fn now() -> u64 {
    sequence_guard::lambda::epoch_seconds()
}

fn at(now: u64) -> Invocation {
    Invocation {
        deadline: None,
        now,
    }
}

fn event_type(sequence: u64) -> &'static str {
    if sequence == 1 {
        "OrderCreated"
    } else {
        "OrderUpdated"
    }
}

/// Event `sequence` of `order` (event id `<order>-<sequence>`), delivered
/// for the `received`th time, as message `m<sequence>`.
fn event(order: &str, sequence: u64, received: u32) -> SqsMessage {
    let body = order_event(
        event_type(sequence),
        order,
        sequence,
        &format!("{order}-{sequence}"),
    );
    delivered(message(&format!("m{sequence}"), order, &body), received)
}

/// A second, different event for `sequence`.
fn other_event(order: &str, sequence: u64, event_id: &str, received: u32) -> SqsMessage {
    let body = order_event(event_type(sequence), order, sequence, event_id);
    delivered(message(&format!("x{sequence}"), order, &body), received)
}

async fn run<S: Store>(runner: &Runner<S>, messages: Vec<SqsMessage>) -> BatchReport {
    runner
        .run(&batch(messages), at(now()))
        .await
        .expect("message ids")
}

async fn inspect<S: Store>(store: &S, order: &str) -> Inspection {
    store
        .inspect(&EntityKey::of::<shop::Order>(order))
        .await
        .expect("inspect")
}

async fn sequence<S: Store>(store: &S, order: &str) -> Option<u64> {
    entity(store, EntityKey::of::<shop::Order>(order))
        .await
        .map(|entity| entity.sequence())
}

fn parked_sequences(inspection: &Inspection) -> Vec<u64> {
    inspection
        .parked
        .iter()
        .map(|parked| parked.sequence)
        .collect()
}

fn with(config: impl FnOnce(&mut RunnerConfig)) -> RunnerConfig {
    let mut runner = RunnerConfig::default();
    config(&mut runner);
    runner
}

/// Event 2 of `order` applied by a write that did not drain 3 and 4 (as a
/// run cut short by the deadline or an error leaves it).
async fn apply_two_without_draining<S: Store>(store: &S, order: &str, now: u64) {
    use sequence_guard::store::{Commit, Committed, Expected};

    let mut two = typed::<Order, _>(store, order).await.expect("created");
    two.sequence = 2;
    two.last_event_id = format!("{order}-2");
    let two = AnyEntity::new(two);
    let commit = Commit {
        key: EntityKey::of::<shop::Order>(order),
        expected: Expected {
            sequence: Some(1),
            parked: [3, 4].into(),
            entity: None,
            due_at: None,
        },
        entity: Some(two),
        park: vec![],
        drain: vec![],
        conflicts: vec![],
        now,
        deadline: None,
        outbox: None,
    };
    assert_eq!(
        store.commit(&commit).await.expect("commit"),
        Committed::Written
    );
}

mod suite {
    use super::*;
    use Outcome::*;

    pub async fn a_gap_fails_below_the_threshold_and_is_parked_at_it<S: Store>(store: S) {
        let runner = Runner::new(shop::domain(), store, RunnerConfig::default());
        let store = runner.store();
        assert_eq!(
            outcomes(&run(&runner, vec![event("o", 1, 1)]).await),
            [Applied]
        );
        for received in [1, 2] {
            let report = run(&runner, vec![event("o", 3, received)]).await;
            assert_eq!(outcomes(&report), [Gap], "delivery {received}");
            assert_eq!(failed_ids(&report), ["m3"]);
            assert!(inspect(store, "o").await.parked.is_empty());
        }

        let before = now();
        let report = run(&runner, vec![event("o", 3, 3)]).await;
        assert_eq!(outcomes(&report), [Parked]);
        assert!(
            failed_ids(&report).is_empty(),
            "a parked message is completed"
        );
        assert_eq!(report.messages[0].waiting_for, Some(2));
        assert_eq!(report.parking.len(), 1);
        assert_eq!(report.parking[0].parked, [3]);
        assert_eq!(report.parking[0].waiting_for, Some(2));
        let inspection = inspect(store, "o").await;
        assert_eq!(
            inspection.stored.entity.as_ref().map(AnyEntity::sequence),
            Some(1)
        );
        assert_eq!(
            inspection
                .stored
                .parking
                .sequences
                .iter()
                .copied()
                .collect::<Vec<_>>(),
            [3]
        );
        let since = inspection.stored.parking.since.expect("parkedSince");
        assert!(since >= before && since <= now());
        let parked = &inspection.parked[0];
        assert_eq!(
            (
                parked.sequence,
                parked.event_id.as_str(),
                parked.event_type.as_str()
            ),
            (3, "o-3", "OrderUpdated")
        );
        assert_eq!(parked.message_id, "m3");
        assert_eq!(Some(parked.body.as_str()), event("o", 3, 3).body.as_deref());
        assert_eq!(parked.parked_at, since);

        let report = run(&runner, vec![event("o", 2, 1)]).await;
        assert_eq!(outcomes(&report), [Applied]);
        assert_eq!(report.drained(), 1);
        assert_eq!(report.parking[0].drained[0].sequence, 3);
        assert_eq!(report.parking[0].parked_now, 0);
        assert!(report.oldest_parked_age_seconds().is_some());
        match typed::<shop::Order, _>(store, "o").await {
            Some(order) => {
                assert_eq!((order.sequence, order.total_cents), (3, 300));
                assert_eq!(order.last_event_id, "o-3");
            }
            other => panic!("{other:?}"),
        }
        let inspection = inspect(store, "o").await;
        assert!(inspection.parked.is_empty());
        assert!(inspection.stored.parking.sequences.is_empty());
        assert_eq!(inspection.stored.parking.since, None);
    }

    pub async fn updates_before_the_creation_park_on_an_item_that_is_not_an_entity<S: Store>(
        store: S,
    ) {
        let runner = Runner::new(shop::domain(), store, RunnerConfig::default());
        let store = runner.store();
        let cancel = delivered(
            message("m3", "q", &order_event("OrderCancelled", "q", 3, "q-3")),
            3,
        );
        let report = run(&runner, vec![event("q", 2, 3), cancel]).await;
        assert_eq!(outcomes(&report), [Parked, Parked]);
        assert_eq!(report.messages[0].waiting_for, Some(1));
        let key = EntityKey::of::<shop::Order>("q");
        let loaded = store
            .load(std::slice::from_ref(&key), &[])
            .await
            .expect("load");
        assert!(!loaded.entities.contains_key(&key), "no entity yet");
        assert_eq!(
            loaded.parking[&key]
                .sequences
                .iter()
                .copied()
                .collect::<Vec<_>>(),
            [2, 3]
        );

        // The creation finds no entity: it creates, and the parked events follow.
        let report = run(&runner, vec![event("q", 1, 1)]).await;
        assert_eq!(outcomes(&report), [Applied]);
        assert_eq!(report.drained(), 2);
        match typed::<shop::Order, _>(store, key.id()).await {
            Some(order) => {
                assert_eq!((order.sequence, order.status), (3, OrderStatus::Cancelled));
                assert_eq!(order.total_cents, 200);
            }
            other => panic!("{other:?}"),
        }
        assert!(inspect(store, "q").await.parked.is_empty());
    }

    pub async fn conflicts_are_recorded_once_and_overwrite_nothing<S: Store>(store: S) {
        let runner = Runner::new(shop::domain(), store, RunnerConfig::default());
        let store = runner.store();
        let report = run(&runner, vec![event("c", 1, 1), event("c", 2, 1)]).await;
        assert_eq!(outcomes(&report), [Applied, Applied]);

        // Another event for the applied sequence 2.
        let first_seen = now();
        let report = runner
            .run(
                &batch(vec![other_event("c", 2, "other-2", 1)]),
                at(first_seen),
            )
            .await
            .expect("run");
        assert_eq!(outcomes(&report), [Conflict]);
        assert!(failed_ids(&report).is_empty(), "a conflict is completed");
        assert!(
            report.messages[0]
                .reason
                .as_deref()
                .is_some_and(|reason| reason.contains("c-2") && reason.contains("other-2")),
            "{:?}",
            report.messages[0].reason
        );
        // Seen again later: still one record, first seen as before.
        let report = runner
            .run(
                &batch(vec![other_event("c", 2, "other-2", 2)]),
                at(first_seen + 100),
            )
            .await
            .expect("run");
        assert_eq!(outcomes(&report), [Conflict]);
        let inspection = inspect(store, "c").await;
        assert_eq!(inspection.conflicts.len(), 1);
        let conflict = &inspection.conflicts[0];
        assert_eq!(
            (
                conflict.sequence,
                conflict.event_id.as_str(),
                conflict.seen_at
            ),
            (2, "other-2", first_seen)
        );
        assert_eq!(
            Some(conflict.body.as_str()),
            other_event("c", 2, "other-2", 1).body.as_deref()
        );
        match inspection
            .stored
            .entity
            .as_ref()
            .and_then(|entity| entity.get::<shop::Order>())
        {
            Some(order) => {
                assert_eq!((order.sequence, order.last_event_id.as_str()), (2, "c-2"));
                assert_eq!(order.total_cents, 200);
            }
            other => panic!("{other:?}"),
        }

        // Another event for a parked sequence; the parked one stays.
        assert_eq!(
            outcomes(&run(&runner, vec![event("c", 5, 3)]).await),
            [Parked]
        );
        let report = run(&runner, vec![other_event("c", 5, "other-5", 1)]).await;
        assert_eq!(outcomes(&report), [Conflict]);
        // The parked event itself again (a producer resend): already parked.
        let report = run(&runner, vec![event("c", 5, 1)]).await;
        assert_eq!(outcomes(&report), [Duplicate]);
        assert!(failed_ids(&report).is_empty());
        let inspection = inspect(store, "c").await;
        assert_eq!(parked_sequences(&inspection), [5]);
        assert_eq!(inspection.parked[0].event_id, "c-5");
        let conflicts: Vec<(u64, &str)> = inspection
            .conflicts
            .iter()
            .map(|conflict| (conflict.sequence, conflict.event_id.as_str()))
            .collect();
        assert_eq!(conflicts, [(2, "other-2"), (5, "other-5")]);

        // Behind the last applied event only its id is known: a duplicate.
        let report = run(&runner, vec![other_event("c", 1, "other-1", 1)]).await;
        assert_eq!(outcomes(&report), [Duplicate]);
    }

    pub async fn parking_is_bounded_per_stream<S: Store>(store: S) {
        let runner = Runner::new(
            shop::domain(),
            store,
            with(|config| config.max_parked_per_entity = 2),
        );
        let store = runner.store();
        run(&runner, vec![event("b", 1, 1)]).await;
        let report = run(
            &runner,
            vec![event("b", 4, 3), event("b", 5, 3), event("b", 6, 3)],
        )
        .await;
        assert_eq!(outcomes(&report), [Parked, Parked, Gap]);
        assert_eq!(failed_ids(&report), ["m6"]);
        assert_eq!(report.parking_full(), 1);
        assert!(report.messages[2].parking_full);
        assert!(
            report.messages[2]
                .reason
                .as_deref()
                .is_some_and(|reason| reason.contains("MAX_PARKED_PER_STREAM"))
        );
        assert_eq!(parked_sequences(&inspect(store, "b").await), [4, 5]);

        let report = run(&runner, vec![event("b", 2, 1), event("b", 3, 1)]).await;
        assert_eq!(outcomes(&report), [Applied, Applied]);
        assert_eq!(report.drained(), 2);
        assert_eq!(sequence(store, "b").await, Some(5));
        let report = run(&runner, vec![event("b", 6, 4)]).await;
        assert_eq!(outcomes(&report), [Applied]);
        assert_eq!(sequence(store, "b").await, Some(6));
    }

    pub async fn the_retry_policy_never_parks<S: Store>(store: S) {
        let runner = Runner::new(
            shop::domain(),
            store,
            with(|config| config.gap_policy = GapPolicy::Retry),
        );
        let store = runner.store();
        run(&runner, vec![event("r", 1, 1)]).await;
        let report = run(&runner, vec![event("r", 3, 10)]).await;
        assert_eq!(outcomes(&report), [Gap]);
        assert_eq!(failed_ids(&report), ["m3"]);
        assert!(inspect(store, "r").await.parked.is_empty());
    }

    pub async fn a_gap_filled_in_the_same_batch_is_applied_without_parking<S: Store>(store: S) {
        let runner = Runner::new(shop::domain(), store, RunnerConfig::default());
        let store = runner.store();
        run(&runner, vec![event("s", 1, 1)]).await;
        let report = run(
            &runner,
            vec![event("s", 3, 3), event("s", 5, 3), event("s", 2, 3)],
        )
        .await;
        assert_eq!(outcomes(&report), [Applied, Parked, Applied]);
        assert!(failed_ids(&report).is_empty());
        assert_eq!(sequence(store, "s").await, Some(3));
        assert_eq!(parked_sequences(&inspect(store, "s").await), [5]);
        assert_eq!(report.parking[0].parked, [5]);
        assert!(report.parking[0].drained.is_empty());
    }

    pub async fn a_long_drain_goes_in_bounded_steps<S: Store>(store: S) {
        let runner = Runner::new(shop::domain(), store, RunnerConfig::default());
        let store = runner.store();
        run(&runner, vec![event("l", 1, 1)]).await;
        let gaps: Vec<SqsMessage> = (3..=152).map(|sequence| event("l", sequence, 3)).collect();
        let report = run(&runner, gaps).await;
        assert_eq!(report.count(Parked), 150);
        assert!(report.parking.len() >= 2, "more than one transaction");
        assert_eq!(parked_sequences(&inspect(store, "l").await).len(), 150);

        let report = run(&runner, vec![event("l", 2, 1)]).await;
        assert_eq!(outcomes(&report), [Applied]);
        assert_eq!(report.drained(), 150);
        assert!(report.parking.len() >= 2, "more than one transaction");
        let drained: Vec<u64> = report
            .parking
            .iter()
            .flat_map(|parking| parking.drained.iter().map(|parked| parked.sequence))
            .collect();
        assert_eq!(drained, (3..=152).collect::<Vec<_>>(), "in order");
        assert_eq!(sequence(store, "l").await, Some(152));
        let inspection = inspect(store, "l").await;
        assert!(inspection.parked.is_empty());
        assert!(inspection.stored.parking.sequences.is_empty());
    }

    /// Large bodies (padded with a field the consumer ignores) are parked
    /// and drained in steps bounded by bytes as well as by count: a step
    /// holds at most MAX_COMMIT_BYTES plus one body, so a transaction stays
    /// under DynamoDB's 4 MB and a drain does not hold a hundred bodies.
    pub async fn large_bodies_park_and_drain_in_steps_bounded_by_bytes<S: Store>(store: S) {
        use sequence_guard::store::{MAX_COMMIT_BYTES, MAX_STORED_BODY};

        const SIZE: usize = 250 * 1024;
        let padded = |sequence: u64| {
            let mut message = event("big", sequence, 3);
            let mut body: serde_json::Value =
                serde_json::from_str(message.body.as_deref().unwrap_or_default()).expect("json");
            body["padding"] = serde_json::json!("");
            let length = body.to_string().len();
            body["padding"] = serde_json::json!("p".repeat(SIZE - length));
            message.body = Some(body.to_string());
            assert_eq!(message.body.as_ref().map(String::len), Some(SIZE));
            message
        };
        let bound = MAX_COMMIT_BYTES + MAX_STORED_BODY;
        let runner = Runner::new(shop::domain(), store, RunnerConfig::default());
        let store = runner.store();
        run(&runner, vec![event("big", 1, 1)]).await;
        let mut commits = Vec::new();
        for sequences in [3..=12, 13..=14] {
            let report = run(&runner, sequences.map(padded).collect()).await;
            assert!(failed_ids(&report).is_empty(), "{report:?}");
            commits.extend(report.parking);
        }
        assert!(
            commits.len() >= 3,
            "ten large parks take two steps: {}",
            commits.len()
        );
        for commit in &commits {
            assert!(commit.parked.len() * SIZE <= bound, "{:?}", commit.parked);
        }

        let report = run(&runner, vec![event("big", 2, 1)]).await;
        assert_eq!(outcomes(&report), [Applied]);
        assert_eq!(report.drained(), 12);
        assert!(report.parking.len() >= 2, "more than one step");
        for commit in &report.parking {
            let bytes: usize = commit.drained.iter().map(|parked| parked.body_bytes).sum();
            assert!(bytes <= bound, "a step drained {bytes} bytes");
        }
        assert_eq!(sequence(store, "big").await, Some(14));
        assert!(inspect(store, "big").await.parked.is_empty());
    }

    /// A creation may carry a later sequence than 1: what is parked at or
    /// behind it can never be applied. It is cleared; the one at the
    /// creation's own sequence, another event, is recorded as a conflict.
    pub async fn a_creation_past_parked_events_clears_them<S: Store>(store: S) {
        let runner = Runner::new(shop::domain(), store, RunnerConfig::default());
        let store = runner.store();
        let created_at = |order: &str, sequence: u64, event_id: &str, id: &str| {
            let body = order_event("OrderCreated", order, sequence, event_id);
            message(id, order, &body)
        };
        // Parked 2 and 3, then created at 2 by another event: 2 conflicts, 3 drains.
        run(&runner, vec![event("k", 2, 3), event("k", 3, 3)]).await;
        let report = run(&runner, vec![created_at("k", 2, "k-created", "c")]).await;
        assert_eq!(outcomes(&report), [Applied]);
        assert_eq!(report.conflicts(), 1);
        assert_eq!(report.parking[0].cleared, [2]);
        assert_eq!(report.parking[0].conflicts, [2]);
        assert_eq!(report.drained(), 1);
        assert_eq!(sequence(store, "k").await, Some(3));
        let inspection = inspect(store, "k").await;
        assert!(inspection.parked.is_empty(), "{inspection:?}");
        let conflicts: Vec<(u64, &str)> = inspection
            .conflicts
            .iter()
            .map(|conflict| (conflict.sequence, conflict.event_id.as_str()))
            .collect();
        assert_eq!(conflicts, [(2, "k-2")]);
        assert_eq!(
            Some(inspection.conflicts[0].body.as_str()),
            event("k", 2, 3).body.as_deref()
        );

        // Parked 2 and 3, then created at 5: both behind it, cleared as duplicates.
        run(&runner, vec![event("m", 2, 3), event("m", 3, 3)]).await;
        let report = run(&runner, vec![created_at("m", 5, "m-created", "c")]).await;
        assert_eq!(outcomes(&report), [Applied]);
        assert_eq!(report.parking[0].cleared, [2, 3]);
        assert_eq!(report.conflicts(), 0);
        assert_eq!(sequence(store, "m").await, Some(5));
        let inspection = inspect(store, "m").await;
        assert!(inspection.parked.is_empty() && inspection.conflicts.is_empty());
        assert!(inspection.stored.parking.sequences.is_empty());

        // In one batch: 2 parks, then a creation at 2 takes its place.
        let report = run(
            &runner,
            vec![event("n", 2, 3), created_at("n", 2, "n-created", "c")],
        )
        .await;
        assert_eq!(outcomes(&report), [Conflict, Applied]);
        assert!(failed_ids(&report).is_empty());
        let inspection = inspect(store, "n").await;
        assert!(inspection.parked.is_empty());
        assert_eq!(inspection.conflicts.len(), 1);
        assert_eq!(inspection.conflicts[0].event_id, "n-2");
        // Nothing is left for a sweep.
        let swept = sequence_guard::sweep::look(&shop::domain(), store, now())
            .await
            .expect("look");
        assert_eq!(swept.entities, 0);
    }

    /// A creation past a hundred parked events clears them in more than one
    /// transaction, the conflict at its own sequence included.
    pub async fn a_creation_past_a_hundred_parked_events_clears_them_in_steps<S: Store>(store: S) {
        let runner = Runner::new(shop::domain(), store, RunnerConfig::default());
        let store = runner.store();
        let updates: Vec<SqsMessage> = (3..=100).map(|sequence| event("w", sequence, 3)).collect();
        let report = run(&runner, updates).await;
        assert_eq!(report.count(Parked), 98);
        let body = order_event("OrderCreated", "w", 100, "w-created");
        let report = run(&runner, vec![message("c", "w", &body)]).await;
        assert_eq!(outcomes(&report), [Applied]);
        assert!(report.parking.len() >= 2, "more than one transaction");
        assert_eq!(report.conflicts(), 1);
        assert_eq!(sequence(store, "w").await, Some(100));
        let inspection = inspect(store, "w").await;
        assert!(inspection.parked.is_empty());
        assert!(inspection.stored.parking.sequences.is_empty());
        assert_eq!(inspection.conflicts.len(), 1);
        assert_eq!(inspection.conflicts[0].event_id, "w-100");
    }

    /// Two writers decided on the same item: one clears a parked sequence and
    /// parks another, so the set keeps its size; the other, with a different
    /// set in mind, must lose its condition.
    pub async fn a_commit_checks_the_very_set_it_was_decided_on<S: Store>(store: S) {
        use sequence_guard::store::{Commit, Committed, Expected, ParkedEvent};

        let parked = |sequence: u64| ParkedEvent {
            sequence,
            event_id: format!("v-{sequence}"),
            event_type: "OrderUpdated".into(),
            body: "{}".into(),
            message_id: format!("m{sequence}"),
            parked_at: 1,
        };
        let key = EntityKey::of::<shop::Order>("v");
        let order = AnyEntity::new(Order {
            sequence: 5,
            last_event_id: "v-5".into(),
            customer_name: "Ada".into(),
            email: "ada@example.com".into(),
            total_cents: 5,
            status: OrderStatus::Open,
            cancel_reason: None,
            paid_cents: 0,
            refund_cents: 0,
        });
        let commit =
            |expected: &[u64], entity: Option<AnyEntity>, park: Vec<ParkedEvent>, drain| Commit {
                key: key.clone(),
                expected: Expected {
                    sequence: if expected.is_empty() && entity.is_some() {
                        None
                    } else {
                        Some(5)
                    },
                    parked: expected.iter().copied().collect(),
                    entity: None,
                    due_at: None,
                },
                entity,
                park,
                drain,
                conflicts: vec![],
                now: 1,
                deadline: None,
                outbox: None,
            };
        let first = commit(&[], Some(order), vec![parked(3), parked(8)], vec![]);
        assert_eq!(
            store.commit(&first).await.expect("commit"),
            Committed::Written
        );
        let one = commit(&[3, 8], None, vec![parked(9)], vec![3]);
        assert_eq!(
            store.commit(&one).await.expect("commit"),
            Committed::Written
        );
        let other = commit(&[3, 8], None, vec![parked(10)], vec![3]);
        match store.commit(&other).await.expect("commit") {
            Committed::LostRace { current } => {
                assert_eq!(
                    current.parking.sequences.into_iter().collect::<Vec<_>>(),
                    [8, 9]
                )
            }
            Committed::Written => panic!("written over a set it was not decided on"),
            moved @ Committed::Moved { .. } => panic!("no append in this commit: {moved:?}"),
        }
        assert_eq!(parked_sequences(&inspect(&store, "v").await), [8, 9]);
    }

    /// The index of parked entities (what the scheduled sweep reads) follows
    /// parking and draining, oldest first.
    pub async fn the_sweep_finds_every_entity_with_events_parked<S: Store>(store: S) {
        let runner = Runner::new(shop::domain(), store, RunnerConfig::default());
        let sweep = |now| sequence_guard::sweep::sweep(&runner, at(now));
        assert_eq!(sweep(now()).await.expect("sweep").entities, 0);
        let first = now();
        run(&runner, vec![event("i1", 1, 1)]).await;
        let parked = batch(vec![event("i1", 3, 3), event("i1", 4, 3)]);
        runner.run(&parked, at(first)).await.expect("run");
        let later = batch(vec![event("i2", 2, 3)]);
        runner.run(&later, at(first + 60)).await.expect("run");

        let report = sweep(first + 100).await.expect("sweep");
        assert_eq!(report.entities, 2);
        assert_eq!(report.oldest_parked_age_seconds, Some(100));
        let longest: Vec<(EntityKey, u64, usize, u64)> = report
            .longest
            .iter()
            .map(|stream| {
                (
                    stream.key.clone(),
                    stream.parked_for_seconds,
                    stream.parked,
                    stream.waiting_for,
                )
            })
            .collect();
        assert_eq!(
            longest,
            [
                (EntityKey::of::<shop::Order>("i1"), 100, 2, 2),
                (EntityKey::of::<shop::Order>("i2"), 40, 1, 1),
            ]
        );

        // Drained: out of the index.
        run(&runner, vec![event("i1", 2, 1)]).await;
        let report = sweep(first + 200).await.expect("sweep");
        assert_eq!(report.entities, 1);
        assert_eq!(report.longest[0].key, EntityKey::of::<shop::Order>("i2"));
        assert_eq!(report.oldest_parked_age_seconds, Some(140));
        run(&runner, vec![event("i2", 1, 1)]).await;
        let report = sweep(first + 300).await.expect("sweep");
        assert_eq!(
            (report.entities, report.oldest_parked_age_seconds),
            (0, None)
        );
    }

    /// The longest id the contract allows (256 characters of four bytes
    /// each) parks, is found by the sweep and drains: its entry in the
    /// index of parked entities fits DynamoDB's 1,024-byte sort key.
    pub async fn the_longest_ids_park_and_are_swept<S: Store>(store: S) {
        let runner = Runner::new(shop::domain(), store, RunnerConfig::default());
        let store = runner.store();
        let long = "😀".repeat(256);
        let event =
            |sequence, received| other_event(&long, sequence, &format!("l-{sequence}"), received);
        run(&runner, vec![event(1, 1)]).await;
        let report = run(&runner, vec![event(3, 3), event(4, 3)]).await;
        assert_eq!(outcomes(&report), [Outcome::Parked, Outcome::Parked]);
        let swept = sequence_guard::sweep::sweep(&runner, at(now()))
            .await
            .expect("sweep");
        assert_eq!(swept.entities, 1);
        assert_eq!(
            swept.longest[0].key,
            EntityKey::of::<shop::Order>(long.clone())
        );
        let report = run(&runner, vec![event(2, 1)]).await;
        assert_eq!(outcomes(&report), [Outcome::Applied]);
        assert_eq!(report.drained(), 2);
        assert_eq!(sequence(store, &long).await, Some(4));
        let swept = sequence_guard::sweep::sweep(&runner, at(now()))
            .await
            .expect("sweep");
        assert_eq!(swept.entities, 0, "out of the index once drained");
    }

    /// A drain cut short (the deadline, an error) leaves the entity's next
    /// sequence parked; nothing in the stream may come to finish it, so the
    /// sweep drains it.
    pub async fn the_sweep_finishes_a_drain_cut_short<S: Store>(store: S) {
        let runner = Runner::new(shop::domain(), store, RunnerConfig::default());
        let store = runner.store();
        run(&runner, vec![event("d", 1, 1)]).await;
        run(&runner, vec![event("d", 3, 3), event("d", 4, 3)]).await;
        // Event 2 applied by a write that did not drain (as a cut-short run leaves it).
        apply_two_without_draining(store, "d", now()).await;
        let seen = sequence_guard::sweep::look(&shop::domain(), store, now())
            .await
            .expect("look");
        assert!(seen.longest[0].drainable, "{seen:?}");

        let report = sequence_guard::sweep::sweep(&runner, at(now()))
            .await
            .expect("sweep");
        let drained: Vec<u64> = report
            .drained
            .iter()
            .flat_map(|parking| parking.drained.iter().map(|parked| parked.sequence))
            .collect();
        assert_eq!(drained, [3, 4]);
        assert_eq!(
            (report.entities, report.oldest_parked_age_seconds),
            (0, None)
        );
        assert_eq!(sequence(store, "d").await, Some(4));
        assert!(inspect(store, "d").await.parked.is_empty());
    }

    /// The sweep pages through the whole index: a drain cut short behind
    /// more than LOGGED entities that have waited longer (streams whose
    /// missing event was lost) is still finished, while only the LOGGED
    /// longest waiting are reported one by one. A sweep out of time stops
    /// without an error and says so.
    pub async fn the_sweep_drains_behind_a_hundred_older_parked_entities<S: Store>(store: S) {
        use sequence_guard::sweep::{LOGGED, PAGE};

        let runner = Runner::new(shop::domain(), store, RunnerConfig::default());
        let store = runner.store();
        let first = now();
        let older = PAGE + 20;
        let orders: Vec<String> = (0..older).map(|n| format!("old-{n:03}")).collect();
        for chunk in orders.chunks(10) {
            run(
                &runner,
                chunk.iter().map(|order| event(order, 1, 1)).collect(),
            )
            .await;
            let gaps = batch(chunk.iter().map(|order| event(order, 3, 3)).collect());
            runner.run(&gaps, at(first)).await.expect("run");
        }
        // "zz-cut" parks 3 and 4 later, then 2 is applied by a write that did
        // not drain (as a run cut short by the deadline leaves it).
        run(&runner, vec![event("zz-cut", 1, 1)]).await;
        let gaps = batch(vec![event("zz-cut", 3, 3), event("zz-cut", 4, 3)]);
        runner.run(&gaps, at(first + 60)).await.expect("run");
        apply_two_without_draining(store, "zz-cut", first + 60).await;

        // Out of time: nothing read, no error, and said.
        let late = Invocation {
            deadline: Some(std::time::Instant::now()),
            now: first + 100,
        };
        let report = sequence_guard::sweep::sweep(&runner, late)
            .await
            .expect("sweep");
        assert!(!report.complete);
        assert_eq!(sequence(store, "zz-cut").await, Some(2));

        let report = sequence_guard::sweep::sweep(&runner, at(first + 100))
            .await
            .expect("sweep");
        let drained: Vec<u64> = report
            .drained
            .iter()
            .flat_map(|parking| parking.drained.iter().map(|parked| parked.sequence))
            .collect();
        assert_eq!(
            drained,
            [3, 4],
            "the drain behind the older entities is finished"
        );
        assert_eq!(sequence(store, "zz-cut").await, Some(4));
        assert!(report.complete);
        assert_eq!(report.entities, older, "every waiting entity counted");
        assert_eq!(report.oldest_parked_age_seconds, Some(100));
        assert_eq!(report.longest.len(), LOGGED, "only the longest reported");
        assert!(
            report
                .longest
                .iter()
                .all(|stream| stream.parked_for_seconds == 100)
        );
        assert_eq!(
            report.longest[0].key,
            EntityKey::of::<shop::Order>("old-000")
        );

        let report = sequence_guard::sweep::look(&shop::domain(), store, first + 100)
            .await
            .expect("look");
        assert_eq!((report.entities, report.drained.len()), (older, 0));
    }

    /// One invocation parks 3 while another applies 2: whichever writes
    /// second loses its condition and decides again, so 3 is never stranded.
    pub async fn a_park_racing_the_missing_event_never_strands_it<S: Store + Clone>(store: S) {
        let first = Runner::new(shop::domain(), store.clone(), RunnerConfig::default());
        let second = Runner::new(shop::domain(), store.clone(), RunnerConfig::default());
        for round in 0..10 {
            let order = format!("race-{round}");
            run(&first, vec![event(&order, 1, 1)]).await;
            let (a, b) = tokio::join!(
                run(&first, vec![event(&order, 3, 3)]),
                run(&second, vec![event(&order, 2, 1)]),
            );
            assert!(
                failed_ids(&a).is_empty() && failed_ids(&b).is_empty(),
                "{a:?} {b:?}"
            );
            assert_eq!(sequence(&store, &order).await, Some(3), "round {round}");
            let inspection = inspect(&store, &order).await;
            assert!(
                inspection.parked.is_empty(),
                "round {round}: {inspection:?}"
            );
            assert!(inspection.stored.parking.sequences.is_empty());
        }
    }
}

macro_rules! parking_suite {
    ($module:ident, $store:expr) => {
        mod $module {
            use super::*;

            #[tokio::test]
            async fn a_gap_fails_below_the_threshold_and_is_parked_at_it() {
                suite::a_gap_fails_below_the_threshold_and_is_parked_at_it($store).await
            }
            #[tokio::test]
            async fn updates_before_the_creation_park_on_an_item_that_is_not_an_entity() {
                suite::updates_before_the_creation_park_on_an_item_that_is_not_an_entity($store)
                    .await
            }
            #[tokio::test]
            async fn conflicts_are_recorded_once_and_overwrite_nothing() {
                suite::conflicts_are_recorded_once_and_overwrite_nothing($store).await
            }
            #[tokio::test]
            async fn parking_is_bounded_per_stream() {
                suite::parking_is_bounded_per_stream($store).await
            }
            #[tokio::test]
            async fn the_retry_policy_never_parks() {
                suite::the_retry_policy_never_parks($store).await
            }
            #[tokio::test]
            async fn a_gap_filled_in_the_same_batch_is_applied_without_parking() {
                suite::a_gap_filled_in_the_same_batch_is_applied_without_parking($store).await
            }
            #[tokio::test]
            async fn a_long_drain_goes_in_bounded_steps() {
                suite::a_long_drain_goes_in_bounded_steps($store).await
            }
            #[tokio::test]
            async fn large_bodies_park_and_drain_in_steps_bounded_by_bytes() {
                suite::large_bodies_park_and_drain_in_steps_bounded_by_bytes($store).await
            }
            #[tokio::test]
            async fn a_creation_past_parked_events_clears_them() {
                suite::a_creation_past_parked_events_clears_them($store).await
            }
            #[tokio::test]
            async fn a_creation_past_a_hundred_parked_events_clears_them_in_steps() {
                suite::a_creation_past_a_hundred_parked_events_clears_them_in_steps($store).await
            }
            #[tokio::test]
            async fn a_commit_checks_the_very_set_it_was_decided_on() {
                suite::a_commit_checks_the_very_set_it_was_decided_on($store).await
            }
            #[tokio::test]
            async fn the_sweep_finds_every_entity_with_events_parked() {
                suite::the_sweep_finds_every_entity_with_events_parked($store).await
            }
            #[tokio::test]
            async fn the_longest_ids_park_and_are_swept() {
                suite::the_longest_ids_park_and_are_swept($store).await;
            }

            #[tokio::test]
            async fn the_sweep_finishes_a_drain_cut_short() {
                suite::the_sweep_finishes_a_drain_cut_short($store).await
            }
            #[tokio::test]
            async fn the_sweep_drains_behind_a_hundred_older_parked_entities() {
                suite::the_sweep_drains_behind_a_hundred_older_parked_entities($store).await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_park_racing_the_missing_event_never_strands_it() {
                suite::a_park_racing_the_missing_event_never_strands_it($store).await
            }
        }
    };
}

parking_suite!(memory, Arc::new(MemoryStore::new()));
parking_suite!(dynamodb, fresh_table().await);

/// A parked event whose item was deleted or damaged by hand cannot be
/// drained: it stays listed, the entity stops before it, and the event
/// itself, sent again, is applied and clears the slot.
#[tokio::test]
async fn a_parked_event_lost_from_the_table_is_healed_by_its_resend() {
    use aws_sdk_dynamodb::types::AttributeValue;

    let store = fresh_table().await;
    let runner = Runner::new(shop::domain(), store.clone(), RunnerConfig::default());
    run(&runner, vec![event("h", 1, 1)]).await;
    let report = run(&runner, vec![event("h", 3, 3), event("h", 4, 3)]).await;
    assert_eq!(outcomes(&report), [Outcome::Parked, Outcome::Parked]);
    let pending = |sequence: u64| {
        (
            AttributeValue::S("ORDER#h".into()),
            AttributeValue::S(format!("PENDING#{sequence:020}")),
        )
    };
    // Event 3's item is deleted, event 4's body damaged.
    let (pk, sk) = pending(3);
    store
        .client()
        .delete_item()
        .table_name(store.table())
        .key("pk", pk)
        .key("sk", sk)
        .send()
        .await
        .expect("DeleteItem");
    let (pk, sk) = pending(4);
    store
        .client()
        .update_item()
        .table_name(store.table())
        .key("pk", pk)
        .key("sk", sk)
        .update_expression("SET body = :garbage")
        .expression_attribute_values(":garbage", AttributeValue::S("{not json".into()))
        .send()
        .await
        .expect("UpdateItem");

    let report = run(&runner, vec![event("h", 2, 1)]).await;
    assert_eq!(outcomes(&report), [Outcome::Applied]);
    assert_eq!(
        sequence(&store, "h").await,
        Some(2),
        "stops before the lost event"
    );
    assert_eq!(report.drained(), 0);

    let report = run(&runner, vec![event("h", 3, 1), event("h", 4, 1)]).await;
    assert_eq!(outcomes(&report), [Outcome::Applied, Outcome::Applied]);
    assert_eq!(sequence(&store, "h").await, Some(4));
    let inspection = inspect(&store, "h").await;
    assert!(inspection.parked.is_empty(), "{inspection:?}");
    assert!(inspection.stored.parking.sequences.is_empty());
}
