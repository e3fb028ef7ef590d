//! The process's tools on its tables: `payments-verify` agrees with a live
//! table whose states hold deadlines (set from the clock: not compared),
//! and `payments-rebuild` rebuilds the states, deadlines included, without
//! appending again.

use super::*;

fn tool(exe: &str, tables: &Tables, table: &str) -> (i32, String, String) {
    let output = std::process::Command::new(exe)
        .args(["--endpoint-url", &dynamodb_local().endpoint])
        .env("AWS_ACCESS_KEY_ID", "local")
        .env("AWS_SECRET_ACCESS_KEY", "local")
        .env("AWS_REGION", "us-east-1")
        .env("EVENTS_TABLE", &tables.events)
        .env("TABLE_NAME", table)
        .args(["--events-table", &tables.events, "--table", table])
        .output()
        .expect("the tool runs");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_agrees_with_states_that_hold_deadlines_and_rebuild_appends_nothing() {
    let tables = Tables::new().await;
    let mut world = tables.world(3).await;
    world
        .produce("order-0", "PaymentReceived", paid(1000))
        .await;
    world
        .produce("order-1", "PaymentReceived", paid(1000))
        .await;
    world
        .produce("order-1", "OrderCancelled", cancelled())
        .await;
    world.drain(BASE).await;
    assert!(deadline(world.runner.store(), "order-2").await.is_some());
    let events_before: usize = {
        let producer = tables.producer();
        let mut count = 0;
        for order in ["order-0", "order-1", "order-2"] {
            count += stream_events(&producer, order).await.len();
        }
        count
    };
    assert_eq!(events_before, 2 + 4 + 1, "the refund of order-1 appended");

    let (code, out, err) = tool(
        env!("CARGO_BIN_EXE_payments-verify"),
        &tables,
        &tables.table,
    );
    assert_eq!(code, 0, "verify agrees: {out}\n{err}");
    assert!(out.contains("\"differ\":0"), "{out}");

    let rebuilt = format!("{}-rebuilt", tables.table);
    sequence_guard::store::dynamodb::ensure_table(&tables.client, &rebuilt)
        .await
        .expect("a fresh table");
    let (code, out, err) = tool(env!("CARGO_BIN_EXE_payments-rebuild"), &tables, &rebuilt);
    assert_eq!(code, 0, "rebuild: {out}\n{err}");
    let producer = tables.producer();
    let mut events_after = 0;
    for order in ["order-0", "order-1", "order-2"] {
        events_after += stream_events(&producer, order).await.len();
    }
    assert_eq!(events_after, events_before, "rebuild appended nothing");
    let store = DynamoStore::new(tables.client.clone(), rebuilt.clone());
    for order in ["order-0", "order-1", "order-2"] {
        assert_eq!(
            state(&store, order).await,
            state(world.runner.store(), order).await,
            "{order} rebuilt as it is live"
        );
    }
    assert!(
        deadline(&store, "order-2").await.is_some(),
        "the awaiting order's deadline rebuilt"
    );
    assert!(deadline(&store, "order-0").await.is_none());
    let (code, out, err) = tool(env!("CARGO_BIN_EXE_payments-verify"), &tables, &rebuilt);
    assert_eq!(
        code, 0,
        "verify agrees with the rebuilt table: {out}\n{err}"
    );
}
