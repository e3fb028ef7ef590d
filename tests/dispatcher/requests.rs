//! What the requests hold: the contract's ids and bodies, ten per request in
//! stream order, nothing for heads, removals and changes, deduplication of an
//! effect without a sequence, no request without time left, SQS's byte limit,
//! the trace header and digests for long ids.

use super::*;

#[tokio::test]
async fn events_go_out_with_the_contracts_ids_ten_per_request_in_stream_order() {
    let mut records = Vec::new();
    let mut seq = 0;
    for sequence in 1..=25 {
        for stream in ["a", "b"] {
            seq += 1;
            records.push(insert(seq, stream, sequence));
        }
    }
    let queue = TestQueue::default();
    let outcome = dispatch(&records, &domain(), &queue, quick(), None).await;
    assert_eq!(outcome.dispatched, 50);
    assert_eq!(outcome.requests, 5, "full requests: 0.1 per event");
    assert_eq!(outcome.failure, None);
    assert_eq!(
        serde_json::to_value(outcome.response()).unwrap(),
        json!({ "batchItemFailures": [] })
    );
    let taken = taken(&queue);
    assert_eq!(of_stream(&taken, "a"), (1..=25).collect::<Vec<_>>());
    assert_eq!(of_stream(&taken, "b"), (1..=25).collect::<Vec<_>>());
    let first = &queue.requests.lock().unwrap()[0][0];
    assert_eq!(first.group_id, "a");
    assert_eq!(first.deduplication_id, "a:1");
    assert_eq!(first.body, body("a", 1), "the body byte for byte");
    assert_eq!(first.sequence_number, sequence_number(1));
}

#[tokio::test]
async fn the_head_requests_removals_and_changes_send_nothing() {
    let head = json!({ "pk": { "S": "STREAM#a" }, "sk": { "S": "HEAD" } });
    let request = json!({ "pk": { "S": "REQUEST#r-1" }, "sk": { "S": "REQUEST" } });
    let mut head_image = head.clone();
    head_image["sequence"] = json!({ "N": "1" });
    let event_keys =
        json!({ "pk": { "S": "STREAM#a" }, "sk": { "S": format!("EVENT#{:020}", 1) } });
    let records = vec![
        stream_record("INSERT", 1, head.clone(), Some(head_image.clone())),
        stream_record("MODIFY", 2, head, Some(head_image)),
        stream_record("INSERT", 3, request.clone(), Some(request.clone())),
        stream_record("REMOVE", 4, request, None),
        stream_record("REMOVE", 5, event_keys.clone(), None),
        insert(6, "a", 1),
    ];
    let mut modified = insert(7, "a", 1);
    modified["eventName"] = json!("MODIFY");
    let mut records = records;
    records.push(modified);
    let queue = TestQueue::default();
    let outcome = dispatch(&records, &domain(), &queue, quick(), None).await;
    assert_eq!((outcome.skipped, outcome.dispatched), (6, 1));
    assert_eq!(queue.requests.lock().unwrap().len(), 1);
    assert!(queue.reports.lock().unwrap().is_empty());
}

#[tokio::test]
async fn an_effect_without_a_sequence_is_deduplicated_by_its_event_id() {
    let body =
        json!({ "eventId": "bump-1", "type": "Bumped", "data": { "box_id": "box-9" } }).to_string();
    let record = insert_with(1, "box-9", 4, &body);
    let queue = TestQueue::default();
    let outcome = dispatch(&[record], &domain(), &queue, quick(), None).await;
    assert_eq!(outcome.dispatched, 1);
    let sent = &queue.taken.lock().unwrap()[0];
    assert_eq!(
        (sent.group_id.as_str(), sent.deduplication_id.as_str()),
        ("box-9", "bump-1")
    );
}

#[tokio::test]
async fn no_request_starts_without_time_left() {
    let queue = TestQueue::default();
    let records: Vec<Value> = (1..=3).map(|n| insert(n, "a", n)).collect();
    let settings = Settings {
        margin: Duration::from_secs(5),
        ..quick()
    };
    let deadline = Instant::now() + Duration::from_secs(1);
    let outcome = dispatch(&records, &domain(), &queue, settings, Some(deadline)).await;
    assert_eq!(outcome.requests, 0);
    assert_eq!(outcome.failure, Some(sequence_number(1)));
}

#[tokio::test]
async fn requests_stay_within_sqs_bytes() {
    // Four bodies of ~100 KB: at most two per request (256 KiB).
    let big = |n: u64| {
        insert_with(
            n,
            "a",
            n,
            &body("a", n).replace(
                "\"data\":{}",
                &format!("\"data\":{{}},\"pad\":\"{}\"", "x".repeat(100_000)),
            ),
        )
    };
    let records: Vec<Value> = (1..=4).map(big).collect();
    let queue = TestQueue::default();
    let outcome = dispatch(&records, &domain(), &queue, quick(), None).await;
    assert_eq!(outcome.dispatched, 4);
    for request in queue.requests.lock().unwrap().iter() {
        let bytes: usize = request.iter().map(|o| o.body.len()).sum();
        assert!(bytes <= 256 * 1024, "{bytes}");
    }
    assert_eq!(outcome.requests, 2);
}

#[tokio::test]
async fn a_trace_header_rides_along_and_long_ids_become_digests() {
    let long = "x".repeat(200);
    let body = json!({ "eventId": "e-long-1", "type": "Counted", "aggregateId": long, "sequence": 1, "data": {} });
    let mut record = insert_with(1, &long, 1, &body.to_string());
    record["dynamodb"]["NewImage"]["traceHeader"] =
        json!({ "S": "Root=1-5759e988-bd862e3fe1be46a994272793;Sampled=1" });
    let queue = TestQueue::default();
    let outcome = dispatch(&[record], &domain(), &queue, quick(), None).await;
    assert_eq!(outcome.dispatched, 1);
    let sent = &queue.taken.lock().unwrap()[0];
    assert_eq!(
        sent.trace_header.as_deref(),
        Some("Root=1-5759e988-bd862e3fe1be46a994272793;Sampled=1")
    );
    assert!(valid_sqs_id(&sent.group_id) && sent.group_id.starts_with("h-"));
    assert!(valid_sqs_id(&sent.deduplication_id) && sent.deduplication_id.ends_with(":1"));
    assert_eq!(sent.stream, long);
}
