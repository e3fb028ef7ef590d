//! `verify` on DynamoDB Local, for counters: a counter's line names the
//! values expected and found (its attribute only), so that the operator can
//! choose what to mend; a counter the table holds and no stored event
//! explains is ahead of the store. And for a consumer that projects
//! personal data, run without `PERSONAL_DATA_KEY`: the cause said, exit 2.

mod support;

use sequence_guard::producer::{Append, EventStore, NewEvent, StoredEvent};
use sequence_guard::runner::{Invocation, Runner, RunnerConfig};
use sequence_guard::store::dynamodb::{DynamoStore, connect, create_table, ensure_events_table};
use serde_json::json;
use support::personal_data::{keyed_domain, personal_data_key};
use support::*;

async fn append_stock(store: &EventStore, sku: &str, deltas: &[i64]) -> Vec<StoredEvent> {
    for delta in deltas {
        store
            .append(Append::one(
                sku,
                NewEvent::new("InventoryAdjusted", json!({"sku": sku, "delta": delta})),
            ))
            .await
            .expect("stock");
    }
    store.read(sku, 0, 100).await.expect("read")
}

/// One batch of bodies of one stream through the projector's runner; every
/// message must complete.
async fn project(runner: &Runner<DynamoStore>, stream: &str, bodies: &[&str]) {
    let messages = bodies
        .iter()
        .enumerate()
        .map(|(index, body)| message(&format!("{stream}:{index}"), stream, body))
        .collect();
    let invocation = Invocation {
        deadline: None,
        now: sequence_guard::lambda::epoch_seconds(),
    };
    let report = runner.run(&batch(messages), invocation).await.expect("run");
    assert!(failed_ids(&report).is_empty(), "{report:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_counters_line_names_the_values_expected_and_found() {
    // GIVEN skus in the store: SKU-B (5, -2, 7) of which the consumer got
    // the first event only, SKU-C (3) it never got; and SKU-D, fed to the
    // table directly, that the store has no event of.
    let client = connect(Some(&dynamodb_local().endpoint)).await;
    let suffix = std::process::id();
    let (events_table, table) = (
        format!("verify-counters-events-{suffix}"),
        format!("verify-counters-{suffix}"),
    );
    ensure_events_table(&client, &events_table)
        .await
        .expect("events");
    create_table(&client, &table).await.expect("table");
    let store = EventStore::new(client.clone(), events_table.clone(), shop::domain());
    let b = append_stock(&store, "SKU-B", &[5, -2, 7]).await;
    append_stock(&store, "SKU-C", &[3]).await;
    let runner = Runner::new(
        shop::domain(),
        DynamoStore::new(client, table.clone()),
        RunnerConfig::default(),
    );
    project(&runner, "SKU-B", &[&b[0].body]).await;
    project(
        &runner,
        "SKU-D",
        &[&inventory_adjusted("direct-1", "SKU-D", 4)],
    )
    .await;

    // WHEN verify compares.
    let (code, lines, stderr) = verify_lines(&events_table, &table, &[]);

    // THEN each counter's line says its values: what to mend (SKU-B: 5
    // short; SKU-C: 3, no item), and SKU-D is ahead of the store.
    assert_eq!(code, 1, "{stderr}");
    assert_eq!(
        lines,
        [
            json!({"pk": "SKU#SKU-B", "sk": "STOCK", "expected": 10, "found": 5, "attributes": ["onHand"]}),
            json!({"pk": "SKU#SKU-C", "sk": "STOCK", "expected": 3, "found": null, "attributes": ["onHand"]}),
            json!({"pk": "SKU#SKU-D", "sk": "STOCK", "expected": null, "found": 4, "attributes": ["onHand"],
                   "ahead": true}),
            json!({"checked": 3, "differ": 3, "ahead": 1}),
        ],
        "{stderr}"
    );
    assert!(
        stderr.contains("ahead of the event store on 1 stream(s): SKU-D"),
        "{stderr}"
    );

    // AND with --stream, only that counter.
    let (code, lines, stderr) = verify_lines(&events_table, &table, &["--stream", "SKU-B"]);
    assert_eq!(code, 1, "{stderr}");
    assert_eq!(
        lines,
        [
            json!({"pk": "SKU#SKU-B", "sk": "STOCK", "expected": 10, "found": 5, "attributes": ["onHand"]}),
            json!({"checked": 1, "differ": 1}),
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_personal_data_key_verify_names_it_and_exits_2() {
    // GIVEN an order in the store, its name and e-mail sealed, projected by
    // a projector that has the key: the table agrees with the store.
    let client = connect(Some(&dynamodb_local().endpoint)).await;
    let suffix = std::process::id();
    let (events_table, table) = (
        format!("verify-sealed-events-{suffix}"),
        format!("verify-sealed-{suffix}"),
    );
    ensure_events_table(&client, &events_table)
        .await
        .expect("events");
    create_table(&client, &table).await.expect("table");
    let domain = keyed_domain(&client, &events_table);
    let store = EventStore::new(client.clone(), events_table.clone(), domain.clone());
    let details =
        json!({"customerName": "Ada Lovelace", "email": "ada@example.com", "totalCents": 100});
    store
        .append(Append::one(
            "order-1",
            NewEvent::new("OrderCreated", details),
        ))
        .await
        .expect("append");
    let stored = store.read("order-1", 0, 10).await.expect("read");
    let runner = Runner::new(
        domain,
        DynamoStore::new(client, table.clone()),
        RunnerConfig::default(),
    );
    project(&runner, "order-1", &[&stored[0].body]).await;
    let key = personal_data_key();
    let (code, lines, stderr) = verify_lines_with_key(&events_table, &table, &[], Some(&key));
    assert_eq!(code, 0, "{lines:?} {stderr}");

    // WHEN verify runs without PERSONAL_DATA_KEY.
    let (code, lines, stderr) = verify_lines_with_key(&events_table, &table, &[], None);

    // THEN it says why it cannot compare (its fold cannot open the sealed
    // values), naming the variable, and compares nothing: no line would be
    // true, and the projection is not ahead of the store.
    assert_eq!(code, 2, "{lines:?} {stderr}");
    assert!(lines.is_empty(), "{lines:?}");
    assert!(stderr.contains("PERSONAL_DATA_KEY"), "{stderr}");
    assert!(stderr.contains("sealed"), "{stderr}");
    assert!(!stderr.contains("ahead"), "{stderr}");
}
