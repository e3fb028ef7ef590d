//! Personal data through the whole pipeline, on the real parts
//! (docs/personal-data.md): the producer's `append` on DynamoDB Local,
//! sealing each order's `customerName` and `email` with a data key wrapped
//! under a LocalStack KMS key; the table's stream read as Lambda's mapping
//! does (`support::streams`); the `dispatcher` binary publishing to
//! LocalStack's SNS FIFO topic, which feeds two SQS FIFO queues; the
//! `projector` binary (the orders, which opens the values) and the
//! `status-projector` binary (which projects none and holds no key); the
//! `erase`, `append`, `rebuild`, `verify` and `resend` binaries.
//!
//! Every value put in a personal field carries a marker
//! (`MARKER-<subject>-...`), searched for in clear in every attribute of
//! every item of every table (recursively), in every message body either
//! queue delivered, in the dead-letter and failure queues, and in the log
//! output of every binary (the functions at `TRACE`, the tools with
//! `RUST_LOG=trace`). The one place a marker may be is where it is
//! projected: the `customerName` and `email` of its order's item in the
//! order projection, until its subject's erasure is applied there.
//!
//! Here: what the topics share. `pipeline` starts and runs the parts;
//! `scan` finds markers; `erasure` is the story of three subjects before
//! and after one is erased (with `rebuild`, `verify` and `append`);
//! `in_flight` erases subjects whose events are in a queue, parked, or
//! resent; `reports` looks at the other copies: a conflict record, a failed
//! message's report, the dispatcher's report of an item it cannot send;
//! `lost_event` erases a subject whose stream waits for a lost event;
//! `logs` keeps the test process's own lines (the producer runs here).

#[path = "../support/mod.rs"]
mod support;

mod erasure;
mod in_flight;
mod logs;
mod lost_event;
mod pipeline;
mod reports;
mod scan;

use serde_json::{Value, json};

/// What every marker starts with.
const MARKER: &str = "MARKER-";

/// The marker of `subject`'s values (each value carries it).
fn marker(subject: &str) -> String {
    format!("{MARKER}{subject}-")
}

/// An order's details whose name and email carry `subject`'s marker and
/// the `n`th value.
fn details(subject: &str, n: u64) -> Value {
    json!({
        "customerName": format!("{}name-{n}", marker(subject)),
        "email": format!("{}mail-{n}@example.com", marker(subject)),
        "totalCents": 100 * n,
    })
}

/// A subject id of this test binary's own (every test shares one
/// DynamoDB Local and one LocalStack).
fn subject(test: &str, name: &str) -> String {
    format!("pp{}-{test}-{name}", std::process::id())
}

/// The one JSON line a tool printed.
fn json_line(stdout: &str) -> Value {
    serde_json::from_str(stdout.trim()).unwrap_or_else(|err| panic!("{stdout}: {err}"))
}

/// Where markers may be, and nowhere else: the `customerName` and `email`
/// of the order items of `projected` in the order projection. Not in the
/// event store (its events and key items), not in the status table, not in
/// any body either queue delivered (whose personal fields are sealed), not
/// in any dead-letter or failure queue, not in any binary's output.
async fn assert_in_clear_only_where_projected(pipeline: &pipeline::Pipeline, projected: &[&str]) {
    let events = scan::hits(&pipeline.events_table, MARKER).await;
    assert!(events.is_empty(), "the event store: {events:#?}");
    let status = scan::hits(&pipeline.status.table, MARKER).await;
    assert!(status.is_empty(), "the status table: {status:#?}");
    let orders = scan::hits(&pipeline.orders.table, MARKER).await;
    let mut expected = Vec::new();
    for subject in projected {
        for path in ["customerName", "email"] {
            expected.push(scan::Hit {
                pk: format!("ORDER#{subject}"),
                sk: "STATE".to_owned(),
                path: path.to_owned(),
            });
        }
        // Each subject's own marker, in its own item.
        let own = scan::hits(&pipeline.orders.table, &marker(subject)).await;
        assert_eq!(own.len(), 2, "{subject}: {own:#?}");
        assert!(own.iter().all(|hit| hit.pk == format!("ORDER#{subject}")));
    }
    expected.sort();
    assert_eq!(orders, expected, "the order projection");

    for (consumer, bodies) in [
        ("orders", &pipeline.orders.bodies),
        ("status", &pipeline.status.bodies),
    ] {
        assert!(!bodies.is_empty(), "{consumer}: its queue delivered");
        for body in bodies.values() {
            assert!(
                !body.contains(MARKER),
                "{consumer}'s queue delivered {body}"
            );
            assert_sealed(body);
        }
    }
    let given_up = pipeline.given_up().await;
    assert!(given_up.is_empty(), "given up: {given_up:#?}");
    let logs = pipeline.logs();
    assert!(
        !logs.contains(MARKER),
        "a binary wrote a marker:\n{}",
        logs.lines()
            .filter(|line| line.contains(MARKER))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// The personal fields of an order body are sealed (not the placeholder,
/// not plain).
fn assert_sealed(body: &str) {
    let body: Value = serde_json::from_str(body).unwrap_or_else(|err| panic!("{body}: {err}"));
    if matches!(body["type"].as_str(), Some("OrderCreated" | "OrderUpdated")) {
        for field in ["customerName", "email"] {
            let value = body["data"][field].as_str().unwrap_or_default();
            assert!(
                sequence_guard::personal::is_sealed(value),
                "{field} of {body}"
            );
        }
    }
}
