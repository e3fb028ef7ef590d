//! A step's state and its appended event are one transaction across the
//! process's table and the event store's: both written, or neither (a
//! fault on the `TransactWriteItems`), and a redelivery appends once.

use super::proxy::{Fault, OperationFaults};
use super::*;

/// The tables, a runner whose requests go through a proxy that faults
/// `TransactWriteItems` when armed, and the producer (direct).
async fn faulty() -> (Tables, OperationFaults, Runner<DynamoStore>, EventStore) {
    let tables = Tables::new().await;
    let proxy = proxy_for("TransactWriteItems").await;
    let runner = tables.runner_through(client_through(&proxy.endpoint).await);
    let producer = tables.producer();
    (tables, proxy, runner, producer)
}

async fn run_one(
    runner: &Runner<DynamoStore>,
    event: &Logged,
    delivery: &str,
) -> (Outcome, String) {
    let report = runner
        .run(&records(std::slice::from_ref(event), delivery), at(BASE))
        .await
        .expect("a batch");
    let message = &report.messages[0];
    (message.outcome, message.reason.clone().unwrap_or_default())
}

/// A paid order, then cancelled by its customer: the cancel's step moves
/// the state to `CANCELLED` and appends the refund, together.
async fn paid_then_cancelled(runner: &Runner<DynamoStore>, producer: &EventStore) -> Vec<Logged> {
    produce(producer, "order-1", "p-1", "OrderCreated", created(1000)).await;
    produce(producer, "order-1", "p-2", "PaymentReceived", paid(1000)).await;
    produce(producer, "order-1", "p-3", "OrderCancelled", cancelled()).await;
    let events = stream_events(producer, "order-1").await;
    let report = runner
        .run(&records(&events[..2], "first"), at(BASE))
        .await
        .expect("a batch");
    assert_eq!(outcomes(&report), [Outcome::Applied, Outcome::Applied]);
    let payment = state(runner.store(), "order-1").await.expect("a state");
    assert_eq!((payment.state, payment.sequence), (PaymentState::Paid, 2));
    events
}

/// The refund and the state after the cancel's step was written, once.
async fn assert_refunded_once(runner: &Runner<DynamoStore>, producer: &EventStore) {
    let events = stream_events(producer, "order-1").await;
    let types: Vec<&str> = events.iter().map(|e| e.event_type.as_str()).collect();
    assert_eq!(
        types,
        [
            "OrderCreated",
            "PaymentReceived",
            "OrderCancelled",
            "RefundRequested"
        ],
        "one refund"
    );
    assert_eq!(events[3].event_id, "process-payments-p-3-0");
    assert_eq!(
        events[3].data,
        json!({"amountCents": 1000, "reason": "order cancelled"})
    );
    let payment = state(runner.store(), "order-1").await.expect("a state");
    assert_eq!(
        (
            payment.state,
            payment.sequence,
            payment.last_event_id.as_str()
        ),
        (PaymentState::Cancelled, 3, "p-3")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_faulted_transaction_writes_neither_the_state_nor_the_refund() {
    let (_tables, proxy, runner, producer) = faulty().await;
    let events = paid_then_cancelled(&runner, &producer).await;

    // Every TransactWriteItems answered 500 (the SDK's and the event
    // store's retries included): the cancel's step fails, nothing written.
    proxy.arm(Fault::ServerError, u64::MAX);
    let (outcome, reason) = run_one(&runner, &events[2], "second").await;
    proxy.disarm();
    assert_eq!(outcome, Outcome::StorageError, "{reason}");
    assert!(proxy.faulted() >= 1, "the transaction was faulted");
    assert_eq!(
        stream_events(&producer, "order-1").await.len(),
        3,
        "no refund appended"
    );
    let payment = state(runner.store(), "order-1").await.expect("a state");
    assert_eq!(
        (payment.state, payment.sequence),
        (PaymentState::Paid, 2),
        "the state did not move"
    );

    // Redelivered: written, once; and again: a duplicate, nothing more.
    let (outcome, reason) = run_one(&runner, &events[2], "third").await;
    assert_eq!(outcome, Outcome::Applied, "{reason}");
    assert!(
        proxy.seen() > proxy.faulted(),
        "written by one TransactWriteItems"
    );
    assert_refunded_once(&runner, &producer).await;
    let (outcome, reason) = run_one(&runner, &events[2], "fourth").await;
    assert_eq!(outcome, Outcome::Duplicate, "{reason}");
    assert_refunded_once(&runner, &producer).await;

    // Its own refund reaches it: the state follows the stream.
    let refund = stream_events(&producer, "order-1").await[3].clone();
    let (outcome, reason) = run_one(&runner, &refund, "fifth").await;
    assert_eq!(outcome, Outcome::Applied, "{reason}");
    let payment = state(runner.store(), "order-1").await.expect("a state");
    assert_eq!(
        (payment.state, payment.sequence),
        (PaymentState::Cancelled, 4)
    );
    assert_eq!(stream_events(&producer, "order-1").await.len(), 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transaction_whose_answer_is_lost_is_written_once_with_its_state() {
    let (_tables, proxy, runner, producer) = faulty().await;
    let events = paid_then_cancelled(&runner, &producer).await;

    // The transaction takes effect; its answer never comes back.
    proxy.arm(Fault::LostAnswer, 1);
    let mut deliveries = 0;
    loop {
        deliveries += 1;
        let (outcome, reason) = run_one(&runner, &events[2], &format!("try-{deliveries}")).await;
        if !outcome.is_failure() {
            assert!(
                matches!(outcome, Outcome::Applied | Outcome::Duplicate),
                "{outcome:?} {reason}"
            );
            break;
        }
        assert!(deliveries < 3, "still failing: {outcome:?} {reason}");
    }
    assert_eq!(proxy.faulted(), 1, "the answer was lost");
    assert_refunded_once(&runner, &producer).await;
    let (outcome, _) = run_one(&runner, &events[2], "again").await;
    assert_eq!(outcome, Outcome::Duplicate);
    assert_refunded_once(&runner, &producer).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_faulted_deadline_writes_nothing_and_fires_once_at_the_next_sweep() {
    let (_tables, proxy, runner, producer) = faulty().await;
    produce(&producer, "order-1", "p-1", "OrderCreated", created(1000)).await;
    let events = stream_events(&producer, "order-1").await;
    let (outcome, reason) = run_one(&runner, &events[0], "first").await;
    assert_eq!(outcome, Outcome::Applied, "{reason}");
    assert_eq!(
        deadline(runner.store(), "order-1").await,
        Some(BASE + WINDOW)
    );

    proxy.arm(Fault::ServerError, u64::MAX);
    let report = runner.fire_due(&at(BASE + WINDOW)).await;
    proxy.disarm();
    assert_eq!((report.fired, report.failed), (0, 1), "{report:?}");
    assert_eq!(stream_events(&producer, "order-1").await.len(), 1);
    let payment = state(runner.store(), "order-1").await.expect("a state");
    assert_eq!(payment.state, PaymentState::AwaitingPayment);
    assert_eq!(
        deadline(runner.store(), "order-1").await,
        Some(BASE + WINDOW),
        "the deadline kept"
    );

    let report = fire_until(&runner, BASE + WINDOW, 1).await;
    assert_eq!(report, 1);
    let events = stream_events(&producer, "order-1").await;
    assert_eq!(events.len(), 2);
    assert_eq!(events[1].event_type, "OrderCancelled");
    assert_eq!(
        events[1].event_id,
        format!("process-payments-due-order-1-{}-0", BASE + WINDOW)
    );
    let payment = state(runner.store(), "order-1").await.expect("a state");
    assert_eq!(
        (payment.state, payment.sequence),
        (PaymentState::Cancelling, 1)
    );
    assert_eq!(deadline(runner.store(), "order-1").await, None);
    assert_eq!(runner.fire_due(&at(BASE + 5 * WINDOW)).await.fired, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_whose_every_answer_is_lost_fails_written_whole_and_is_then_a_duplicate() {
    let (_tables, proxy, runner, producer) = faulty().await;
    let events = paid_then_cancelled(&runner, &producer).await;

    // Written by the first try; every answer lost, the retries' too: the
    // step is reported failed, and what it wrote is whole.
    proxy.arm(Fault::LostAnswer, u64::MAX);
    let (outcome, reason) = run_one(&runner, &events[2], "lost").await;
    proxy.disarm();
    assert!(proxy.faulted() >= 2, "the retries' answers lost too");
    assert_eq!(outcome, Outcome::StorageError, "{reason}");
    assert_refunded_once(&runner, &producer).await;

    let (outcome, reason) = run_one(&runner, &events[2], "redelivered").await;
    assert_eq!(outcome, Outcome::Duplicate, "{reason}");
    assert_refunded_once(&runner, &producer).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deadline_whose_answer_is_lost_appends_its_cancel_once() {
    let (_tables, proxy, runner, producer) = faulty().await;
    produce(&producer, "order-1", "p-1", "OrderCreated", created(1000)).await;
    let events = stream_events(&producer, "order-1").await;
    let (outcome, reason) = run_one(&runner, &events[0], "first").await;
    assert_eq!(outcome, Outcome::Applied, "{reason}");

    proxy.arm(Fault::LostAnswer, 1);
    let mut reports = Vec::new();
    for _ in 0..50 {
        let report = runner.fire_due(&at(BASE + WINDOW)).await;
        reports.push(report);
        if proxy.faulted() == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    eprintln!("a deadline's answer lost: {reports:?}");
    assert_eq!(proxy.faulted(), 1, "the answer was lost");
    assert!(
        reports.iter().all(|report| report.failed == 0),
        "{reports:?}"
    );
    let events = stream_events(&producer, "order-1").await;
    let types: Vec<&str> = events.iter().map(|e| e.event_type.as_str()).collect();
    assert_eq!(types, ["OrderCreated", "OrderCancelled"], "one cancel");
    let payment = state(runner.store(), "order-1").await.expect("a state");
    assert_eq!(
        (payment.state, payment.sequence),
        (PaymentState::Cancelling, 1)
    );
    assert_eq!(deadline(runner.store(), "order-1").await, None);
    assert_eq!(
        runner.fire_due(&at(BASE + 5 * WINDOW)).await,
        Default::default()
    );
    assert_eq!(stream_events(&producer, "order-1").await.len(), 2);
}
