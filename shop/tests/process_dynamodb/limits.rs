//! What a handler that asks more of one step than a transaction holds gets
//! on DynamoDB Local: a handler error naming the limit, nothing written; and
//! a step at the limit, written whole.

use sequence_guard::process::{MAX_OUTGOING, Outbox, Process};
use sequence_guard::{Decision, Domain, Entity, Events, Handling, Sequenced};
use serde::de::IgnoredAny;
use serde::{Deserialize, Serialize};

use super::*;

/// A process that follows orders and, on each creation, appends as many
/// payments of a cent to the order as its total says (0: one to the order
/// and one to another stream; 1000 or more: none), on each update as many
/// padded ones.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Entity)]
#[serde(rename_all = "camelCase")]
#[entity(kind = "GREEDY")]
struct Greedy {
    sequence: u64,
    last_event_id: String,
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type", content = "data")]
enum GreedyEvent {
    OrderCreated(Value),
    OrderUpdated(Value),
    // The store's other types: its queue receives them all.
    OrderCancelled(IgnoredAny),
    PaymentReceived(IgnoredAny),
    RefundRequested(IgnoredAny),
    PersonalDataErased(IgnoredAny),
    ProductCreated(IgnoredAny),
    ProductPriceChanged(IgnoredAny),
    InventoryAdjusted(IgnoredAny),
}

impl Events for GreedyEvent {
    fn handling(self) -> Handling {
        match self {
            GreedyEvent::OrderCreated(data) => Handling::process(data, on_created),
            GreedyEvent::OrderUpdated(data) => Handling::process(data, on_updated),
            GreedyEvent::OrderCancelled(_)
            | GreedyEvent::PaymentReceived(_)
            | GreedyEvent::RefundRequested(_)
            | GreedyEvent::PersonalDataErased(_) => Handling::pass::<Greedy>(),
            GreedyEvent::ProductCreated(_)
            | GreedyEvent::ProductPriceChanged(_)
            | GreedyEvent::InventoryAdjusted(_) => Handling::ignore(),
        }
    }
}

/// A payment's data padded to about 200 KB (the shop's types take fields
/// they do not know, of at most 1024 characters each).
fn padded() -> Value {
    let mut data = json!({"amountCents": 1});
    for n in 0..200 {
        data[format!("pad{n}")] = json!("x".repeat(1000));
    }
    data
}

/// An update: as many padded payments as its total says.
fn on_updated(
    state: &mut Option<Greedy>,
    event: &Sequenced<Value>,
    outbox: &mut Outbox,
) -> Decision {
    let Some(greedy) = state else {
        return Decision::NotCreated;
    };
    if greedy.sequence + 1 != event.sequence {
        return if greedy.sequence >= event.sequence {
            Decision::Duplicate
        } else {
            Decision::Gap
        };
    }
    greedy.sequence = event.sequence;
    greedy.last_event_id.clone_from(&event.event_id);
    for _ in 0..event.data["totalCents"].as_u64().unwrap_or(0) {
        outbox.append(&event.aggregate_id, "PaymentReceived", &padded());
    }
    Decision::Applied
}

fn on_created(
    state: &mut Option<Greedy>,
    event: &Sequenced<Value>,
    outbox: &mut Outbox,
) -> Decision {
    if state.is_some() {
        return Decision::Duplicate;
    }
    *state = Some(Greedy {
        sequence: event.sequence,
        last_event_id: event.event_id.clone(),
    });
    let order = &event.aggregate_id;
    match event.data["totalCents"].as_u64().unwrap_or(0) {
        1000.. => {}
        0 => {
            outbox.append(order, "PaymentReceived", &paid(1));
            outbox.append(&format!("{order}-other"), "PaymentReceived", &paid(1));
        }
        count => {
            for _ in 0..count {
                outbox.append(order, "PaymentReceived", &paid(1));
            }
        }
    }
    Decision::Applied
}

fn greedy(tables: &Tables) -> Runner<DynamoStore> {
    let domain = Domain::new::<GreedyEvent>()
        .entity::<Greedy>()
        .with_process(Process::new("greedy", shop::domain()));
    let events = EventStore::new(tables.client.clone(), tables.events.clone(), shop::domain());
    let store =
        DynamoStore::new(tables.client.clone(), tables.table.clone()).with_event_store(events);
    Runner::new(domain, store, RunnerConfig::default())
}

/// Creates `order` with `total` and delivers its creation: the outcome and
/// its reason.
async fn created_with(
    tables: &Tables,
    runner: &Runner<DynamoStore>,
    order: &str,
    total: u64,
) -> (Outcome, String) {
    let producer = tables.producer();
    produce(
        &producer,
        order,
        &format!("{order}-1"),
        "OrderCreated",
        created(total),
    )
    .await;
    let events = stream_events(&producer, order).await;
    let report = runner
        .run(&records(&events, "m"), at(BASE))
        .await
        .expect("a batch");
    let message = &report.messages[0];
    (message.outcome, message.reason.clone().unwrap_or_default())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_appending_more_than_a_transaction_holds_is_a_handler_error() {
    let tables = Tables::new().await;
    let runner = greedy(&tables);
    let producer = tables.producer();
    let limit = MAX_OUTGOING as u64;

    let (outcome, reason) = created_with(&tables, &runner, "too-many", limit + 1).await;
    assert_eq!(outcome, Outcome::HandlerError, "{reason}");
    assert!(
        reason.contains(&format!("appended {} events in one step", limit + 1))
            && reason.contains(&format!("at most {limit}")),
        "the reason names the limit: {reason}"
    );
    assert_eq!(typed::<Greedy, _>(runner.store(), "too-many").await, None);
    assert_eq!(
        stream_events(&producer, "too-many").await.len(),
        1,
        "nothing appended"
    );

    // At the limit: one transaction, written whole.
    let (outcome, reason) = created_with(&tables, &runner, "at-limit", limit).await;
    assert_eq!(outcome, Outcome::Applied, "{reason}");
    let events = stream_events(&producer, "at-limit").await;
    assert_eq!(events.len() as u64, 1 + limit);
    for (index, event) in events.iter().skip(1).enumerate() {
        assert_eq!(event.event_type, "PaymentReceived");
        assert_eq!(event.event_id, format!("process-greedy-at-limit-1-{index}"));
    }
    let state = typed::<Greedy, _>(runner.store(), "at-limit")
        .await
        .expect("a state");
    assert_eq!(state.sequence, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_appending_to_two_streams_is_a_handler_error_naming_both() {
    let tables = Tables::new().await;
    let runner = greedy(&tables);
    let producer = tables.producer();
    let (outcome, reason) = created_with(&tables, &runner, "split", 0).await;
    assert_eq!(outcome, Outcome::HandlerError, "{reason}");
    assert!(
        reason.contains("`split`") && reason.contains("`split-other`"),
        "the reason names both streams: {reason}"
    );
    assert_eq!(typed::<Greedy, _>(runner.store(), "split").await, None);
    assert_eq!(stream_events(&producer, "split").await.len(), 1);
    assert!(stream_events(&producer, "split-other").await.is_empty());
}

/// A gap closed behind 97 parked updates and a parked cancel that asks for
/// a refund: the drain reaches the cancel with the step nearly full (each
/// drained event's parked item deleted in the step's transaction), and the
/// refund's event and request record must still fit in the transaction's
/// 100 items, or wait for the next step.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refund_drained_when_the_step_is_nearly_full_waits_for_the_next_step() {
    let tables = Tables::new().await;
    let (runner, producer) = (tables.runner(), tables.producer());
    let order = "crowded";
    produce(&producer, order, "c-1", "OrderCreated", created(1000)).await;
    produce(&producer, order, "c-2", "PaymentReceived", paid(100)).await;
    let updates = 97;
    for n in 0..updates {
        let id = format!("c-{}", n + 3);
        produce(&producer, order, &id, "OrderUpdated", created(1000)).await;
    }
    let cancel = updates + 3;
    produce(
        &producer,
        order,
        &format!("c-{cancel}"),
        "OrderCancelled",
        cancelled(),
    )
    .await;
    let events = stream_events(&producer, order).await;
    assert_eq!(events.len() as u64, cancel);

    let report = runner
        .run(&records(&events[..1], "first"), at(BASE))
        .await
        .expect("a batch");
    assert_eq!(outcomes(&report), [Outcome::Applied]);
    // Everything after the payment delivered a third time: parked.
    for chunk in events[2..].chunks(10) {
        let event = batch(
            chunk
                .iter()
                .map(|event| {
                    let id = format!("parked-{}", event.event_id);
                    delivered(message(&id, order, &event.body), 3)
                })
                .collect(),
        );
        let report = runner.run(&event, at(BASE)).await.expect("a batch");
        assert!(
            outcomes(&report)
                .iter()
                .all(|outcome| *outcome == Outcome::Parked),
            "{:?}",
            outcomes(&report)
        );
    }

    // The payment closes the gap: the drain applies what it can.
    let mut deliveries = Vec::new();
    for delivery in 1..=3 {
        let report = runner
            .run(
                &records(&events[1..2], &format!("gap-{delivery}")),
                at(BASE),
            )
            .await
            .expect("a batch");
        let message = &report.messages[0];
        deliveries.push((message.outcome, message.reason.clone()));
        if !message.outcome.is_failure() {
            break;
        }
    }
    assert_eq!(
        deliveries[0].0,
        Outcome::Applied,
        "the payment that closes the gap: {deliveries:?}"
    );
    // The drain goes on in a next step of the same invocation: every parked
    // event applied, the refund appended once, caused by the cancel.
    let refunds: Vec<Logged> = stream_events(&producer, order)
        .await
        .into_iter()
        .filter(|event| event.event_type == "RefundRequested")
        .collect();
    assert_eq!(refunds.len(), 1, "one refund");
    assert_eq!(
        refunds[0].event_id,
        format!("process-payments-c-{cancel}-0")
    );
    assert_eq!(refunds[0].data["amountCents"], 100);
    let payment = state(runner.store(), order).await.expect("a state");
    assert_eq!(
        (payment.state, payment.sequence),
        (PaymentState::Cancelled, cancel)
    );
}

/// Two updates in one batch, each appending 2.4 MB (each within what one
/// append holds): together more than a transaction's 4 MB, so the second's
/// appends must wait for the next step.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_handlers_appending_4_mb_together_are_written_in_two_steps() {
    let tables = Tables::new().await;
    let runner = greedy(&tables);
    let producer = tables.producer();
    let order = "heavy";
    produce(&producer, order, "h-1", "OrderCreated", created(1000)).await;
    produce(&producer, order, "h-2", "OrderUpdated", created(12)).await;
    produce(&producer, order, "h-3", "OrderUpdated", created(12)).await;
    let events = stream_events(&producer, order).await;
    let report = runner
        .run(&records(&events, "m"), at(BASE))
        .await
        .expect("a batch");
    let reasons: Vec<_> = report
        .messages
        .iter()
        .map(|message| (message.outcome, message.reason.clone()))
        .collect();
    assert_eq!(outcomes(&report), [Outcome::Applied; 3], "{reasons:?}");
    let appended = stream_events(&producer, order).await;
    assert_eq!(appended.len(), 3 + 24, "each update's payments, once");
    let state = typed::<Greedy, _>(runner.store(), order)
        .await
        .expect("a state");
    assert_eq!(state.sequence, 3);
}
