//! Three orders through the pipeline, one of them then erased with the
//! `erase` binary: before, the markers are only in the order projection's
//! names and emails; after, the erased subject's are nowhere, its items
//! moved by one with the placeholder and nothing else changed, the others
//! intact; `rebuild` and `verify` agree; its personal data is refused,
//! its cancellation is not.

use aws_sdk_dynamodb::types::AttributeValue;
use sequence_guard::personal::{ERASURE_TYPE, PLACEHOLDER, is_sealed};
use serde_json::{Value, json};

use crate::pipeline::Pipeline;
use crate::scan::{Item, all_items, count, item, number, text, without};
use crate::support::{metric_sum, projection};
use crate::{MARKER, assert_in_clear_only_where_projected, details, json_line, marker, subject};

const ERASE: &str = env!("CARGO_BIN_EXE_erase");
const APPEND: &str = env!("CARGO_BIN_EXE_append");
const REBUILD: &str = env!("CARGO_BIN_EXE_rebuild");
const VERIFY: &str = env!("CARGO_BIN_EXE_verify");
const STATUS_VERIFY: &str = env!("CARGO_BIN_EXE_status-verify");

/// Every item of `table` under one of `pks`.
async fn items_of(table: &str, pks: &[String]) -> Vec<Item> {
    let mut items: Vec<Item> = all_items(table)
        .await
        .into_iter()
        .filter(|item| pks.iter().any(|pk| text(item, "pk") == pk))
        .collect();
    items.sort_by_key(|item| (text(item, "pk").to_owned(), text(item, "sk").to_owned()));
    items
}

fn s(text: &str) -> AttributeValue {
    AttributeValue::S(text.to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_erased_subject_is_gone_from_every_table_and_the_others_are_intact() {
    let mut pipeline = Pipeline::start("erase").await;
    let subjects: Vec<String> = ["a", "b", "c"]
        .iter()
        .map(|name| subject("erase", name))
        .collect();
    for subject in &subjects {
        pipeline
            .append(subject, "OrderCreated", details(subject, 1))
            .await;
        pipeline
            .append(subject, "OrderUpdated", details(subject, 2))
            .await;
        pipeline
            .append(subject, "OrderUpdated", details(subject, 3))
            .await;
    }
    pipeline.settle().await;

    // Before: each order projected with its plain values, each status
    // without; every stored body sealed.
    for subject in &subjects {
        let order = item(&pipeline.orders.table, &format!("ORDER#{subject}"), "STATE")
            .await
            .expect("an order");
        assert_eq!(
            (text(&order, "customerName"), text(&order, "email")),
            (
                format!("{}name-3", marker(subject)).as_str(),
                format!("{}mail-3@example.com", marker(subject)).as_str()
            )
        );
        assert_eq!(number(&order, "sequence"), 3);
        let status = item(
            &pipeline.status.table,
            &format!("STATUS#{subject}"),
            "STATE",
        )
        .await
        .expect("a status");
        assert_eq!(number(&status, "sequence"), 3);
        for event in pipeline.stored(subject).await {
            let body: Value = serde_json::from_str(&event.body).expect("json");
            assert!(
                body["data"]["customerName"].as_str().is_some_and(is_sealed),
                "{body}"
            );
        }
    }
    let refs: Vec<&str> = subjects.iter().map(String::as_str).collect();
    assert_in_clear_only_where_projected(&pipeline, &refs).await;
    assert_eq!(pipeline.orders.bodies.len(), 9);
    assert_eq!(pipeline.status.bodies.len(), 9);
    assert_eq!(metric_sum(&pipeline.orders.output(), "Applied"), 9.0);
    // The functions logged at TRACE, and the logs were searched (the
    // producer's own lines too: it writes none unless it retries).
    assert!(
        pipeline.orders.output().contains("TRACE") || pipeline.orders.output().contains("DEBUG")
    );

    let erased = subjects[0].as_str();
    let (order_pk, status_pk) = (format!("ORDER#{erased}"), format!("STATUS#{erased}"));
    let order_before = item(&pipeline.orders.table, &order_pk, "STATE")
        .await
        .expect("order");
    let status_before = item(&pipeline.status.table, &status_pk, "STATE")
        .await
        .expect("status");
    let others: Vec<String> = subjects[1..]
        .iter()
        .flat_map(|subject| [format!("ORDER#{subject}"), format!("STATUS#{subject}")])
        .collect();
    let others_before = (
        items_of(&pipeline.orders.table, &others).await,
        items_of(&pipeline.status.table, &others).await,
    );

    // `erase`: the key deleted, the stream told; again: nothing more.
    let (code, stdout, stderr) = pipeline.tool(ERASE, &["--subject", erased], &[]).await;
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert_eq!(
        json_line(&stdout),
        json!({"subject": erased, "subjectKnown": true, "keyDeleted": true,
               "streamsTold": [{"stream": erased, "sequence": 4}], "alreadyDone": false})
    );
    let (code, stdout, stderr) = pipeline.tool(ERASE, &["--subject", erased], &[]).await;
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert_eq!(
        json_line(&stdout),
        json!({"subject": erased, "subjectKnown": true, "keyDeleted": false,
               "streamsTold": [], "alreadyDone": true})
    );
    let key = item(&pipeline.events_table, &format!("SUBJECT#{erased}"), "KEY")
        .await
        .expect("the erased key item");
    assert!(!key.contains_key("wrappedKey"), "{:?}", key.keys());
    let stored = pipeline.stored(erased).await;
    assert_eq!(stored.len(), 4, "one erasure event appended, once");
    assert_eq!(stored[3].event_type, ERASURE_TYPE);
    let erasure_id = stored[3].event_id.clone();

    pipeline.settle().await;

    // The order: the placeholder, moved by one, nothing else changed.
    let order = item(&pipeline.orders.table, &order_pk, "STATE")
        .await
        .expect("order");
    assert_eq!(order.get("customerName"), Some(&s(PLACEHOLDER)));
    assert_eq!(order.get("email"), Some(&s(PLACEHOLDER)));
    assert_eq!(number(&order, "sequence"), 4);
    assert_eq!(order.get("lastEventId"), Some(&s(&erasure_id)));
    let moved = ["customerName", "email", "sequence", "lastEventId"];
    assert_eq!(without(&order, &moved), without(&order_before, &moved));
    // The status: moved by one, nothing else changed.
    let status = item(&pipeline.status.table, &status_pk, "STATE")
        .await
        .expect("status");
    assert_eq!(number(&status, "sequence"), 4);
    assert_eq!(status.get("lastEventId"), Some(&s(&erasure_id)));
    let moved = ["sequence", "lastEventId"];
    assert_eq!(without(&status, &moved), without(&status_before, &moved));
    // The other subjects' items: as they were.
    assert_eq!(
        (
            items_of(&pipeline.orders.table, &others).await,
            items_of(&pipeline.status.table, &others).await,
        ),
        others_before
    );
    for table in [
        &pipeline.events_table,
        &pipeline.orders.table,
        &pipeline.status.table,
    ] {
        assert_eq!(count(table, &marker(erased)).await, 0, "{table}");
    }
    assert_in_clear_only_where_projected(&pipeline, &refs[1..]).await;

    // `rebuild` into a fresh table: the live projection, the placeholder
    // in the erased subject's item.
    let endpoint = &crate::support::dynamodb_local().endpoint;
    let rebuilt = format!("{}-rebuilt", pipeline.orders.table);
    let events_table = pipeline.events_table.clone();
    let (code, stdout, stderr) = pipeline
        .tool(
            REBUILD,
            &[
                "--events-table",
                &events_table,
                "--table",
                &rebuilt,
                "--create-table",
            ],
            &[],
        )
        .await;
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert_eq!(
        projection(endpoint, &rebuilt).await,
        projection(endpoint, &pipeline.orders.table).await
    );
    let again = item(&rebuilt, &order_pk, "STATE").await.expect("rebuilt");
    assert_eq!(again.get("customerName"), Some(&s(PLACEHOLDER)));
    assert_eq!(count(&rebuilt, &marker(erased)).await, 0);
    // `verify`, of each consumer: no difference.
    for (exe, table) in [
        (VERIFY, pipeline.orders.table.clone()),
        (STATUS_VERIFY, pipeline.status.table.clone()),
    ] {
        let (code, stdout, stderr) = pipeline
            .tool(
                exe,
                &["--events-table", &events_table, "--table", &table],
                &[],
            )
            .await;
        assert_eq!(code, 0, "{table}: {stdout}{stderr}");
        let summary = json_line(stdout.lines().last().unwrap_or_default());
        assert_eq!(summary["differ"], 0, "{stdout}");
        assert!(summary["checked"].as_u64() >= Some(3), "{stdout}");
    }

    // Personal data of the erased subject: refused, naming it; nothing
    // stored. Its cancellation: appended, and projected.
    let data = details(erased, 9).to_string();
    let (code, stdout, stderr) = pipeline
        .tool(
            APPEND,
            &[
                "--stream",
                erased,
                "--type",
                "OrderUpdated",
                "--data",
                &data,
            ],
            &[],
        )
        .await;
    assert_eq!(code, 2, "{stdout}{stderr}");
    assert!(stderr.contains(&format!("`{erased}`")), "{stderr}");
    assert!(!stderr.contains(MARKER), "{stderr}");
    assert_eq!(pipeline.stored(erased).await.len(), 4);
    let (code, stdout, stderr) = pipeline
        .tool(
            APPEND,
            &[
                "--stream",
                erased,
                "--type",
                "OrderCancelled",
                "--data",
                r#"{"reason":"changed mind"}"#,
            ],
            &[],
        )
        .await;
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert_eq!(json_line(&stdout)["sequence"], 5);
    pipeline.settle().await;
    let order = item(&pipeline.orders.table, &order_pk, "STATE")
        .await
        .expect("order");
    assert_eq!(
        (
            number(&order, "sequence"),
            text(&order, "status"),
            text(&order, "customerName"),
        ),
        (5, "CANCELLED", PLACEHOLDER)
    );
    let status = item(&pipeline.status.table, &status_pk, "STATE")
        .await
        .expect("status");
    assert_eq!(
        (number(&status, "sequence"), text(&status, "status")),
        (5, "CANCELLED")
    );
    assert_in_clear_only_where_projected(&pipeline, &refs[1..]).await;
}
