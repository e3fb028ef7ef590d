//! `rebuild` on DynamoDB Local: the event store, filled through the
//! producer's append, projected into a fresh table equals the projection the
//! live path (batches of mixed streams, each delivered twice) made; a second
//! rebuild changes nothing; without a table it prints the embedded one.

mod support;

use std::process::Command;

use aws_lambda_events::event::sqs::{SqsEvent, SqsMessage};
use sequence_guard::producer::{Append, EventStore, NewEvent, StoredEvent};
use sequence_guard::runner::{Invocation, Runner, RunnerConfig};
use sequence_guard::store::dynamodb::{DynamoStore, connect, create_table, ensure_events_table};
use serde_json::json;
use support::*;

fn rebuild(endpoint: &str, args: &[&str]) -> (i32, String, String) {
    run_local(env!("CARGO_BIN_EXE_rebuild"), endpoint, args)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rebuilt_projection_equals_the_live_one_and_a_second_rebuild_changes_nothing() {
    let local = dynamodb_local();
    let client = connect(Some(&local.endpoint)).await;
    let suffix = std::process::id();
    let (events_table, live_table, rebuilt_table) = (
        format!("rebuild-events-{suffix}"),
        format!("rebuild-live-{suffix}"),
        format!("rebuild-new-{suffix}"),
    );
    ensure_events_table(&client, &events_table)
        .await
        .expect("events");
    create_table(&client, &live_table).await.expect("live");
    let store = EventStore::new(
        client.clone(),
        events_table.clone(),
        personal_data::keyed_domain(&client, &events_table),
    );

    // The story, appended: orders, products, stock.
    let mut streams = Vec::new();
    for order in 0..4 {
        let id = format!("order-{order}");
        let details = |total: u64| json!({"customerName": "Ada", "email": "ada@example.com", "totalCents": total});
        let mut events = vec![NewEvent::new("OrderCreated", details(100))];
        events.extend((1..=4).map(|n| NewEvent::new("OrderUpdated", details(100 + n))));
        if order % 2 == 1 {
            events.push(NewEvent::new(
                "OrderCancelled",
                json!({"reason": "changed mind"}),
            ));
        }
        store
            .append(Append {
                events,
                ..Append::one(id.clone(), NewEvent::new("x", json!({})))
            })
            .await
            .expect("order");
        streams.push(id);
    }
    for product in 0..3 {
        let id = format!("product-{product}");
        store
            .append(Append::one(
                id.clone(),
                NewEvent::new("ProductCreated", json!({"name": "Lamp", "priceCents": 10})),
            ))
            .await
            .expect("product");
        for price in 11..15 {
            store
                .append(Append::one(
                    id.clone(),
                    NewEvent::new("ProductPriceChanged", json!({"priceCents": price})),
                ))
                .await
                .expect("price");
        }
        streams.push(id);
    }
    for sku in ["SKU-A", "SKU-B"] {
        for delta in [5, -2, 7] {
            store
                .append(Append::one(
                    sku,
                    NewEvent::new("InventoryAdjusted", json!({"sku": sku, "delta": delta})),
                ))
                .await
                .expect("stock");
        }
        streams.push(sku.to_owned());
    }

    // The live path: batches mixing the streams (each in its order), each
    // batch delivered twice.
    let mut stored: Vec<Vec<StoredEvent>> = Vec::new();
    for stream in &streams {
        stored.push(store.read(stream, 0, 100).await.expect("read"));
    }
    let runner = Runner::new(
        personal_data::keyed_domain(&client, &events_table),
        DynamoStore::new(client.clone(), live_table.clone()),
        RunnerConfig::default(),
    );
    let mut position = vec![0; streams.len()];
    loop {
        let mut batch = SqsEvent::default();
        for (index, stream) in streams.iter().enumerate() {
            for _ in 0..2 {
                let Some(event) = stored[index].get(position[index]) else {
                    break;
                };
                position[index] += 1;
                let mut message = SqsMessage::default();
                message.message_id = Some(format!("{stream}:{}", event.sequence));
                message.body = Some(event.body.clone());
                message
                    .attributes
                    .insert("MessageGroupId".into(), stream.clone());
                batch.records.push(message);
            }
        }
        if batch.records.is_empty() {
            break;
        }
        for _ in 0..2 {
            let invocation = Invocation {
                deadline: None,
                now: sequence_guard::lambda::epoch_seconds(),
            };
            let report = runner.run(&batch, invocation).await.expect("run");
            assert!(report.response().batch_item_failures.is_empty());
        }
    }
    let live = projection(&local.endpoint, &live_table).await;
    assert_eq!(live.len(), 4 + 3 + 2, "{live:#?}");

    let (code, stdout, stderr) = rebuild(
        &local.endpoint,
        &[
            "--events-table",
            &events_table,
            "--table",
            &rebuilt_table,
            "--create-table",
        ],
    );
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains("rebuilt 9 streams, 43 events; 0 not done"),
        "{stdout}"
    );
    let rebuilt = projection(&local.endpoint, &rebuilt_table).await;
    assert_eq!(rebuilt, live, "the rebuilt projection equals the live one");

    let (code, stdout, stderr) = rebuild(
        &local.endpoint,
        &["--events-table", &events_table, "--table", &rebuilt_table],
    );
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("0 not done"), "{stdout}");
    assert_eq!(
        projection(&local.endpoint, &rebuilt_table).await,
        live,
        "a second rebuild changes nothing"
    );

    // Without a table: the embedded one, printed.
    let (code, stdout, stderr) = rebuild(&local.endpoint, &["--events-table", &events_table]);
    assert_eq!(code, 0, "{stderr}");
    for line in [
        "order   order-1      sequence 6   totalCents 104    status CANCELLED",
        "product product-2    sequence 5   priceCents 14",
        "sku     SKU-B        onHand 10",
    ] {
        assert!(stdout.contains(line), "{line} missing:\n{stdout}");
    }

    // Without the event store's table: named.
    let output = Command::new(env!("CARGO_BIN_EXE_rebuild"))
        .env_remove("EVENTS_TABLE")
        .output()
        .expect("run");
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("EVENTS_TABLE is not set"));
}

/// A store larger than one `Scan` page (1 MB): a page that ends inside a
/// stream's events must not make the next page skip that stream's head.
#[tokio::test]
async fn every_stream_is_rebuilt_when_the_store_spans_several_scan_pages() {
    let local = dynamodb_local();
    let client = connect(Some(&local.endpoint)).await;
    let events_table = format!("rebuild-pages-{}", std::process::id());
    ensure_events_table(&client, &events_table)
        .await
        .expect("events");
    let domain = personal_data::keyed_domain(&client, &events_table);
    let store = EventStore::new(client, events_table.clone(), domain);
    // Undeclared data fields are kept in the body: about 20 KB per event.
    let mut data = json!({"customerName": "Ada", "email": "ada@example.com", "totalCents": 1});
    for field in 0..20 {
        data[format!("note{field}")] = json!("n".repeat(1000));
    }
    for stream in ["order-a", "order-b", "order-c"] {
        let mut events = vec![NewEvent::new("OrderCreated", data.clone())];
        events.extend((0..29).map(|_| NewEvent::new("OrderUpdated", data.clone())));
        store
            .append(Append {
                events,
                ..Append::one(stream, NewEvent::new("x", json!({})))
            })
            .await
            .expect("append");
    }
    let (code, stdout, stderr) = rebuild(&local.endpoint, &["--events-table", &events_table]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains("rebuilt 3 streams, 90 events; 0 not done"),
        "{stdout}"
    );
}

/// A rebuild into the live table, once the counters' dedup records may
/// have expired (`DEDUP_TTL_SECONDS` of a day: every table is older than
/// the window less a day), adds nothing twice: a counter the table holds is
/// refused, named, and the rest is rebuilt. Into a young table it applies.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rebuild_into_an_old_table_refuses_to_add_to_a_counter_it_holds() {
    // GIVEN the live table, projected from the store: SKU-A at 10, and an
    // order; then SKU-B (4) and order-2 appended but not projected (a hole).
    let local = dynamodb_local();
    let client = connect(Some(&local.endpoint)).await;
    let suffix = std::process::id();
    let (events_table, live_table) = (
        format!("rebuild-old-events-{suffix}"),
        format!("rebuild-old-live-{suffix}"),
    );
    ensure_events_table(&client, &events_table)
        .await
        .expect("events");
    create_table(&client, &live_table).await.expect("live");
    let store = EventStore::new(
        client.clone(),
        events_table.clone(),
        personal_data::keyed_domain(&client, &events_table),
    );
    let stock = |sku: &str, delta: i64| {
        Append::one(
            sku,
            NewEvent::new("InventoryAdjusted", json!({"sku": sku, "delta": delta})),
        )
    };
    let order = |id: &str| {
        Append::one(
            id,
            NewEvent::new(
                "OrderCreated",
                json!({"customerName": "Ada", "email": "ada@example.com", "totalCents": 100}),
            ),
        )
    };
    for delta in [5, -2, 7] {
        store.append(stock("SKU-A", delta)).await.expect("stock");
    }
    store.append(order("order-1")).await.expect("order");
    let runner = Runner::new(
        personal_data::keyed_domain(&client, &events_table),
        DynamoStore::new(client.clone(), live_table.clone()),
        RunnerConfig::default(),
    );
    for stream in ["SKU-A", "order-1"] {
        let mut batch = SqsEvent::default();
        for event in store.read(stream, 0, 100).await.expect("read") {
            let mut message = SqsMessage::default();
            message.message_id = Some(format!("{stream}:{}", event.sequence));
            message.body = Some(event.body.clone());
            message
                .attributes
                .insert("MessageGroupId".into(), stream.to_owned());
            batch.records.push(message);
        }
        let invocation = Invocation {
            deadline: None,
            now: sequence_guard::lambda::epoch_seconds(),
        };
        let report = runner.run(&batch, invocation).await.expect("run");
        assert!(report.response().batch_item_failures.is_empty());
    }
    let stock_of = |items: &std::collections::BTreeMap<(String, String), String>, sku: &str| {
        items
            .get(&(format!("SKU#{sku}"), "STOCK".to_owned()))
            .cloned()
    };
    let ten = r#"onHand=N("10")"#;

    // With the default window (35 days) the table is young: every dedup
    // record it ever had is still there, and a rebuild into it applies,
    // the records absorbing what it holds.
    let (code, stdout, stderr) = rebuild(
        &local.endpoint,
        &["--events-table", &events_table, "--table", &live_table],
    );
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(!stderr.contains("refused"), "{stderr}");
    let young = projection(&local.endpoint, &live_table).await;
    assert!(stock_of(&young, "SKU-A").is_some_and(|item| item.contains(ten)));

    store.append(stock("SKU-B", 4)).await.expect("stock");
    store.append(order("order-2")).await.expect("order");

    // WHEN the dedup records have expired (deleted, as TTL does), and the
    // store is rebuilt into the live table, with a window of a day.
    let mut start = None;
    loop {
        let page = client
            .scan()
            .table_name(&live_table)
            .set_exclusive_start_key(start)
            .send()
            .await
            .expect("scan");
        for item in page.items.unwrap_or_default() {
            let pk = item.get("pk").and_then(|pk| pk.as_s().ok()).cloned();
            if pk.as_deref().is_some_and(|pk| pk.starts_with("MESSAGE#")) {
                client
                    .delete_item()
                    .table_name(&live_table)
                    .key("pk", item["pk"].clone())
                    .key("sk", item["sk"].clone())
                    .send()
                    .await
                    .expect("expire");
            }
        }
        start = page.last_evaluated_key;
        if start.is_none() {
            break;
        }
    }
    let before = projection(&local.endpoint, &live_table).await;
    assert!(stock_of(&before, "SKU-A").is_some_and(|item| item.contains(ten)));
    let output = Command::new(env!("CARGO_BIN_EXE_rebuild"))
        .args(["--endpoint-url", &local.endpoint])
        .args(["--events-table", &events_table, "--table", &live_table])
        .env("AWS_ACCESS_KEY_ID", "local")
        .env("AWS_SECRET_ACCESS_KEY", "local")
        .env("AWS_REGION", "us-east-1")
        .env("PERSONAL_DATA_KEY", personal_data::personal_data_key())
        .env("DEDUP_TTL_SECONDS", "86400")
        .output()
        .expect("rebuild");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr),
    );

    // THEN SKU-A is not added again: its stream is refused, named with why,
    // and the rebuild exits 1 after the rest: the hole is mended (order-2,
    // and SKU-B, a counter the table held no item of).
    assert_eq!(output.status.code(), Some(1), "{stdout}{stderr}");
    assert!(
        stderr.contains("stream SKU-A refused from sequence 1")
            && stderr.contains("SKU#SKU-A/STOCK")
            && stderr.contains("older than the dedup window")
            && stderr.contains("verify --stream SKU-A"),
        "{stderr}"
    );
    assert!(!stderr.contains("stream SKU-B refused"), "{stderr}");
    assert!(stdout.contains("1 streams refused"), "{stdout}");
    let after = projection(&local.endpoint, &live_table).await;
    assert_eq!(stock_of(&after, "SKU-A"), stock_of(&before, "SKU-A"));
    assert!(stock_of(&after, "SKU-B").is_some_and(|item| item.contains(r#"onHand=N("4")"#)));
    assert!(after.contains_key(&("ORDER#order-2".to_owned(), "STATE".to_owned())));
}
