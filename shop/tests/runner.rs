//! The batch runner on the in-memory store, with faults injected around it:
//! what is reported failed, what is attempted, what reaches the store.

mod support;

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use sequence_guard::EntityKey;
use sequence_guard::runner::{BatchError, BatchReport, Invocation, Outcome, Runner, RunnerConfig};
use sequence_guard::store::Addition;
use sequence_guard::store::memory::MemoryStore;
use sequence_guard::store::{
    Added, Commit, Committed, DedupKey, Inspection, Loaded, ParkedEvent, Store, StoreError,
};
use sequence_guard::testing::Keyed;
use sequence_guard::testing::SaveExt;
use serde_json::json;
use shop::Product;
use support::*;

/// Faults to inject, by store operation.
#[derive(Debug, Default, Clone)]
struct Faults {
    load_fails: bool,
    /// Keys whose loaded item cannot be read.
    corrupt: Vec<EntityKey>,
    /// Saves of these aggregate ids fail without effect.
    save_fails_for: Vec<String>,
    /// Saves of these aggregate ids are refused for good (ValidationException).
    save_rejected_for: Vec<String>,
    /// Saves take effect, but the answer is lost.
    save_answer_lost: bool,
    /// Before each save, another writer moves the entity on.
    save_always_raced: bool,
    save_delay: Option<Duration>,
    adjust_fails: bool,
    /// Answers to the next stock transactions, in order, before the store's
    /// own (another invocation moving onHand between two attempts).
    adjust_answers: Vec<Added>,
}

/// The in-memory store behind a layer of faults, counting calls.
#[derive(Default)]
struct FaultyStore {
    inner: MemoryStore,
    faults: Mutex<Faults>,
    loads: AtomicU32,
    saves: AtomicU32,
    adjusts: AtomicU32,
}

fn failure(operation: &'static str) -> StoreError {
    StoreError::Request {
        operation,
        message: "injected fault: ProvisionedThroughputExceededException".into(),
    }
}

impl FaultyStore {
    fn with(faults: Faults) -> Arc<Self> {
        Arc::new(FaultyStore {
            faults: Mutex::new(faults),
            ..Default::default()
        })
    }
    fn faults(&self) -> Faults {
        self.faults.lock().expect("faults").clone()
    }
    fn set(&self, faults: Faults) {
        *self.faults.lock().expect("faults") = faults;
    }
    fn calls(&self) -> (u32, u32, u32) {
        (
            self.loads.load(Ordering::SeqCst),
            self.saves.load(Ordering::SeqCst),
            self.adjusts.load(Ordering::SeqCst),
        )
    }
}

impl Store for FaultyStore {
    async fn load(&self, keys: &[EntityKey], dedup: &[DedupKey]) -> Result<Loaded, StoreError> {
        self.loads.fetch_add(1, Ordering::SeqCst);
        let faults = self.faults();
        if faults.load_fails {
            return Err(failure("BatchGetItem"));
        }
        let mut loaded = self.inner.load(keys, dedup).await?;
        for key in faults.corrupt {
            loaded.entities.insert(
                key.clone(),
                Err(StoreError::Corrupt {
                    key: format!("{key:?}"),
                    message: "bad".into(),
                }),
            );
        }
        Ok(loaded)
    }

    async fn commit(&self, commit: &Commit) -> Result<Committed, StoreError> {
        self.saves.fetch_add(1, Ordering::SeqCst);
        let faults = self.faults();
        if let Some(delay) = faults.save_delay {
            tokio::time::sleep(delay).await;
        }
        let id = commit.key.id().to_owned();
        if faults.save_fails_for.contains(&id) {
            return Err(failure("UpdateItem"));
        }
        if faults.save_rejected_for.contains(&id) {
            return Err(StoreError::Rejected {
                operation: "UpdateItem",
                message:
                    "ValidationException: Item size to update has exceeded the maximum allowed size"
                        .into(),
            });
        }
        if faults.save_always_raced {
            // Another invocation writes the entity one step further first.
            let key = commit.key.clone();
            let current = self
                .inner
                .load(std::slice::from_ref(&key), &[])
                .await?
                .entities
                .remove(&key)
                .transpose()?;
            if let Some(mut product) = current
                .as_ref()
                .and_then(|current| current.get::<Product>())
                .cloned()
            {
                // As another invocation applying the next event would.
                product.sequence += 1;
                product.last_event_id =
                    format!("{}-{}-ProductPriceChanged", key.id(), product.sequence);
                self.inner
                    .save(
                        &Keyed::new(key.id(), product),
                        current.map(|c| c.sequence()),
                    )
                    .await?;
            }
        }
        let committed = self.inner.commit(commit).await?;
        if faults.save_answer_lost {
            return Err(StoreError::Timeout {
                operation: "UpdateItem",
                millis: 3000,
            });
        }
        Ok(committed)
    }

    async fn parked(
        &self,
        key: &EntityKey,
        sequences: &[u64],
    ) -> Result<Vec<ParkedEvent>, StoreError> {
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
        self.adjusts.fetch_add(1, Ordering::SeqCst);
        if self.faults().adjust_fails {
            return Err(failure("TransactWriteItems"));
        }
        let scripted = {
            let mut faults = self.faults.lock().expect("faults");
            (!faults.adjust_answers.is_empty()).then(|| faults.adjust_answers.remove(0))
        };
        match scripted {
            Some(answer) => Ok(answer),
            None => self.inner.add(adjustments).await,
        }
    }

    async fn counter(
        &self,
        counter: &'static sequence_guard::Counter,
        id: &str,
    ) -> Result<Option<i64>, StoreError> {
        self.inner.counter(counter, id).await
    }
}

fn no_deadline() -> Invocation {
    Invocation {
        deadline: None,
        now: sequence_guard::lambda::epoch_seconds(),
    }
}

fn outcomes(report: &BatchReport) -> Vec<(&str, Outcome)> {
    report
        .messages
        .iter()
        .map(|message| (message.message_id.as_str(), message.outcome))
        .collect()
}

fn order_body(event_type: &str, order: &str, sequence: u64) -> String {
    body(
        event_type,
        order,
        sequence,
        json!({ "customerName": "Ada", "email": "ada@example.com", "totalCents": sequence * 100 }),
    )
}

async fn sequence_of<S: Store>(store: &S, key: EntityKey) -> Option<u64> {
    entity(store, key).await.map(|entity| entity.sequence())
}

#[tokio::test]
async fn after_a_failure_the_rest_of_the_stream_is_not_attempted_and_other_streams_go_on() {
    // GIVEN order-a: created, then 3 (a gap), then 2, which alone would apply.
    let store = FaultyStore::with(Faults::default());
    let runner = Runner::new(shop::domain(), store.clone(), RunnerConfig::default());
    let event = batch(vec![
        message("a1", "order-a", &order_body("OrderCreated", "order-a", 1)),
        message("b1", "order-b", &order_body("OrderCreated", "order-b", 1)),
        message("a3", "order-a", &order_body("OrderUpdated", "order-a", 3)),
        message("a2", "order-a", &order_body("OrderUpdated", "order-a", 2)),
        message("b2", "order-b", &order_body("OrderUpdated", "order-b", 2)),
    ]);
    // WHEN the batch runs
    let report = runner.run(&event, no_deadline()).await.expect("run");
    // THEN a3 and everything after it in order-a fail; order-b completes.
    assert_eq!(
        outcomes(&report),
        [
            ("a1", Outcome::Applied),
            ("b1", Outcome::Applied),
            ("a3", Outcome::Gap),
            ("a2", Outcome::Skipped),
            ("b2", Outcome::Applied)
        ]
    );
    assert_eq!(failed_ids(&report), ["a3", "a2"]);
    assert_eq!(
        sequence_of(&*store, EntityKey::of::<shop::Order>("order-a")).await,
        Some(1),
        "a2 was not attempted"
    );
    assert_eq!(
        sequence_of(&*store, EntityKey::of::<shop::Order>("order-b")).await,
        Some(2)
    );
}

#[tokio::test]
async fn a_batch_loads_once_and_writes_once_per_stream() {
    let store = FaultyStore::with(Faults::default());
    let runner = Runner::new(shop::domain(), store.clone(), RunnerConfig::default());
    let mut messages = Vec::new();
    for order in 0..10 {
        let id = format!("order-{order}");
        for sequence in 1..=3 {
            let event_type = if sequence == 1 {
                "OrderCreated"
            } else {
                "OrderUpdated"
            };
            messages.push(message(
                &format!("{id}-{sequence}"),
                &id,
                &order_body(event_type, &id, sequence),
            ));
        }
    }
    let event = batch(messages);
    let report = runner.run(&event, no_deadline()).await.expect("run");
    assert_eq!(report.count(Outcome::Applied), 30);
    assert_eq!(store.calls(), (1, 10, 0), "one load, one write per stream");

    // The same batch again: all duplicates, one load and no write at all.
    let report = runner.run(&event, no_deadline()).await.expect("run");
    assert_eq!(report.count(Outcome::Duplicate), 30);
    assert_eq!(store.calls(), (2, 10, 0));
}

#[tokio::test]
async fn a_record_without_a_message_id_fails_the_invocation_before_any_work() {
    let store = FaultyStore::with(Faults::default());
    let runner = Runner::new(shop::domain(), store.clone(), RunnerConfig::default());
    let mut anonymous = message("", "order-x", &order_body("OrderCreated", "order-x", 1));
    anonymous.message_id = None;
    let event = batch(vec![
        message("ok", "order-y", &order_body("OrderCreated", "order-y", 1)),
        anonymous,
    ]);
    assert_eq!(
        runner.run(&event, no_deadline()).await,
        Err(BatchError::MissingMessageId { index: 1 })
    );
    assert_eq!(store.calls(), (0, 0, 0), "nothing was attempted");
}

#[tokio::test]
async fn a_failed_write_fails_its_run_and_the_rest_of_its_stream_only() {
    let store = FaultyStore::with(Faults {
        save_fails_for: vec!["order-bad".into()],
        ..Default::default()
    });
    let runner = Runner::new(shop::domain(), store.clone(), RunnerConfig::default());
    let event = batch(vec![
        message(
            "bad1",
            "order-bad",
            &order_body("OrderCreated", "order-bad", 1),
        ),
        message(
            "good1",
            "order-good",
            &order_body("OrderCreated", "order-good", 1),
        ),
        message(
            "bad2",
            "order-bad",
            &order_body("OrderUpdated", "order-bad", 2),
        ),
    ]);
    let report = runner.run(&event, no_deadline()).await.expect("run");
    assert_eq!(
        outcomes(&report),
        [
            ("bad1", Outcome::StorageError),
            ("good1", Outcome::Applied),
            ("bad2", Outcome::Skipped)
        ]
    );
    let reason = report.messages[0].reason.as_deref().unwrap_or_default();
    assert!(
        reason.contains("UpdateItem") && reason.contains("ProvisionedThroughputExceeded"),
        "{reason}"
    );
    assert_eq!(failed_ids(&report), ["bad1", "bad2"]);
    // Redelivered once the store is back: applied, nothing lost.
    store.set(Faults::default());
    let report = runner.run(&event, no_deadline()).await.expect("run");
    assert_eq!(
        outcomes(&report),
        [
            ("bad1", Outcome::Applied),
            ("good1", Outcome::Duplicate),
            ("bad2", Outcome::Applied)
        ]
    );
}

#[tokio::test]
async fn duplicates_before_a_failed_write_still_complete() {
    let store = FaultyStore::with(Faults::default());
    let runner = Runner::new(shop::domain(), store.clone(), RunnerConfig::default());
    let first = batch(vec![message(
        "c1",
        "order-d",
        &order_body("OrderCreated", "order-d", 1),
    )]);
    runner.run(&first, no_deadline()).await.expect("run");
    store.set(Faults {
        save_fails_for: vec!["order-d".into()],
        ..Default::default()
    });
    let event = batch(vec![
        message("c1", "order-d", &order_body("OrderCreated", "order-d", 1)),
        message("u2", "order-d", &order_body("OrderUpdated", "order-d", 2)),
    ]);
    let report = runner.run(&event, no_deadline()).await.expect("run");
    assert_eq!(
        outcomes(&report),
        [("c1", Outcome::Duplicate), ("u2", Outcome::StorageError)]
    );
}

#[tokio::test]
async fn a_write_whose_answer_is_lost_is_retried_and_then_found_done() {
    // The write takes effect, but the answer never comes back.
    let store = FaultyStore::with(Faults {
        save_answer_lost: true,
        ..Default::default()
    });
    let runner = Runner::new(shop::domain(), store.clone(), RunnerConfig::default());
    let event = batch(vec![
        message("p1", "product-l", &product_created("product-l")),
        message("p2", "product-l", &price_changed("product-l", 2)),
    ]);
    let report = runner.run(&event, no_deadline()).await.expect("run");
    assert_eq!(
        outcomes(&report),
        [("p1", Outcome::StorageError), ("p2", Outcome::Skipped)]
    );
    // SQS redelivers both; the guard finds them applied.
    store.set(Faults::default());
    let report = runner.run(&event, no_deadline()).await.expect("run");
    assert_eq!(
        outcomes(&report),
        [("p1", Outcome::Duplicate), ("p2", Outcome::Duplicate)]
    );
    assert_eq!(
        sequence_of(&*store, EntityKey::of::<shop::Product>("product-l")).await,
        Some(2),
        "applied once"
    );
}

#[tokio::test]
async fn a_failed_load_fails_entity_streams_but_not_inventory() {
    let store = FaultyStore::with(Faults {
        load_fails: true,
        ..Default::default()
    });
    let runner = Runner::new(shop::domain(), store.clone(), RunnerConfig::default());
    let event = batch(vec![
        message("o1", "order-l", &order_body("OrderCreated", "order-l", 1)),
        message("i1", "SKU-L", &inventory_adjusted("inv-1", "SKU-L", 4)),
        message("o2", "order-l", &order_body("OrderUpdated", "order-l", 2)),
    ]);
    let report = runner.run(&event, no_deadline()).await.expect("run");
    assert_eq!(
        outcomes(&report),
        [
            ("o1", Outcome::StorageError),
            ("i1", Outcome::Applied),
            ("o2", Outcome::Skipped)
        ]
    );
    assert_eq!(store.calls(), (1, 0, 1), "no write after a failed load");
}

#[tokio::test]
async fn an_unreadable_item_fails_its_stream_only() {
    let store = FaultyStore::with(Faults {
        corrupt: vec![EntityKey::of::<shop::Order>("order-c")],
        ..Default::default()
    });
    let runner = Runner::new(shop::domain(), store.clone(), RunnerConfig::default());
    let event = batch(vec![
        message("c1", "order-c", &order_body("OrderUpdated", "order-c", 2)),
        message("k1", "order-k", &order_body("OrderCreated", "order-k", 1)),
    ]);
    let report = runner.run(&event, no_deadline()).await.expect("run");
    assert_eq!(
        outcomes(&report),
        [("c1", Outcome::StorageError), ("k1", Outcome::Applied)]
    );
}

#[tokio::test]
async fn a_failed_stock_transaction_fails_its_stream_only() {
    let store = FaultyStore::with(Faults {
        adjust_fails: true,
        ..Default::default()
    });
    let runner = Runner::new(shop::domain(), store.clone(), RunnerConfig::default());
    let event = batch(vec![
        message("i1", "SKU-F", &inventory_adjusted("inv-1", "SKU-F", 4)),
        message("i2", "SKU-F", &inventory_adjusted("inv-2", "SKU-F", 1)),
        message("o1", "order-f", &order_body("OrderCreated", "order-f", 1)),
    ]);
    let report = runner.run(&event, no_deadline()).await.expect("run");
    // i1 and i2 share one transaction: both fail with it; order-f goes on.
    assert_eq!(
        outcomes(&report),
        [
            ("i1", Outcome::StorageError),
            ("i2", Outcome::StorageError),
            ("o1", Outcome::Applied)
        ]
    );
    assert_eq!(
        store.calls().2,
        1,
        "one transaction for the sku's adjustments"
    );
    assert_eq!(
        store.counter(&shop::STOCK, "SKU-F").await.expect("read"),
        None
    );
}

#[tokio::test]
async fn a_skus_adjustments_are_one_transaction_and_known_duplicates_none() {
    let store = FaultyStore::with(Faults::default());
    let runner = Runner::new(shop::domain(), store.clone(), RunnerConfig::default());
    let event = batch(vec![
        message("i1", "SKU-T", &inventory_adjusted("inv-1", "SKU-T", 4)),
        message("i2", "SKU-T", &inventory_adjusted("inv-2", "SKU-T", -1)),
        message(
            "i1-again",
            "SKU-T",
            &inventory_adjusted("inv-1", "SKU-T", 4),
        ),
        message("i3", "SKU-T", &inventory_adjusted("inv-3", "SKU-T", 10)),
    ]);
    let report = runner.run(&event, no_deadline()).await.expect("run");
    assert_eq!(
        outcomes(&report),
        [
            ("i1", Outcome::Applied),
            ("i2", Outcome::Applied),
            ("i1-again", Outcome::Duplicate),
            ("i3", Outcome::Applied)
        ]
    );
    assert_eq!(store.calls(), (1, 0, 1), "one load, one transaction");
    assert_eq!(
        store.counter(&shop::STOCK, "SKU-T").await.expect("read"),
        Some(13)
    );
    // Redelivered: the load finds every record; no transaction at all.
    let report = runner.run(&event, no_deadline()).await.expect("run");
    assert_eq!(report.count(Outcome::Duplicate), 4);
    assert_eq!(store.calls(), (2, 0, 1));
}

#[tokio::test]
async fn a_race_lost_too_often_is_failed_not_forced() {
    let store = FaultyStore::with(Faults {
        save_always_raced: true,
        ..Default::default()
    });
    let runner = Runner::new(
        shop::domain(),
        store.clone(),
        RunnerConfig {
            condition_retries: 2,
            ..RunnerConfig::default()
        },
    );
    store
        .inner
        .save(&product_entity("product-r", 1), None)
        .await
        .expect("seed");
    // The competing writer moves the product on before each of our writes.
    let event = batch(vec![message(
        "p2",
        "product-r",
        &price_changed("product-r", 2),
    )]);
    let report = runner.run(&event, no_deadline()).await.expect("run");
    // First try expects 1 (raced to 2): decided again from 2, event 2 is a duplicate.
    assert_eq!(outcomes(&report), [("p2", Outcome::Duplicate)]);
    assert_eq!(store.calls().1, 1);

    let event = batch(vec![
        message("p3", "product-r", &price_changed("product-r", 3)),
        message("p4", "product-r", &price_changed("product-r", 4)),
        message("p5", "product-r", &price_changed("product-r", 5)),
        message("p6", "product-r", &price_changed("product-r", 6)),
    ]);
    store
        .inner
        .save(&product_entity("product-r", 2), Some(2))
        .await
        .expect("reset");
    let report = runner.run(&event, no_deadline()).await.expect("run");
    // Every write loses; after 2 re-decisions the runner gives up on the run.
    let failed: Vec<Outcome> = report
        .messages
        .iter()
        .map(|message| message.outcome)
        .collect();
    assert!(failed.contains(&Outcome::StorageError), "{failed:?}");
    let reason = report
        .messages
        .iter()
        .find_map(|message| message.reason.clone())
        .unwrap_or_default();
    assert!(reason.contains("lost the race"), "{reason}");
    assert_eq!(
        store.calls().1,
        1 + 3,
        "the first run's write, then a try and two re-decisions"
    );
}

fn product_entity(id: &str, sequence: u64) -> Keyed {
    Keyed::new(
        id,
        Product {
            sequence,
            last_event_id: format!("seed-{sequence}"),
            name: "Lamp".into(),
            price_cents: 1,
        },
    )
}

#[tokio::test]
async fn past_the_deadline_nothing_is_attempted_and_everything_is_failed() {
    let store = FaultyStore::with(Faults::default());
    let runner = Runner::new(shop::domain(), store.clone(), RunnerConfig::default());
    let event = batch(vec![
        message("o1", "order-t", &order_body("OrderCreated", "order-t", 1)),
        message("i1", "SKU-T", &inventory_adjusted("inv-t", "SKU-T", 4)),
    ]);
    // 300 ms left, less than the 500 ms margin.
    let invocation = Invocation {
        deadline: Some(Instant::now() + Duration::from_millis(300)),
        now: 0,
    };
    let report = runner.run(&event, invocation).await.expect("run");
    assert_eq!(failed_ids(&report), ["o1", "i1"]);
    assert_eq!(store.calls(), (0, 0, 0), "no store call was made");
    for message in &report.messages {
        assert_eq!(message.outcome, Outcome::Skipped, "{}", message.message_id);
        let reason = message.reason.as_deref().unwrap_or_default();
        assert!(reason.contains("deadline"), "{reason}");
    }
}

#[tokio::test]
async fn a_write_that_would_outlive_the_invocation_is_cut_and_failed() {
    let store = FaultyStore::with(Faults {
        save_delay: Some(Duration::from_secs(30)),
        ..Default::default()
    });
    let runner = Runner::new(
        shop::domain(),
        store.clone(),
        RunnerConfig {
            deadline_margin: Duration::from_millis(100),
            ..RunnerConfig::default()
        },
    );
    let event = batch(vec![message(
        "o1",
        "order-s",
        &order_body("OrderCreated", "order-s", 1),
    )]);
    let started = Instant::now();
    let invocation = Invocation {
        deadline: Some(started + Duration::from_millis(400)),
        now: 0,
    };
    let report = runner.run(&event, invocation).await.expect("run");
    assert_eq!(outcomes(&report), [("o1", Outcome::StorageError)]);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "the runner did not wait for the slow write"
    );
    let reason = report.messages[0].reason.clone().unwrap_or_default();
    assert!(reason.contains("did not answer"), "{reason}");
}

#[tokio::test]
async fn bad_inputs_each_fail_alone() {
    let store = FaultyStore::with(Faults::default());
    let runner = Runner::new(shop::domain(), store.clone(), RunnerConfig::default());
    let mut no_body = message("no-body", "g-nobody", "");
    no_body.body = None;
    let event = batch(vec![
        message("not-json", "g1", "{\"eventId\""),
        message("deep", "g2", &"[".repeat(100_000)),
        message("array", "g3", "[1,2,3]"),
        message(
            "unknown",
            "g4",
            &json!({"eventId":"e","type":"Nope","data":{}}).to_string(),
        ),
        message("zero", "g5", &order_body("OrderUpdated", "order-z", 0)),
        message("binary", "g6", "\u{0}\u{1}\u{fffd}"),
        no_body,
        message(
            "fine",
            "order-fine",
            &order_body("OrderCreated", "order-fine", 1),
        ),
    ]);
    let report = runner.run(&event, no_deadline()).await.expect("run");
    let expected_invalid = [
        "not-json", "deep", "array", "unknown", "zero", "binary", "no-body",
    ];
    assert_eq!(failed_ids(&report), expected_invalid);
    for message in &report.messages[..7] {
        assert_eq!(message.outcome, Outcome::Invalid, "{}", message.message_id);
        assert!(
            message
                .reason
                .as_deref()
                .is_some_and(|reason| !reason.is_empty())
        );
    }
    assert_eq!(report.messages[7].outcome, Outcome::Applied);
}

/// The samples in `events/` are shaped as SQS delivers a FIFO batch to
/// Lambda, and follow the contract's group and deduplication ids.
#[test]
fn the_sample_events_are_real_sqs_fifo_batches() {
    use md5::{Digest, Md5};
    for (file, json) in samples::ALL {
        let raw: serde_json::Value = serde_json::from_str(json).expect("JSON");
        let records = raw["Records"].as_array().expect("Records");
        assert!(
            !records.is_empty() && records.len() <= 10,
            "{file}: a batch holds 1 to 10 records"
        );
        for record in records {
            let id = record["messageId"].as_str().unwrap_or_default();
            let at = format!("{file} {id}");
            for field in [
                "messageId",
                "receiptHandle",
                "body",
                "md5OfBody",
                "eventSourceARN",
                "awsRegion",
            ] {
                assert!(
                    record[field].as_str().is_some_and(|v| !v.is_empty()),
                    "{at}: {field}"
                );
            }
            assert_eq!(record["eventSource"], "aws:sqs", "{at}");
            assert!(
                record["eventSourceARN"]
                    .as_str()
                    .is_some_and(|arn| arn.ends_with(".fifo")),
                "{at}"
            );
            let body = record["body"].as_str().unwrap_or_default();
            let md5: String = Md5::digest(body.as_bytes())
                .iter()
                .map(|byte| format!("{byte:02x}"))
                .collect();
            assert_eq!(record["md5OfBody"], md5.as_str(), "{at}: md5OfBody");
            let attributes = &record["attributes"];
            for attribute in [
                "ApproximateReceiveCount",
                "SentTimestamp",
                "SequenceNumber",
                "MessageGroupId",
            ] {
                assert!(attributes[attribute].is_string(), "{at}: {attribute}");
            }
            // Readable bodies follow the contract's group and deduplication ids; a
            // producer's resend after SQS's 5-minute window carries a new one.
            let Ok(event) = serde_json::from_str::<serde_json::Value>(body) else {
                continue;
            };
            let (group, dedup) = match event["sequence"].as_u64() {
                Some(sequence) => {
                    let aggregate = event["aggregateId"].as_str().unwrap_or_default();
                    (aggregate.to_owned(), format!("{aggregate}:{sequence}"))
                }
                None if event["type"] == "InventoryAdjusted" => (
                    event["data"]["sku"].as_str().unwrap_or_default().to_owned(),
                    event["eventId"].as_str().unwrap_or_default().to_owned(),
                ),
                None => continue, // an invalid sample
            };
            assert_eq!(
                attributes["MessageGroupId"],
                group.as_str(),
                "{at}: MessageGroupId"
            );
            let sent_dedup = attributes["MessageDeduplicationId"]
                .as_str()
                .unwrap_or_default();
            assert!(
                sent_dedup == dedup || sent_dedup == format!("{dedup}:resent"),
                "{at}: MessageDeduplicationId {sent_dedup}, expected {dedup}"
            );
        }
        // The Lambda event type reads every sample.
        assert_eq!(sample(json).records.len(), records.len(), "{file}");
    }
}

/// A body too large for a DynamoDB item (400 KB) cannot be parked or
/// recorded as a conflict: the message fails with a reason that says so,
/// and costs nothing else.
#[tokio::test]
async fn bodies_too_large_to_park_or_record_fail_alone_with_a_reason() {
    let store = FaultyStore::with(Faults::default());
    let runner = Runner::new(shop::domain(), store.clone(), RunnerConfig::default());
    let big = |sequence: u64, event_id: &str| {
        json!({
            "eventId": event_id,
            "type": "OrderUpdated",
            "aggregateId": "order-big",
            "sequence": sequence,
            "data": { "customerName": "Ada", "email": "ada@example.com", "totalCents": 1 },
            "padding": "x".repeat(360 * 1024),
        })
        .to_string()
    };
    let created = order_body("OrderCreated", "order-big", 1);
    runner
        .run(
            &batch(vec![message("c1", "order-big", &created)]),
            no_deadline(),
        )
        .await
        .expect("run");

    let gap = delivered(message("g3", "order-big", &big(3, "order-big-3")), 3);
    let fine = delivered(
        message(
            "o1",
            "order-other",
            &order_body("OrderCreated", "order-other", 1),
        ),
        1,
    );
    let report = runner
        .run(&batch(vec![gap, fine]), no_deadline())
        .await
        .expect("run");
    assert_eq!(
        outcomes(&report),
        [("g3", Outcome::Gap), ("o1", Outcome::Applied)]
    );
    assert!(
        report.messages[0]
            .reason
            .as_deref()
            .is_some_and(|reason| reason.contains("not parked: the body is")),
        "{:?}",
        report.messages[0].reason
    );
    let key = EntityKey::of::<shop::Order>("order-big");
    assert!(
        store
            .inspect(&key)
            .await
            .expect("inspect")
            .parked
            .is_empty()
    );

    // A different event for the applied sequence 1, too large to record.
    let conflicting = big(1, "another-1").replace("OrderUpdated", "OrderCreated");
    let report = runner
        .run(
            &batch(vec![message("x1", "order-big", &conflicting)]),
            no_deadline(),
        )
        .await
        .expect("run");
    assert_eq!(outcomes(&report), [("x1", Outcome::Invalid)]);
    assert!(
        report.messages[0]
            .reason
            .as_deref()
            .is_some_and(|reason| reason.contains("too large to record")),
        "{:?}",
        report.messages[0].reason
    );
    assert!(
        store
            .inspect(&key)
            .await
            .expect("inspect")
            .conflicts
            .is_empty()
    );
    assert_eq!(sequence_of(&*store, key).await, Some(1));
}

/// An update parked in a batch and found behind a creation later in the same
/// batch stands only if the write that creates the entity does.
#[tokio::test]
async fn a_park_cleared_by_a_later_creation_is_not_acknowledged_when_the_write_fails() {
    let store = FaultyStore::with(Faults {
        save_fails_for: vec!["order-f".into()],
        ..Default::default()
    });
    let runner = Runner::new(shop::domain(), store.clone(), RunnerConfig::default());
    let update = delivered(
        message("u3", "order-f", &order_body("OrderUpdated", "order-f", 3)),
        3,
    );
    let creation = message("c5", "order-f", &order_body("OrderCreated", "order-f", 5));
    let report = runner
        .run(&batch(vec![update, creation]), no_deadline())
        .await
        .expect("run");
    assert_eq!(failed_ids(&report), ["u3", "c5"], "{report:?}");
    store.set(Faults::default());
    let update = delivered(
        message("u3", "order-f", &order_body("OrderUpdated", "order-f", 3)),
        4,
    );
    let creation = message("c5", "order-f", &order_body("OrderCreated", "order-f", 5));
    let report = runner
        .run(&batch(vec![update, creation]), no_deadline())
        .await
        .expect("run");
    assert_eq!(
        outcomes(&report),
        [("u3", Outcome::Duplicate), ("c5", Outcome::Applied)]
    );
    let key = EntityKey::of::<shop::Order>("order-f");
    assert_eq!(sequence_of(&*store, key.clone()).await, Some(5));
    assert!(
        store
            .inspect(&key)
            .await
            .expect("inspect")
            .parked
            .is_empty()
    );
}

/// A write the table refuses for good (DynamoDB's ValidationException) is
/// its own outcome, not a storage error: failed with a reason that says
/// retrying will not help; the rest of its stream waits, other streams go on.
#[tokio::test]
async fn a_write_the_table_refuses_for_good_is_rejected_not_a_storage_error() {
    let store = FaultyStore::with(Faults::default());
    let runner = Runner::new(shop::domain(), store.clone(), RunnerConfig::default());
    let created = batch(vec![
        message(
            "big-1",
            "order-big",
            &order_body("OrderCreated", "order-big", 1),
        ),
        message(
            "ok-1",
            "order-ok",
            &order_body("OrderCreated", "order-ok", 1),
        ),
    ]);
    runner.run(&created, no_deadline()).await.expect("run");
    store.set(Faults {
        save_rejected_for: vec!["order-big".into()],
        ..Default::default()
    });
    let report = runner
        .run(
            &batch(vec![
                message(
                    "big-2",
                    "order-big",
                    &order_body("OrderUpdated", "order-big", 2),
                ),
                message(
                    "big-3",
                    "order-big",
                    &order_body("OrderUpdated", "order-big", 3),
                ),
                message(
                    "ok-2",
                    "order-ok",
                    &order_body("OrderUpdated", "order-ok", 2),
                ),
            ]),
            no_deadline(),
        )
        .await
        .expect("run");
    assert_eq!(
        outcomes(&report),
        [
            ("big-2", Outcome::Rejected),
            ("big-3", Outcome::Skipped),
            ("ok-2", Outcome::Applied)
        ]
    );
    let reason = report.messages[0].reason.as_deref().unwrap_or_default();
    assert!(
        reason.contains("refused by the table")
            && reason.contains("ValidationException")
            && reason.contains("will not help"),
        "{reason}"
    );
    assert_eq!(report.count(Outcome::StorageError), 0);
    assert_eq!(
        sequence_of(&*store, EntityKey::of::<shop::Order>("order-big")).await,
        Some(1)
    );
    assert!(sequence_guard::metrics::emitted().contains(&"Rejected"));
}

/// onHand moves between two attempts of a stream's stock transaction: the
/// first refusal cuts at the fourth adjustment, the second (onHand higher
/// now) at the second. Every message still gets exactly one verdict: the
/// first applied, the second rejected, the rest not attempted.
#[tokio::test]
async fn a_second_refusal_of_a_stock_step_keeps_one_verdict_per_message() {
    let store = FaultyStore::with(Faults {
        adjust_answers: vec![
            Added::OutOfRange {
                counter: &shop::STOCK,
                id: "SKU-Q".into(),
                value: Some(i64::MAX - 35),
            },
            Added::OutOfRange {
                counter: &shop::STOCK,
                id: "SKU-Q".into(),
                value: Some(i64::MAX - 15),
            },
        ],
        ..Default::default()
    });
    let runner = Runner::new(shop::domain(), store.clone(), RunnerConfig::default());
    let messages: Vec<_> = (1..=5)
        .map(|n| {
            let id = format!("q{n}");
            message(&id, "SKU-Q", &inventory_adjusted(&id, "SKU-Q", 10))
        })
        .collect();
    let report = runner
        .run(&batch(messages), no_deadline())
        .await
        .expect("run");
    assert_eq!(
        outcomes(&report),
        [
            ("q1", Outcome::Applied),
            ("q2", Outcome::Rejected),
            ("q3", Outcome::Skipped),
            ("q4", Outcome::Skipped),
            ("q5", Outcome::Skipped),
        ]
    );
    assert_eq!(
        store
            .inner
            .counter(&shop::STOCK, "SKU-Q")
            .await
            .expect("read"),
        Some(10)
    );
    assert_eq!(
        store.calls().2,
        3,
        "two refusals, then the one adjustment before both"
    );
}
