//! A consumer added to a live system (docs/event-store.md, Adding a consumer
//! to a live system), on real parts: the producer's append on DynamoDB
//! Local, the table's stream read as Lambda's mapping does, the `dispatcher`
//! binary publishing to LocalStack's SNS FIFO topic, the first consumer (the
//! `projector` binary) already fed, and the status consumer (the
//! `status-projector` binary) subscribed late, then caught up with the
//! `status-rebuild` binary while appends flow, checked with `status-verify`
//! and `status-inspect`.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use sequence_guard::producer::{Append, AppendError, EventStore, NewEvent};
use sequence_guard::store::dynamodb::{DynamoStore, connect};
use serde_json::{Value, json};
use shop::OrderStatus;
use shop::status::Status;
use support::live::{Stack, consumer, differ, drained_by, parked_in, settle, stack, tool};
use support::localstack::{Poller, bodies};
use support::rng::Rng;
use support::streams::StreamSource;
use support::*;

/// Each order's status as the fold of the event store makes it.
async fn folded(events: &EventStore, orders: &BTreeSet<String>) -> BTreeMap<String, Status> {
    let mut folded = BTreeMap::new();
    for order in orders {
        let stored = events.read(order, 0, 10_000).await.expect("read");
        let last = stored.last().expect("an order has events");
        let cancelled = stored
            .iter()
            .any(|event| event.event_type == "OrderCancelled");
        let status = Status {
            sequence: last.sequence,
            last_event_id: last.event_id.clone(),
            status: if cancelled {
                OrderStatus::Cancelled
            } else {
                OrderStatus::Open
            },
            cancel_reason: cancelled.then(|| "changed mind".to_owned()),
        };
        folded.insert(order.clone(), status);
    }
    folded
}

fn details(total: u64) -> Value {
    json!({ "customerName": "Ada", "email": "ada@example.com", "totalCents": total })
}

/// Appends one event, tried again on a storage error.
async fn append(events: &EventStore, stream: &str, event_type: &str) {
    let data = match event_type {
        "OrderCancelled" => json!({ "reason": "changed mind" }),
        _ => details(7),
    };
    let append = Append::one(stream, NewEvent::new(event_type, data));
    loop {
        match events.append(append.clone()).await {
            Ok(_) => return,
            Err(AppendError::Contention { .. } | AppendError::Store(_)) => continue,
            Err(err) => panic!("append to {stream}: {err}"),
        }
    }
}

/// What the live system holds before the new consumer: `count` orders
/// (`<prefix>-<n>`), each created and updated a few times, every fourth
/// cancelled ([`history`]). Their ids.
async fn existing_orders(events: &EventStore, prefix: &str, count: usize) -> BTreeSet<String> {
    let mut orders = BTreeSet::new();
    for n in 0..count {
        let order = format!("{prefix}-{n}");
        let (updates, cancelled) = history(&order);
        append(events, &order, "OrderCreated").await;
        for _ in 0..updates {
            append(events, &order, "OrderUpdated").await;
        }
        if cancelled {
            append(events, &order, "OrderCancelled").await;
        }
        orders.insert(order);
    }
    orders
}

/// An existing order's updates, and whether it was cancelled, from the
/// number its id ends with.
fn history(order: &str) -> (u64, bool) {
    let n: u64 = order
        .rsplit('-')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{order}: an existing order's id ends with its number"));
    (1 + n % 3, n.is_multiple_of(4))
}

/// An existing order's last sequence.
fn last_sequence(order: &str) -> u64 {
    let (updates, cancelled) = history(order);
    1 + updates + u64::from(cancelled)
}

/// The status table's orders, as stored.
async fn statuses(table: &str, orders: &BTreeSet<String>) -> BTreeMap<String, Status> {
    let store = DynamoStore::new(connect(Some(&dynamodb_local().endpoint)).await, table);
    let mut found = BTreeMap::new();
    for order in orders {
        if let Some(status) = typed::<Status, _>(&store, order).await {
            found.insert(order.clone(), status);
        }
    }
    found
}

/// Why the rebuild step is there: a consumer subscribed to a stack that
/// already holds orders, and not caught up, parks the next event of every
/// existing order for good; its view is wrong, `status-verify` says so, and
/// `status-inspect --parked` lists the orders waiting. The rebuild mends it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_consumer_subscribed_without_a_rebuild_parks_every_existing_order() {
    let Stack {
        name,
        events,
        topic_arn,
        mut source,
        dispatcher: _dispatcher,
        orders,
    } = stack("blind").await;
    let existing = existing_orders(&events, "b-order", 3).await;
    settle(&mut source, &[&orders]).await;

    // GIVEN the status consumer subscribed, and no rebuild.
    let status = consumer(&name, "status", &topic_arn, Some(2)).await;
    // WHEN each existing order is updated, and a new order made.
    for order in &existing {
        append(&events, order, "OrderUpdated").await;
    }
    append(&events, "b-new", "OrderCreated").await;
    append(&events, "b-new", "OrderUpdated").await;
    settle(&mut source, &[&orders, &status]).await;

    // THEN each existing order's update was not created, then parked: the
    // message completed, nothing dead-lettered.
    let output = status.function.output();
    assert!(status.metric("NotCreated") >= 3.0, "{output}");
    assert_eq!(status.metric("Parked"), 3.0, "{output}");
    assert!(
        bodies(&status.poller.sqs, &status.queues.dlq_url)
            .await
            .is_empty()
    );
    let mut all = existing.clone();
    all.insert("b-new".to_owned());
    let found = statuses(&status.table, &all).await;
    assert_eq!(
        found.keys().collect::<Vec<_>>(),
        ["b-new"],
        "the only order seen"
    );
    let parked = parked_in(&status.table).await;
    for order in &existing {
        assert!(
            parked.contains(&format!(
                "STATUS#{order} PENDING#{:020}",
                last_sequence(order) + 1
            )),
            "{parked:?}"
        );
    }

    // `status-verify` names each existing order; `status-inspect --parked`
    // lists them (the first consumer's `inspect` knows no STATUS# entity,
    // and passes over them).
    let verify = env!("CARGO_BIN_EXE_status-verify");
    let (code, stdout, stderr) = tool(verify, &events, &status.table, &[]).await;
    assert_eq!((code, differ(&stdout)), (1, 3), "{stdout}{stderr}");
    for order in &existing {
        assert!(
            stdout.contains(&format!(r#""pk":"STATUS#{order}""#)),
            "{stdout}"
        );
    }
    let inspect = env!("CARGO_BIN_EXE_status-inspect");
    let (code, stdout, stderr) = tool(inspect, &events, &status.table, &["--parked"]).await;
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.starts_with("3 entities with events parked\n"),
        "{stdout}"
    );
    for order in &existing {
        assert!(
            stdout.contains(&format!("  status {order}: waiting for 1, 1 parked, for ")),
            "{stdout}"
        );
    }

    // The rebuild, late, still mends it: it drains what waited.
    let rebuild = env!("CARGO_BIN_EXE_status-rebuild");
    let (code, stdout, stderr) =
        tool(rebuild, &events, &status.table, &["--table", &status.table]).await;
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert_eq!(drained_by(&stderr).0, 3, "{stderr}");
    let (code, stdout, _) = tool(verify, &events, &status.table, &[]).await;
    assert_eq!((code, differ(&stdout)), (0, 0), "{stdout}");
    assert_eq!(
        statuses(&status.table, &all).await,
        folded(&events, &all).await
    );
    assert!(parked_in(&status.table).await.is_empty());
    let (_, stdout, _) = tool(inspect, &events, &status.table, &["--parked"]).await;
    assert!(
        stdout.starts_with("0 entities with events parked\n"),
        "{stdout}"
    );
}

/// The documented way, with appends flowing all along: the status
/// consumer's queue subscribed, then `status-rebuild` into its table while
/// the dispatcher publishes and the consumer consumes (parking from the
/// second delivery), then the queue drained. Live messages of existing
/// orders come before the rebuild reaches their order (not created, then
/// parked), and the rebuild drains them; in the end nothing is parked,
/// `status-verify` exits 0, and every order's status is the fold of the
/// store.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_consumer_added_to_a_live_system_catches_up_while_appends_flow() {
    let Stack {
        name,
        events,
        topic_arn,
        mut source,
        dispatcher: _dispatcher,
        orders,
    } = stack("meet").await;
    // GIVEN a live system: orders created, updated, some cancelled, projected.
    let existing = existing_orders(&events, "m-order", 12).await;
    settle(&mut source, &[&orders]).await;

    // WHEN the status consumer's queue is subscribed first ...
    let status = consumer(&name, "status", &topic_arn, Some(2)).await;
    // ... appends go on (updates and cancellations of existing and new
    // orders), the dispatcher publishes, both consumers consume ...
    let appending = Arc::new(AtomicBool::new(true));
    let appender = tokio::spawn(appends(events.clone(), existing.clone(), appending.clone()));
    let dispatching = Arc::new(AtomicBool::new(true));
    let dispatcher = tokio::spawn(dispatch(source, dispatching.clone()));
    let polling = Arc::new(AtomicBool::new(true));
    let pollers: Vec<_> = [&orders, &status]
        .map(|consumer| tokio::spawn(consume(consumer.mapping(), polling.clone())))
        .into();
    // ... until live messages of existing orders wait parked ...
    let started = Instant::now();
    while status.metric("Parked") < 2.0 {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "live messages parked: {}",
            status.function.output()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let parked_before = status.metric("Parked");
    // ... then `status-rebuild` runs into its table, while they flow.
    let (code, stdout, stderr) = tool(
        env!("CARGO_BIN_EXE_status-rebuild"),
        &events,
        &status.table,
        &["--table", &status.table],
    )
    .await;
    assert_eq!(code, 0, "{stdout}{stderr}");
    let (drained, cleared) = drained_by(&stderr);
    // Appends go on a moment after it, then stop; the queue drains.
    tokio::time::sleep(Duration::from_secs(1)).await;
    appending.store(false, Ordering::Relaxed);
    let all = appender.await.expect("appender");
    dispatching.store(false, Ordering::Relaxed);
    let _source = dispatcher.await.expect("dispatcher");
    polling.store(false, Ordering::Relaxed);
    for poller in pollers {
        poller.await.expect("poller");
    }

    // THEN live messages were ahead of the rebuild, waited, and met it.
    let metric = |name| status.metric(name);
    println!(
        "{} orders ({} existing); status consumer: {} applied, {} duplicate, {} not created, {} gap, \
         {} parked ({parked_before} before the rebuild), {} drained by live messages; \
         the rebuild: {} drained, {} cleared as duplicates; {}",
        all.len(),
        existing.len(),
        metric("Applied"),
        metric("Duplicate"),
        metric("NotCreated"),
        metric("Gap"),
        metric("Parked"),
        metric("Drained"),
        drained,
        cleared,
        stdout.trim()
    );
    assert!(metric("NotCreated") >= 2.0);
    assert!(
        drained + cleared >= 2,
        "the rebuild met what was parked: {stderr}"
    );
    // Nothing is parked, `status-verify` exits 0, every status is the fold.
    assert_eq!(parked_in(&status.table).await, Vec::<String>::new());
    let (code, stdout, stderr) = tool(
        env!("CARGO_BIN_EXE_status-verify"),
        &events,
        &status.table,
        &[],
    )
    .await;
    assert_eq!((code, differ(&stdout)), (0, 0), "{stdout}{stderr}");
    assert_eq!(
        statuses(&status.table, &all).await,
        folded(&events, &all).await
    );
    assert!(
        bodies(&status.poller.sqs, &status.queues.dlq_url)
            .await
            .is_empty()
    );
    // The first consumer went on as before.
    let (code, stdout, stderr) =
        tool(env!("CARGO_BIN_EXE_verify"), &events, &orders.table, &[]).await;
    assert_eq!((code, differ(&stdout)), (0, 0), "{stdout}{stderr}");
}

/// Appends while `on`, 20 ms apart: updates of open orders, cancellations,
/// new orders. Every order written to.
async fn appends(
    events: EventStore,
    existing: BTreeSet<String>,
    on: Arc<AtomicBool>,
) -> BTreeSet<String> {
    let mut rng = Rng(33);
    let mut open: Vec<String> = existing
        .iter()
        .filter(|order| !history(order).1)
        .cloned()
        .collect();
    let mut all = existing;
    let mut new = 0;
    while on.load(Ordering::Relaxed) {
        match rng.below(100) {
            0..60 if !open.is_empty() => {
                let order = &open[rng.below(open.len() as u64) as usize];
                append(&events, order, "OrderUpdated").await;
            }
            60..70 if !open.is_empty() => {
                let order = open.swap_remove(rng.below(open.len() as u64) as usize);
                append(&events, &order, "OrderCancelled").await;
            }
            _ => {
                new += 1;
                let order = format!("m-new-{new}");
                append(&events, &order, "OrderCreated").await;
                open.push(order.clone());
                all.insert(order);
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    all
}

/// The dispatcher's mapping, while `on`; then until nothing is left.
async fn dispatch(mut source: StreamSource, on: Arc<AtomicBool>) -> StreamSource {
    while on.load(Ordering::Relaxed) {
        if source.poll().await.is_none() {
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }
    source.drain(Duration::from_secs(30)).await;
    source
}

/// A consumer's mapping, while `on`; then until its queue stays empty.
async fn consume(poller: Poller, on: Arc<AtomicBool>) {
    while on.load(Ordering::Relaxed) {
        poller.poll().await;
    }
    poller.drain(Duration::from_secs(60)).await;
    assert_eq!(poller.in_queue().await, 0, "{}: drained", poller.queue_url);
}
