//! The in-memory store behind faults drawn per case (before or after a
//! write takes effect), checking that every entity written is the fold of a
//! prefix of its stream.

use super::*;

/// Faults injected around the in-memory store, and the prefix check.
pub(super) struct SimStore {
    pub(super) inner: MemoryStore,
    pub(super) plan: Mutex<(Rng, u64, u32)>, // (rng, fault percent, faults left)
    pub(super) expected: HashMap<EntityKey, Vec<AnyEntity>>,
    pub(super) violations: Mutex<Vec<String>>,
    pub(super) faults: AtomicU64,
    /// The event store's streams, when the consumer reads it.
    pub(super) events: Option<HashMap<String, Vec<StoredEvent>>>,
}

#[derive(Clone, Copy, PartialEq)]
enum Fault {
    None,
    Before,
    After,
}

impl SimStore {
    fn fault(&self) -> Fault {
        let mut plan = self.plan.lock().expect("plan");
        let (rng, percent, left) = &mut *plan;
        if *left == 0 || !rng.chance(*percent) {
            return Fault::None;
        }
        *left -= 1;
        self.faults.fetch_add(1, Ordering::Relaxed);
        if rng.chance(50) {
            Fault::Before
        } else {
            Fault::After
        }
    }

    fn injected(operation: &'static str) -> StoreError {
        StoreError::Request {
            operation,
            message: "injected transient fault".into(),
        }
    }
}

impl Store for SimStore {
    async fn load(&self, keys: &[EntityKey], dedup: &[DedupKey]) -> Result<Loaded, StoreError> {
        if self.fault() != Fault::None {
            return Err(Self::injected("BatchGetItem"));
        }
        self.inner.load(keys, dedup).await
    }

    async fn commit(&self, commit: &Commit) -> Result<Committed, StoreError> {
        let fault = self.fault();
        if fault == Fault::Before {
            return Err(Self::injected("UpdateItem"));
        }
        let committed = self.inner.commit(commit).await?;
        if let (Committed::Written, Some(entity)) = (&committed, &commit.entity) {
            let prefix = self.expected.get(&commit.key).and_then(|states| {
                states.get(usize::try_from(entity.sequence()).ok()?.checked_sub(1)?)
            });
            if prefix != Some(entity) {
                self.violations.lock().expect("violations").push(format!(
                    "written entity is not the fold of a prefix of its stream: {entity:?}"
                ));
            }
        }
        if fault == Fault::After {
            return Err(Self::injected("UpdateItem"));
        }
        Ok(committed)
    }

    async fn parked(
        &self,
        key: &EntityKey,
        sequences: &[u64],
    ) -> Result<Vec<ParkedEvent>, StoreError> {
        if self.fault() != Fault::None {
            return Err(Self::injected("BatchGetItem"));
        }
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
        let fault = self.fault();
        if fault == Fault::Before {
            return Err(Self::injected("TransactWriteItems"));
        }
        let adjusted = self.inner.add(adjustments).await?;
        if fault == Fault::After {
            return Err(Self::injected("TransactWriteItems"));
        }
        Ok(adjusted)
    }

    async fn counter(
        &self,
        counter: &'static sequence_guard::Counter,
        id: &str,
    ) -> Result<Option<i64>, StoreError> {
        self.inner.counter(counter, id).await
    }

    fn reads_event_store(&self) -> bool {
        self.events.is_some()
    }

    async fn stored_events(
        &self,
        stream: &str,
        after: u64,
        limit: usize,
    ) -> Result<Option<Vec<StoredEvent>>, StoreError> {
        let Some(events) = &self.events else {
            return Ok(None);
        };
        if self.fault() != Fault::None {
            return Err(Self::injected("Query"));
        }
        Ok(Some(
            events
                .get(stream)
                .map(|events| {
                    events
                        .iter()
                        .filter(|event| event.sequence > after)
                        .take(limit)
                        .cloned()
                        .collect()
                })
                .unwrap_or_default(),
        ))
    }
}
