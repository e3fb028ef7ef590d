//! A process added to a live system (docs/processes.md, "Adding a process
//! to a live system"), on real parts: the producer's append on DynamoDB
//! Local, the table's stream read as Lambda's mapping does, the
//! `dispatcher` binary publishing to LocalStack's SNS FIFO topic, and the
//! payments process (`payments-process`) subscribed late, then caught up
//! with `payments-rebuild --table` while orders change.
//!
//! The rule it shows: what happened before the process existed (before its
//! table was made) is folded without reacting; everything after is reacted
//! to exactly once, whether the rebuild applies it (the live delivery is
//! then a duplicate) or a live delivery does (the events before it read
//! from the store, those from before the start folded without reacting:
//! the live process knows its start too).

mod support;

use std::time::Duration;

use sequence_guard::producer::{Append, AppendError, EventStore, NewEvent};
use serde_json::{Value, json};
use support::live::{Stack, differ, process, settle, stack, tool};

async fn append(events: &EventStore, stream: &str, event_type: &str, data: Value) {
    let append = Append::one(stream, NewEvent::new(event_type, data));
    loop {
        match events.append(append.clone()).await {
            Ok(_) => return,
            Err(AppendError::Contention { .. } | AppendError::Store(_)) => continue,
            Err(err) => panic!("append to {stream}: {err}"),
        }
    }
}

async fn created(events: &EventStore, order: &str, total: u64) {
    let data = json!({ "customerName": "Ada", "email": "ada@example.com", "totalCents": total });
    append(events, order, "OrderCreated", data).await;
}

async fn paid(events: &EventStore, order: &str, amount: u64) {
    append(
        events,
        order,
        "PaymentReceived",
        json!({ "amountCents": amount }),
    )
    .await;
}

async fn cancelled(events: &EventStore, order: &str) {
    append(
        events,
        order,
        "OrderCancelled",
        json!({ "reason": "changed mind" }),
    )
    .await;
}

/// The refunds the order's stream holds: each one's amount.
async fn refunds(events: &EventStore, order: &str) -> Vec<u64> {
    events
        .read(order, 0, 100)
        .await
        .expect("read")
        .into_iter()
        .filter(|event| event.event_type == "RefundRequested")
        .map(|event| {
            let body: Value = serde_json::from_str(&event.body).expect("a body");
            body["data"]["amountCents"].as_u64().expect("an amount")
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_paid_order_cancelled_during_the_catch_up_is_refunded_once() {
    let Stack {
        name,
        events,
        topic_arn,
        mut source,
        dispatcher: _dispatcher,
        orders,
    } = stack("catch-up").await;

    // GIVEN, before the process exists: an order paid in full (`early-1`),
    // and one cancelled then paid (`early-2`: a refund the process would
    // have asked for, had it existed).
    created(&events, "early-1", 2500).await;
    paid(&events, "early-1", 2500).await;
    created(&events, "early-2", 1800).await;
    cancelled(&events, "early-2").await;
    paid(&events, "early-2", 1800).await;
    settle(&mut source, &[&orders]).await;
    // The store keeps appendedAt in seconds: the process is made a second on.
    tokio::time::sleep(Duration::from_millis(1100)).await;

    // WHEN the process is deployed (its table, then its queue subscribed)…
    let payments = process(&name, &topic_arn, 900, 2).await;
    // … `early-1` is cancelled, delivered live first: its creation and
    // payment, from before the process's start, are read from the store
    // and folded without reacting, and the cancel reacts…
    cancelled(&events, "early-1").await;
    // … and `early-2` is updated: its past (cancelled, then paid: a refund
    // had the process existed) read from the store, folded without
    // reacting: no refund is made up…
    let update = json!({ "customerName": "Ada", "email": "ada@example.com", "totalCents": 1800 });
    append(&events, "early-2", "OrderUpdated", update).await;
    settle(&mut source, &[&orders, &payments]).await;
    assert_eq!(
        (payments.metric("Filled"), payments.metric("Parked")),
        (5.0, 0.0),
        "{}",
        payments.function.output()
    );
    // … a paid order made meanwhile (`late-1`) is cancelled, and the
    // rebuild reaches it before its live delivery …
    created(&events, "late-1", 900).await;
    paid(&events, "late-1", 900).await;
    cancelled(&events, "late-1").await;
    source.drain(Duration::from_secs(30)).await;
    let rebuild = env!("CARGO_BIN_EXE_payments-rebuild");
    let (code, stdout, stderr) = tool(
        rebuild,
        &events,
        &payments.table,
        &["--table", &payments.table],
    )
    .await;
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(
        stderr.contains("folded without reacting"),
        "the rebuild says where the process starts: {stderr}"
    );
    // … and everything then settles: the refunds dispatched, and the live
    // deliveries of what the rebuild applied found duplicates.
    settle(&mut source, &[&orders, &payments]).await;

    // THEN each payment of an order cancelled after the process's start is
    // asked back once, and nothing is made up for what came before.
    assert_eq!(
        refunds(&events, "early-1").await,
        [2500],
        "reacted to live, its past read from the store"
    );
    assert_eq!(
        refunds(&events, "late-1").await,
        [900],
        "folded by the rebuild"
    );
    assert!(
        refunds(&events, "early-2").await.is_empty(),
        "before the start"
    );
    // The process's table is the fold of the store, nothing parked.
    let verify = env!("CARGO_BIN_EXE_payments-verify");
    let (code, stdout, stderr) = tool(verify, &events, &payments.table, &[]).await;
    assert_eq!((code, differ(&stdout)), (0, 0), "{stdout}{stderr}");
}
