//! Test support (the `test-support` feature): what tests and the benchmark
//! need and the function does not.
//!
//! - [`SaveExt::save`]: writes one entity with the guard's condition, as a
//!   test sets up a table (or plays another invocation).

use std::collections::BTreeSet;
use std::future::Future;

use crate::entity::{AnyEntity, Entity, EntityKey};
use crate::store::{Commit, Committed, Expected, Store, StoreError};

/// The answer to a conditional save.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Saved {
    /// The entity was written.
    Written,
    /// The stored entity was no longer at the expected sequence: another
    /// invocation wrote it first. `current` is what is stored now (`None`:
    /// nothing), as returned by the failed condition itself.
    Conflict { current: Option<AnyEntity> },
}

/// An entity and its key: what a test saves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Keyed {
    pub key: EntityKey,
    pub entity: AnyEntity,
}

impl Keyed {
    /// The `T` `id`.
    pub fn new<T: Entity>(id: &str, entity: T) -> Self {
        Keyed {
            key: EntityKey::of::<T>(id),
            entity: AnyEntity::new(entity),
        }
    }
}

/// One entity written with the guard's condition, through
/// [`Store::commit`].
pub trait SaveExt: Store {
    /// Writes the entity only if the stored one is still at `expected`
    /// (`None`: only if there is none) and nothing is parked on it.
    fn save(
        &self,
        keyed: &Keyed,
        expected: Option<u64>,
    ) -> impl Future<Output = Result<Saved, StoreError>> + Send {
        let commit = Commit {
            key: keyed.key.clone(),
            expected: Expected {
                sequence: expected,
                parked: BTreeSet::new(),
                entity: None,
            },
            entity: Some(keyed.entity.clone()),
            park: Vec::new(),
            drain: Vec::new(),
            conflicts: Vec::new(),
            now: 0,
        };
        async move {
            Ok(match self.commit(&commit).await? {
                Committed::Written => Saved::Written,
                Committed::Conflict { current } => Saved::Conflict {
                    current: current.entity,
                },
            })
        }
    }
}

impl<S: Store + ?Sized> SaveExt for S {}
