//! Parking, draining, conflicts and their bounds: the decision rows of the
//! contract that need the table, on the in-memory store and on DynamoDB Local.
//!
//! Here: the helpers the topics share, and the suite run on each store.

#[path = "../support/mod.rs"]
mod support;

mod conflicts;
mod drains;
mod gaps;
mod lost_items;
mod races;
mod sweep;

use std::sync::Arc;

use aws_lambda_events::event::sqs::SqsMessage;
use sequence_guard::runner::{BatchReport, GapPolicy, Invocation, Outcome, Runner, RunnerConfig};
use sequence_guard::store::memory::MemoryStore;
use sequence_guard::store::{Inspection, Store};
use sequence_guard::{AnyEntity, EntityKey};
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
        "ItemCreated"
    } else {
        "ItemUpdated"
    }
}

/// Event `sequence` of `item` (event id `<item>-<sequence>`), delivered
/// for the `received`th time, as message `m<sequence>`.
fn event(item: &str, sequence: u64, received: u32) -> SqsMessage {
    let body = item_event(
        event_type(sequence),
        item,
        sequence,
        &format!("{item}-{sequence}"),
    );
    delivered(message(&format!("m{sequence}"), item, &body), received)
}

/// A second, different event for `sequence`.
fn other_event(item: &str, sequence: u64, event_id: &str, received: u32) -> SqsMessage {
    let body = item_event(event_type(sequence), item, sequence, event_id);
    delivered(message(&format!("x{sequence}"), item, &body), received)
}

async fn run<S: Store>(runner: &Runner<S>, messages: Vec<SqsMessage>) -> BatchReport {
    runner
        .run(&batch(messages), at(now()))
        .await
        .expect("message ids")
}

async fn inspect<S: Store>(store: &S, item: &str) -> Inspection {
    store
        .inspect(&EntityKey::of::<Item>(item))
        .await
        .expect("inspect")
}

async fn sequence<S: Store>(store: &S, item: &str) -> Option<u64> {
    entity(store, EntityKey::of::<Item>(item))
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

/// Event 2 of `item` applied by a write that did not drain 3 and 4 (as a
/// run cut short by the deadline or an error leaves it).
async fn apply_two_without_draining<S: Store>(store: &S, item: &str, now: u64) {
    use sequence_guard::store::{Commit, Committed, Expected};

    let mut two = typed::<Item, _>(store, item).await.expect("created");
    two.sequence = 2;
    two.last_event_id = format!("{item}-2");
    let two = AnyEntity::new(two);
    let commit = Commit {
        key: EntityKey::of::<Item>(item),
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

/// The suite, run on each store by the macro below.
mod suite {
    pub(crate) use super::conflicts::*;
    pub(crate) use super::drains::*;
    pub(crate) use super::gaps::*;
    pub(crate) use super::races::*;
    pub(crate) use super::sweep::*;
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
