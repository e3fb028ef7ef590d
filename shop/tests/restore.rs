//! Erased stays erased after a restore (docs/personal-data.md, "A restored
//! table"), on DynamoDB Local: an order projected, its customer erased and
//! the erasure applied, then the projection table brought back to before
//! the erasure as a point-in-time recovery would; `rebuild --erasures
//! --check` names the order (exit 1) and writes nothing, `rebuild
//! --erasures` replaces its values with the placeholder and keeps its
//! sequence, and the check then finds nothing (exit 0).

mod support;

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;
use sequence_guard::personal::PLACEHOLDER;
use sequence_guard::producer::erase;
use sequence_guard::producer::{Append, EventStore, NewEvent};
use sequence_guard::runner::{Invocation, Runner, RunnerConfig};
use sequence_guard::store::dynamodb::{DynamoStore, connect, create_table, ensure_events_table};
use serde_json::{Value, json};
use shop::Order;
use support::personal_data::keyed_domain;
use support::{batch, dynamodb_local, message, run_local, typed};

const NAME: &str = "Ada MARKER Lovelace";

async fn project(runner: &Runner<DynamoStore>, events: &EventStore, order: &str) {
    let stored = events.read(order, 0, 100).await.expect("read");
    let messages = stored
        .iter()
        .map(|event| message(&format!("{order}-{}", event.sequence), order, &event.body))
        .collect();
    let invocation = Invocation {
        deadline: None,
        now: 1_800_000_000,
    };
    let report = runner
        .run(&batch(messages), invocation)
        .await
        .expect("a batch");
    assert!(
        report.response().batch_item_failures.is_empty(),
        "{report:?}"
    );
}

async fn item(
    client: &aws_sdk_dynamodb::Client,
    table: &str,
    pk: &str,
) -> HashMap<String, AttributeValue> {
    client
        .get_item()
        .table_name(table)
        .key("pk", AttributeValue::S(pk.to_owned()))
        .key("sk", AttributeValue::S("STATE".to_owned()))
        .consistent_read(true)
        .send()
        .await
        .expect("get")
        .item
        .expect("an item")
}

fn lines(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|err| panic!("{err}: {line}")))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn erasures_are_applied_again_to_a_table_restored_from_before_them() {
    let endpoint = dynamodb_local().endpoint.clone();
    let client = connect(Some(&endpoint)).await;
    let events_table = format!("restore-events-{}", std::process::id());
    let table = format!("restore-orders-{}", std::process::id());
    ensure_events_table(&client, &events_table)
        .await
        .expect("events table");
    create_table(&client, &table).await.expect("table");
    let domain = keyed_domain(&client, &events_table);
    let events = EventStore::new(client.clone(), &events_table, domain.clone());
    let runner = Runner::new(
        domain,
        DynamoStore::new(client.clone(), &table),
        RunnerConfig::default(),
    );

    // GIVEN two orders projected; one's customer asks to be forgotten.
    for order in ["order-9", "order-10"] {
        let data = json!({"customerName": NAME, "email": "ada@example.com", "totalCents": 4200});
        events
            .append(Append::one(order, NewEvent::new("OrderCreated", data)))
            .await
            .expect("appended");
        project(&runner, &events, order).await;
    }
    let backup = item(&client, &table, "ORDER#order-9").await;
    erase(&events, "order-9").await.expect("erased");
    project(&runner, &events, "order-9").await;
    let erased: Order = typed(runner.store(), "order-9").await.expect("an order");
    assert_eq!(
        (erased.customer_name.as_str(), erased.sequence),
        (PLACEHOLDER, 2)
    );

    // WHEN the table is restored to before the erasure (its item as backed up).
    client
        .put_item()
        .table_name(&table)
        .set_item(Some(backup))
        .send()
        .await
        .expect("restored");
    let restored: Order = typed(runner.store(), "order-9").await.expect("an order");
    assert_eq!(
        (restored.customer_name.as_str(), restored.sequence),
        (NAME, 1)
    );

    // THEN the check names it, writing nothing …
    let exe = env!("CARGO_BIN_EXE_rebuild");
    let args = [
        "--events-table",
        &events_table,
        "--table",
        &table,
        "--erasures",
    ];
    let (code, stdout, stderr) = run_local(exe, &endpoint, &[&args[..], &["--check"]].concat());
    assert_eq!(code, 1, "{stdout}{stderr}");
    let found = lines(&stdout);
    assert_eq!(
        found[0],
        json!({"pk": "ORDER#order-9", "sk": "STATE", "attributes": ["customerName", "email"], "erased": false})
    );
    assert_eq!(found[1]["held"], 1, "{stdout}");
    assert!(!stdout.contains("MARKER") && !stderr.contains("MARKER"));
    let unchanged: Order = typed(runner.store(), "order-9").await.expect("an order");
    assert_eq!(unchanged.customer_name, NAME);

    // … the command erases it again, its sequence kept, the other order left
    // as it is …
    let (code, stdout, stderr) = run_local(exe, &endpoint, &args);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert_eq!(lines(&stdout)[0]["erased"], true, "{stdout}");
    let again: Order = typed(runner.store(), "order-9").await.expect("an order");
    assert_eq!(
        (
            again.customer_name.as_str(),
            again.email.as_str(),
            again.sequence
        ),
        (PLACEHOLDER, PLACEHOLDER, 1)
    );
    assert_eq!(again.total_cents, 4200);
    let other: Order = typed(runner.store(), "order-10").await.expect("an order");
    assert_eq!(other.customer_name, NAME);

    // … and the check finds nothing more; the erasure still applies on top.
    let (code, stdout, stderr) = run_local(exe, &endpoint, &[&args[..], &["--check"]].concat());
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert_eq!(lines(&stdout).last().expect("a summary")["held"], 0);
    project(&runner, &events, "order-9").await;
    let caught_up: Order = typed(runner.store(), "order-9").await.expect("an order");
    assert_eq!(
        (caught_up.customer_name.as_str(), caught_up.sequence),
        (PLACEHOLDER, 2)
    );
}
