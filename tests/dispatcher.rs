//! The dispatcher's sending, on a queue of the test's own that records every
//! request and refuses what it is told to: ids and bodies as the contract
//! says, ten per request, stream order kept through refusals, corrupt items
//! reported without blocking, and the redelivery point. In topic mode the
//! same rules hold with SNS's codes (a recording topic), and `SnsTopic`'s
//! `PublishBatch` requests and answers are read on a fake SNS. The same code
//! on real SQS and SNS (LocalStack) and a real stream (DynamoDB Local) is in
//! `shop/tests/dispatch/` and `shop/tests/fanout.rs`.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use sequence_guard::dispatcher::{
    Outgoing, Queue, Read, Refused, SendError, Settings, SnsTopic, dispatch, read, sqs_body_char,
    topic_blames_message, valid_sqs_id,
};
use sequence_guard::{Counter, Decision, Domain, Entity, Events, Handling, Sequenced};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Tally {
    sequence: u64,
    last_event_id: String,
}

impl Entity for Tally {
    const KIND: &'static str = "TALLY";
    fn sequence(&self) -> u64 {
        self.sequence
    }
    fn last_event_id(&self) -> &str {
        &self.last_event_id
    }
}

#[derive(Debug, Deserialize)]
struct Nothing {}

#[derive(Debug, Deserialize)]
struct Bump {
    box_id: String,
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type", content = "data")]
enum TallyEvent {
    Counted(Nothing),
    Bumped(Bump),
}

static BOXES: Counter = Counter {
    kind: "BOX",
    sort_key: "COUNT",
    attribute: "count",
};

fn on_counted(tally: &mut Option<Tally>, event: &Sequenced<Nothing>) -> Decision {
    let sequence = tally.as_ref().map_or(0, |tally| tally.sequence);
    if sequence != event.sequence - 1 {
        return if sequence >= event.sequence {
            Decision::Duplicate
        } else {
            Decision::Gap
        };
    }
    *tally = Some(Tally {
        sequence: event.sequence,
        last_event_id: event.event_id.clone(),
    });
    Decision::Applied
}

impl Events for TallyEvent {
    fn handling(self) -> Handling {
        match self {
            TallyEvent::Counted(data) => Handling::sequenced(data, on_counted),
            TallyEvent::Bumped(data) => Handling::add("Bumps", &BOXES, data.box_id, 1),
        }
    }
}

fn domain() -> Domain {
    Domain::new::<TallyEvent>()
        .entity::<Tally>()
        .counter(&BOXES)
}

fn body(stream: &str, sequence: u64) -> String {
    json!({ "eventId": format!("e-{stream}-{sequence}"), "type": "Counted", "aggregateId": stream, "sequence": sequence, "data": {} })
        .to_string()
}

/// A stream record as Lambda delivers it, for any item.
fn stream_record(event_name: &str, seq: u64, keys: Value, image: Option<Value>) -> Value {
    let mut change = json!({
        "ApproximateCreationDateTime": 1_764_500_000.0,
        "Keys": keys,
        "SequenceNumber": format!("{seq:021}"),
        "SizeBytes": 100,
        "StreamViewType": "NEW_IMAGE",
    });
    if let Some(image) = image {
        change["NewImage"] = image;
    }
    json!({
        "eventID": format!("id-{seq}"),
        "eventName": event_name,
        "eventVersion": "1.1",
        "eventSource": "aws:dynamodb",
        "awsRegion": "us-east-1",
        "dynamodb": change,
        "eventSourceARN": "arn:aws:dynamodb:us-east-1:000000000000:table/events/stream/2026-11-30T00:00:00.000",
    })
}

/// An event item's INSERT, with this body.
fn insert_with(seq: u64, stream: &str, sequence: u64, body: &str) -> Value {
    let keys = json!({ "pk": { "S": format!("STREAM#{stream}") }, "sk": { "S": format!("EVENT#{sequence:020}") } });
    let mut image = keys.clone();
    image["eventId"] = json!({ "S": format!("e-{stream}-{sequence}") });
    image["type"] = json!({ "S": "Counted" });
    image["sequence"] = json!({ "N": sequence.to_string() });
    image["body"] = json!({ "S": body });
    image["appendedAt"] = json!({ "N": "1764500000" });
    stream_record("INSERT", seq, keys, Some(image))
}

fn insert(seq: u64, stream: &str, sequence: u64) -> Value {
    insert_with(seq, stream, sequence, &body(stream, sequence))
}

fn sequence_number(seq: u64) -> String {
    format!("{seq:021}")
}

type Rule = Box<dyn Fn(&Outgoing, u32) -> Option<Refused> + Send + Sync>;

/// A queue that records requests, takes entries unless `refuse` says
/// otherwise (given the entry and how many times it was offered before),
/// and fails whole requests while `fail_requests` > 0.
#[derive(Default)]
struct TestQueue {
    requests: Mutex<Vec<Vec<Outgoing>>>,
    taken: Mutex<Vec<Outgoing>>,
    reports: Mutex<Vec<Value>>,
    offered: Mutex<HashMap<String, u32>>,
    refuse: Option<Rule>,
    fail_requests: Mutex<u32>,
    fail_reports: bool,
}

impl Queue for TestQueue {
    async fn send(&self, entries: &[Outgoing]) -> Result<Vec<Refused>, SendError> {
        assert!(
            entries.len() <= 10,
            "{} entries in one request",
            entries.len()
        );
        self.requests.lock().unwrap().push(entries.to_vec());
        {
            let mut fail = self.fail_requests.lock().unwrap();
            if *fail > 0 {
                *fail -= 1;
                return Err(SendError("ServiceUnavailable: injected".to_owned()));
            }
        }
        let mut refused = Vec::new();
        for (index, entry) in entries.iter().enumerate() {
            let times = {
                let mut offered = self.offered.lock().unwrap();
                let times = offered.entry(entry.deduplication_id.clone()).or_default();
                *times += 1;
                *times - 1
            };
            match self.refuse.as_ref().and_then(|rule| rule(entry, times)) {
                Some(mut refusal) => {
                    refusal.index = index;
                    refused.push(refusal);
                }
                None => self.taken.lock().unwrap().push(entry.clone()),
            }
        }
        Ok(refused)
    }

    async fn report(&self, report: &str) -> Result<(), SendError> {
        // As SQS: a character it does not carry refuses the message.
        if report.chars().any(|c| !sqs_body_char(c)) {
            return Err(SendError("InvalidMessageContents: injected".to_owned()));
        }
        if self.fail_reports {
            return Err(SendError("AccessDenied: injected".to_owned()));
        }
        self.reports
            .lock()
            .unwrap()
            .push(serde_json::from_str(report).expect("a report is JSON"));
        Ok(())
    }
}

fn throttled() -> Refused {
    Refused {
        index: 0,
        code: "ThrottlingException".to_owned(),
        message: "injected".to_owned(),
        sender_fault: false,
    }
}

fn quick() -> Settings {
    Settings {
        retries: 3,
        backoff: Duration::from_millis(1),
        margin: Duration::from_millis(100),
    }
}

/// The (stream, sequence) of every message taken, in the order taken.
fn taken(queue: &TestQueue) -> Vec<(String, u64)> {
    queue
        .taken
        .lock()
        .unwrap()
        .iter()
        .map(|o| {
            let body: Value = serde_json::from_str(&o.body).unwrap();
            (o.stream.clone(), body["sequence"].as_u64().unwrap())
        })
        .collect()
}

fn of_stream(taken: &[(String, u64)], stream: &str) -> Vec<u64> {
    taken
        .iter()
        .filter(|(s, _)| s == stream)
        .map(|(_, n)| *n)
        .collect()
}

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
    let ids = |request: &Vec<Outgoing>| -> Vec<String> {
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

/// The test queue as a topic: SNS's rules for what blames the message.
struct TestTopic(TestQueue);

impl Queue for TestTopic {
    async fn send(&self, entries: &[Outgoing]) -> Result<Vec<Refused>, SendError> {
        self.0.send(entries).await
    }

    async fn report(&self, report: &str) -> Result<(), SendError> {
        self.0.report(report).await
    }

    fn blames_message(&self, refusal: &Refused) -> bool {
        topic_blames_message(refusal)
    }

    fn service(&self) -> &'static str {
        "SNS"
    }
}

fn refused_with(code: &'static str) -> Refused {
    Refused {
        index: 0,
        code: code.to_owned(),
        message: "injected".to_owned(),
        sender_fault: true,
    }
}

#[tokio::test]
async fn an_entry_sns_blames_on_itself_is_reported_and_its_stream_goes_on() {
    let refuse: Rule = Box::new(|entry, _| match entry.deduplication_id.as_str() {
        "a:2" => Some(refused_with("InvalidParameter")),
        "b:2" => Some(refused_with("ParameterValueInvalid")),
        _ => None,
    });
    let topic = TestTopic(TestQueue {
        refuse: Some(refuse),
        ..TestQueue::default()
    });
    let records: Vec<Value> = (1..=3)
        .flat_map(|n| [insert(2 * n - 1, "a", n), insert(2 * n, "b", n)])
        .collect();
    let outcome = dispatch(&records, &domain(), &topic, quick(), None).await;
    assert_eq!(outcome.failure, None);
    assert_eq!(of_stream(&taken(&topic.0), "a"), vec![1, 3]);
    assert_eq!(of_stream(&taken(&topic.0), "b"), vec![1, 3]);
    let reports = topic.0.reports.lock().unwrap();
    assert_eq!(reports.len(), 2);
    let reason = reports[0]["reason"].as_str().unwrap();
    assert!(
        reason.starts_with("SNS refused the message: InvalidParameter"),
        "{reason}"
    );
}

#[tokio::test]
async fn a_topic_sends_again_what_only_sqs_would_blame_and_names_its_first_record() {
    // SQS's code for a bad body is not SNS's: a topic sends it again, first
    // of its stream, and names it for redelivery when it keeps failing.
    let refuse: Rule = Box::new(|entry, _| {
        (entry.deduplication_id == "a:2").then(|| refused_with("InvalidMessageContents"))
    });
    let topic = TestTopic(TestQueue {
        refuse: Some(refuse),
        ..TestQueue::default()
    });
    let mut records: Vec<Value> = (1..=3).map(|n| insert(n, "a", n)).collect();
    records.push(insert(4, "b", 1));
    let outcome = dispatch(&records, &domain(), &topic, quick(), None).await;
    assert_eq!(outcome.failure, Some(sequence_number(2)));
    assert!(
        outcome
            .failure_reason
            .as_deref()
            .unwrap_or_default()
            .contains("SNS did not take it"),
        "{:?}",
        outcome.failure_reason
    );
    assert!(
        topic.0.reports.lock().unwrap().is_empty(),
        "nothing reported"
    );
    // a:3 went in a:2's first request; after it, a:2 alone, three times.
    let requests: Vec<Vec<String>> = topic
        .0
        .requests
        .lock()
        .unwrap()
        .iter()
        .map(|r| r.iter().map(|o| o.deduplication_id.clone()).collect())
        .collect();
    assert_eq!(requests.len(), 4, "{requests:?}");
    for again in &requests[1..] {
        assert_eq!(again, &["a:2"]);
    }
    assert_eq!(of_stream(&taken(&topic.0), "b"), vec![1]);
}

/// A fake SNS on a local port: answers every request with `status` and
/// `answer` (an awsQuery XML document) and keeps each request's form fields.
struct FakeSns {
    endpoint: String,
    requests: std::sync::Arc<Mutex<Vec<HashMap<String, String>>>>,
}

fn fake_sns(status: u16, answer: &'static str) -> FakeSns {
    use std::io::{BufRead, BufReader, Read as _, Write as _};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    let requests = std::sync::Arc::new(Mutex::new(Vec::new()));
    let kept = requests.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut length = 0;
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 {
                    break;
                }
                let line = line.trim_end();
                if line.is_empty() {
                    break;
                }
                if let Some((name, value)) = line.split_once(':')
                    && name.eq_ignore_ascii_case("content-length")
                {
                    length = value.trim().parse().unwrap();
                }
            }
            let mut body = vec![0; length];
            reader.read_exact(&mut body).unwrap();
            let fields: HashMap<String, String> =
                form_urlencoded(&String::from_utf8(body).unwrap());
            kept.lock().unwrap().push(fields);
            let response = format!(
                "HTTP/1.1 {status} Status\r\nContent-Type: text/xml\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{answer}",
                answer.len()
            );
            stream.write_all(response.as_bytes()).unwrap();
        }
    });
    FakeSns { endpoint, requests }
}

/// `a=b&c=d`, percent-decoded, `+` as a space.
fn form_urlencoded(body: &str) -> HashMap<String, String> {
    let decode = |text: &str| {
        let bytes = text.replace('+', " ").into_bytes();
        let mut out = Vec::new();
        let mut i = 0;
        while i < bytes.len() {
            if bytes[i] == b'%' {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap();
                out.push(u8::from_str_radix(hex, 16).unwrap());
                i += 3;
            } else {
                out.push(bytes[i]);
                i += 1;
            }
        }
        String::from_utf8(out).unwrap()
    };
    body.split('&')
        .filter_map(|pair| pair.split_once('='))
        .map(|(name, value)| (decode(name), decode(value)))
        .collect()
}

fn topic_on(endpoint: &str) -> SnsTopic {
    let credentials = aws_sdk_sns::config::Credentials::new("test", "test", None, None, "test");
    let sns = aws_sdk_sns::Client::from_conf(
        aws_sdk_sns::config::Builder::new()
            .behavior_version(aws_sdk_sns::config::BehaviorVersion::latest())
            .endpoint_url(endpoint)
            .region(aws_sdk_sns::config::Region::new("us-east-1"))
            .credentials_provider(credentials.clone())
            .build(),
    );
    let sqs = aws_sdk_sqs::Client::from_conf(
        aws_sdk_sqs::config::Builder::new()
            .behavior_version(aws_sdk_sqs::config::BehaviorVersion::latest())
            .endpoint_url(endpoint)
            .region(aws_sdk_sqs::config::Region::new("us-east-1"))
            .credentials_provider(credentials)
            .build(),
    );
    SnsTopic::new(
        sns,
        "arn:aws:sns:us-east-1:123456789012:events.fifo",
        sqs,
        format!("{endpoint}/123456789012/failures"),
    )
}

const PUBLISH_BATCH_ANSWER: &str = r#"<PublishBatchResponse xmlns="http://sns.amazonaws.com/doc/2010-03-31/">
  <PublishBatchResult>
    <Successful>
      <member><Id>0</Id><MessageId>m-0</MessageId><SequenceNumber>10000000000000000001</SequenceNumber></member>
      <member><Id>2</Id><MessageId>m-2</MessageId><SequenceNumber>10000000000000000002</SequenceNumber></member>
    </Successful>
    <Failed>
      <member><Id>1</Id><Code>InvalidParameter</Code><Message>Invalid parameter: Message too long</Message><SenderFault>true</SenderFault></member>
    </Failed>
  </PublishBatchResult>
  <ResponseMetadata><RequestId>r-1</RequestId></ResponseMetadata>
</PublishBatchResponse>"#;

#[tokio::test]
async fn sns_topic_publishes_each_entry_with_the_queues_ids_and_body_in_order() {
    let sns = fake_sns(200, PUBLISH_BATCH_ANSWER);
    let topic = topic_on(&sns.endpoint);
    let records: Vec<Value> = (1..=4).map(|n| insert(n, "a", n)).collect();
    let entries: Vec<Outgoing> = records
        .iter()
        .map(|record| match read(record, &domain()) {
            Read::Send(outgoing) => outgoing,
            other => panic!("{other:?}"),
        })
        .collect();
    // The fake answers three of four: the fourth is not known to be sent.
    let refused = topic.send(&entries).await.expect("answered");
    assert_eq!(refused.len(), 2, "{refused:?}");
    assert_eq!(
        refused[0],
        Refused {
            index: 1,
            code: "InvalidParameter".to_owned(),
            message: "Invalid parameter: Message too long".to_owned(),
            sender_fault: true,
        }
    );
    assert!(topic.blames_message(&refused[0]));
    assert_eq!(
        (refused[1].index, refused[1].code.as_str()),
        (3, "NoAnswer")
    );
    assert!(!topic.blames_message(&refused[1]));
    assert_eq!(topic.service(), "SNS");

    let requests = sns.requests.lock().unwrap();
    assert_eq!(requests.len(), 1);
    let fields = &requests[0];
    assert_eq!(fields["Action"], "PublishBatch");
    assert_eq!(
        fields["TopicArn"],
        "arn:aws:sns:us-east-1:123456789012:events.fifo"
    );
    for (n, entry) in entries.iter().enumerate() {
        let field = |name: &str| {
            fields
                .get(&format!(
                    "PublishBatchRequestEntries.member.{}.{name}",
                    n + 1
                ))
                .cloned()
                .unwrap_or_else(|| panic!("entry {n}: no {name} in {fields:?}"))
        };
        assert_eq!(field("Id"), n.to_string());
        assert_eq!(field("MessageGroupId"), entry.group_id);
        assert_eq!(field("MessageDeduplicationId"), entry.deduplication_id);
        assert_eq!(field("Message"), entry.body, "the body byte for byte");
        assert_eq!(field("MessageDeduplicationId"), format!("a:{}", n + 1));
    }
    assert!(
        !fields.keys().any(|name| name.contains("MessageAttributes")),
        "no attributes: {fields:?}"
    );
}

#[tokio::test]
async fn a_publish_batch_refused_as_a_whole_is_sent_again_then_names_its_first_record() {
    let sns = fake_sns(
        400,
        r#"<ErrorResponse xmlns="http://sns.amazonaws.com/doc/2010-03-31/"><Error><Type>Sender</Type><Code>BatchRequestTooLong</Code><Message>The batch request is too long.</Message></Error><RequestId>r-2</RequestId></ErrorResponse>"#,
    );
    let topic = topic_on(&sns.endpoint);
    let records: Vec<Value> = (1..=10).map(|n| insert(n, "b", n)).collect();
    let outcome = dispatch(&records, &domain(), &topic, quick(), None).await;
    assert_eq!(outcome.dispatched, 0);
    assert_eq!(outcome.failure, Some(sequence_number(1)));
    assert_eq!(outcome.requests, 4, "one try and three retries");
    let requests = sns.requests.lock().unwrap();
    assert_eq!(requests.len(), 4, "the SDK does not retry a sender's error");
    assert_eq!(
        requests[0]["PublishBatchRequestEntries.member.10.MessageDeduplicationId"], "b:10",
        "ten entries in the first request"
    );
    for again in &requests[1..] {
        assert!(
            !again.contains_key("PublishBatchRequestEntries.member.2.Id"),
            "the troubled stream's head alone: {again:?}"
        );
    }
}
