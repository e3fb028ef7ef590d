//! A gap closed from the event store, on each store (in memory, and on
//! DynamoDB Local with the event store's table): a stream delivered out of
//! order is applied at its first delivery, its earlier messages found
//! duplicates; a fill is bounded; what it cannot close (events the store
//! does not hold, an event the consumer refuses) is a gap as before, then
//! parked; an event parked before is cleared by a fill past it; a gap met
//! within a run is closed there; parking at the first delivery reads the
//! store first.

#[path = "../support/mod.rs"]
mod support;

mod cases;

use std::sync::Arc;

use aws_lambda_events::event::sqs::SqsMessage;
use sequence_guard::producer::{Append, EventLog, EventStore, MemoryEvents, NewEvent, StoredEvent};
use sequence_guard::runner::{BatchReport, Invocation, Runner, RunnerConfig};
use sequence_guard::store::Store;
use sequence_guard::store::dynamodb::{DynamoStore, connect, create_table, ensure_events_table};
use sequence_guard::store::memory::MemoryStore;
use sequence_guard::{Domain, EntityKey};
use support::*;

/// A consumer of an event store: its runner, and the store's log.
struct Setup<S, L> {
    runner: Runner<S>,
    log: L,
}

/// The in-memory pair: the consumer's table reads the event store's log.
fn in_memory(store_domain: Domain, config: RunnerConfig) -> Setup<MemoryStore, Arc<MemoryEvents>> {
    let log = Arc::new(MemoryEvents::new(store_domain));
    let store = MemoryStore::new().with_event_store(log.clone());
    Setup {
        runner: Runner::new(domain(), store, config),
        log,
    }
}

/// The DynamoDB Local pair: a projection table whose store reads the
/// event store's table.
async fn on_dynamodb(store_domain: Domain, config: RunnerConfig) -> Setup<DynamoStore, EventStore> {
    let client = connect(Some(&dynamodb_local().endpoint)).await;
    let suffix = format!(
        "{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |since| since.as_nanos())
    );
    let (events_table, table) = (format!("fill-events-{suffix}"), format!("fill-{suffix}"));
    ensure_events_table(&client, &events_table)
        .await
        .expect("events table");
    create_table(&client, &table).await.expect("table");
    let log = EventStore::new(client.clone(), events_table, store_domain);
    let store = DynamoStore::new(client, table).with_event_store(log.clone());
    Setup {
        runner: Runner::new(domain(), store, config),
        log,
    }
}

/// A store's log, read the same way whatever it is.
trait Log {
    fn log(&self) -> &impl EventLog;

    async fn append_item(&self, item: &str, event_type: &str, sequence: u64) {
        self.log()
            .append(Append::one(
                item,
                NewEvent::new(event_type, item_data(event_type, item, sequence)),
            ))
            .await
            .expect("appended");
    }

    async fn stored(&self, item: &str) -> Vec<StoredEvent> {
        self.log().read(item, 0, 1000).await.expect("read")
    }
}

impl Log for EventStore {
    fn log(&self) -> &impl EventLog {
        self
    }
}

impl Log for Arc<MemoryEvents> {
    fn log(&self) -> &impl EventLog {
        self.as_ref()
    }
}

/// `count` events of `item` appended: its creation, then updates.
async fn append_items(log: &impl Log, item: &str, count: u64) -> Vec<StoredEvent> {
    for sequence in 1..=count {
        let event_type = if sequence == 1 {
            "ItemCreated"
        } else {
            "ItemUpdated"
        };
        log.append_item(item, event_type, sequence).await;
    }
    log.stored(item).await
}

/// The stored event as the dispatcher sends it, delivered for the
/// `received`th time.
fn sent(item: &str, event: &StoredEvent, received: u32) -> SqsMessage {
    delivered(
        message(&format!("m{}", event.sequence), item, &event.body),
        received,
    )
}

async fn run<S: Store>(runner: &Runner<S>, messages: Vec<SqsMessage>) -> BatchReport {
    let invocation = Invocation {
        deadline: None,
        now: sequence_guard::lambda::epoch_seconds(),
    };
    runner
        .run(&batch(messages), invocation)
        .await
        .expect("message ids")
}

async fn sequence_of<S: Store>(store: &S, item: &str) -> Option<u64> {
    entity(store, EntityKey::of::<Item>(item))
        .await
        .map(|entity| entity.sequence())
}

macro_rules! fill_suite {
    ($module:ident, $setup:expr) => {
        mod $module {
            use super::*;

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_stream_out_of_order_is_applied_at_its_first_delivery() {
                cases::a_stream_out_of_order_is_applied_at_its_first_delivery($setup).await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_fill_is_bounded_and_the_next_delivery_goes_on() {
                cases::a_fill_is_bounded_and_the_next_delivery_goes_on($setup).await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn events_the_store_does_not_hold_are_a_gap_then_parked() {
                cases::events_the_store_does_not_hold_are_a_gap_then_parked($setup).await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn an_event_parked_before_is_cleared_by_a_fill_past_it() {
                cases::an_event_parked_before_is_cleared_by_a_fill_past_it($setup).await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_gap_met_within_a_run_is_closed_there() {
                cases::a_gap_met_within_a_run_is_closed_there($setup).await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn parking_at_the_first_delivery_reads_the_store_first() {
                cases::parking_at_the_first_delivery_reads_the_store_first($setup).await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_fill_stops_at_an_event_the_consumer_refuses() {
                cases::a_fill_stops_at_an_event_the_consumer_refuses($setup).await
            }
        }
    };
}

fill_suite!(
    memory,
    |domain, config| async move { in_memory(domain, config) }
);
fill_suite!(dynamodb, on_dynamodb);
