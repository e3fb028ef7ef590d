//! What is read from a stream's records: what `read` makes of each, corrupt
//! event items reported each with its reason and blocking nothing, a report
//! that cannot be sent, a stream without new images.

use super::*;

#[test]
fn read_names_what_it_does_with_a_record() {
    assert!(matches!(read(&insert(1, "a", 1), &domain()), Read::Send(_)));
    let head = json!({ "pk": { "S": "STREAM#a" }, "sk": { "S": "HEAD" } });
    assert!(matches!(
        read(
            &stream_record("INSERT", 2, head.clone(), Some(head)),
            &domain()
        ),
        Read::Skip(_)
    ));
    assert!(matches!(
        read(&insert_with(3, "a", 1, "{}"), &domain()),
        Read::Corrupt(_)
    ));
}

/// Event items that cannot be sent, each with what its reason must say.
fn corrupt_records() -> Vec<(Value, &'static str)> {
    let without_body = {
        let mut record = insert(1, "c", 1);
        record["dynamodb"]["NewImage"]
            .as_object_mut()
            .unwrap()
            .remove("body");
        record
    };
    let not_json = insert_with(2, "c", 2, "not json");
    let unknown_type = insert_with(
        3,
        "c",
        3,
        &json!({ "eventId": "x", "type": "Exploded", "aggregateId": "c", "sequence": 3, "data": {} })
            .to_string(),
    );
    let other_stream = insert_with(4, "c", 4, &body("d", 4));
    let other_sequence = insert_with(5, "c", 5, &body("c", 6));
    let bad_character = insert_with(
        6,
        "c",
        6,
        &body("c", 6).replace("\"data\":{}", "\"data\":{},\"x\":\"\u{FFFF}\""),
    );
    let too_big = insert_with(
        7,
        "c",
        7,
        &body("c", 7).replace(
            "\"data\":{}",
            &format!("\"data\":{{}},\"pad\":\"{}\"", "x".repeat(262_144)),
        ),
    );
    let body_not_text = {
        let mut record = insert(8, "c", 8);
        record["dynamodb"]["NewImage"]["body"] = json!({ "N": "42" });
        record
    };
    let not_a_record = {
        let mut record = insert(10, "c", 10);
        record["dynamodb"]["SizeBytes"] = json!("big");
        record
    };
    let key_and_sequence_disagree = {
        let mut record = insert(11, "c", 11);
        record["dynamodb"]["NewImage"]["sequence"] = json!({ "N": "12" });
        record
    };
    vec![
        (without_body, "no `body`"),
        (not_json, "not a message of the domain"),
        (unknown_type, "Exploded"),
        (other_stream, "the body's stream is `d`"),
        (other_sequence, "the body's sequence is 6"),
        (bad_character, "U+FFFF"),
        (too_big, "more than an SQS message holds"),
        (body_not_text, "attributes"),
        (not_a_record, "not a DynamoDB stream record"),
        (key_and_sequence_disagree, "disagree"),
    ]
}

#[tokio::test]
async fn corrupt_event_items_are_reported_each_with_its_reason_and_block_nothing() {
    let corrupt = corrupt_records();
    let mut records = Vec::new();
    for (n, (record, _)) in corrupt.iter().enumerate() {
        records.push(record.clone());
        records.push(insert(100 + n as u64, "ok", n as u64 + 1));
    }
    let queue = TestQueue::default();
    let outcome = dispatch(&records, &domain(), &queue, quick(), None).await;
    assert_eq!(outcome.failure, None, "{:?}", outcome.failure_reason);
    assert_eq!(
        of_stream(&taken(&queue), "ok"),
        (1..=corrupt.len() as u64).collect::<Vec<_>>()
    );
    let reports = queue.reports.lock().unwrap();
    assert_eq!(reports.len(), corrupt.len());
    for ((record, says), report) in corrupt.iter().zip(reports.iter()) {
        let reason = report["reason"].as_str().unwrap();
        assert!(reason.contains(says), "`{reason}` should say `{says}`");
        assert_eq!(report["condition"], json!("CorruptEventItem"));
        assert_eq!(report["keys"]["pk"], json!("STREAM#c"));
        // Where and what the item is, never its body or data.
        assert_eq!(report.get("record"), None, "no record: it holds the body");
        let image = &record["dynamodb"]["NewImage"];
        assert_eq!(report["type"], image["type"]["S"]);
        let sequence = image["sequence"]["N"]
            .as_str()
            .map(|n| n.parse::<u64>().unwrap());
        assert_eq!(report["sequence"], json!(sequence));
        assert_eq!(
            report["sequenceNumber"],
            record["dynamodb"]["SequenceNumber"]
        );
    }
    assert_eq!(outcome.corrupt.len(), corrupt.len());
}

#[tokio::test]
async fn a_report_that_cannot_be_sent_makes_its_record_the_redelivery_point() {
    let queue = TestQueue {
        fail_reports: true,
        ..TestQueue::default()
    };
    let records = vec![
        insert(1, "a", 1),
        insert_with(2, "c", 1, "not json"),
        insert(3, "a", 2),
    ];
    let outcome = dispatch(&records, &domain(), &queue, quick(), None).await;
    assert_eq!(outcome.failure, Some(sequence_number(2)));
    assert_eq!(
        outcome.dispatched, 2,
        "the others are sent; they come again as duplicates"
    );
}

#[tokio::test]
async fn a_stream_without_new_images_sends_nothing_and_fails_the_batch() {
    let mut keys_only = insert(2, "a", 2);
    keys_only["dynamodb"]
        .as_object_mut()
        .unwrap()
        .remove("NewImage");
    keys_only["dynamodb"]["StreamViewType"] = json!("KEYS_ONLY");
    let records = vec![insert(1, "a", 1), keys_only, insert(3, "a", 3)];
    let queue = TestQueue::default();
    let outcome = dispatch(&records, &domain(), &queue, quick(), None).await;
    let reason = outcome.unusable.expect("the stream is set up wrong");
    assert!(
        reason.contains("NEW_IMAGE") && reason.contains("KeysOnly"),
        "{reason}"
    );
    assert!(queue.requests.lock().unwrap().is_empty(), "nothing sent");
    assert!(queue.reports.lock().unwrap().is_empty(), "nothing reported");
}
