//! The batch runner on the in-memory store, with faults injected around it:
//! what is reported failed, what is attempted, what reaches the store; on
//! the engine's test domain (`tests/support/domain.rs`).
//! Here: the store behind a layer of faults and the helpers the topics share.

#[path = "../support/mod.rs"]
mod support;

mod bad_inputs;
mod deadline;
mod races;
mod rejected_writes;
mod store_faults;
mod streams;
mod test_domain;

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use sequence_guard::EntityKey;
use sequence_guard::runner::{BatchError, BatchReport, Invocation, Outcome, Runner, RunnerConfig};
use sequence_guard::store::DedupAddition;
use sequence_guard::store::memory::MemoryStore;
use sequence_guard::store::{
    Added, Commit, Committed, DedupKey, Inspection, Loaded, ParkedEvent, Store, StoreError,
};
use sequence_guard::testing::Keyed;
use sequence_guard::testing::SaveExt;
use serde_json::json;
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
    /// Answers to the next counter transactions, in order, before the
    /// store's own (another invocation moving a level between two attempts).
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
            if let Some(mut tag) = current
                .as_ref()
                .and_then(|current| current.get::<Tag>())
                .cloned()
            {
                // As another invocation applying the next event would.
                tag.sequence += 1;
                tag.last_event_id = format!("{}-{}-TagWeighed", key.id(), tag.sequence);
                self.inner
                    .save(&Keyed::new(key.id(), tag), current.map(|c| c.sequence()))
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

    async fn add(&self, adjustments: &[DedupAddition]) -> Result<Added, StoreError> {
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

async fn sequence_of<S: Store>(store: &S, key: EntityKey) -> Option<u64> {
    entity(store, key).await.map(|entity| entity.sequence())
}
