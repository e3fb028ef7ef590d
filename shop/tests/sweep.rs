//! `inspect --parked` on an earlier release's index of parked entities:
//! it reads that layout and writes nothing; the sweep then moves it. The
//! sweep's other rules are the library's (`tests/sweep.rs`).

mod support;

use aws_sdk_dynamodb::types::AttributeValue;
use sequence_guard::runner::{Invocation, Runner, RunnerConfig};
use sequence_guard::store::Store;
use sequence_guard::store::dynamodb::DynamoStore;
use support::*;

fn now() -> u64 {
    sequence_guard::lambda::epoch_seconds()
}

fn at(now: u64) -> Invocation {
    Invocation {
        deadline: None,
        now,
    }
}

/// Creates order `id` (sequence 1) and parks its sequence 3 (a gap at its
/// third delivery), as of `when`; in batches of ten orders.
async fn park<S: Store>(runner: &Runner<S>, ids: &[String], when: u64) {
    let event = |id: &str, sequence: u64, receives: u32| {
        let kind = if sequence == 1 {
            "OrderCreated"
        } else {
            "OrderUpdated"
        };
        let event_id = format!("{id}-{sequence}");
        let body = order_event(kind, id, sequence, &event_id);
        delivered(message(&event_id, id, &body), receives)
    };
    for chunk in ids.chunks(10) {
        for (sequence, receives) in [(1, 1), (3, 3)] {
            let messages = chunk
                .iter()
                .map(|id| event(id, sequence, receives))
                .collect();
            runner.run(&batch(messages), at(when)).await.expect("run");
        }
    }
}

/// The entries of the index (any shard, or the earlier release's one
/// partition `PARKED`) that stand for the entity `pk`.
async fn index_entries(store: &DynamoStore, pk: &str) -> Vec<(String, Option<String>)> {
    let scan = store
        .client()
        .scan()
        .table_name(store.table())
        .filter_expression("begins_with(pk, :index) AND sk = :sk")
        .expression_attribute_values(":index", AttributeValue::S("PARKED".into()))
        .expression_attribute_values(":sk", AttributeValue::S(pk.into()))
        .consistent_read(true)
        .send()
        .await
        .expect("Scan");
    scan.items
        .unwrap_or_default()
        .into_iter()
        .map(|item| {
            let text = |name: &str| match item.get(name) {
                Some(AttributeValue::S(text)) => Some(text.clone()),
                Some(AttributeValue::N(number)) => Some(number.clone()),
                _ => None,
            };
            (text("pk").unwrap_or_default(), text("parkedSince"))
        })
        .collect()
}

/// Puts `pk`'s entry where the earlier release kept it: its shard entry
/// (if any) deleted, an entry in the one partition `PARKED` put.
async fn as_earlier_release(store: &DynamoStore, pk: &str, since: u64) {
    for (shard, _) in index_entries(store, pk).await {
        store
            .client()
            .delete_item()
            .table_name(store.table())
            .key("pk", AttributeValue::S(shard))
            .key("sk", AttributeValue::S(pk.into()))
            .send()
            .await
            .expect("DeleteItem");
    }
    store
        .client()
        .put_item()
        .table_name(store.table())
        .item("pk", AttributeValue::S("PARKED".into()))
        .item("sk", AttributeValue::S(pk.into()))
        .item("parkedSince", AttributeValue::N(since.to_string()))
        .send()
        .await
        .expect("PutItem");
}

fn inspect_parked(store: &DynamoStore) -> (i32, String, String) {
    let endpoint = dynamodb_local().endpoint.clone();
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_inspect"))
        .args([
            "--endpoint-url",
            &endpoint,
            "--table",
            store.table(),
            "--parked",
        ])
        .env_remove("AWS_ENDPOINT_URL")
        .env_remove("AWS_ENDPOINT_URL_DYNAMODB")
        .env("AWS_ACCESS_KEY_ID", "local")
        .env("AWS_SECRET_ACCESS_KEY", "local")
        .output()
        .expect("run inspect");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// Right after an upgrade the index holds an earlier release's entries:
/// `inspect --parked` (and the look it runs) lists their entities and the
/// table is, item for item, as it was: it called no operation that writes
/// (its documented rights are DescribeTable, Query, GetItem and
/// BatchGetItem). The sweep then moves them.
#[tokio::test]
async fn inspect_reads_the_earlier_layout_and_writes_nothing_the_sweep_moves_it() {
    let store = fresh_table().await;
    let runner = Runner::new(shop::domain(), store.clone(), RunnerConfig::default());
    let parked_at = now() - 600;
    park(&runner, &["old-1".into(), "new-1".into()], parked_at).await;
    as_earlier_release(&store, "ORDER#old-1", parked_at).await;
    let endpoint = dynamodb_local().endpoint.clone();
    let before = items_of(&endpoint, store.table(), &[""]).await;

    let (code, stdout, stderr) = inspect_parked(&store);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.starts_with("2 entities with events parked\n"),
        "{stdout}"
    );
    assert!(
        stdout.contains("  order old-1: waiting for 2, 1 parked, for "),
        "{stdout}"
    );
    assert_eq!(
        items_of(&endpoint, store.table(), &[""]).await,
        before,
        "inspect wrote"
    );

    let looking = DynamoStore::new(store.client().clone(), store.table());
    let report = sequence_guard::sweep::look(&shop::domain(), &looking, now())
        .await
        .expect("look");
    assert_eq!(report.entities, 2);
    let writes: Vec<&str> = looking
        .operations()
        .into_iter()
        .filter(|operation| !["Query", "BatchGetItem", "GetItem"].contains(operation))
        .collect();
    assert!(writes.is_empty(), "the look called {writes:?}");
    assert_eq!(
        items_of(&endpoint, store.table(), &[""]).await,
        before,
        "the look wrote"
    );

    let report = sequence_guard::sweep::sweep(&runner, at(now()))
        .await
        .expect("sweep");
    assert_eq!(report.entities, 2, "{report:?}");
    let old = index_entries(&store, "ORDER#old-1").await;
    assert_eq!(old.len(), 1, "{old:?}");
    assert!(
        old[0].0.starts_with("PARKED#"),
        "moved to its shard: {old:?}"
    );
    assert_eq!(old[0].1, Some(parked_at.to_string()), "{old:?}");
}
