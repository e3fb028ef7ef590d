//! `PaymentReceived` and `RefundRequested` on the order: their limits, as
//! the consumer and the producer read them; the order item's `paidCents` and
//! `refundCents` on DynamoDB Local (written once there is an amount, so the
//! items of an earlier release agree with the fold as they are), and
//! `verify` agreeing with the fold of the store; the samples through the
//! order projection and the status consumer.

mod support;

use aws_sdk_dynamodb::types::AttributeValue;
use sequence_guard::EntityKey;
use sequence_guard::producer::{Append, AppendError, EventStore, NewEvent};
use sequence_guard::runner::{Invocation, Outcome, Runner, RunnerConfig};
use sequence_guard::store::dynamodb::{DynamoStore, connect, create_table, ensure_events_table};
use sequence_guard::store::memory::MemoryStore;
use serde_json::{Value, json};
use shop::status::Status;
use shop::{Order, OrderStatus};
use support::*;

fn invocation() -> Invocation {
    Invocation {
        deadline: None,
        now: sequence_guard::lambda::epoch_seconds(),
    }
}

fn envelope(event_type: &str, data: Value) -> String {
    json!({"eventId": "e-2", "type": event_type, "aggregateId": "order-1", "sequence": 2, "data": data})
        .to_string()
}

#[test]
fn the_two_types_are_sequenced_on_the_order() {
    let domain = shop::domain();
    for (event_type, data, handler) in [
        (
            "PaymentReceived",
            json!({"amountCents": 1}),
            "shop::order::on_payment_received",
        ),
        (
            "RefundRequested",
            json!({"amountCents": 9_223_372_036_854_775_807_u64, "reason": ""}),
            "shop::order::on_refund_requested",
        ),
    ] {
        let event = domain
            .parse(&envelope(event_type, data))
            .unwrap_or_else(|err| panic!("{event_type}: {err}"));
        assert_eq!(event.type_name(), event_type);
        assert_eq!(event.sequence(), Some(2));
        assert_eq!(
            event.entity_key(),
            Some(EntityKey::of::<Order>("order-1")),
            "{event_type}"
        );
        assert_eq!(event.handler(), handler);
    }
}

#[test]
fn amounts_below_one_and_bad_reasons_are_refused_with_the_field_named() {
    let domain = shop::domain();
    let cases = [
        (
            "PaymentReceived",
            json!({"amountCents": 0}),
            "amountCents",
            "must be >= 1, got 0",
        ),
        (
            "PaymentReceived",
            json!({"amountCents": -5}),
            "amountCents",
            "must be >= 1, got -5",
        ),
        (
            "PaymentReceived",
            json!({"amountCents": 1.5}),
            "amountCents",
            "integer",
        ),
        (
            "PaymentReceived",
            json!({"amountCents": "12"}),
            "amountCents",
            "",
        ),
        ("PaymentReceived", json!({}), "amountCents", "missing"),
        (
            "RefundRequested",
            json!({"amountCents": 0, "reason": "r"}),
            "amountCents",
            "must be >= 1",
        ),
        (
            "RefundRequested",
            json!({"amountCents": 5}),
            "reason",
            "missing",
        ),
        (
            "RefundRequested",
            json!({"amountCents": 5, "reason": 7}),
            "reason",
            "",
        ),
        (
            "RefundRequested",
            json!({"amountCents": 5, "reason": "x".repeat(1025)}),
            "reason",
            "must be 0 to 1024 characters",
        ),
    ];
    for (event_type, data, field, says) in cases {
        let body = envelope(event_type, data);
        let reason = domain
            .parse(&body)
            .map(|_| ())
            .expect_err(&body)
            .to_string();
        assert!(
            reason.contains(&format!("data.{field}")) && reason.contains(says),
            "{body}: {reason}"
        );
    }
}

/// The samples of the payments (13 and 14) through both consumers of the
/// shop: the order projection adds the amounts, also on the cancelled
/// order-400; the status consumer passes them, its sequence exact.
#[tokio::test]
async fn the_samples_add_the_amounts_and_the_status_consumer_passes_them() {
    let orders = MemoryStore::new();
    let statuses = MemoryStore::new();
    let projector = Runner::new(shop::domain(), &orders, RunnerConfig::default());
    let status = Runner::new(shop::status::domain(), &statuses, RunnerConfig::default());
    for json in [samples::PAYMENT_RECEIVED, samples::REFUND_REQUESTED] {
        for runner in [&projector, &status] {
            let report = runner.run(&sample(json), invocation()).await.expect("run");
            assert!(failed_ids(&report).is_empty(), "{report:?}");
        }
    }
    // The refund resent by the producer: a duplicate, counted once.
    let report = status
        .run(&sample(samples::REFUND_REQUESTED), invocation())
        .await
        .expect("run");
    assert_eq!(outcomes(&report), [Outcome::Duplicate, Outcome::Duplicate]);

    let paid = typed::<Order, _>(&orders, "order-300")
        .await
        .expect("order-300");
    assert_eq!(
        (
            paid.sequence,
            paid.status,
            paid.paid_cents,
            paid.refund_cents
        ),
        (2, OrderStatus::Open, 2500, 0)
    );
    let refunded = typed::<Order, _>(&orders, "order-400")
        .await
        .expect("order-400");
    assert_eq!(
        (
            refunded.sequence,
            refunded.status,
            refunded.paid_cents,
            refunded.refund_cents
        ),
        (4, OrderStatus::Cancelled, 1800, 1800)
    );
    assert_eq!(
        refunded.cancel_reason.as_deref(),
        Some("payment not received")
    );

    let status_of = |id: &'static str| {
        let statuses = &statuses;
        async move { typed::<Status, _>(statuses, id).await.expect(id) }
    };
    let paid = status_of("order-300").await;
    assert_eq!((paid.sequence, paid.status), (2, OrderStatus::Open));
    let refunded = status_of("order-400").await;
    assert_eq!(
        (refunded.sequence, refunded.status),
        (4, OrderStatus::Cancelled)
    );
    assert_eq!(
        refunded.last_event_id,
        first_event_id(samples::REFUND_REQUESTED)
    );
}

/// The `eventId` of the first record of a sample.
fn first_event_id(json: &str) -> String {
    let body = sample(json).records[0].body.clone().expect("body");
    let event: Value = serde_json::from_str(&body).expect("json");
    event["eventId"].as_str().expect("eventId").to_owned()
}

async fn append(store: &EventStore, stream: &str, event_type: &str, data: Value) {
    store
        .append(Append::one(stream, NewEvent::new(event_type, data)))
        .await
        .unwrap_or_else(|err| panic!("{stream} {event_type}: {err:?}"));
}

fn created(total_cents: u64) -> Value {
    json!({"customerName": "Ada", "email": "ada@example.com", "totalCents": total_cents})
}

/// Each stored event of `stream` through the projector, one batch each (so
/// that every event loads the item the one before it wrote).
async fn project(runner: &Runner<DynamoStore>, events: &EventStore, stream: &str) {
    for event in events.read(stream, 0, 100).await.expect("read") {
        let messages = vec![message(&event.event_id, stream, &event.body)];
        let report = runner
            .run(&batch(messages), invocation())
            .await
            .expect("run");
        assert_eq!(outcomes(&report), [Outcome::Applied], "{stream}");
    }
}

fn number(item: &std::collections::HashMap<String, AttributeValue>, name: &str) -> Option<String> {
    match item.get(name) {
        Some(AttributeValue::N(number)) => Some(number.clone()),
        None => None,
        other => panic!("{name}: expected N, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_order_item_holds_the_amounts_and_verify_agrees_with_the_fold() {
    // GIVEN an event store on DynamoDB Local: an order paid in full, one
    // cancelled, then paid and refunded, and one never paid.
    let client = connect(Some(&dynamodb_local().endpoint)).await;
    let suffix = std::process::id();
    let (events_table, table) = (
        format!("payments-events-{suffix}"),
        format!("payments-orders-{suffix}"),
    );
    ensure_events_table(&client, &events_table)
        .await
        .expect("events table");
    create_table(&client, &table).await.expect("table");
    let events = EventStore::new(
        client.clone(),
        events_table.clone(),
        personal_data::keyed_domain(&client, &events_table),
    );
    append(&events, "paid", "OrderCreated", created(2500)).await;
    append(
        &events,
        "paid",
        "PaymentReceived",
        json!({"amountCents": 2000}),
    )
    .await;
    append(
        &events,
        "paid",
        "PaymentReceived",
        json!({"amountCents": 500}),
    )
    .await;
    append(&events, "refunded", "OrderCreated", created(1800)).await;
    append(
        &events,
        "refunded",
        "OrderCancelled",
        json!({"reason": "payment not received"}),
    )
    .await;
    append(
        &events,
        "refunded",
        "PaymentReceived",
        json!({"amountCents": 1800}),
    )
    .await;
    append(
        &events,
        "refunded",
        "RefundRequested",
        json!({"amountCents": 1800, "reason": "order cancelled"}),
    )
    .await;
    append(&events, "unpaid", "OrderCreated", created(700)).await;

    // The producer refuses what the consumer would: nothing stored.
    for (data, says) in [
        (
            json!({"amountCents": 0}),
            "field `data.amountCents` must be >= 1, got 0",
        ),
        (json!({}), "missing field `data.amountCents`"),
    ] {
        match events
            .append(Append::one("paid", NewEvent::new("PaymentReceived", data)))
            .await
        {
            Err(AppendError::Invalid { reason, .. }) => assert_eq!(reason.to_string(), says),
            other => panic!("{says}: {other:?}"),
        }
    }
    assert_eq!(events.read("paid", 0, 100).await.expect("read").len(), 3);

    // WHEN the projector applies them.
    let runner = Runner::new(
        personal_data::keyed_domain(&client, &events_table),
        DynamoStore::new(client.clone(), table.clone()),
        RunnerConfig::default(),
    );
    for stream in ["paid", "refunded", "unpaid"] {
        project(&runner, &events, stream).await;
    }

    // THEN the items hold the sums as numbers; an order without amounts
    // holds neither attribute, as an earlier release wrote it.
    let item = |id: &'static str| {
        let client = client.clone();
        let table = table.clone();
        async move {
            client
                .get_item()
                .table_name(table)
                .key("pk", AttributeValue::S(format!("ORDER#{id}")))
                .key("sk", AttributeValue::S("STATE".into()))
                .consistent_read(true)
                .send()
                .await
                .expect("GetItem")
                .item
                .unwrap_or_else(|| panic!("no order {id}"))
        }
    };
    let paid = item("paid").await;
    assert_eq!(number(&paid, "paidCents").as_deref(), Some("2500"));
    assert_eq!(number(&paid, "refundCents"), None);
    assert_eq!(number(&paid, "sequence").as_deref(), Some("3"));
    let refunded = item("refunded").await;
    assert_eq!(number(&refunded, "paidCents").as_deref(), Some("1800"));
    assert_eq!(number(&refunded, "refundCents").as_deref(), Some("1800"));
    assert_eq!(
        refunded.get("status"),
        Some(&AttributeValue::S("CANCELLED".into()))
    );
    let unpaid = item("unpaid").await;
    assert!(
        !unpaid.contains_key("paidCents") && !unpaid.contains_key("refundCents"),
        "{unpaid:?}"
    );

    // AND verify finds the projection equal to the fold of the store.
    let (code, lines, stderr) = verify_lines(&events_table, &table, &[]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        lines.last(),
        Some(&json!({"checked": 3, "differ": 0})),
        "{lines:?}"
    );

    // AND an amount lost from an item is named by its attribute.
    client
        .update_item()
        .table_name(&table)
        .key("pk", AttributeValue::S("ORDER#refunded".into()))
        .key("sk", AttributeValue::S("STATE".into()))
        .update_expression("REMOVE refundCents")
        .send()
        .await
        .expect("UpdateItem");
    let (code, lines, stderr) = verify_lines(&events_table, &table, &[]);
    assert_eq!(code, 1, "{stderr}");
    assert_eq!(lines[0]["pk"], "ORDER#refunded", "{lines:?}");
    assert_eq!(lines[0]["attributes"], json!(["refundCents"]), "{lines:?}");
}

/// Runs the replay binary `exe` on `file`, with the logs at error level.
fn replay(exe: &str, file: &std::path::Path) -> (i32, String, String) {
    let output = std::process::Command::new(exe)
        .arg(file)
        .env("RUST_LOG", "error")
        .env_remove("GAP_POLICY")
        .env_remove("PARK_AFTER_RECEIVES")
        .output()
        .expect("run replay");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn a_payment_past_the_largest_sum_fails_with_its_reason_at_every_consumer_that_adds_it_up() {
    // GIVEN an order paid 2^63-1 cents, then one cent more, then cancelled.
    let max = i64::MAX as u64;
    let events = [
        ("OrderCreated", created(1000)),
        ("PaymentReceived", json!({"amountCents": max})),
        ("PaymentReceived", json!({"amountCents": 1})),
        ("OrderCancelled", json!({"reason": "changed mind"})),
    ];
    let messages = events
        .iter()
        .enumerate()
        .map(|(index, (event_type, data))| {
            let sequence = index as u64 + 1;
            let body = json!({"eventId": format!("e-{sequence}"), "type": event_type,
                "aggregateId": "order-max", "sequence": sequence, "data": data});
            message(&format!("m-{sequence}"), "order-max", &body.to_string())
        })
        .collect();
    let dir = std::env::temp_dir().join(format!("past-the-largest-sum-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let file = dir.join("events.json");
    std::fs::write(
        &file,
        serde_json::to_string(&batch(messages)).expect("json"),
    )
    .expect("write");

    // WHEN the order projection, the payments process and the status
    // consumer replay it.
    let [orders, payments, statuses] = [
        env!("CARGO_BIN_EXE_replay"),
        env!("CARGO_BIN_EXE_payments-replay"),
        env!("CARGO_BIN_EXE_status-replay"),
    ]
    .map(|exe| replay(exe, &file));
    let _ = std::fs::remove_dir_all(&dir);

    // THEN at the two that add it up, the payment that would pass the
    // largest sum is the message that fails, nothing of it written, and
    // the log says why, naming the field; the cancel behind it waits.
    for (_, stdout, stderr) in [orders, payments] {
        let outcomes: Vec<&str> = stdout
            .lines()
            .filter(|line| line.contains("order-max  seq"))
            .collect();
        assert_eq!(outcomes.len(), 4, "{stdout}");
        assert!(outcomes[1].ends_with("applied"), "{stdout}");
        assert!(outcomes[2].contains("invalid"), "{stdout}");
        assert!(outcomes[3].contains("skipped"), "{stdout}");
        assert!(stdout.contains("paidCents 9223372036854775807"), "{stdout}");
        assert!(
            stderr.contains(
                "PaymentReceived not applied: its amountCents 1 would take the order's paidCents of 9223372036854775807 past 2^63-1 cents; retrying will not help"
            ),
            "{stderr}"
        );
    }
    // AND the status consumer, which adds nothing up, passes it.
    let (code, stdout, stderr) = statuses;
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains(r#"status "CANCELLED""#), "{stdout}");
}
