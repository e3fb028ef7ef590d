//! A process's step: what the shop's payments process (`shop::payments`)
//! costs per step on DynamoDB Local, in requests, capacity units and
//! dollars. A step is one message the process handles (its state moved, its
//! deadline set or cleared, its appends: one write) or one deadline the
//! sweep fires.
//!
//! Each kind of step is measured over 20 orders, delivered one message a
//! batch and ten a batch (ten orders' events, as a queue's batch holds
//! them); deadlines are fired one a sweep and ten a sweep. The order's own
//! events are appended first by a producer of their own (not counted), and
//! the process is given each event's body as the dispatcher sends it.
//!
//! Requests: `DynamoStore::requests()`, the event store's included (what
//! `BatchReport.requests` counts). Write units: a transaction's by AWS's
//! rules (`transaction_units`: 2 per KB and item), and 2 for each entry of
//! the `due` index it adds or removes (DynamoDB Local's count in a
//! transaction; AWS's index rule says 1 a write: an upper bound); every
//! other request's as DynamoDB Local reports them (`process/meter.rs`: it
//! follows the rules for one item, an index's writes included, and
//! undercounts a transaction across two tables, whose own report is
//! printed beside). Read units: as DynamoDB Local reports them (a key it
//! does not find costs nothing there). Dollars: the units at the on-demand
//! prices of `../support/cost.rs`.

mod meter;

use std::collections::HashMap;

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::AttributeValue;
use sequence_guard::producer::{Append, EventStore, ExpectedSequence, NewEvent};
use sequence_guard::runner::DeadlineReport;
use sequence_guard::runner::{Invocation, Runner, RunnerConfig};
use sequence_guard::store::Store;
use sequence_guard::store::dynamodb::{DynamoStore, connect, create_table, ensure_events_table};
use serde_json::{Value, json};

use self::meter::{Meter, Reported};
use crate::cost::{PRICES_READ, READ_UNIT, WRITE_UNIT};
use crate::figure_files::{Figure, Tables};
use crate::workloads::{batch, message};

/// Orders measured per kind of step and batch size.
const ORDERS: usize = 20;
/// Each order's total, paid in full.
const TOTAL_CENTS: u64 = 2500;

/// What some steps cost together.
#[derive(Debug, Default, Clone, Copy)]
struct Cost {
    steps: u64,
    requests: u64,
    reported: Reported,
    /// Entries of the `due` index added or removed (a moved one: 2).
    index_changes: u64,
}

impl Cost {
    fn plus(&self, other: &Cost) -> Cost {
        Cost {
            steps: self.steps + other.steps,
            requests: self.requests + other.requests,
            reported: self.reported.plus(&other.reported),
            index_changes: self.index_changes + other.index_changes,
        }
    }

    fn per_step(&self) -> PerStep {
        let steps = self.steps.max(1) as f64;
        let reported = &self.reported;
        // An index entry written by a transaction: 2 units (as DynamoDB
        // Local counts it in a transaction on one table: an upper bound).
        // Written by an `UpdateItem`, it is in Local's report already.
        let index = if reported.transactions > 0 {
            2.0 * self.index_changes as f64
        } else {
            0.0
        };
        PerStep {
            requests: self.requests as f64 / steps,
            write: (reported.write_units + reported.transaction_units + index) / steps,
            read: reported.read_units / steps,
            local_write: (reported.write_units + reported.transaction_reported) / steps,
            failed: reported.failed,
        }
    }
}

/// One step's share of a [`Cost`] (or a sum of shares).
#[derive(Debug, Default, Clone, Copy)]
struct PerStep {
    requests: f64,
    /// By the rules: a transaction's items and index entries counted, the
    /// rest as DynamoDB Local reports it.
    write: f64,
    read: f64,
    /// As DynamoDB Local reports it, transactions included.
    local_write: f64,
    failed: u64,
}

impl PerStep {
    fn plus(self, other: PerStep) -> PerStep {
        PerStep {
            requests: self.requests + other.requests,
            write: self.write + other.write,
            read: self.read + other.read,
            local_write: self.local_write + other.local_write,
            failed: self.failed + other.failed,
        }
    }

    /// Dollars per million steps (a million times a step's units at the
    /// on-demand prices).
    fn dollars_per_million(&self) -> f64 {
        (self.write * WRITE_UNIT.dollars + self.read * READ_UNIT.dollars) * 1e6
    }
}

/// A process table and its store (the event store's appends in its steps),
/// both clients metered; and a client that is not, to look at the table.
struct Rig {
    store: DynamoStore,
    meter: Meter,
    local: Client,
    table: String,
}

/// Where the counts stand, and the `due` index's entries (`pk` to `dueAt`).
type Mark = (u64, Reported, HashMap<String, String>);

impl Rig {
    async fn new(local: &Client, endpoint: &str, table: &str, events_table: &str) -> Rig {
        if let Err(err) = create_table(local, table).await {
            eprintln!("cannot create table {table}: {err}");
            std::process::exit(1);
        }
        let meter = Meter::default();
        let client = meter.wrap(&connect(Some(endpoint)).await);
        let events = EventStore::new(client.clone(), events_table, shop::domain());
        let store = DynamoStore::new(client, table).with_event_store(events);
        Rig {
            store,
            meter,
            local: local.clone(),
            table: table.to_owned(),
        }
    }

    /// The states with a deadline: `pk` to `dueAt` (a scan, not counted).
    async fn deadlines(&self) -> HashMap<String, String> {
        let mut deadlines = HashMap::new();
        let mut after = None;
        loop {
            let page = self
                .local
                .scan()
                .table_name(&self.table)
                .filter_expression("attribute_exists(dueAt)")
                .set_exclusive_start_key(after)
                .send()
                .await;
            let page = match page {
                Ok(page) => page,
                Err(err) => {
                    eprintln!("cannot scan {}: {err}", self.table);
                    std::process::exit(1);
                }
            };
            for item in page.items() {
                if let (Some(AttributeValue::S(pk)), Some(AttributeValue::N(at))) =
                    (item.get("pk"), item.get("dueAt"))
                {
                    deadlines.insert(pk.clone(), at.clone());
                }
            }
            match page.last_evaluated_key {
                Some(key) if !key.is_empty() => after = Some(key),
                _ => return deadlines,
            }
        }
    }

    async fn mark(&self) -> Mark {
        let deadlines = self.deadlines().await;
        (self.store.requests(), self.meter.reported(), deadlines)
    }

    /// What was sent since `mark`, for `steps` steps.
    async fn since(&self, mark: &Mark, steps: usize) -> Cost {
        let (requests, reported, deadlines) = self.mark().await;
        let before = &mark.2;
        let index_changes = deadlines
            .iter()
            .map(|(pk, at)| match before.get(pk) {
                None => 1,
                Some(was) if was != at => 2,
                Some(_) => 0,
            })
            .sum::<u64>()
            + before
                .keys()
                .filter(|pk| !deadlines.contains_key(*pk))
                .count() as u64;
        Cost {
            steps: steps as u64,
            requests: requests - mark.0,
            reported: reported.since(&mark.1),
            index_changes,
        }
    }
}

fn now() -> u64 {
    sequence_guard::lambda::epoch_seconds()
}

/// Appends one event of `event_type` to each order, whose stream stands at
/// `at`; answers each order's new event as the dispatcher sends it.
async fn produce(
    producer: &EventStore,
    orders: &[String],
    event_type: &str,
    data: &Value,
    at: u64,
) -> Vec<(String, String)> {
    for order in orders {
        let append = Append {
            expected: ExpectedSequence::Exact(at),
            ..Append::one(order.clone(), NewEvent::new(event_type, data.clone()))
        };
        if let Err(err) = producer.append(append).await {
            eprintln!("cannot append {event_type} to {order}: {err}");
            std::process::exit(1);
        }
    }
    bodies(producer, orders, at).await
}

/// Each order's event after `after` (its body as the dispatcher sends it).
async fn bodies(producer: &EventStore, orders: &[String], after: u64) -> Vec<(String, String)> {
    let mut bodies = Vec::with_capacity(orders.len());
    for order in orders {
        match producer.read(order, after, 1).await {
            Ok(events) if !events.is_empty() => {
                bodies.push((order.clone(), events[0].body.clone()));
            }
            Ok(_) => {
                eprintln!("{order}: no event after sequence {after}");
                std::process::exit(1);
            }
            Err(err) => {
                eprintln!("cannot read {order}: {err}");
                std::process::exit(1);
            }
        }
    }
    bodies
}

/// Delivers `bodies` to the process, `size` a batch: what they cost.
async fn deliver(
    runner: &Runner<&DynamoStore>,
    rig: &Rig,
    bodies: &[(String, String)],
    size: usize,
) -> Cost {
    let mark = rig.mark().await;
    for chunk in bodies.chunks(size) {
        let messages = chunk
            .iter()
            .enumerate()
            .map(|(n, (stream, body))| message(format!("{stream}-{n}"), stream, body.clone()))
            .collect();
        let invocation = Invocation {
            deadline: None,
            now: now(),
        };
        match runner.run(&batch(messages), invocation).await {
            Ok(report) => {
                for failed in report.messages.iter().filter(|m| !is_applied(m.outcome)) {
                    eprintln!(
                        "process step on {}: {:?} (not measured as a step)",
                        failed.stream, failed.outcome
                    );
                }
            }
            Err(err) => eprintln!("a batch of the process could not be read: {err}"),
        }
    }
    rig.since(&mark, bodies.len()).await
}

fn is_applied(outcome: sequence_guard::runner::Outcome) -> bool {
    outcome == sequence_guard::runner::Outcome::Applied
}

/// A sweep of the process's deadlines at `at`: what it cost, and what it
/// fired.
async fn sweep(runner: &Runner<&DynamoStore>, rig: &Rig, at: u64) -> (Cost, DeadlineReport) {
    let mark = rig.mark().await;
    let invocation = Invocation {
        deadline: None,
        now: at,
    };
    let report = runner.fire_due(&invocation).await;
    (rig.since(&mark, report.fired as usize).await, report)
}

/// The steps measured at one batch size.
struct Steps {
    created: PerStep,
    paid: PerStep,
    cancelled_refunded: PerStep,
    refund_arrives: PerStep,
    deadline: PerStep,
    own_cancel_arrives: PerStep,
    /// A sweep that finds nothing due (per sweep, not per step).
    empty_sweep: PerStep,
}

async fn measure(local: &Client, endpoint: &str, events: &str, run: u64, size: usize) -> Steps {
    // An order's name and email are sealed: the producer has its keys.
    let producer = EventStore::new(
        local.clone(),
        events,
        crate::keys::keyed(shop::domain(), local, events, &crate::keys::Wrapping::Local),
    );
    let orders = |scenario: &str| -> Vec<String> {
        (0..ORDERS)
            .map(|n| format!("proc-{run}-{scenario}-{size}-{n}"))
            .collect()
    };
    let created =
        json!({"customerName": "Ada", "email": "ada@example.com", "totalCents": TOTAL_CENTS});

    // Created, paid in full, then cancelled by the customer: refunded.
    let paid_orders = orders("paid");
    let rig = Rig::new(
        local,
        endpoint,
        &format!("bench-process-{run}-paid-{size}"),
        events,
    )
    .await;
    let runner = Runner::new(
        shop::payments::domain(),
        &rig.store,
        RunnerConfig::default(),
    );
    let sent = produce(&producer, &paid_orders, "OrderCreated", &created, 0).await;
    let created_cost = deliver(&runner, &rig, &sent, size).await;
    let payment = json!({"amountCents": TOTAL_CENTS});
    let sent = produce(&producer, &paid_orders, "PaymentReceived", &payment, 1).await;
    let paid = deliver(&runner, &rig, &sent, size).await;
    let cancel = json!({"reason": "customer changed their mind"});
    let sent = produce(&producer, &paid_orders, "OrderCancelled", &cancel, 2).await;
    let cancelled_refunded = deliver(&runner, &rig, &sent, size).await;
    // The refund it appended, delivered back to it.
    let sent = bodies(&producer, &paid_orders, 3).await;
    let refund_arrives = deliver(&runner, &rig, &sent, size).await;

    // Created, never paid: the deadline cancels it, and the cancel comes
    // back. Deadlines fired `size` a sweep.
    let due_orders = orders("due");
    let rig = Rig::new(
        local,
        endpoint,
        &format!("bench-process-{run}-due-{size}"),
        events,
    )
    .await;
    let runner = Runner::new(
        shop::payments::domain(),
        &rig.store,
        RunnerConfig::default(),
    );
    let window = shop::payments::window().unwrap_or(shop::payments::DEFAULT_WINDOW_SECONDS);
    let mut deadline = Cost::default();
    for chunk in due_orders.chunks(size) {
        let sent = produce(&producer, chunk, "OrderCreated", &created, 0).await;
        deliver(&runner, &rig, &sent, size).await;
        let (cost, report) = sweep(&runner, &rig, now() + window + 60).await;
        if report.fired != chunk.len() as u64 {
            eprintln!(
                "a sweep fired {} of {} deadlines due ({report:?})",
                report.fired,
                chunk.len()
            );
        }
        deadline = deadline.plus(&cost);
    }
    let sent = bodies(&producer, &due_orders, 1).await;
    let own_cancel_arrives = deliver(&runner, &rig, &sent, size).await;
    let (empty, _) = sweep(&runner, &rig, now() + window + 60).await;

    Steps {
        created: created_cost.per_step(),
        paid: paid.per_step(),
        cancelled_refunded: cancelled_refunded.per_step(),
        refund_arrives: refund_arrives.per_step(),
        deadline: deadline.per_step(),
        own_cancel_arrives: own_cancel_arrives.per_step(),
        empty_sweep: Cost { steps: 1, ..empty }.per_step(),
    }
}

/// A row's figures, from the steps of one batch size.
type Pick = fn(&Steps) -> PerStep;

fn row(tables: &mut Tables, what: &str, size: &str, figures: &PerStep) {
    let failed = if figures.failed > 0 {
        format!(" ({} requests failed, no units reported)", figures.failed)
    } else {
        String::new()
    };
    println!(
        "| {what} | {size} | {:.2} | {:.2} | {:.2} | {:.3} | {:.2}{failed} |",
        figures.requests,
        figures.write,
        figures.read,
        figures.dollars_per_million(),
        figures.local_write,
    );
    let row = match size {
        "-" => what.to_owned(),
        size => format!("{what}, {size} a batch"),
    };
    for (column, value, decimals) in [
        ("requests", figures.requests, 2),
        ("write units", figures.write, 2),
        ("read units", figures.read, 2),
        ("$ per million steps", figures.dollars_per_million(), 3),
        ("write units, Local's report", figures.local_write, 2),
    ] {
        tables.record("process", Figure::cell(&row, column, value, decimals, ""));
    }
}

/// The table: each kind of step, each order's lifecycle, at batch sizes 1
/// and 10, on DynamoDB Local at `endpoint`.
pub async fn print_process(endpoint: &str, tables: &mut Tables) {
    println!("\n== A process's step: the shop's payments process on DynamoDB Local");
    println!(
        "   per step: DynamoDB requests (the event store's included); write units: a transaction's \
         by AWS's rules (2 per KB and item, 2 per entry of the `due` index added or removed),"
    );
    println!(
        "   the other requests' and the read units as DynamoDB Local reports them \
         (ReturnConsumedCapacity TOTAL); {ORDERS} orders per row; a batch of 10: ten orders' messages"
    );
    println!(
        "   $ per million steps at on-demand prices (us-east-1, read {PRICES_READ}): write {}, \
         read {}; DynamoDB only (not SQS, SNS, Lambda)",
        WRITE_UNIT.per, READ_UNIT.per
    );
    println!(
        "   last column: the write units as DynamoDB Local reports them all (it undercounts a \
         transaction across two tables)"
    );
    tables.start(
        "process",
        "A step of the shop's payments process on DynamoDB Local: its requests, units and \
         DynamoDB's dollars",
        "bench --process",
        "step",
        &[
            "requests",
            "write units",
            "read units",
            "$ per million steps",
            "write units, Local's report",
        ],
    );
    let local = connect(Some(endpoint)).await;
    let events = "bench-process-events";
    if let Err(err) = ensure_events_table(&local, events).await {
        eprintln!("{events}: {err}");
        std::process::exit(1);
    }
    let run = now();
    let one = measure(&local, endpoint, events, run, 1).await;
    let ten = measure(&local, endpoint, events, run, 10).await;
    println!(
        "\n| step | batch | requests | write units | read units | $ per million steps | \
         write units, Local's report |"
    );
    println!("| --- | ---: | ---: | ---: | ---: | ---: | ---: |");
    let kinds: [(&str, Pick); 6] = [
        ("`OrderCreated`: awaiting, deadline set", |s| s.created),
        ("`PaymentReceived`, paid in full: deadline cleared", |s| {
            s.paid
        }),
        (
            "`OrderCancelled` after payment: `RefundRequested` appended",
            |s| s.cancelled_refunded,
        ),
        ("its `RefundRequested` arrives", |s| s.refund_arrives),
        (
            "the deadline fired: `OrderCancelled` appended (a sweep's 16 queries shared)",
            |s| s.deadline,
        ),
        ("its `OrderCancelled` arrives: cancelled", |s| {
            s.own_cancel_arrives
        }),
    ];
    for (what, of) in kinds {
        row(tables, what, "1", &of(&one));
        row(tables, what, "10", &of(&ten));
    }
    let lifecycles: [(&str, Pick); 3] = [
        ("an order created, paid (2 steps)", |s| {
            s.created.plus(s.paid)
        }),
        (
            "an order created, not paid, cancelled by the deadline (3 steps)",
            |s| s.created.plus(s.deadline).plus(s.own_cancel_arrives),
        ),
        (
            "an order created, paid, cancelled, refunded (4 steps)",
            |s| {
                s.created
                    .plus(s.paid)
                    .plus(s.cancelled_refunded)
                    .plus(s.refund_arrives)
            },
        ),
    ];
    for (what, of) in lifecycles {
        row(tables, what, "1", &of(&one));
        row(tables, what, "10", &of(&ten));
    }
    row(
        tables,
        "a sweep with no deadline due (per sweep, each schedule period)",
        "-",
        &one.empty_sweep,
    );
}
