//! A warm runner: the items it wrote stand in for the next batch's read
//! (`src/runner/warm.rs`). On the in-memory store, counting its requests;
//! what it cannot see (an item edited by hand) on DynamoDB Local.

#[path = "../support/mod.rs"]
mod support;

use std::sync::atomic::{AtomicUsize, Ordering};

use sequence_guard::EntityKey;
use sequence_guard::handling::{Counter, Effect};
use sequence_guard::runner::{Invocation, Outcome, Runner, RunnerConfig};
use sequence_guard::store::memory::MemoryStore;
use sequence_guard::store::{
    Added, Commit, Committed, DedupAddition, DedupKey, Inspection, Loaded, ParkedEvent, ParkedPage,
    Store, StoreError,
};
use support::*;

/// A store that counts its loads and writes (each one request).
pub struct Calls<S> {
    store: S,
    writes: AtomicUsize,
}

impl<S> Calls<S> {
    pub fn new(store: S) -> Self {
        Calls {
            store,
            writes: AtomicUsize::new(0),
        }
    }

    /// The store it counts the writes of.
    pub fn inner(&self) -> &S {
        &self.store
    }

    /// The loads and writes so far.
    pub fn calls(&self) -> usize {
        self.writes.load(Ordering::Relaxed)
    }
}

impl<S: Store> Store for Calls<S> {
    async fn load(&self, keys: &[EntityKey], dedup: &[DedupKey]) -> Result<Loaded, StoreError> {
        self.writes.fetch_add(1, Ordering::Relaxed);
        self.store.load(keys, dedup).await
    }

    async fn commit(&self, commit: &Commit) -> Result<Committed, StoreError> {
        self.writes.fetch_add(1, Ordering::Relaxed);
        self.store.commit(commit).await
    }

    async fn commit_with_effects(
        &self,
        commit: &Commit,
        effects: &[Effect],
    ) -> Result<Committed, StoreError> {
        self.writes.fetch_add(1, Ordering::Relaxed);
        self.store.commit_with_effects(commit, effects).await
    }

    async fn parked(
        &self,
        key: &EntityKey,
        sequences: &[u64],
    ) -> Result<Vec<ParkedEvent>, StoreError> {
        self.store.parked(key, sequences).await
    }

    async fn parked_entities(
        &self,
        after: Option<&str>,
        limit: usize,
    ) -> Result<ParkedPage, StoreError> {
        self.store.parked_entities(after, limit).await
    }

    async fn inspect(&self, key: &EntityKey) -> Result<Inspection, StoreError> {
        self.store.inspect(key).await
    }

    async fn add(&self, additions: &[DedupAddition]) -> Result<Added, StoreError> {
        self.store.add(additions).await
    }

    async fn counter(
        &self,
        counter: &'static Counter,
        id: &str,
    ) -> Result<Option<i64>, StoreError> {
        self.store.counter(counter, id).await
    }

    fn requests(&self) -> u64 {
        self.store.requests()
    }
}

fn now() -> Invocation {
    Invocation {
        deadline: None,
        now: 1_700_000_000,
    }
}

fn updates(item: &str, from: u64, to: u64) -> aws_lambda_events::event::sqs::SqsEvent {
    let messages = (from..=to)
        .map(|sequence| {
            let event_type = if sequence == 1 {
                "ItemCreated"
            } else {
                "ItemUpdated"
            };
            message(
                &format!("{item}-{sequence}"),
                item,
                &item_body(event_type, item, sequence),
            )
        })
        .collect();
    batch(messages)
}

#[tokio::test]
async fn a_warm_batch_is_one_write_and_its_duplicates_none() {
    let store = Calls::new(MemoryStore::default());
    let runner = Runner::new(domain(), &store, RunnerConfig::default());
    let report = runner
        .run(&updates("item-w", 1, 10), now())
        .await
        .expect("run");
    assert_eq!(outcomes(&report), vec![Outcome::Applied; 10]);
    let before = store.calls();
    let report = runner
        .run(&updates("item-w", 11, 20), now())
        .await
        .expect("run");
    assert_eq!(outcomes(&report), vec![Outcome::Applied; 10]);
    assert_eq!(store.calls() - before, 1, "one write, no read");
    let before = store.calls();
    let report = runner
        .run(&updates("item-w", 11, 20), now())
        .await
        .expect("run");
    assert_eq!(outcomes(&report), vec![Outcome::Duplicate; 10]);
    assert_eq!(store.calls() - before, 0, "duplicates: no request");
}

/// A process that read an item for a batch of duplicates (another one
/// wrote the events) keeps it as it found it: the next duplicates cost no
/// request, and the next new event is one write.
#[tokio::test]
async fn an_item_read_for_duplicates_is_kept_as_found() {
    let store = Calls::new(MemoryStore::default());
    let writer = Runner::new(domain(), &store, RunnerConfig::default());
    writer
        .run(&updates("item-d", 1, 5), now())
        .await
        .expect("run");
    let runner = Runner::new(domain(), &store, RunnerConfig::default());
    let before = store.calls();
    let report = runner
        .run(&updates("item-d", 4, 5), now())
        .await
        .expect("run");
    assert_eq!(outcomes(&report), vec![Outcome::Duplicate; 2]);
    assert_eq!(store.calls() - before, 1, "read once, nothing written");
    assert_eq!(runner.warm_entities(), 1, "kept as found");
    let before = store.calls();
    let report = runner
        .run(&updates("item-d", 3, 5), now())
        .await
        .expect("run");
    assert_eq!(outcomes(&report), vec![Outcome::Duplicate; 3]);
    assert_eq!(store.calls() - before, 0, "duplicates again: no request");
    let before = store.calls();
    let report = runner
        .run(&updates("item-d", 6, 6), now())
        .await
        .expect("run");
    assert_eq!(outcomes(&report), vec![Outcome::Applied]);
    assert_eq!(store.calls() - before, 1, "one write, no read");
    assert_eq!(runner.warm_entities(), 1);
}

#[tokio::test]
async fn another_writer_between_batches_fails_the_condition_and_is_decided_again() {
    let store = Calls::new(MemoryStore::default());
    let runner = Runner::new(domain(), &store, RunnerConfig::default());
    runner
        .run(&updates("item-r", 1, 3), now())
        .await
        .expect("run");
    // Another invocation applies 4 and 5 behind this runner's back.
    let other = Runner::new(domain(), &store, RunnerConfig::default());
    let report = other
        .run(&updates("item-r", 4, 5), now())
        .await
        .expect("run");
    assert_eq!(outcomes(&report), vec![Outcome::Applied; 2]);
    // This runner still believes 3: its write fails, the item comes back,
    // 4 and 5 are duplicates and 6 is applied once.
    let report = runner
        .run(&updates("item-r", 4, 6), now())
        .await
        .expect("run");
    assert_eq!(
        outcomes(&report),
        [Outcome::Duplicate, Outcome::Duplicate, Outcome::Applied]
    );
    let item = typed::<Item, _>(store.inner(), "item-r")
        .await
        .expect("item");
    assert_eq!(item.sequence, 6);
}

/// Lambda hands a FIFO group's batches to whichever environment is free:
/// a process that took none of the last ones holds an entry behind the
/// item. Its next batch starts past the entry's next sequence, so the
/// item is read and the batch applied; failing it as a gap would hold the
/// group for a visibility timeout (found by the pipeline's faults workload).
#[tokio::test]
async fn a_process_left_behind_reads_the_item_instead_of_failing_a_gap() {
    let store = Calls::new(MemoryStore::default());
    let first = Runner::new(domain(), &store, RunnerConfig::default());
    let second = Runner::new(domain(), &store, RunnerConfig::default());
    let report = first
        .run(&updates("item-b", 1, 3), now())
        .await
        .expect("run");
    assert_eq!(outcomes(&report), vec![Outcome::Applied; 3]);
    let report = second
        .run(&updates("item-b", 4, 6), now())
        .await
        .expect("run");
    assert_eq!(outcomes(&report), vec![Outcome::Applied; 3]);
    let before = store.calls();
    let report = first
        .run(&updates("item-b", 7, 9), now())
        .await
        .expect("run");
    assert_eq!(outcomes(&report), vec![Outcome::Applied; 3]);
    assert_eq!(store.calls() - before, 2, "one read, one write");
    let item = typed::<Item, _>(store.inner(), "item-b")
        .await
        .expect("item");
    assert_eq!(item.sequence, 9);
    // Warm again: its next batch is one write.
    let before = store.calls();
    let report = first
        .run(&updates("item-b", 10, 12), now())
        .await
        .expect("run");
    assert_eq!(outcomes(&report), vec![Outcome::Applied; 3]);
    assert_eq!(store.calls() - before, 1, "one write, no read");
}

/// A real gap on a warm entity is confirmed by a read, then failed (and
/// parked at its third delivery, as any gap).
#[tokio::test]
async fn a_real_gap_on_a_warm_entity_is_read_then_failed() {
    let store = Calls::new(MemoryStore::default());
    let runner = Runner::new(domain(), &store, RunnerConfig::default());
    runner
        .run(&updates("item-g", 1, 3), now())
        .await
        .expect("run");
    let before = store.calls();
    let report = runner
        .run(&updates("item-g", 6, 7), now())
        .await
        .expect("run");
    assert_eq!(outcomes(&report), [Outcome::Gap, Outcome::Skipped]);
    assert_eq!(store.calls() - before, 1, "the read, nothing written");
    let item = typed::<Item, _>(store.inner(), "item-g")
        .await
        .expect("item");
    assert_eq!(item.sequence, 3);
}

#[tokio::test]
async fn the_cache_is_bounded_and_can_be_turned_off() {
    let store = Calls::new(MemoryStore::default());
    let config = RunnerConfig {
        warm_entities: 2,
        ..RunnerConfig::default()
    };
    let runner = Runner::new(domain(), &store, config);
    for item in ["a", "b", "c"] {
        runner.run(&updates(item, 1, 2), now()).await.expect("run");
    }
    assert_eq!(runner.warm_entities(), 2);
    let before = store.calls();
    // "a" was evicted: its batch reads again.
    runner.run(&updates("a", 3, 3), now()).await.expect("run");
    assert_eq!(store.calls() - before, 2, "a read and a write");

    let cold = Runner::new(
        domain(),
        &store,
        RunnerConfig {
            warm_entities: 0,
            ..RunnerConfig::default()
        },
    );
    cold.run(&updates("d", 1, 1), now()).await.expect("run");
    assert_eq!(cold.warm_entities(), 0);
}

/// What a warm runner cannot see, on DynamoDB Local: an item changed by hand
/// that keeps its `sequence` passes the next write's condition, so the next
/// event lands on the item as the runner wrote it and the edit is gone; a
/// runner keeping nothing warm reads the edit and keeps it
/// (docs/behaviour.md: edit an item by hand only with `WARM_ENTITIES=0`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hand_edit_at_the_same_sequence_is_seen_only_by_a_runner_keeping_nothing_warm() {
    use aws_sdk_dynamodb::types::AttributeValue;

    for (warm_entities, name_after) in [(1000, NAME), (0, "edited by hand")] {
        let store = fresh_table().await;
        let config = RunnerConfig {
            warm_entities,
            ..RunnerConfig::default()
        };
        let runner = Runner::new(domain(), &store, config);
        runner
            .run(&updates("item-h", 1, 1), now())
            .await
            .expect("run");
        let created = typed::<Item, _>(&store, "item-h").await.expect("item");
        assert_eq!(created.name, NAME, "the sample's name");
        store
            .client()
            .update_item()
            .table_name(store.table())
            .key("pk", AttributeValue::S("ITEM#item-h".into()))
            .key("sk", AttributeValue::S("STATE".into()))
            .update_expression("SET #name = :name")
            .expression_attribute_names("#name", "name")
            .expression_attribute_values(":name", AttributeValue::S("edited by hand".into()))
            .send()
            .await
            .expect("UpdateItem");
        // A pass moves the guard alone: the name is the item's as loaded.
        let touched = message(
            "item-h-2",
            "item-h",
            &body("ItemTouched", "item-h", 2, serde_json::json!({})),
        );
        let report = runner.run(&batch(vec![touched]), now()).await.expect("run");
        assert_eq!(outcomes(&report), [Outcome::Applied]);
        let item = typed::<Item, _>(&store, "item-h").await.expect("item");
        assert_eq!(item.sequence, 2);
        assert_eq!(item.name, name_after, "WARM_ENTITIES={warm_entities}");
    }
}
