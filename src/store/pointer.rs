//! A store behind a pointer is a store: `Arc<S>` and `&S` delegate every
//! operation of [`Store`].

use std::future::Future;

use super::{
    Added, Commit, Committed, ConflictRecord, DedupAddition, DedupKey, DueEntry, Inspection,
    Loaded, ParkedEvent, ParkedPage, Store, StoreError, SweepMark,
};
use crate::entity::EntityKey;
use crate::handling::{Counter, Effect};
use crate::producer::StoredEvent;

/// A store behind a pointer is a store: `Arc<S>` (two runners on one table, as
/// two concurrent invocations are) and `&S`.
macro_rules! delegate_store {
    ($($pointer:ty),+) => {$(
        impl<S: Store> Store for $pointer {
            fn load(
                &self,
                keys: &[EntityKey],
                dedup: &[DedupKey],
            ) -> impl Future<Output = Result<Loaded, StoreError>> + Send {
                S::load(self, keys, dedup)
            }

            fn commit(
                &self,
                commit: &Commit,
            ) -> impl Future<Output = Result<Committed, StoreError>> + Send {
                S::commit(self, commit)
            }

            fn commit_with_effects(
                &self,
                commit: &Commit,
                effects: &[Effect],
            ) -> impl Future<Output = Result<Committed, StoreError>> + Send {
                S::commit_with_effects(self, commit, effects)
            }

            fn parked(
                &self,
                key: &EntityKey,
                sequences: &[u64],
            ) -> impl Future<Output = Result<Vec<ParkedEvent>, StoreError>> + Send {
                S::parked(self, key, sequences)
            }

            fn parked_entities(
                &self,
                after: Option<&str>,
                limit: usize,
            ) -> impl Future<Output = Result<ParkedPage, StoreError>> + Send {
                S::parked_entities(self, after, limit)
            }

            fn upgrade_parked_index(
                &self,
                limit: usize,
            ) -> impl Future<Output = Result<usize, StoreError>> + Send {
                S::upgrade_parked_index(self, limit)
            }

            fn sweep_mark(
                &self,
            ) -> impl Future<Output = Result<Option<SweepMark>, StoreError>> + Send {
                S::sweep_mark(self)
            }

            fn save_sweep_mark(
                &self,
                mark: &SweepMark,
            ) -> impl Future<Output = Result<(), StoreError>> + Send {
                S::save_sweep_mark(self, mark)
            }

            fn inspect(
                &self,
                key: &EntityKey,
            ) -> impl Future<Output = Result<Inspection, StoreError>> + Send {
                S::inspect(self, key)
            }

            fn forget_conflicts(
                &self,
                key: &EntityKey,
            ) -> impl Future<Output = Result<usize, StoreError>> + Send {
                S::forget_conflicts(self, key)
            }

            fn add(
                &self,
                additions: &[DedupAddition],
            ) -> impl Future<Output = Result<Added, StoreError>> + Send {
                S::add(self, additions)
            }

            fn counter(
                &self,
                counter: &'static Counter,
                id: &str,
            ) -> impl Future<Output = Result<Option<i64>, StoreError>> + Send {
                S::counter(self, counter, id)
            }

            fn record_counter_conflicts(
                &self,
                counter: &'static Counter,
                id: &str,
                conflicts: &[ConflictRecord],
            ) -> impl Future<Output = Result<(), StoreError>> + Send {
                S::record_counter_conflicts(self, counter, id, conflicts)
            }

            fn due(
                &self,
                shard: u8,
                now: u64,
                after: Option<&DueEntry>,
                limit: usize,
            ) -> impl Future<Output = Result<Vec<DueEntry>, StoreError>> + Send {
                S::due(self, shard, now, after, limit)
            }

            fn reads_event_store(&self) -> bool {
                S::reads_event_store(self)
            }

            fn stored_events(
                &self,
                stream: &str,
                after: u64,
                limit: usize,
            ) -> impl Future<Output = Result<Option<Vec<StoredEvent>>, StoreError>> + Send {
                S::stored_events(self, stream, after, limit)
            }

            fn requests(&self) -> u64 {
                S::requests(self)
            }
        }
    )+};
}

delegate_store!(std::sync::Arc<S>, &S);
