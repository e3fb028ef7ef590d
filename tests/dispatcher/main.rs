//! The dispatcher's sending, on a queue of the test's own that records every
//! request and refuses what it is told to: ids and bodies as the contract
//! says, ten per request, stream order kept through refusals, corrupt items
//! reported without blocking, and the redelivery point. In topic mode the
//! same rules hold with SNS's codes (a recording topic), and `SnsTopic`'s
//! `PublishBatch` requests and answers are read on a fake SNS. The same code
//! on real SQS and SNS (LocalStack) and a real stream (DynamoDB Local) is in
//! `shop/tests/dispatch/` and `shop/tests/fanout.rs`. Here: the domain, the
//! records and the recording queue the topics share.

mod key_items;
mod records;
mod refusals;
mod requests;
mod sns_topic;
mod topic_mode;

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use sequence_guard::dispatcher::{
    Message, Queue, Read, Refused, SendError, Settings, SnsTopic, dispatch, read, sqs_body_char,
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

type Rule = Box<dyn Fn(&Message, u32) -> Option<Refused> + Send + Sync>;

/// A queue that records requests, takes entries unless `refuse` says
/// otherwise (given the entry and how many times it was offered before),
/// and fails whole requests while `fail_requests` > 0.
#[derive(Default)]
struct TestQueue {
    requests: Mutex<Vec<Vec<Message>>>,
    taken: Mutex<Vec<Message>>,
    reports: Mutex<Vec<Value>>,
    offered: Mutex<HashMap<String, u32>>,
    refuse: Option<Rule>,
    fail_requests: Mutex<u32>,
    fail_reports: bool,
}

impl Queue for TestQueue {
    async fn send(&self, entries: &[Message]) -> Result<Vec<Refused>, SendError> {
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
