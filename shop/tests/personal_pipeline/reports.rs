//! The copies of an event other than the store's and the queues': a
//! conflict record (another event at an applied sequence), the function's
//! report of a message it fails, and the dispatcher's report of an event
//! item it cannot send. None holds a personal value in clear, before or
//! after the subject is erased; the erasure deletes the conflict record.

use std::time::Duration;

use aws_sdk_dynamodb::types::AttributeValue;
use sequence_guard::personal::{PLACEHOLDER, SEALED_PREFIX};
use sequence_guard::producer::{erase, seal_data};
use sequence_guard::store::dynamodb::connect;
use serde_json::{Value, json};

use crate::pipeline::Pipeline;
use crate::scan::{hits, item, number, text};
use crate::support::function::failures;
use crate::support::localstack::{bodies, send};
use crate::support::{batch, dynamodb_local, message};
use crate::{MARKER, assert_in_clear_only_where_projected, details, subject};

/// What a producer that does not encrypt sends: its values are plain.
const PLAIN: &str = "PLAIN-";

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn conflict_records_and_failure_reports_hold_no_personal_value() {
    let mut pipeline = Pipeline::start("reports").await;
    let order = subject("reports", "d");
    pipeline
        .append(&order, "OrderCreated", details(&order, 1))
        .await;
    pipeline
        .append(&order, "OrderUpdated", details(&order, 2))
        .await;
    pipeline.settle().await;

    // Another event at 2, sealed with the subject's key as `append` seals,
    // sent to the orders' queue by another producer: a conflict, recorded.
    let mut data = details(&order, 7);
    seal_data(
        pipeline.events.domain(),
        &order,
        "another-2",
        "OrderUpdated",
        &mut data,
    )
    .await
    .expect("sealed");
    let body = json!({"eventId": "another-2", "type": "OrderUpdated", "aggregateId": order,
                      "sequence": 2, "data": data})
    .to_string();
    assert!(!body.contains(MARKER), "{body}");
    let orders_url = pipeline.orders.queues.url.clone();
    send(&pipeline.sqs, &orders_url, &order, "another-2", &body).await;
    pipeline.orders.drain(Duration::from_secs(30)).await;
    let order_pk = format!("ORDER#{order}");
    let sealed = hits(&pipeline.orders.table, SEALED_PREFIX).await;
    assert!(
        sealed
            .iter()
            .any(|hit| hit.pk == order_pk && hit.sk.starts_with("CONFLICT#")),
        "a conflict record, its values sealed: {sealed:#?}"
    );
    assert_in_clear_only_where_projected(&pipeline, &[&order]).await;

    // A message the function fails (a producer that does not encrypt, an
    // amount out of range): its report names the field, not a value.
    let plain = json!({"eventId": "plain-3", "type": "OrderUpdated", "aggregateId": order,
                       "sequence": 3, "data": {"customerName": format!("{PLAIN}name"),
                       "email": format!("{PLAIN}mail@example.com"), "totalCents": -1}})
    .to_string();
    let event = serde_json::to_string(&batch(vec![message("plain-3", &order, &plain)]))
        .expect("an SQS event");
    let answer = pipeline.orders.poller.api.invoke(&event).await;
    assert_eq!(failures(&answer), ["plain-3"]);
    let output = pipeline.orders.output();
    assert!(output.contains("totalCents"), "the report names the field");

    // An event item the dispatcher cannot send (a type no release knows,
    // its values sealed): its report names the item, and holds neither a
    // value nor the body.
    let broken = subject("reports", "broken");
    let client = connect(Some(&dynamodb_local().endpoint)).await;
    let mut copy = item(
        &pipeline.events_table,
        &format!("STREAM#{order}"),
        &format!("EVENT#{:020}", 2),
    )
    .await
    .expect("the stored event 2");
    let mut stored: Value = serde_json::from_str(text(&copy, "body")).expect("json");
    stored["type"] = json!("OrderRenamed");
    stored["aggregateId"] = json!(broken);
    stored["sequence"] = json!(1);
    stored["eventId"] = json!(format!("{broken}-1"));
    copy.insert(
        "pk".to_owned(),
        AttributeValue::S(format!("STREAM#{broken}")),
    );
    copy.insert(
        "sk".to_owned(),
        AttributeValue::S(format!("EVENT#{:020}", 1)),
    );
    copy.insert("body".to_owned(), AttributeValue::S(stored.to_string()));
    for (name, value) in [
        ("sequence", AttributeValue::N("1".to_owned())),
        ("type", AttributeValue::S("OrderRenamed".to_owned())),
        ("eventId", AttributeValue::S(format!("{broken}-1"))),
    ] {
        if copy.contains_key(name) {
            copy.insert(name.to_owned(), value);
        }
    }
    client
        .put_item()
        .table_name(&pipeline.events_table)
        .set_item(Some(copy))
        .send()
        .await
        .expect("the broken item written");
    pipeline.dispatch().await;
    let reports = bodies(&pipeline.sqs, &pipeline.failure_url).await;
    assert_eq!(reports.len(), 1, "{reports:#?}");
    let report = &reports[0];
    assert!(
        report.contains("CorruptEventItem") && report.contains(&broken),
        "{report}"
    );
    assert!(
        !report.contains(MARKER) && !report.contains(SEALED_PREFIX),
        "{report}"
    );

    // Erased: the order holds the placeholder, and its conflict record is
    // deleted.
    let erased = erase(&pipeline.events, &order).await.expect("erased");
    assert_eq!(erased.told, [(order.clone(), 3)]);
    pipeline.settle().await;
    let state = item(&pipeline.orders.table, &order_pk, "STATE")
        .await
        .expect("the order");
    assert_eq!(
        (
            number(&state, "sequence"),
            text(&state, "customerName"),
            text(&state, "email")
        ),
        (3, PLACEHOLDER, PLACEHOLDER)
    );
    let conflicts = hits(&pipeline.orders.table, "CONFLICT#").await;
    assert!(conflicts.is_empty(), "{conflicts:#?}");
    assert!(
        pipeline
            .orders
            .output()
            .contains("an erasure deleted the entity's conflict records")
    );
    assert_in_clear_only_where_projected(&pipeline, &[]).await;
    let logs = pipeline.logs();
    assert!(!logs.contains(PLAIN), "{logs}");
    for table in [&pipeline.orders.table, &pipeline.status.table] {
        assert!(hits(table, PLAIN).await.is_empty(), "{table}");
    }
}
