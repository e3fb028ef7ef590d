//! The shop's second consumer (`shop::status`) on the in-memory store and on
//! DynamoDB Local: every sample through it; a status item per order and
//! nothing of the products' or the stock's streams; no personal data; a run
//! of passes in one write; passes park and drain as any update.

mod support;

use std::collections::BTreeSet;

use sequence_guard::runner::{BatchReport, Invocation, Outcome, Runner, RunnerConfig};
use sequence_guard::store::Store;
use sequence_guard::store::memory::MemoryStore;
use shop::OrderStatus;
use shop::status::Status;
use support::*;

fn invocation() -> Invocation {
    Invocation {
        deadline: None,
        now: sequence_guard::lambda::epoch_seconds(),
    }
}

fn order(
    id: &str,
    event_type: &str,
    sequence: u64,
    receives: u32,
) -> aws_lambda_events::event::sqs::SqsMessage {
    let mut message = message(
        &format!("{id}-{sequence}"),
        id,
        &order_event(event_type, id, sequence, &format!("{id}-{sequence}")),
    );
    message
        .attributes
        .insert("ApproximateReceiveCount".into(), receives.to_string());
    message
}

async fn run<S: Store>(
    runner: &Runner<S>,
    messages: Vec<aws_lambda_events::event::sqs::SqsMessage>,
) -> BatchReport {
    runner
        .run(&batch(messages), invocation())
        .await
        .expect("run")
}

fn outcomes(report: &BatchReport) -> Vec<Outcome> {
    report
        .messages
        .iter()
        .map(|message| message.outcome)
        .collect()
}

#[tokio::test]
async fn the_samples_leave_each_orders_status_and_nothing_else() {
    let store = MemoryStore::new();
    let runner = Runner::new(shop::status::domain(), &store, RunnerConfig::default());
    let mut ignored = 0;
    for (_, json) in samples::ALL {
        let report = runner.run(&sample(json), invocation()).await.expect("run");
        ignored += report.count(Outcome::Ignored);
    }
    assert!(ignored >= 5, "the product and stock samples: {ignored}");
    let entities = store.entities();
    let kinds: BTreeSet<&str> = entities.iter().map(|(key, _)| key.kind().name).collect();
    assert_eq!(kinds, BTreeSet::from(["STATUS"]));
    assert!(store.counters().is_empty(), "no stock");
    let order_42 = entities
        .iter()
        .find(|(key, _)| key.id() == "order-42")
        .and_then(|(_, entity)| entity.get::<Status>().cloned())
        .expect("order-42");
    assert_eq!(
        order_42.sequence, 6,
        "the updates passed: the sequence is exact"
    );
    assert_eq!(order_42.status, OrderStatus::Cancelled);
}

/// A run of updates in one batch passes in the run's one write, and a pass
/// parks and drains as any update.
#[tokio::test]
async fn passes_cost_the_runs_one_write_and_park_as_updates() {
    let store = fresh_table().await;
    let runner = Runner::new(
        shop::status::domain(),
        store.clone(),
        RunnerConfig::default(),
    );
    run(&runner, vec![order("o-1", "OrderCreated", 1, 1)]).await;
    let before = store.requests();
    let updates: Vec<_> = (2..=6)
        .map(|n| order("o-1", "OrderUpdated", n, 1))
        .collect();
    let report = run(&runner, updates).await;
    assert_eq!(outcomes(&report), [Outcome::Applied; 5]);
    assert_eq!(
        store.requests() - before,
        1,
        "the status this runner wrote is known: one conditional write for the run"
    );
    // A runner that keeps nothing warm reads first: one load, one write.
    let cold_store = fresh_table().await;
    let cold = Runner::new(
        shop::status::domain(),
        cold_store.clone(),
        RunnerConfig {
            warm_entities: 0,
            ..RunnerConfig::default()
        },
    );
    run(&cold, vec![order("o-1", "OrderCreated", 1, 1)]).await;
    let before = cold_store.requests();
    let updates: Vec<_> = (2..=6)
        .map(|n| order("o-1", "OrderUpdated", n, 1))
        .collect();
    let report = run(&cold, updates).await;
    assert_eq!(outcomes(&report), [Outcome::Applied; 5]);
    assert_eq!(
        cold_store.requests() - before,
        2,
        "one load and one conditional write for the run"
    );
    // A gap of passes parks at its third delivery and drains when it closes.
    let report = run(&runner, vec![order("o-1", "OrderUpdated", 8, 3)]).await;
    assert_eq!(outcomes(&report), [Outcome::Parked]);
    let report = run(&runner, vec![order("o-1", "OrderUpdated", 7, 1)]).await;
    assert_eq!(outcomes(&report), [Outcome::Applied]);
    assert_eq!(report.drained(), 1);
    // Product and stock events: done, nothing read or written.
    let before = store.requests();
    let product = message(
        "p-1",
        "p-1",
        r#"{"eventId":"p-1-1","type":"ProductCreated","aggregateId":"p-1","sequence":1,"data":{"anything":true}}"#,
    );
    let stock = message(
        "s-1",
        "SKU-1",
        r#"{"eventId":"s-1","type":"InventoryAdjusted","data":{"sku":"SKU-1","delta":2}}"#,
    );
    let report = run(&runner, vec![product, stock]).await;
    assert_eq!(outcomes(&report), [Outcome::Ignored, Outcome::Ignored]);
    assert!(report.response().batch_item_failures.is_empty());
    assert_eq!(store.requests(), before, "nothing read, nothing written");

    // The whole table: one status item, its attributes, no personal data.
    let scan = store
        .client()
        .scan()
        .table_name(store.table())
        .consistent_read(true)
        .send()
        .await
        .expect("Scan");
    let items = scan.items.unwrap_or_default();
    assert_eq!(items.len(), 1, "{items:?}");
    let names: BTreeSet<&str> = items[0].keys().map(String::as_str).collect();
    assert_eq!(
        names,
        BTreeSet::from(["pk", "sk", "sequence", "lastEventId", "status"])
    );
    let text = format!("{items:?}");
    assert!(
        text.contains("STATUS#o-1") && text.contains("N(\"8\")"),
        "{text}"
    );
    for personal in [
        "customerName",
        "email",
        "totalCents",
        "ada@example.com",
        "Ada",
    ] {
        assert!(!text.contains(personal), "{personal}: {text}");
    }
}
