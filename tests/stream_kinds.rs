//! A stream is one kind's: an append to a stream that holds events of
//! another kind (an entity kind, or a counter) is refused, naming the
//! stream and both kinds, and writes nothing; on DynamoDB Local, on every
//! way an append finds the stream (its last event read, the expected event
//! checked in the transaction, read first), and for a stream of an earlier
//! release (no `kind` on its items). (The `append` binary's exit 2 is the
//! worked example's: its test is in `shop/tests/stream_kinds.rs`.)
//!
//! The scenario: a domain that uses a gauge's name as a tag's id. Before,
//! `TagCreated G-1` took sequence 1, `LevelAdjusted gauge=G-1` sequence
//! 2, `TagWeighed` 3, and the tag waited for its 2 for ever.

mod support;

use std::sync::Arc;

use aws_sdk_dynamodb::types::AttributeValue;
use sequence_guard::personal::{Keyring, LocalKeys};
use sequence_guard::producer::{
    Append, AppendError, EventStore, ExactCheck, ExpectedSequence, NewEvent,
};
use sequence_guard::store::dynamodb::{connect, ensure_events_table};
use serde_json::json;
use support::*;

async fn fresh_store() -> EventStore {
    let local = dynamodb_local();
    let client = connect(Some(&local.endpoint)).await;
    let name = format!(
        "kinds-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos())
    );
    ensure_events_table(&client, &name)
        .await
        .expect("events table");
    // An item's name is personal: its events are sealed with keys.
    let keys = Keyring::new(LocalKeys::new().expect("keys"));
    EventStore::new(client, name, domain().with_keys(Arc::new(keys)))
}

fn tag_created() -> NewEvent {
    NewEvent::new("TagCreated", json!({"label": "Lamp", "weight": 1000}))
}

fn tag_weighed(weight: u64) -> NewEvent {
    NewEvent::new("TagWeighed", json!({"weight": weight}))
}

fn adjusted(gauge: &str) -> NewEvent {
    NewEvent::new("LevelAdjusted", json!({"gauge": gauge, "delta": 5}))
}

fn exact(stream: &str, at: u64, event: NewEvent) -> Append {
    Append {
        expected: ExpectedSequence::Exact(at),
        ..Append::one(stream, event)
    }
}

/// The refusal names the stream and both kinds.
fn assert_other_kind(result: Result<sequence_guard::producer::Appended, AppendError>) {
    match result {
        Err(err @ AppendError::OtherKind { .. }) => assert_eq!(
            err.to_string(),
            "the stream `G-1` holds events of the entity kind TAG, and LevelAdjusted projects onto the counter GAUGE#LEVEL: a stream is one kind's"
        ),
        other => panic!("refused as another kind's stream, not {other:?}"),
    }
}

#[tokio::test]
async fn a_product_stream_refuses_a_stock_adjustment_and_goes_on() {
    let store = fresh_store().await;
    let first = store
        .append(Append::one("G-1", tag_created()))
        .await
        .expect("the tag");
    assert_eq!(first.sequence, 1);
    // Its last event read (any sequence), in the transaction (an exact
    // sequence), read first: each refuses, and nothing is written.
    assert_other_kind(store.append(Append::one("G-1", adjusted("G-1"))).await);
    assert_other_kind(store.append(exact("G-1", 1, adjusted("G-1"))).await);
    let read_first = store.clone().with_exact_check(ExactCheck::ReadFirst);
    assert_other_kind(read_first.append(exact("G-1", 1, adjusted("G-1"))).await);
    let mut with_request = Append::one("G-1", adjusted("G-1"));
    with_request.request_id = Some("r-1".into());
    assert_other_kind(store.append(with_request).await);
    assert_eq!(store.last_sequence("G-1").await.expect("last"), 1);
    // The tag's next event takes 2: nothing waits.
    let next = store
        .append(Append::one("G-1", tag_weighed(1200)))
        .await
        .expect("the weight");
    assert_eq!(next.sequence, 2);
    let stored = store.read("G-1", 0, 10).await.expect("read");
    let types: Vec<&str> = stored
        .iter()
        .map(|event| event.event_type.as_str())
        .collect();
    assert_eq!(types, ["TagCreated", "TagWeighed"]);
}

#[tokio::test]
async fn a_counter_stream_refuses_an_entitys_event() {
    let store = fresh_store().await;
    store
        .append(Append::one("G-2", adjusted("G-2")))
        .await
        .expect("the level");
    for append in [
        Append::one("G-2", tag_created()),
        exact("G-2", 1, tag_created()),
    ] {
        match store.append(append).await {
            Err(AppendError::OtherKind {
                stream,
                found,
                event_type,
                appending,
            }) => assert_eq!(
                (
                    stream.as_str(),
                    found.as_str(),
                    event_type.as_str(),
                    appending.as_str()
                ),
                (
                    "G-2",
                    "the counter GAUGE#LEVEL",
                    "TagCreated",
                    "the entity kind TAG"
                )
            ),
            other => panic!("refused, not {other:?}"),
        }
    }
    // An item's stream refuses a tag's event the same way.
    store
        .append(Append::one(
            "item-1",
            NewEvent::new("ItemCreated", json!({"name": "Ada", "amount": 1})),
        ))
        .await
        .expect("the item");
    assert!(matches!(
        store.append(Append::one("item-1", tag_weighed(1))).await,
        Err(AppendError::OtherKind { .. })
    ));
    assert_eq!(store.last_sequence("item-1").await.expect("last"), 1);
}

/// One append of events of two kinds is refused before anything is sent.
#[tokio::test]
async fn an_append_of_two_kinds_is_refused_before_any_request() {
    let store = fresh_store().await;
    let append = Append {
        events: vec![tag_created(), adjusted("G-3")],
        ..Append::one("G-3", tag_created())
    };
    let requests = store.requests();
    assert!(matches!(
        store.append(append).await,
        Err(AppendError::OtherKind { .. })
    ));
    assert_eq!(store.requests(), requests, "no request");
}

/// A stream of an earlier release (no `kind` on its items): its last
/// event's body says the kind.
#[tokio::test]
async fn a_stream_of_an_earlier_release_is_known_by_its_body() {
    let store = fresh_store().await;
    let body = json!({"eventId": "old-1", "type": "TagCreated", "aggregateId": "G-1", "sequence": 1,
        "data": {"label": "Lamp", "weight": 1000}});
    store
        .client()
        .put_item()
        .table_name(store.table())
        .item("pk", AttributeValue::S("STREAM#G-1".into()))
        .item("sk", AttributeValue::S(format!("EVENT#{:020}", 1)))
        .item("eventId", AttributeValue::S("old-1".into()))
        .item("type", AttributeValue::S("TagCreated".into()))
        .item("sequence", AttributeValue::N("1".into()))
        .item("body", AttributeValue::S(body.to_string()))
        .item("appendedAt", AttributeValue::N("1".into()))
        .send()
        .await
        .expect("an earlier release's event");
    assert_other_kind(store.append(Append::one("G-1", adjusted("G-1"))).await);
    let next = store
        .append(Append::one("G-1", tag_weighed(900)))
        .await
        .expect("the weight");
    assert_eq!(next.sequence, 2);
}
