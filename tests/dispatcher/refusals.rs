//! Entries refused and requests failed: a refused entry goes again first of
//! its stream while other streams go on, one refused for good is the
//! redelivery point, a stream's events out of order go in sequence order,
//! failed requests go again, an entry SQS blames on itself is reported, a
//! sender fault that may pass is sent again.

use super::*;

#[tokio::test]
async fn a_refused_entry_goes_again_first_of_its_stream_and_other_streams_go_on() {
    // a:2 is throttled twice. SQS answers each entry of a request on its
    // own: a:3 to a:10, in a:2's request, are taken ahead of it (the
    // consumer's guard holds them); a:11 and a:12, in a later request, wait
    // for it, while b goes on beside a's first request.
    let refuse: Rule =
        Box::new(|entry, times| (entry.deduplication_id == "a:2" && times < 2).then(throttled));
    let queue = TestQueue {
        refuse: Some(refuse),
        ..TestQueue::default()
    };
    let mut records: Vec<Value> = (1..=6)
        .flat_map(|n| [insert(2 * n - 1, "a", n), insert(2 * n, "b", n)])
        .collect();
    records.extend((7..=12).map(|n| insert(6 + n, "a", n)));
    let outcome = dispatch(&records, &domain(), &queue, quick(), None).await;
    assert_eq!(outcome.failure, None);
    assert_eq!(outcome.dispatched, 18);
    assert_eq!(outcome.refused, 2);
    let taken = taken(&queue);
    let requests: Vec<Vec<String>> = queue
        .requests
        .lock()
        .unwrap()
        .iter()
        .map(|r| r.iter().map(|o| o.deduplication_id.clone()).collect())
        .collect();
    assert_eq!(
        of_stream(&taken, "a"),
        vec![1, 3, 4, 5, 6, 7, 8, 9, 10, 2, 11, 12],
        "{taken:?} {requests:?}"
    );
    assert_eq!(of_stream(&taken, "b"), (1..=6).collect::<Vec<_>>());
    let ids = |names: &[&str]| names.iter().map(|n| (*n).to_owned()).collect::<Vec<_>>();
    assert_eq!(
        requests,
        vec![
            (1..=10).map(|n| format!("a:{n}")).collect(),
            (1..=6).map(|n| format!("b:{n}")).collect(),
            ids(&["a:2"]),
            ids(&["a:2"]),
            ids(&["a:11", "a:12"]),
        ],
        "b beside a's first request; a:2 alone when sent again; a:11 held behind it"
    );
}

#[tokio::test]
async fn an_entry_still_refused_after_retries_is_the_redelivery_point() {
    let refuse: Rule = Box::new(|entry, _| (entry.deduplication_id == "a:2").then(throttled));
    let queue = TestQueue {
        refuse: Some(refuse),
        ..TestQueue::default()
    };
    // Shard order: b:1..b:8, a:1..a:11, b:9. a:1..a:10 go in one request,
    // a:2 refused in it; a:11 would be a later request.
    let mut records: Vec<Value> = (1..=8).map(|n| insert(n, "b", n)).collect();
    records.extend((1..=11).map(|n| insert(8 + n, "a", n)));
    records.push(insert(20, "b", 9));
    let outcome = dispatch(&records, &domain(), &queue, quick(), None).await;
    assert_eq!(outcome.failure, Some(sequence_number(10)), "a:2's record");
    assert_eq!(
        serde_json::to_value(outcome.response()).unwrap(),
        json!({ "batchItemFailures": [{ "itemIdentifier": sequence_number(10) }] })
    );
    let taken = taken(&queue);
    assert_eq!(
        of_stream(&taken, "a"),
        vec![1, 3, 4, 5, 6, 7, 8, 9, 10],
        "nothing of a in a request after a:2's"
    );
    assert_eq!(
        of_stream(&taken, "b"),
        (1..=9).collect::<Vec<_>>(),
        "b goes on"
    );
    assert_eq!(outcome.refused, 4, "offered once and retried three times");
    // Lambda delivers a:2 and everything after it again: now taken, in order.
    let again = TestQueue::default();
    let outcome = dispatch(&records[9..], &domain(), &again, quick(), None).await;
    assert_eq!(outcome.failure, None);
    assert_eq!(
        of_stream(&taken_again(&again), "a"),
        (2..=11).collect::<Vec<_>>()
    );
}

/// A stream's events out of order in the shard (each event is an item of
/// its own: a transaction's, or a split partition's, may come so): sent in
/// sequence order, and a refused one names its own record for redelivery.
#[tokio::test]
async fn a_streams_events_out_of_order_in_a_batch_go_in_sequence_order() {
    // Shard order: a:3, b:2, a:1, b:1, a:2.
    let records: Vec<Value> = [("a", 3), ("b", 2), ("a", 1), ("b", 1), ("a", 2)]
        .into_iter()
        .zip(1..)
        .map(|((stream, sequence), seq)| insert(seq, stream, sequence))
        .collect();
    let queue = TestQueue::default();
    let outcome = dispatch(&records, &domain(), &queue, quick(), None).await;
    assert_eq!(outcome.failure, None);
    let sent = taken(&queue);
    assert_eq!(of_stream(&sent, "a"), [1, 2, 3]);
    assert_eq!(of_stream(&sent, "b"), [1, 2]);

    let refuse: Rule = Box::new(|entry, _| (entry.deduplication_id == "a:1").then(throttled));
    let queue = TestQueue {
        refuse: Some(refuse),
        ..TestQueue::default()
    };
    let outcome = dispatch(&records, &domain(), &queue, quick(), None).await;
    // a:1 went first of its request, refused; the queue took a:2 and a:3
    // after it in that request (as the earlier test's queue does).
    assert_eq!(outcome.failure, Some(sequence_number(3)), "a:1's record");
    let sent = taken(&queue);
    assert_eq!(of_stream(&sent, "a"), [2, 3]);
    assert_eq!(of_stream(&sent, "b"), [1, 2], "b goes on");
    // Lambda delivers a:1's record and those after it again: a:1 taken.
    let again = TestQueue::default();
    let outcome = dispatch(&records[2..], &domain(), &again, quick(), None).await;
    assert_eq!(outcome.failure, None);
    assert_eq!(of_stream(&taken_again(&again), "a"), [1, 2]);
}

fn taken_again(queue: &TestQueue) -> Vec<(String, u64)> {
    taken(queue)
}

#[tokio::test]
async fn a_failed_request_is_sent_again_and_a_lasting_failure_names_its_first_record() {
    let queue = TestQueue {
        fail_requests: Mutex::new(2),
        ..TestQueue::default()
    };
    let records: Vec<Value> = (1..=3).map(|n| insert(n, "a", n)).collect();
    let outcome = dispatch(&records, &domain(), &queue, quick(), None).await;
    assert_eq!((outcome.dispatched, outcome.failure), (3, None));
    // a:1 to a:3 fail as a request; a:1 alone (its stream troubled) fails
    // again; a:1 alone is taken; then a:2 and a:3.
    assert_eq!(outcome.requests, 4);

    let down = TestQueue {
        fail_requests: Mutex::new(u32::MAX),
        ..TestQueue::default()
    };
    let mut records = vec![stream_record(
        "INSERT",
        1,
        json!({ "pk": { "S": "STREAM#a" }, "sk": { "S": "HEAD" } }),
        Some(json!({ "pk": { "S": "STREAM#a" }, "sk": { "S": "HEAD" }, "sequence": { "N": "2" } })),
    )];
    records.extend((1..=2).map(|n| insert(n + 1, "a", n)));
    let outcome = dispatch(&records, &domain(), &down, quick(), None).await;
    assert_eq!(outcome.dispatched, 0);
    assert_eq!(
        outcome.failure,
        Some(sequence_number(2)),
        "the first event record, not the head"
    );
    assert_eq!(
        down.requests.lock().unwrap().len(),
        4,
        "one try and three retries"
    );
}

#[tokio::test]
async fn an_entry_sqs_blames_on_itself_is_reported_and_its_stream_goes_on() {
    let refuse: Rule = Box::new(|entry, _| {
        (entry.deduplication_id == "a:2").then(|| Refused {
            index: 0,
            code: "InvalidParameterValue".to_owned(),
            message: "injected".to_owned(),
            sender_fault: true,
        })
    });
    let queue = TestQueue {
        refuse: Some(refuse),
        ..TestQueue::default()
    };
    let records: Vec<Value> = (1..=3).map(|n| insert(n, "a", n)).collect();
    let outcome = dispatch(&records, &domain(), &queue, quick(), None).await;
    assert_eq!(outcome.failure, None);
    assert_eq!(of_stream(&taken(&queue), "a"), vec![1, 3]);
    let reports = queue.reports.lock().unwrap();
    assert_eq!(reports.len(), 1);
    assert_eq!(reports[0]["sequenceNumber"], json!(sequence_number(2)));
    assert!(
        reports[0]["reason"]
            .as_str()
            .unwrap()
            .contains("InvalidParameterValue"),
        "{}",
        reports[0]
    );
}

#[tokio::test]
async fn a_sender_fault_that_may_pass_is_sent_again_not_reported() {
    // KMS throttling carries SenderFault: the event is good, SQS is not ready.
    let refuse: Rule = Box::new(|entry, times| {
        (entry.deduplication_id == "a:1" && times < 2).then(|| Refused {
            index: 0,
            code: "KMS.ThrottlingException".to_owned(),
            message: "injected".to_owned(),
            sender_fault: true,
        })
    });
    let queue = TestQueue {
        refuse: Some(refuse),
        ..TestQueue::default()
    };
    let records: Vec<Value> = (1..=2).map(|n| insert(n, "a", n)).collect();
    let outcome = dispatch(&records, &domain(), &queue, quick(), None).await;
    assert_eq!(outcome.failure, None);
    assert!(queue.reports.lock().unwrap().is_empty());
    assert!(of_stream(&taken(&queue), "a").contains(&1));
}

#[tokio::test]
async fn a_refused_head_still_goes_alone_after_a_later_entry_is_reported() {
    // a:1 throttled once, a:2 refused for good (reported), a:3 to a:10
    // taken in the same request; a:11, in the next request, waits for a:1,
    // which then goes alone.
    let refuse: Rule = Box::new(|entry, times| match entry.deduplication_id.as_str() {
        "a:1" if times < 1 => Some(throttled()),
        "a:2" => Some(Refused {
            index: 0,
            code: "InvalidMessageContents".to_owned(),
            message: "injected".to_owned(),
            sender_fault: true,
        }),
        _ => None,
    });
    let queue = TestQueue {
        refuse: Some(refuse),
        ..TestQueue::default()
    };
    let mut records: Vec<Value> = (1..=7).map(|n| insert(n, "b", n)).collect();
    records.extend((1..=11).map(|n| insert(7 + n, "a", n)));
    let outcome = dispatch(&records, &domain(), &queue, quick(), None).await;
    assert_eq!(outcome.failure, None);
    assert_eq!(
        of_stream(&taken(&queue), "a"),
        vec![3, 4, 5, 6, 7, 8, 9, 10, 1, 11]
    );
    let requests = queue.requests.lock().unwrap();
    let ids = |request: &Vec<Message>| -> Vec<String> {
        request.iter().map(|o| o.deduplication_id.clone()).collect()
    };
    assert_eq!(
        ids(&requests[1]),
        (1..=7).map(|n| format!("b:{n}")).collect::<Vec<_>>()
    );
    assert_eq!(
        ids(&requests[2]),
        vec!["a:1"],
        "a:1 alone, a:11 held behind it"
    );
    assert_eq!(ids(&requests[3]), vec!["a:11"]);
    assert!(
        requests.iter().skip(1).all(|request| {
            let a: Vec<String> = ids(request)
                .into_iter()
                .filter(|id| id.starts_with("a:"))
                .collect();
            a.len() <= 1
        }),
        "after a:1's refusal, stream a goes one at a time until a:1 is taken: {:?}",
        requests.iter().map(ids).collect::<Vec<_>>()
    );
    assert_eq!(queue.reports.lock().unwrap().len(), 1, "a:2 reported");
}
