//! Deliveries again: the dispatcher killed mid-batch, a stream batch delivered
//! twice (SQS deduplication drops it) and, past five minutes, resent (the
//! guard answers `Duplicate`).

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_dispatcher_crash_mid_batch_and_a_batch_delivered_twice_are_absorbed() {
    // The dispatcher's SQS behind a proxy that only counts: the test kills
    // the dispatcher after its first SendMessageBatch went through.
    let upstream = localstack()
        .endpoint
        .trim_start_matches("http://")
        .to_owned();
    // The dispatcher sends a batch's requests at once; the proxy answers
    // them 100 ms apart, so the kill lands after the first and before the
    // others.
    let counter = Arc::new(FaultProxy::start_staggered(upstream, Duration::from_millis(100)).await);
    let faults = Faults {
        sqs: Some(counter.clone()),
        dynamodb: None,
    };
    let mut p = pipeline("crash", &faults).await;
    let ids = names("order", 3);
    orders(&p.events, &ids, 9).await; // 30 events: three requests of ten

    let pid = p.dispatcher.child.id().expect("pid");
    let api = p.source.api.clone();
    let watcher = tokio::spawn(async move {
        while counter.counts.forwarded.load(Ordering::Relaxed) < 1 {
            tokio::time::sleep(Duration::from_micros(200)).await;
        }
        let killed = std::process::Command::new("kill")
            .args(["-9", &pid.to_string()])
            .status()
            .expect("kill");
        assert!(killed.success());
        api.crashed();
        counter.counts.forwarded.load(Ordering::Relaxed)
    });
    let first = p.source.poll().await.expect("a batch");
    let sent_before_crash = watcher.await.expect("watcher");
    assert!(
        (1..3).contains(&sent_before_crash),
        "killed after {sent_before_crash} of the batch's three requests"
    );
    assert!(
        matches!(first.answer, Answer::Error(_)),
        "the dispatcher died mid-batch: {first:?}"
    );
    assert!(first.bisected, "the mapping splits the batch and retries");
    // Lambda starts a new process; the batch comes again, in halves.
    p.dispatcher = start_dispatcher(
        &p.source.api,
        &p.sqs_endpoint,
        &p.queues.url,
        &p.failure_url,
    );
    p.settle().await;
    p.assert_projection_is_the_fold().await;
    // The messages sent before the crash were sent again: SQS dropped them.
    assert_eq!(p.projected("Applied"), 30.0);
    assert_eq!(p.projected("Duplicate"), 0.0);

    // A stream batch delivered twice (a retry after a lost answer).
    orders(&p.events, &names("again", 2), 4).await;
    // Ten events, and the two orders' key items (the dispatcher skips
    // them).
    let batch = p.source.read(100).await;
    let (events, subjects) = personal_data::part_key_records(batch.clone());
    assert_eq!(events.len(), 10, "ten events, one record each (no head)");
    assert_eq!(subjects, ["again-0", "again-1"]);
    for _ in 0..2 {
        let answer = StreamSource::invoke(&p.source.api, &batch).await;
        assert_eq!(
            answer,
            Answer::Response(r#"{"batchItemFailures":[]}"#.to_owned())
        );
    }
    p.settle().await;
    assert_eq!(
        p.projected("Applied"),
        40.0,
        "the second delivery was dropped by SQS"
    );
    assert_eq!(p.projected("Duplicate"), 0.0);

    // Past SQS's five minutes, a redelivery is a new message: the guard
    // answers each one Duplicate and the projection does not move.
    let before = projection(&dynamodb_local().endpoint, &p.table).await;
    for id in names("again", 2) {
        for event in p.events.read(&id, 0, 100).await.expect("read") {
            let dedup = format!("late-{id}:{}", event.sequence);
            send(&p.poller.sqs, &p.queues.url, &id, &dedup, &event.body).await;
        }
    }
    p.settle().await;
    assert_eq!(p.projected("Duplicate"), 10.0);
    assert_eq!(
        projection(&dynamodb_local().endpoint, &p.table).await,
        before
    );
    p.assert_projection_is_the_fold().await;
}
