//! A stream is one kind's: an append to a stream that holds events of
//! another kind (an entity kind, or a counter) is refused, naming the
//! stream and both kinds, and writes nothing; on DynamoDB Local, on every
//! way an append finds the stream (its last event read, the expected event
//! checked in the transaction, read first), by the `append` binary (exit
//! 2), and for a stream of an earlier release (no `kind` on its items).
//!
//! The scenario: a shop that uses the sku as its product id. Before,
//! `ProductCreated SKU-1` took sequence 1, `InventoryAdjusted sku=SKU-1`
//! sequence 2, `ProductPriceChanged` 3, and the product waited for its 2
//! for ever.

mod support;

use aws_sdk_dynamodb::types::AttributeValue;
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
    let domain = personal_data::keyed_domain(&client, &name);
    EventStore::new(client, name, domain)
}

fn product_created() -> NewEvent {
    NewEvent::new(
        "ProductCreated",
        json!({"name": "Lamp", "priceCents": 1000}),
    )
}

fn price_changed(cents: u64) -> NewEvent {
    NewEvent::new("ProductPriceChanged", json!({"priceCents": cents}))
}

fn adjusted(sku: &str) -> NewEvent {
    NewEvent::new("InventoryAdjusted", json!({"sku": sku, "delta": 5}))
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
            "the stream `SKU-1` holds events of the entity kind PRODUCT, and InventoryAdjusted projects onto the counter SKU#STOCK: a stream is one kind's"
        ),
        other => panic!("refused as another kind's stream, not {other:?}"),
    }
}

#[tokio::test]
async fn a_product_stream_refuses_a_stock_adjustment_and_goes_on() {
    let store = fresh_store().await;
    let first = store
        .append(Append::one("SKU-1", product_created()))
        .await
        .expect("the product");
    assert_eq!(first.sequence, 1);
    // Its last event read (any sequence), in the transaction (an exact
    // sequence), read first: each refuses, and nothing is written.
    assert_other_kind(store.append(Append::one("SKU-1", adjusted("SKU-1"))).await);
    assert_other_kind(store.append(exact("SKU-1", 1, adjusted("SKU-1"))).await);
    let read_first = store.clone().with_exact_check(ExactCheck::ReadFirst);
    assert_other_kind(
        read_first
            .append(exact("SKU-1", 1, adjusted("SKU-1")))
            .await,
    );
    let mut with_request = Append::one("SKU-1", adjusted("SKU-1"));
    with_request.request_id = Some("r-1".into());
    assert_other_kind(store.append(with_request).await);
    assert_eq!(store.last_sequence("SKU-1").await.expect("last"), 1);
    // The product's next event takes 2: nothing waits.
    let next = store
        .append(Append::one("SKU-1", price_changed(1200)))
        .await
        .expect("the price");
    assert_eq!(next.sequence, 2);
    let stored = store.read("SKU-1", 0, 10).await.expect("read");
    let types: Vec<&str> = stored
        .iter()
        .map(|event| event.event_type.as_str())
        .collect();
    assert_eq!(types, ["ProductCreated", "ProductPriceChanged"]);
}

#[tokio::test]
async fn a_counter_stream_refuses_an_entitys_event() {
    let store = fresh_store().await;
    store
        .append(Append::one("SKU-2", adjusted("SKU-2")))
        .await
        .expect("the stock");
    for append in [
        Append::one("SKU-2", product_created()),
        exact("SKU-2", 1, product_created()),
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
                    "SKU-2",
                    "the counter SKU#STOCK",
                    "ProductCreated",
                    "the entity kind PRODUCT"
                )
            ),
            other => panic!("refused, not {other:?}"),
        }
    }
    // An order's stream refuses a product's event the same way.
    store
        .append(Append::one(
            "order-1",
            NewEvent::new(
                "OrderCreated",
                json!({"customerName": "Ada", "email": "a@example.com", "totalCents": 1}),
            ),
        ))
        .await
        .expect("the order");
    assert!(matches!(
        store.append(Append::one("order-1", price_changed(1))).await,
        Err(AppendError::OtherKind { .. })
    ));
    assert_eq!(store.last_sequence("order-1").await.expect("last"), 1);
}

/// One append of events of two kinds is refused before anything is sent.
#[tokio::test]
async fn an_append_of_two_kinds_is_refused_before_any_request() {
    let store = fresh_store().await;
    let append = Append {
        events: vec![product_created(), adjusted("SKU-3")],
        ..Append::one("SKU-3", product_created())
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
    let body = json!({"eventId": "old-1", "type": "ProductCreated", "aggregateId": "SKU-1", "sequence": 1,
        "data": {"name": "Lamp", "priceCents": 1000}});
    store
        .client()
        .put_item()
        .table_name(store.table())
        .item("pk", AttributeValue::S("STREAM#SKU-1".into()))
        .item("sk", AttributeValue::S(format!("EVENT#{:020}", 1)))
        .item("eventId", AttributeValue::S("old-1".into()))
        .item("type", AttributeValue::S("ProductCreated".into()))
        .item("sequence", AttributeValue::N("1".into()))
        .item("body", AttributeValue::S(body.to_string()))
        .item("appendedAt", AttributeValue::N("1".into()))
        .send()
        .await
        .expect("an earlier release's event");
    assert_other_kind(store.append(Append::one("SKU-1", adjusted("SKU-1"))).await);
    let next = store
        .append(Append::one("SKU-1", price_changed(900)))
        .await
        .expect("the price");
    assert_eq!(next.sequence, 2);
}

/// The binary: exit 2, the stream and both kinds named, nothing written.
#[tokio::test]
async fn the_append_binary_refuses_with_exit_2() {
    let local = dynamodb_local();
    let store = fresh_store().await;
    let table = store.table().to_owned();
    let run = |args: &[&str]| {
        let mut all = vec!["--table", table.as_str()];
        all.extend_from_slice(args);
        run_local(env!("CARGO_BIN_EXE_append"), &local.endpoint, &all)
    };
    let (code, _, stderr) = run(&[
        "--stream",
        "SKU-1",
        "--type",
        "ProductCreated",
        "--data",
        r#"{"name":"Lamp","priceCents":1000}"#,
    ]);
    assert_eq!(code, 0, "{stderr}");
    let (code, stdout, stderr) = run(&[
        "--stream",
        "SKU-1",
        "--type",
        "InventoryAdjusted",
        "--data",
        r#"{"sku":"SKU-1","delta":5}"#,
    ]);
    assert_eq!(code, 2, "{stdout}{stderr}");
    assert!(
        stderr.contains("`SKU-1`")
            && stderr.contains("the entity kind PRODUCT")
            && stderr.contains("the counter SKU#STOCK")
            && stderr.contains("nothing appended"),
        "{stderr}"
    );
    assert_eq!(store.last_sequence("SKU-1").await.expect("last"), 1);
}
