//! What the engine's black-box suites share: the test domain
//! ([`domain`]), its messages ([`messages`]), DynamoDB Local started once
//! per test binary, and reading back what a store holds.
//!
//! A suite takes it with `#[path = "../support/mod.rs"] mod support;`
//! (the `test-support` feature: `sequence_guard::testing`).
#![allow(dead_code)] // each test binary uses part of this

pub mod domain;
pub mod fault_proxy;
pub mod messages;
pub mod rng;

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};

use sequence_guard::runner::{BatchReport, Outcome};
use sequence_guard::store::Store;
use sequence_guard::store::dynamodb::{DynamoStore, connect, create_table};
use sequence_guard::{AnyEntity, Entity, EntityKey};

pub use domain::*;
pub use messages::*;
#[allow(unused_imports)] // for the suites that start their own
pub use sequence_guard::testing::{DynamoLocal, free_port, spawn_dynamodb_local};

static LOCAL: OnceLock<DynamoLocal> = OnceLock::new();
static TABLES: AtomicU32 = AtomicU32::new(0);

/// The shared DynamoDB Local of this test binary, started on first use.
pub fn dynamodb_local() -> &'static DynamoLocal {
    LOCAL.get_or_init(|| {
        DynamoLocal::start().unwrap_or_else(|err| panic!("DynamoDB Local could not start: {err}"))
    })
}

/// A new, empty table on DynamoDB Local, with the contract's key schema.
pub async fn fresh_table() -> DynamoStore {
    let local = dynamodb_local();
    let client = connect(Some(&local.endpoint)).await;
    let name = format!(
        "t{}-{}",
        std::process::id(),
        TABLES.fetch_add(1, Ordering::Relaxed)
    );
    create_table(&client, &name).await.expect("create table");
    DynamoStore::new(client, name)
}

/// One entity as stored now (`None`: there is none).
pub async fn entity<S: Store>(store: &S, key: EntityKey) -> Option<AnyEntity> {
    let mut loaded = store
        .load(std::slice::from_ref(&key), &[])
        .await
        .expect("load")
        .entities;
    loaded.remove(&key).map(|entity| entity.expect("readable"))
}

/// The `T` `id` as stored now (`None`: there is none).
pub async fn typed<T: Entity, S: Store>(store: &S, id: &str) -> Option<T> {
    entity(store, EntityKey::of::<T>(id))
        .await
        .map(|entity| entity.get::<T>().cloned().expect("of its kind"))
}

/// The outcome of each message of a report, in batch order.
pub fn outcomes(report: &BatchReport) -> Vec<Outcome> {
    report
        .messages
        .iter()
        .map(|message| message.outcome)
        .collect()
}

/// The message ids a report's batch response lists as failed.
pub fn failed_ids(report: &BatchReport) -> Vec<String> {
    report
        .response()
        .batch_item_failures
        .into_iter()
        .map(|failure| failure.item_identifier)
        .collect()
}
