//! Duplicate and raced deliveries on DynamoDB Local: the same batch
//! delivered twice, and by two functions at once, appends each refund once
//! (the request id derives from the event that caused it).

use std::collections::HashSet;

use aws_lambda_events::event::sqs::SqsEvent;
use sequence_guard::runner::BatchReport;

use super::*;

/// Orders needing a refund: paid then cancelled by the customer, and
/// cancelled then paid. Answers every event of theirs, in stream order.
async fn refunds_needed(producer: &EventStore, round: usize) -> Vec<Logged> {
    let (first, second) = (format!("paid-{round}"), format!("late-{round}"));
    produce(
        producer,
        &first,
        &format!("{first}-1"),
        "OrderCreated",
        created(1000),
    )
    .await;
    produce(
        producer,
        &first,
        &format!("{first}-2"),
        "PaymentReceived",
        paid(1000),
    )
    .await;
    produce(
        producer,
        &first,
        &format!("{first}-3"),
        "OrderCancelled",
        cancelled(),
    )
    .await;
    produce(
        producer,
        &second,
        &format!("{second}-1"),
        "OrderCreated",
        created(1000),
    )
    .await;
    produce(
        producer,
        &second,
        &format!("{second}-2"),
        "OrderCancelled",
        cancelled(),
    )
    .await;
    produce(
        producer,
        &second,
        &format!("{second}-3"),
        "PaymentReceived",
        paid(400),
    )
    .await;
    let mut events = stream_events(producer, &first).await;
    events.extend(stream_events(producer, &second).await);
    events
}

/// The refund each order of a round wants, by stream.
fn wanted(round: usize) -> [(String, u64); 2] {
    [
        (format!("paid-{round}"), 1000),
        (format!("late-{round}"), 400),
    ]
}

/// Each stream: gapless, unique ids, its one refund appended by the
/// process, and the state `CANCELLED` at the cancel's step or after.
async fn assert_one_refund(
    runner: &Runner<DynamoStore>,
    producer: &EventStore,
    round: usize,
    ids: &mut HashSet<String>,
) {
    for (stream, amount) in wanted(round) {
        let events = stream_events(producer, &stream).await;
        for (index, event) in events.iter().enumerate() {
            assert_eq!(event.sequence, index as u64 + 1, "{stream} gapless");
            assert!(
                ids.insert(event.event_id.clone()),
                "{} twice",
                event.event_id
            );
        }
        let refunds: Vec<&Logged> = events
            .iter()
            .filter(|event| event.event_type == "RefundRequested")
            .collect();
        assert_eq!(refunds.len(), 1, "{stream}: one refund");
        assert_eq!(refunds[0].sequence, 4, "{stream}");
        assert_eq!(refunds[0].data["amountCents"], amount, "{stream}");
        assert_eq!(
            refunds[0].event_id,
            format!("process-payments-{stream}-3-0"),
            "{stream}: caused by its third event"
        );
        let payment = state(runner.store(), &stream).await.expect("a state");
        assert_eq!(
            (payment.state, payment.sequence),
            (PaymentState::Cancelled, 3),
            "{stream}"
        );
    }
}

fn acknowledged(report: &BatchReport) -> bool {
    report
        .messages
        .iter()
        .all(|message| matches!(message.outcome, Outcome::Applied | Outcome::Duplicate))
}

/// Delivers `event` by both runners at once, then what either failed
/// again (as the queue would), until both acknowledged everything.
async fn raced(first: &Runner<DynamoStore>, second: &Runner<DynamoStore>, event: &SqsEvent) {
    for delivery in 1..=5 {
        let (a, b) = tokio::join!(first.run(event, at(BASE)), second.run(event, at(BASE)));
        let (a, b) = (a.expect("a batch"), b.expect("a batch"));
        eprintln!(
            "delivery {delivery}: {:?} / {:?}",
            outcomes(&a),
            outcomes(&b)
        );
        if acknowledged(&a) && acknowledged(&b) {
            return;
        }
    }
    panic!("still failing after 5 deliveries");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_batch_twice_and_by_two_functions_at_once_appends_once() {
    let tables = Tables::new().await;
    // Two functions whose transactions are held on the way: both read the
    // batch's states before either writes.
    let (proxy, first, second) = racing(&tables).await;
    let producer = tables.producer();
    let mut ids = HashSet::new();

    // The same batch delivered twice: the second time, all duplicates.
    let events = refunds_needed(&producer, 0).await;
    let event = records(&events, "once");
    let report = first.run(&event, at(BASE)).await.expect("a batch");
    assert_eq!(outcomes(&report), [Outcome::Applied; 6]);
    let again = first.run(&event, at(BASE)).await.expect("a batch");
    assert_eq!(outcomes(&again), [Outcome::Duplicate; 6]);
    let other = second.run(&event, at(BASE)).await.expect("a batch");
    assert_eq!(outcomes(&other), [Outcome::Duplicate; 6]);
    assert_one_refund(&first, &producer, 0, &mut ids).await;

    // The same batch by two functions at once, round after round.
    for round in 1..=4 {
        let events = refunds_needed(&producer, round).await;
        let before = proxy.seen();
        raced(&first, &second, &records(&events, "raced")).await;
        assert!(
            proxy.seen() - before > 2,
            "both wrote the refunds' steps at once: {} transactions",
            proxy.seen() - before
        );
        assert_one_refund(&first, &producer, round, &mut ids).await;
        // And its refunds delivered by both at once too: the state follows.
        let mut refunds = Vec::new();
        for (stream, _) in wanted(round) {
            refunds.extend(stream_events(&producer, &stream).await.into_iter().skip(3));
        }
        raced(&first, &second, &records(&refunds, "refunds")).await;
        for (stream, _) in wanted(round) {
            let payment = state(first.store(), &stream).await.expect("a state");
            assert_eq!(payment.sequence, 4, "{stream} followed its stream");
            assert_eq!(stream_events(&producer, &stream).await.len(), 4, "{stream}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parked_cancel_drained_when_its_gap_closes_appends_its_refund_once() {
    let tables = Tables::new().await;
    let (runner, producer) = (tables.runner(), tables.producer());
    produce(&producer, "order-1", "p-1", "OrderCreated", created(1000)).await;
    produce(&producer, "order-1", "p-2", "PaymentReceived", paid(1000)).await;
    produce(&producer, "order-1", "p-3", "OrderCancelled", cancelled()).await;
    let events = stream_events(&producer, "order-1").await;
    let one = |event: &Logged, id: &str, count: u32| {
        batch(vec![delivered(
            message(id, &event.stream, &event.body),
            count,
        )])
    };
    let run = async |event: SqsEvent| {
        let report = runner.run(&event, at(BASE)).await.expect("a batch");
        outcomes(&report)
    };
    assert_eq!(run(one(&events[0], "m-1", 1)).await, [Outcome::Applied]);
    // The cancel before the payment, delivered a third time: parked.
    assert_eq!(run(one(&events[2], "m-3", 3)).await, [Outcome::Parked]);
    assert_eq!(stream_events(&producer, "order-1").await.len(), 3);
    // The payment closes the gap: the cancel drained, its refund appended.
    assert_eq!(run(one(&events[1], "m-2", 1)).await, [Outcome::Applied]);
    let after = stream_events(&producer, "order-1").await;
    let types: Vec<&str> = after.iter().map(|e| e.event_type.as_str()).collect();
    assert_eq!(
        types,
        [
            "OrderCreated",
            "PaymentReceived",
            "OrderCancelled",
            "RefundRequested"
        ]
    );
    assert_eq!(after[3].event_id, "process-payments-p-3-0");
    assert_eq!(after[3].data["amountCents"], 1000);
    let payment = state(runner.store(), "order-1").await.expect("a state");
    assert_eq!(
        (payment.state, payment.sequence),
        (PaymentState::Cancelled, 3)
    );
    // Every one of them again: duplicates, nothing more.
    for (index, event) in events.iter().enumerate() {
        let id = format!("again-{index}");
        assert_eq!(run(one(event, &id, 1)).await, [Outcome::Duplicate]);
    }
    assert_eq!(stream_events(&producer, "order-1").await.len(), 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_ahead_of_its_stream_reads_the_events_before_and_appends_its_refund_once() {
    // GIVEN an order created, paid and cancelled in the store, and the
    // cancel delivered first (a stream split over two shards).
    let tables = Tables::new().await;
    let (runner, producer) = (tables.runner(), tables.producer());
    produce(&producer, "order-1", "p-1", "OrderCreated", created(1000)).await;
    produce(&producer, "order-1", "p-2", "PaymentReceived", paid(1000)).await;
    produce(&producer, "order-1", "p-3", "OrderCancelled", cancelled()).await;
    let events = stream_events(&producer, "order-1").await;
    let one = |event: &Logged, id: &str| batch(vec![message(id, &event.stream, &event.body)]);

    // WHEN it arrives, at its first delivery.
    let report = runner
        .run(&one(&events[2], "m-3"), at(BASE))
        .await
        .expect("a batch");

    // THEN the creation and the payment are read from the store and
    // decided before it, in its step: applied, its refund appended once
    // (caused by the cancel), nothing parked.
    assert_eq!(outcomes(&report), [Outcome::Applied]);
    assert_eq!(report.filled_events(), 2, "{:?}", report.filled);
    assert!(report.parking.is_empty());
    let after = stream_events(&producer, "order-1").await;
    let types: Vec<&str> = after.iter().map(|e| e.event_type.as_str()).collect();
    assert_eq!(
        types,
        [
            "OrderCreated",
            "PaymentReceived",
            "OrderCancelled",
            "RefundRequested"
        ]
    );
    assert_eq!(after[3].event_id, "process-payments-p-3-0");
    let payment = state(runner.store(), "order-1").await.expect("a state");
    assert_eq!(
        (payment.state, payment.sequence, payment.paid_cents),
        (PaymentState::Cancelled, 3, 1000)
    );

    // AND the earlier messages, when they come, are duplicates; the
    // refund is applied; nothing more is appended.
    for (index, event) in events.iter().enumerate() {
        let report = runner
            .run(&one(event, &format!("late-{index}")), at(BASE))
            .await
            .expect("a batch");
        assert_eq!(outcomes(&report), [Outcome::Duplicate], "{index}");
    }
    let report = runner
        .run(&one(&after[3], "refund"), at(BASE))
        .await
        .expect("a batch");
    assert_eq!(outcomes(&report), [Outcome::Applied]);
    assert_eq!(stream_events(&producer, "order-1").await.len(), 4);
}
