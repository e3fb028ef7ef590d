//! An erasure behind a lost event (taken from the queue, never delivered):
//! the consumer reads the lost event, and the one parked behind it, from
//! the event store, and applies them and the erasure at its first delivery;
//! the order's values are gone at once, and `verify` agrees without
//! printing a value. (A hole the store cannot close is `verify`'s and
//! `resend`'s: shop/tests/repair.rs.)

use sequence_guard::personal::PLACEHOLDER;
use sequence_guard::producer::erase;

use crate::pipeline::Pipeline;
use crate::scan::{count, item, number, text};
use crate::{MARKER, assert_in_clear_only_where_projected, details, marker, subject};

const VERIFY: &str = env!("CARGO_BIN_EXE_verify");

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_erasure_behind_a_lost_event_reads_it_from_the_store_and_applies() {
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
    // The erasure arrived behind the lost event: the consumer read 2 (and
    // 3, parked) from the event store and applied them before it, at its
    // first delivery. The order is erased, nothing is left parked.
    let pk = format!("ORDER#{order}");
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
    // `verify` agrees, and prints no value.
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
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(!stdout.contains(MARKER) && !stderr.contains(MARKER));
}
