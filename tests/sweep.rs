//! The sweep on the index of parked entities: it moves an earlier
//! release's layout, never taking out of the index an entity that the
//! earlier release parks meanwhile; and each sweep goes on where the last
//! one stopped, so that a few sweeps see every entity of an index too long
//! for one. (`inspect --parked` on the earlier layout is the worked
//! example's binary: its test is in `shop/tests/sweep.rs`.)

mod support;

use std::collections::{BTreeSet, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use aws_sdk_dynamodb::config::interceptors::BeforeSerializationInterceptorContextRef;
use aws_sdk_dynamodb::config::{ConfigBag, Intercept};
use aws_sdk_dynamodb::error::BoxError;
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsInput;
use aws_sdk_dynamodb::types::{AttributeValue, TransactWriteItem, Update};
use sequence_guard::EntityKey;
use sequence_guard::runner::{Invocation, Runner, RunnerConfig};
use sequence_guard::store::dynamodb::DynamoStore;
use sequence_guard::store::memory::MemoryStore;
use sequence_guard::store::{
    Added, Commit, Committed, DedupAddition, DedupKey, Inspection, Loaded, ParkedEvent, ParkedPage,
    Store, StoreError, SweepMark,
};
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

/// Creates item `id` (sequence 1) and parks its sequence 3 (a gap at its
/// third delivery), as of `when`; in batches of ten items.
async fn park<S: Store>(runner: &Runner<S>, ids: &[String], when: u64) {
    let event = |id: &str, sequence: u64, receives: u32| {
        let kind = if sequence == 1 {
            "ItemCreated"
        } else {
            "ItemUpdated"
        };
        let event_id = format!("{id}-{sequence}");
        let body = item_event(kind, id, sequence, &event_id);
        delivered(message(&event_id, id, &body), receives)
    };
    for chunk in ids.chunks(10) {
        for (sequence, receives) in [(1, 1), (3, 3)] {
            let messages = chunk
                .iter()
                .map(|id| event(id, sequence, receives))
                .collect();
            runner.run(&batch(messages), at(when)).await.expect("run");
        }
    }
}

/// The entries of the index (any shard, or the earlier release's one
/// partition `PARKED`) that stand for the entity `pk`.
async fn index_entries(store: &DynamoStore, pk: &str) -> Vec<(String, Option<String>)> {
    let scan = store
        .client()
        .scan()
        .table_name(store.table())
        .filter_expression("begins_with(pk, :index) AND sk = :sk")
        .expression_attribute_values(":index", AttributeValue::S("PARKED".into()))
        .expression_attribute_values(":sk", AttributeValue::S(pk.into()))
        .consistent_read(true)
        .send()
        .await
        .expect("Scan");
    scan.items
        .unwrap_or_default()
        .into_iter()
        .map(|item| {
            let text = |name: &str| match item.get(name) {
                Some(AttributeValue::S(text)) => Some(text.clone()),
                Some(AttributeValue::N(number)) => Some(number.clone()),
                _ => None,
            };
            (text("pk").unwrap_or_default(), text("parkedSince"))
        })
        .collect()
}

/// Puts `pk`'s entry where the earlier release kept it: its shard entry
/// (if any) deleted, an entry in the one partition `PARKED` put.
async fn as_earlier_release(store: &DynamoStore, pk: &str, since: u64) {
    for (shard, _) in index_entries(store, pk).await {
        store
            .client()
            .delete_item()
            .table_name(store.table())
            .key("pk", AttributeValue::S(shard))
            .key("sk", AttributeValue::S(pk.into()))
            .send()
            .await
            .expect("DeleteItem");
    }
    store
        .client()
        .put_item()
        .table_name(store.table())
        .item("pk", AttributeValue::S("PARKED".into()))
        .item("sk", AttributeValue::S(pk.into()))
        .item("parkedSince", AttributeValue::N(since.to_string()))
        .send()
        .await
        .expect("PutItem");
}

/// Runs `hook` once, before the first TransactWriteItems the client sends,
/// and waits for it: a write of someone else between a read and a write.
#[derive(Debug, Clone)]
struct BeforeFirstTransaction(Arc<Mutex<Option<Hook>>>);

struct Hook(Box<dyn FnOnce() + Send>);

impl std::fmt::Debug for Hook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Hook")
    }
}

impl Intercept for BeforeFirstTransaction {
    fn name(&self) -> &'static str {
        "BeforeFirstTransaction"
    }

    fn read_before_execution(
        &self,
        context: &BeforeSerializationInterceptorContextRef<'_>,
        _cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        if context
            .input()
            .downcast_ref::<TransactWriteItemsInput>()
            .is_some()
        {
            let hook = self.0.lock().map_err(|_| "poisoned")?.take();
            if let Some(Hook(hook)) = hook {
                hook();
            }
        }
        Ok(())
    }
}

/// A park as the earlier release writes it, in one transaction: the
/// entity's `parked` set and `parkedSince` (kept when present), and its
/// entry in the one partition `PARKED` (`parkedSince` kept when present).
async fn park_as_earlier_release(endpoint: &str, table: &str, pk: &str, sequence: u64, when: u64) {
    let client = sequence_guard::store::dynamodb::connect(Some(endpoint)).await;
    let update = |key: (&str, &str), expression: &str, parked: bool| {
        let mut update = Update::builder()
            .table_name(table)
            .key("pk", AttributeValue::S(key.0.into()))
            .key("sk", AttributeValue::S(key.1.into()))
            .update_expression(expression)
            .expression_attribute_values(":now", AttributeValue::N(when.to_string()));
        if parked {
            update = update.expression_attribute_values(
                ":set",
                AttributeValue::Ns(vec![sequence.to_string()]),
            );
        }
        TransactWriteItem::builder()
            .update(update.build().expect("update"))
            .build()
    };
    client
        .transact_write_items()
        .transact_items(update(
            (pk, "STATE"),
            "SET parked = :set, parkedSince = if_not_exists(parkedSince, :now)",
            true,
        ))
        .transact_items(update(
            ("PARKED", pk),
            "SET parkedSince = if_not_exists(parkedSince, :now)",
            false,
        ))
        .send()
        .await
        .expect("the earlier release's park");
}

/// During a rollout the earlier release still parks: between the sweep's
/// read of a stale entry (its entity had nothing parked) and its removal,
/// the earlier release parks on that entity again (its entry kept, as
/// `if_not_exists` keeps it). The removal must not go through: the entity
/// stays in the index, and the next sweep moves its entry and counts it.
#[tokio::test]
async fn a_park_by_the_earlier_release_during_the_move_keeps_the_entity_in_the_index() {
    let plain = fresh_table().await;
    let endpoint = dynamodb_local().endpoint.clone();
    let table = plain.table().to_owned();
    let runner = Runner::new(domain(), plain.clone(), RunnerConfig::default());
    let event = item_event("ItemCreated", "r", 1, "r-1");
    runner
        .run(&batch(vec![message("r-1", "r", &event)]), at(now()))
        .await
        .expect("run");
    let stale_since = now() - 900;
    as_earlier_release(&plain, "ITEM#r", stale_since).await;
    let parked_at = now() - 300;

    let (hook_endpoint, hook_table) = (endpoint.clone(), table.clone());
    let hook = Hook(Box::new(move || {
        std::thread::spawn(move || {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime")
                .block_on(park_as_earlier_release(
                    &hook_endpoint,
                    &hook_table,
                    "ITEM#r",
                    3,
                    parked_at,
                ))
        })
        .join()
        .expect("the earlier release");
    }));
    let config = plain
        .client()
        .config()
        .to_builder()
        .interceptor(BeforeFirstTransaction(Arc::new(Mutex::new(Some(hook)))))
        .build();
    let racing = DynamoStore::new(aws_sdk_dynamodb::Client::from_conf(config), table.clone());
    let sweeping = Runner::new(domain(), racing, RunnerConfig::default());
    sequence_guard::sweep::sweep(&sweeping, at(now()))
        .await
        .expect("sweep");
    let entries = index_entries(&plain, "ITEM#r").await;
    assert_eq!(entries.len(), 1, "parked, so in the index: {entries:?}");

    let report = sequence_guard::sweep::sweep(&runner, at(now()))
        .await
        .expect("sweep");
    let entries = index_entries(&plain, "ITEM#r").await;
    assert_eq!(entries.len(), 1, "{entries:?}");
    assert!(entries[0].0.starts_with("PARKED#"), "moved: {entries:?}");
    assert_eq!(report.entities, 1, "{report:?}");
    assert_eq!(report.longest[0].key, EntityKey::of::<Item>("r"));
}

/// A store whose pages of the index take `delay` each, and which records
/// every entity its pages named.
struct Slow<S> {
    inner: S,
    delay: Duration,
    seen: Mutex<HashSet<String>>,
}

impl<S: Store> Store for Slow<S> {
    async fn load(&self, keys: &[EntityKey], dedup: &[DedupKey]) -> Result<Loaded, StoreError> {
        self.inner.load(keys, dedup).await
    }

    async fn commit(&self, commit: &Commit) -> Result<Committed, StoreError> {
        self.inner.commit(commit).await
    }

    async fn parked(
        &self,
        key: &EntityKey,
        sequences: &[u64],
    ) -> Result<Vec<ParkedEvent>, StoreError> {
        self.inner.parked(key, sequences).await
    }

    async fn parked_entities(
        &self,
        after: Option<&str>,
        limit: usize,
    ) -> Result<ParkedPage, StoreError> {
        tokio::time::sleep(self.delay).await;
        let page = self.inner.parked_entities(after, limit).await?;
        if let Ok(mut seen) = self.seen.lock() {
            seen.extend(page.entities.iter().map(|entry| entry.pk.clone()));
        }
        Ok(page)
    }

    async fn upgrade_parked_index(&self, limit: usize) -> Result<usize, StoreError> {
        self.inner.upgrade_parked_index(limit).await
    }

    async fn sweep_mark(&self) -> Result<Option<SweepMark>, StoreError> {
        self.inner.sweep_mark().await
    }

    async fn save_sweep_mark(&self, mark: &SweepMark) -> Result<(), StoreError> {
        self.inner.save_sweep_mark(mark).await
    }

    async fn inspect(&self, key: &EntityKey) -> Result<Inspection, StoreError> {
        self.inner.inspect(key).await
    }

    async fn add(&self, additions: &[DedupAddition]) -> Result<Added, StoreError> {
        self.inner.add(additions).await
    }

    async fn counter(
        &self,
        counter: &'static sequence_guard::Counter,
        id: &str,
    ) -> Result<Option<i64>, StoreError> {
        self.inner.counter(counter, id).await
    }
}

/// An index of `entities` entities, each sweep given time for two and a
/// half of its pages: the first sweep stops at its deadline; each goes on
/// where the last stopped, so a few sweeps see every entity, and the
/// sweep that ends the pass counts them all.
async fn a_few_sweeps_see_the_whole_index<S: Store>(store: S, entities: usize) {
    const DELAY: Duration = Duration::from_millis(100);
    let config = RunnerConfig::default();
    let margin = config.deadline_margin;
    let slow = Slow {
        inner: store,
        delay: DELAY,
        seen: Mutex::default(),
    };
    let runner = Runner::new(domain(), slow, config);
    let ids: Vec<String> = (0..entities).map(|n| format!("o-{n:03}")).collect();
    park(&runner, &ids, now() - 60).await;
    let all: BTreeSet<String> = ids.iter().map(|id| format!("ITEM#{id}")).collect();

    let mut reports = Vec::new();
    for _ in 0..40 {
        let invocation = Invocation {
            deadline: Some(Instant::now() + margin + DELAY * 5 / 2),
            now: now(),
        };
        let report = sequence_guard::sweep::sweep(&runner, invocation)
            .await
            .expect("sweep");
        reports.push((report.complete, report.entities, report.seen));
        let seen = runner.store().seen.lock().expect("seen").clone();
        if all.iter().all(|pk| seen.contains(pk)) && report.complete {
            break;
        }
    }
    let seen: BTreeSet<String> = runner
        .store()
        .seen
        .lock()
        .expect("seen")
        .clone()
        .into_iter()
        .collect();
    assert_eq!(
        reports.first().map(|report| report.0),
        Some(false),
        "one sweep saw it all: {reports:?}"
    );
    let unseen: Vec<&String> = all.difference(&seen).collect();
    assert!(
        unseen.is_empty(),
        "never seen after {} sweeps: {unseen:?}; {reports:?}",
        reports.len()
    );
    let (complete, counted, _) = reports.last().copied().expect("a sweep");
    assert!(complete, "{reports:?}");
    assert_eq!(
        counted, entities,
        "the pass counts the whole index: {reports:?}"
    );
}

#[tokio::test]
async fn a_few_sweeps_see_the_whole_index_in_memory() {
    a_few_sweeps_see_the_whole_index(MemoryStore::new(), 250).await;
}

#[tokio::test]
async fn a_few_sweeps_see_the_whole_index_on_dynamodb() {
    a_few_sweeps_see_the_whole_index(fresh_table().await, 120).await;
}
