//! Erasure while a subject's events are on their way: in a queue (appended
//! and dispatched, not consumed), parked (a gap parked on the order, the
//! later event held sealed, then the erasure, then the gap closed), and
//! resent after the erasure (`resend`: duplicates, nothing changes). Each
//! ends with the subject's values nowhere, and the others' intact.

use aws_sdk_dynamodb::types::AttributeValue;
use sequence_guard::personal::{PLACEHOLDER, SEALED_PREFIX};
use sequence_guard::producer::erase;

use crate::pipeline::Pipeline;
use crate::scan::{count, hits, item, number, text};
use crate::support::localstack::localstack;
use crate::support::metric_sum;
use crate::{MARKER, assert_in_clear_only_where_projected, details, json_line, marker, subject};

const RESEND: &str = env!("CARGO_BIN_EXE_resend");
const VERIFY: &str = env!("CARGO_BIN_EXE_verify");

/// The order `subject` as projected now: sequence, name, email, total.
async fn order(pipeline: &Pipeline, subject: &str) -> (u64, String, String, u64) {
    let order = item(&pipeline.orders.table, &format!("ORDER#{subject}"), "STATE")
        .await
        .unwrap_or_else(|| panic!("{subject}: no order"));
    (
        number(&order, "sequence"),
        text(&order, "customerName").to_owned(),
        text(&order, "email").to_owned(),
        number(&order, "totalCents"),
    )
}

/// The order `subject` erased at `sequence`, its last total `total`.
fn erased_at(sequence: u64, total: u64) -> (u64, String, String, u64) {
    (
        sequence,
        PLACEHOLDER.to_owned(),
        PLACEHOLDER.to_owned(),
        total,
    )
}

/// No marker of `subject` in any table.
async fn assert_gone(pipeline: &Pipeline, subject: &str) {
    for table in [
        &pipeline.events_table,
        &pipeline.orders.table,
        &pipeline.status.table,
    ] {
        assert_eq!(
            count(table, &marker(subject)).await,
            0,
            "{subject} in {table}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn erasure_reaches_events_in_a_queue_parked_and_resent() {
    let mut pipeline = Pipeline::start("flight").await;
    let [queued, parked, resent, kept] =
        ["queued", "parked", "resent", "kept"].map(|name| subject("flight", name));
    for subject in [&kept, &resent] {
        pipeline
            .append(subject, "OrderCreated", details(subject, 1))
            .await;
        pipeline
            .append(subject, "OrderUpdated", details(subject, 2))
            .await;
    }
    pipeline.settle().await;

    // In a queue: appended and dispatched, not yet consumed, then erased.
    pipeline
        .append(&queued, "OrderCreated", details(&queued, 1))
        .await;
    pipeline
        .append(&queued, "OrderUpdated", details(&queued, 2))
        .await;
    pipeline.dispatch().await;
    let started = std::time::Instant::now();
    while pipeline.orders.poller.in_queue().await < 2 {
        assert!(started.elapsed().as_secs() < 10, "both events queued");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let erased = erase(&pipeline.events, &queued).await.expect("erased");
    assert_eq!(erased.told, [(queued.clone(), 3)]);
    // The queued events, consumed before the erasure is dispatched, read
    // with the placeholder: their key is gone.
    pipeline
        .orders
        .drain(std::time::Duration::from_secs(30))
        .await;
    assert_eq!(order(&pipeline, &queued).await, erased_at(2, 200));
    pipeline.settle().await;
    assert_eq!(order(&pipeline, &queued).await, erased_at(3, 200));
    assert_gone(&pipeline, &queued).await;

    // Parked: 3 parked on the order at 1, 2 left in flight.
    pipeline
        .append(&parked, "OrderCreated", details(&parked, 1))
        .await;
    pipeline
        .append(&parked, "OrderUpdated", details(&parked, 2))
        .await;
    pipeline
        .append(&parked, "OrderUpdated", details(&parked, 3))
        .await;
    pipeline.dispatch().await;
    pipeline
        .status
        .drain(std::time::Duration::from_secs(30))
        .await;
    // 2 left in flight: back after its visibility timeout.
    let _two = pipeline.park_the_third().await;
    let order_pk = format!("ORDER#{parked}");
    let state = item(&pipeline.orders.table, &order_pk, "STATE")
        .await
        .expect("the order at 1");
    assert_eq!(number(&state, "sequence"), 1);
    assert_eq!(
        state.get("parked"),
        Some(&AttributeValue::Ns(vec!["3".to_owned()]))
    );
    // The parked event is held sealed: in clear, only the projected name.
    let sealed = hits(&pipeline.orders.table, SEALED_PREFIX).await;
    assert!(
        sealed
            .iter()
            .any(|hit| hit.pk == order_pk && hit.sk.starts_with("PENDING#")),
        "{sealed:#?}"
    );
    let own = hits(&pipeline.orders.table, &marker(&parked)).await;
    assert!(own.iter().all(|hit| hit.sk == "STATE"), "{own:#?}");

    let erased = erase(&pipeline.events, &parked).await.expect("erased");
    assert_eq!(erased.told, [(parked.clone(), 4)]);
    // A new instance of the orders' function (the old one held the key it
    // opened 1 and 3 with, as long as it lives or until it reads the
    // erasure): 2 comes back, closes the gap, and 3 is drained, both read
    // with the placeholder.
    pipeline.orders.restart().await;
    pipeline
        .orders
        .drain(std::time::Duration::from_secs(30))
        .await;
    assert_eq!(order(&pipeline, &parked).await, erased_at(3, 300));
    let left = hits(&pipeline.orders.table, &order_pk).await;
    assert!(
        left.iter().all(|hit| hit.sk == "STATE"),
        "nothing parked left: {left:#?}"
    );
    pipeline.settle().await;
    assert_eq!(order(&pipeline, &parked).await, erased_at(4, 300));
    assert_gone(&pipeline, &parked).await;

    // Resent after the erasure: every event a duplicate, nothing changed.
    let erased = erase(&pipeline.events, &resent).await.expect("erased");
    assert_eq!(erased.told, [(resent.clone(), 3)]);
    pipeline.settle().await;
    assert_eq!(order(&pipeline, &resent).await, erased_at(3, 200));
    let before = (
        item(&pipeline.orders.table, &format!("ORDER#{resent}"), "STATE").await,
        item(&pipeline.status.table, &format!("STATUS#{resent}"), "STATE").await,
    );
    let duplicates = metric_sum(&pipeline.orders.output(), "Duplicate");
    let applied = metric_sum(&pipeline.orders.output(), "Applied");
    let delivered = pipeline.orders.bodies.len();
    let topic = pipeline.topic_arn.clone();
    let (code, stdout, stderr) = pipeline
        .tool(
            RESEND,
            &["--stream", &resent],
            &[
                ("TOPIC_ARN", &topic),
                ("AWS_ENDPOINT_URL_SNS", &localstack().endpoint),
            ],
        )
        .await;
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert_eq!(json_line(&stdout)["sent"], 3);
    pipeline.settle().await;
    assert_eq!(pipeline.orders.bodies.len(), delivered + 3);
    let output = pipeline.orders.output();
    assert!(
        metric_sum(&output, "Duplicate") - duplicates >= 3.0,
        "each resent event a duplicate:\n{output}"
    );
    assert_eq!(metric_sum(&output, "Applied"), applied, "{output}");
    assert_eq!(
        (
            item(&pipeline.orders.table, &format!("ORDER#{resent}"), "STATE").await,
            item(&pipeline.status.table, &format!("STATUS#{resent}"), "STATE").await,
        ),
        before
    );
    assert_gone(&pipeline, &resent).await;

    // The end: only the kept subject's values, where projected; the
    // projection is the fold of the store.
    assert_eq!(
        order(&pipeline, &kept).await,
        (
            2,
            format!("{}name-2", marker(&kept)),
            format!("{}mail-2@example.com", marker(&kept)),
            200
        )
    );
    assert_in_clear_only_where_projected(&pipeline, &[&kept]).await;
    let (events_table, table) = (pipeline.events_table.clone(), pipeline.orders.table.clone());
    let (code, stdout, stderr) = pipeline
        .tool(
            VERIFY,
            &["--events-table", &events_table, "--table", &table],
            &[],
        )
        .await;
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(!pipeline.logs().contains(MARKER));
}
