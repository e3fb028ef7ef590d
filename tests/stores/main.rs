//! One suite, two stores: every store behaviour and the runner's stories run
//! on the in-memory store and on DynamoDB Local (started by the suite), on
//! the engine's test domain (`tests/support/domain.rs`).
//!
//! Here: the helpers the topics share, and the suite run on each store.

#[path = "../support/mod.rs"]
mod support;

mod counters;
mod dynamodb_layout;
mod dynamodb_refusals;
mod entities;
mod erasure;
mod races;

use std::sync::Arc;

use sequence_guard::EntityKey;
use sequence_guard::runner::{Invocation, Outcome, Runner, RunnerConfig};
use sequence_guard::store::DedupAddition;
use sequence_guard::store::memory::MemoryStore;
use sequence_guard::store::{Added, DedupKey, Existing, Loaded, Store};
use sequence_guard::testing::Keyed;
use sequence_guard::testing::{SaveExt, Saved};
use support::*;

// The real clock: DynamoDB Local deletes items whose TTL attribute
// (`expiresAt` = now + 35 days) is in the past, as DynamoDB does.
fn now() -> u64 {
    sequence_guard::lambda::epoch_seconds()
}

fn invocation() -> Invocation {
    Invocation {
        deadline: None,
        now: now(),
    }
}

fn item(id: &str, sequence: u64) -> Keyed {
    Keyed::new(id, item_at(sequence))
}

fn tag(id: &str, sequence: u64) -> Keyed {
    Keyed::new(id, tag_at(sequence))
}

fn adjustment(event_id: &str, gauge: &str, delta: i64) -> DedupAddition {
    DedupAddition {
        event_id: event_id.to_owned(),
        handler: LEVEL_HANDLER,
        counter: &LEVEL,
        id: gauge.to_owned(),
        delta,
        handled_at: now(),
        expires_at: now() + 604_800,
    }
}

fn existing(index: usize, stream: &str) -> Existing {
    Existing {
        index,
        stream: Some(stream.to_owned()),
    }
}

fn dedup(event_id: &str) -> DedupKey {
    DedupKey {
        event_id: event_id.to_owned(),
        handler: LEVEL_HANDLER,
    }
}

/// The suite, run on each store by the macro below.
mod suite {
    pub(crate) use super::counters::*;
    pub(crate) use super::entities::*;
    pub(crate) use super::erasure::*;
    pub(crate) use super::races::*;
}

macro_rules! store_suite {
    ($module:ident, $store:expr) => {
        mod $module {
            use super::*;

            #[tokio::test]
            async fn missing_entities_load_as_absent() {
                suite::missing_entities_load_as_absent($store).await
            }
            #[tokio::test]
            async fn entities_round_trip_with_every_attribute() {
                suite::entities_round_trip_with_every_attribute($store).await
            }
            #[tokio::test]
            async fn what_dynamodb_refuses_is_refused() {
                suite::what_dynamodb_refuses_is_refused($store).await
            }
            #[tokio::test]
            async fn a_new_entity_is_written_only_where_none_exists() {
                suite::a_new_entity_is_written_only_where_none_exists($store).await
            }
            #[tokio::test]
            async fn an_update_is_written_only_at_the_expected_sequence() {
                suite::an_update_is_written_only_at_the_expected_sequence($store).await
            }
            #[tokio::test]
            async fn a_load_reads_more_keys_than_one_request_takes() {
                suite::a_load_reads_more_keys_than_one_request_takes($store).await
            }
            #[tokio::test]
            async fn an_addition_applies_once_per_event() {
                suite::an_addition_applies_once_per_event($store).await
            }
            #[tokio::test]
            async fn additions_apply_together_or_not_at_all() {
                suite::additions_apply_together_or_not_at_all($store).await
            }
            #[tokio::test]
            async fn a_counter_never_leaves_the_64_bit_range() {
                suite::a_counter_never_leaves_the_64_bit_range($store).await
            }
            #[tokio::test]
            async fn an_adjustment_past_the_64_bit_range_is_rejected() {
                suite::an_adjustment_past_the_64_bit_range_is_rejected($store).await
            }
            #[tokio::test]
            async fn an_erasure_deletes_the_entitys_conflict_records() {
                suite::an_erasure_deletes_the_entitys_conflict_records($store).await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn concurrent_invocations_apply_each_event_exactly_once() {
                suite::concurrent_invocations_apply_each_event_exactly_once($store).await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn concurrent_duplicate_adjustments_apply_once() {
                suite::concurrent_duplicate_adjustments_apply_once($store).await
            }
        }
    };
}

store_suite!(memory, Arc::new(MemoryStore::new()));
store_suite!(dynamodb, fresh_table().await);
