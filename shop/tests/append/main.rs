//! The producer's half on DynamoDB Local: the event store's append (the events,
//! the request record and the caller's writes, all or nothing), checked with the
//! consumer's declarations; the `append` binary; appenders racing on a few
//! streams; requests repeated, also after lost answers and from a new
//! process; faults between the caller and the table. Here: the helpers the
//! topics share.

#[path = "../support/mod.rs"]
mod support;

mod expected_sequences;
mod faults;
mod races;
mod repeated_requests;
mod twin;
mod writes;

use std::collections::{BTreeMap, HashSet};
use std::process::Command;
use std::sync::Arc;

use aws_sdk_dynamodb::types::{AttributeValue, Put, TransactWriteItem};
use sequence_guard::producer::{
    Append, AppendError, EventStore, ExpectedSequence, NewEvent, StoredEvent,
};
use sequence_guard::store::dynamodb::{connect, ensure_events_table};
use serde_json::{Value, json};
use support::fault_proxy::{Fault, FaultProxy};
use support::*;

async fn fresh_store(endpoint: &str) -> EventStore {
    let client = connect(Some(endpoint)).await;
    let name = format!(
        "events-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos())
    );
    ensure_events_table(&client, &name)
        .await
        .expect("events table");
    let domain = personal_data::keyed_domain(&client, &name);
    EventStore::new(client, name, domain)
}

fn created(total_cents: u64) -> NewEvent {
    NewEvent::new(
        "OrderCreated",
        json!({"customerName": "Ada", "email": "ada@example.com", "totalCents": total_cents}),
    )
}

/// An update: never a stream's first event (the producer refuses it); the
/// racing tests append creations, whose place in a stream the store does
/// not mind.
fn updated(total_cents: u64) -> NewEvent {
    NewEvent::new(
        "OrderUpdated",
        json!({"customerName": "Ada", "email": "ada@example.com", "totalCents": total_cents}),
    )
}

async fn events(store: &EventStore, stream: &str) -> Vec<StoredEvent> {
    let mut all = Vec::new();
    loop {
        let after = all.last().map_or(0, |event: &StoredEvent| event.sequence);
        let page = store.read(stream, after, 100).await.expect("read");
        if page.is_empty() {
            return all;
        }
        all.extend(page);
    }
}

/// Every item of the table, as (pk, sk) -> attributes.
async fn items(store: &EventStore, endpoint: &str) -> BTreeMap<(String, String), Value> {
    let client = connect(Some(endpoint)).await;
    let output = client
        .scan()
        .table_name(store.table())
        .consistent_read(true)
        .send()
        .await
        .expect("scan");
    output
        .items
        .unwrap_or_default()
        .into_iter()
        .map(|item| {
            let text = |name: &str| match item.get(name) {
                Some(AttributeValue::S(text)) => text.clone(),
                _ => String::new(),
            };
            let attributes: serde_json::Map<String, Value> = item
                .iter()
                .filter(|(name, _)| *name != "pk" && *name != "sk")
                .map(|(name, value)| {
                    let value = match value {
                        AttributeValue::S(text) => json!(text),
                        AttributeValue::N(number) => json!(number),
                        other => json!(format!("{other:?}")),
                    };
                    (name.clone(), value)
                })
                .collect();
            ((text("pk"), text("sk")), Value::Object(attributes))
        })
        .collect()
}

/// Each stream holds 1..n with no gap, and its last sequence is n.
async fn assert_contiguous(store: &EventStore, stream: &str) -> Vec<StoredEvent> {
    let stored = events(store, stream).await;
    let sequences: Vec<u64> = stored.iter().map(|event| event.sequence).collect();
    assert_eq!(
        sequences,
        (1..=stored.len() as u64).collect::<Vec<_>>(),
        "{stream}"
    );
    assert_eq!(
        store.last_sequence(stream).await.expect("last sequence"),
        stored.len() as u64
    );
    for event in &stored {
        let body: Value = serde_json::from_str(&event.body).expect("a JSON body");
        if event.event_type != "InventoryAdjusted" {
            assert_eq!(body["sequence"], json!(event.sequence), "{stream}");
        }
        let domain = store.domain();
        domain
            .fetch_keys([event.body.as_str()])
            .await
            .expect("its keys");
        domain.parse(&event.body).expect("the consumer takes it");
    }
    stored
}

fn append_binary(endpoint: &str, table: &str, args: &[&str]) -> (i32, String, String) {
    let mut all = vec!["--table", table];
    all.extend_from_slice(args);
    run_local(env!("CARGO_BIN_EXE_append"), endpoint, &all)
}
