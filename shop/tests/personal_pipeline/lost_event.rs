//! An erasure behind a lost event: the guard holds it, parked behind the
//! gap, so the order keeps its values until the gap is mended, as the
//! runbook says (docs/personal-data.md: watch for a stuck stream, then
//! `verify`). `verify` names the item and its attributes, never a value;
//! `resend` of the lost event closes the gap, and the erasure applies.

use sequence_guard::personal::{PLACEHOLDER, erase};

use crate::pipeline::Pipeline;
use crate::scan::{count, item, number, text};
use crate::support::localstack::localstack;
use crate::{MARKER, assert_in_clear_only_where_projected, details, json_line, marker, subject};

const RESEND: &str = env!("CARGO_BIN_EXE_resend");
const VERIFY: &str = env!("CARGO_BIN_EXE_verify");

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_erasure_behind_a_lost_event_waits_for_it_and_verify_names_the_order() {
    let mut pipeline = Pipeline::start("lost").await;
    let order = subject("lost", "g");
    for n in 1..=3 {
        let event_type = if n == 1 {
            "OrderCreated"
        } else {
            "OrderUpdated"
        };
        pipeline
            .append(&order, event_type, details(&order, n))
            .await;
    }
    pipeline.dispatch().await;
    pipeline
        .status
        .drain(std::time::Duration::from_secs(30))
        .await;
    // 3 parked on the order at 1; 2 lost (taken from the queue).
    let two = pipeline.park_the_third().await;
    pipeline
        .sqs
        .delete_message()
        .queue_url(&pipeline.orders.queues.url)
        .receipt_handle(two.receipt_handle.clone().unwrap_or_default())
        .send()
        .await
        .expect("2 lost");

    let erased = erase(&pipeline.events, &order).await.expect("erased");
    assert_eq!(erased.told, [(order.clone(), 4)]);
    pipeline.settle().await;
    // The erasure parked behind the gap, with 3: the order keeps its values.
    let pk = format!("ORDER#{order}");
    let state = item(&pipeline.orders.table, &pk, "STATE")
        .await
        .expect("the order");
    assert_eq!(
        (number(&state, "sequence"), text(&state, "customerName")),
        (1, format!("{}name-1", marker(&order)).as_str())
    );
    assert_eq!(
        state.get("parked"),
        Some(&aws_sdk_dynamodb::types::AttributeValue::Ns(vec![
            "3".to_owned(),
            "4".to_owned()
        ]))
    );
    // `verify` names it: expected 4, found 1, the attributes by name.
    let (events_table, table) = (pipeline.events_table.clone(), pipeline.orders.table.clone());
    let args = [
        "--events-table",
        &events_table,
        "--table",
        &table,
        "--stream",
        &order,
    ];
    let (code, stdout, stderr) = pipeline.tool(VERIFY, &args, &[]).await;
    assert_eq!(code, 1, "{stdout}{stderr}");
    let line = json_line(stdout.lines().next().unwrap_or_default());
    assert_eq!(
        (
            line["pk"].as_str(),
            line["expectedSequence"].as_u64(),
            line["foundSequence"].as_u64()
        ),
        (Some(pk.as_str()), Some(4), Some(1)),
        "{stdout}"
    );
    let attributes = line["attributes"].to_string();
    assert!(attributes.contains("customerName"), "{attributes}");
    assert!(!stdout.contains(MARKER) && !stderr.contains(MARKER));

    // The lost event resent: the gap closes, 3 and the erasure drain.
    let topic = pipeline.topic_arn.clone();
    let (code, stdout, stderr) = pipeline
        .tool(
            RESEND,
            &["--stream", &order, "--from", "2", "--to", "2"],
            &[
                ("TOPIC_ARN", &topic),
                ("AWS_ENDPOINT_URL_SNS", &localstack().endpoint),
            ],
        )
        .await;
    assert_eq!(code, 0, "{stdout}{stderr}");
    pipeline.settle().await;
    let state = item(&pipeline.orders.table, &pk, "STATE")
        .await
        .expect("the order");
    assert_eq!(
        (
            number(&state, "sequence"),
            text(&state, "customerName"),
            text(&state, "email"),
            number(&state, "totalCents"),
        ),
        (4, PLACEHOLDER, PLACEHOLDER, 300)
    );
    assert!(!state.contains_key("parked"), "{state:?}");
    for table in [
        &pipeline.events_table,
        &pipeline.orders.table,
        &pipeline.status.table,
    ] {
        assert_eq!(count(table, &marker(&order)).await, 0, "{table}");
    }
    assert_in_clear_only_where_projected(&pipeline, &[]).await;
    let (code, stdout, stderr) = pipeline.tool(VERIFY, &args, &[]).await;
    assert_eq!(code, 0, "{stdout}{stderr}");
}
