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

/// A rebuild into a table made before the events it folds reacts to them
/// all (the process's start is the table's creation), with the request ids
/// the live process used: the events it would append are in the store
/// already, each is appended once, and the states are written alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rebuild_reacting_as_the_live_process_did_appends_nothing_twice() {
    let tables = Tables::new().await;
    let early = format!("{}-early", tables.table);
    sequence_guard::store::dynamodb::ensure_table(&tables.client, &early)
        .await
        .expect("a table made before the events");
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let mut world = tables.world(2).await;
    world
        .produce("order-1", "PaymentReceived", paid(1000))
        .await;
    world
        .produce("order-1", "OrderCancelled", cancelled())
        .await;
    world.drain(BASE).await;
    let producer = tables.producer();
    let before = stream_events(&producer, "order-1").await.len();
    assert_eq!(before, 4, "created, paid, cancelled, refunded");

    let (code, out, err) = tool(env!("CARGO_BIN_EXE_payments-rebuild"), &tables, &early);
    assert_eq!(code, 0, "rebuild: {out}\n{err}");
    assert!(err.contains("reacted to, once"), "{err}");
    assert_eq!(
        stream_events(&producer, "order-1").await.len(),
        before,
        "the refund not appended again"
    );
    let store = DynamoStore::new(tables.client.clone(), early.clone());
    assert_eq!(
        state(&store, "order-1").await,
        state(world.runner.store(), "order-1").await,
        "order-1 rebuilt as it is live"
    );
}
