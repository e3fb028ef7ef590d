//! `resend`'s tests: the records it makes, the order and grouping of its
//! requests, and what stops it, named.

use std::sync::Mutex;

use serde_json::json;

use super::resending::Resending;
use super::send::{Sent, send_events, stream_record};
use super::target;
use crate::dispatcher::{
    Message, Queue, Read, Refused, SendError, Target, deduplication_id, group_id, read,
    resend_deduplication_id,
};
use crate::domain::Domain;
use crate::producer::StoredEvent;

/// The run's start, in epoch milliseconds.
const RUN: u64 = 1_764_000_000_000;

fn note(stream: &str, sequence: u64) -> StoredEvent {
    let event_type = if sequence == 1 {
        "NoteWritten"
    } else {
        "NoteEdited"
    };
    StoredEvent {
        sequence,
        event_id: format!("e{sequence}"),
        event_type: event_type.to_owned(),
        body: json!({
            "eventId": format!("e{sequence}"),
            "type": event_type,
            "aggregateId": stream,
            "sequence": sequence,
            "data": { "text": format!("text {sequence}") },
        })
        .to_string(),
        appended_at: 1_700_000_000,
    }
}

fn words(book: &str, sequence: u64) -> StoredEvent {
    StoredEvent {
        sequence,
        event_id: format!("w{sequence}"),
        event_type: "WordsCounted".to_owned(),
        // Spaces and key order as a producer wrote them: sent as they are.
        body: format!(
            r#"{{"type": "WordsCounted", "eventId": "w{sequence}", "data": {{"delta": 3, "book": "{book}"}}}}"#
        ),
        appended_at: 1_700_000_000,
    }
}

/// A queue that keeps what it took, and refuses entries whose
/// deduplication id ends with `refuse`'s suffix.
#[derive(Default)]
struct Fake {
    requests: Mutex<Vec<Vec<Message>>>,
    refuse: Option<(&'static str, &'static str, bool)>,
}

impl Fake {
    fn taken(&self) -> Vec<Message> {
        let refuse = self.refuse;
        self.requests
            .lock()
            .unwrap()
            .iter()
            .flatten()
            .filter(|entry| {
                refuse.is_none_or(|(suffix, ..)| !entry.deduplication_id.ends_with(suffix))
            })
            .cloned()
            .collect()
    }
}

impl Queue for Fake {
    async fn send(&self, entries: &[Message]) -> Result<Vec<Refused>, SendError> {
        self.requests.lock().unwrap().push(entries.to_vec());
        Ok(entries
            .iter()
            .enumerate()
            .filter_map(|(index, entry)| {
                let (suffix, code, sender_fault) = self.refuse?;
                entry.deduplication_id.ends_with(suffix).then(|| Refused {
                    index,
                    code: code.to_owned(),
                    message: "no".to_owned(),
                    sender_fault,
                })
            })
            .collect())
    }

    async fn report(&self, _report: &str) -> Result<(), SendError> {
        panic!("a resend never reports");
    }
}

fn domain() -> Domain {
    crate::cli::test_domain::domain()
}

#[test]
fn the_record_reads_as_the_message_the_dispatcher_sent() {
    let long = "n".repeat(200);
    for (stream, event, sequence) in [
        ("n-1", note("n-1", 4), Some(4)),
        (long.as_str(), note(&long, 2), Some(2)),
        ("b-1", words("b-1", 7), None),
    ] {
        let outgoing = match read(&stream_record(stream, &event), &domain()) {
            Read::Send(outgoing) => outgoing,
            other => panic!("{stream}: not sent: {other:?}"),
        };
        assert_eq!(outgoing.stream, stream);
        assert_eq!(outgoing.group_id, group_id(stream));
        assert_eq!(
            outgoing.deduplication_id,
            deduplication_id(stream, sequence, &event.event_id)
        );
        assert_eq!(outgoing.body, event.body, "byte for byte");
        assert_eq!(outgoing.trace_header, None);
    }
}

#[tokio::test]
async fn events_go_in_order_ten_a_request() {
    let queue = Resending::new(Fake::default(), RUN);
    let events: Vec<StoredEvent> = (1..=23).map(|sequence| note("n-1", sequence)).collect();
    let mut sent = Sent::default();
    send_events(&domain(), &queue, "n-1", &events, &mut sent)
        .await
        .expect("all taken");
    assert_eq!(
        sent,
        Sent {
            events: 23,
            requests: 3
        }
    );
    let sizes: Vec<usize> = queue
        .queue
        .requests
        .lock()
        .unwrap()
        .iter()
        .map(Vec::len)
        .collect();
    assert_eq!(sizes, [10, 10, 3]);
    let bodies: Vec<String> = queue
        .queue
        .taken()
        .into_iter()
        .map(|entry| entry.body)
        .collect();
    let stored: Vec<String> = events.into_iter().map(|event| event.body).collect();
    assert_eq!(bodies, stored);
}

/// SQS and SNS drop a deduplication id they took in the last five
/// minutes: a resend sends under ids of its run's own, everything else as
/// the dispatcher sent it.
#[tokio::test]
async fn a_resend_sends_under_its_runs_own_deduplication_ids() {
    let long = "n".repeat(200);
    for (stream, events, sequenced) in [
        ("n-1", vec![note("n-1", 1), note("n-1", 2)], true),
        (long.as_str(), vec![note(&long, 1)], true),
        ("b-1", vec![words("b-1", 1), words("b-1", 2)], false),
    ] {
        let queue = Resending::new(Fake::default(), RUN);
        send_events(&domain(), &queue, stream, &events, &mut Sent::default())
            .await
            .expect("all taken");
        let taken = queue.queue.taken();
        assert_eq!(taken.len(), events.len());
        for (entry, event) in taken.iter().zip(&events) {
            let sequence = sequenced.then_some(event.sequence);
            let dispatchers = deduplication_id(stream, sequence, &event.event_id);
            assert_eq!(
                entry.deduplication_id,
                resend_deduplication_id(&dispatchers, RUN)
            );
            assert_ne!(entry.deduplication_id, dispatchers);
            assert_eq!(entry.group_id, group_id(stream), "the dispatcher's group");
            assert_eq!(entry.body, event.body, "byte for byte");
        }
    }
}

#[tokio::test]
async fn an_event_the_queue_keeps_refusing_is_named_and_not_sent_past() {
    let queue = Resending::new(
        Fake {
            refuse: Some((":14", "ThrottlingException", false)),
            ..Fake::default()
        },
        RUN,
    );
    let events: Vec<StoredEvent> = (1..=20).map(|sequence| note("n-1", sequence)).collect();
    let mut sent = Sent::default();
    let first = send_events(&domain(), &queue, "n-1", &events, &mut sent)
        .await
        .expect_err("not taken");
    assert_eq!(first.sequence, 14);
    assert!(first.reason.contains("did not take"), "{}", first.reason);
    assert!(
        first.reason.contains("ThrottlingException: no"),
        "{}",
        first.reason
    );
    // As the dispatcher: 15 to 20 went in 14's request, and SQS took
    // them; 14 was sent again, alone, and nothing after it.
    let requests = queue.queue.requests.lock().unwrap().clone();
    let ids = |request: &Vec<Message>| -> Vec<String> {
        request
            .iter()
            .map(|entry| entry.deduplication_id.clone())
            .collect()
    };
    assert_eq!(
        requests.len(),
        2 + 3,
        "two requests, then three rounds of 14"
    );
    for again in &requests[2..] {
        assert_eq!(ids(again), [resend_deduplication_id("n-1:14", RUN)]);
    }
    assert_eq!(sent.events, 19);
}

#[tokio::test]
async fn an_event_refused_for_good_is_named_with_the_reason() {
    let queue = Resending::new(
        Fake {
            refuse: Some((":2", "InvalidMessageContents", true)),
            ..Fake::default()
        },
        RUN,
    );
    let events: Vec<StoredEvent> = (1..=2).map(|sequence| note("n-1", sequence)).collect();
    let first = send_events(&domain(), &queue, "n-1", &events, &mut Sent::default())
        .await
        .expect_err("not taken");
    assert_eq!(first.sequence, 2);
    assert!(
        first.reason.contains("InvalidMessageContents"),
        "{}",
        first.reason
    );
    assert!(
        !first.reason.contains("text 2"),
        "no data: {}",
        first.reason
    );
}

#[tokio::test]
async fn a_stored_body_the_domain_refuses_stops_the_resend_before_it() {
    let queue = Resending::new(Fake::default(), RUN);
    let mut events: Vec<StoredEvent> = (1..=4).map(|sequence| note("n-1", sequence)).collect();
    events[2].body = events[2].body.replace("NoteEdited", "NoteBurnt");
    let mut sent = Sent::default();
    let first = send_events(&domain(), &queue, "n-1", &events, &mut sent)
        .await
        .expect_err("not taken");
    assert_eq!(first.sequence, 3);
    assert!(
        first.reason.contains("not a message of the domain"),
        "{}",
        first.reason
    );
    let taken: Vec<String> = queue
        .queue
        .taken()
        .into_iter()
        .map(|entry| entry.deduplication_id)
        .collect();
    assert_eq!(
        taken,
        [
            resend_deduplication_id("n-1:1", RUN),
            resend_deduplication_id("n-1:2", RUN)
        ]
    );
}

#[test]
fn the_target_is_a_fifo_queue_or_a_fifo_topic() {
    let neither = target(None, Some("  ".into())).unwrap_err();
    assert!(
        neither.contains("QUEUE_URL") && neither.contains("TOPIC_ARN"),
        "{neither}"
    );
    assert!(
        target(
            Some("https://sqs.eu-west-1.amazonaws.com/1/events".into()),
            None
        )
        .unwrap_err()
        .contains(".fifo")
    );
    assert!(target(Some("events.fifo".into()), None).is_err());
    assert!(target(None, Some("arn:aws:sns:eu-west-1:1:events".into())).is_err());
    let url = "https://sqs.eu-west-1.amazonaws.com/1/events.fifo";
    let arn = "arn:aws:sns:eu-west-1:123456789012:events.fifo";
    assert_eq!(
        target(Some(url.into()), None),
        Ok(Target::Queue(url.into()))
    );
    assert_eq!(
        target(None, Some(arn.into())),
        Ok(Target::Topic(arn.into()))
    );
    let both = target(Some(url.into()), Some(arn.into())).unwrap_err();
    assert!(
        both.contains("QUEUE_URL") && both.contains("TOPIC_ARN"),
        "{both}"
    );
}
