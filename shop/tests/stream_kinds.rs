//! A stream is one kind's, through the `append` binary: an
//! `InventoryAdjusted` of a product's sku on the product's stream is
//! refused with exit 2, naming the stream and both kinds, and nothing is
//! written. The refusal's every path is the library's
//! (`tests/stream_kinds.rs`).

mod support;

use sequence_guard::producer::EventStore;
use sequence_guard::store::dynamodb::{connect, ensure_events_table};
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
