//! `resend`: mends a hole. Sends a stream's stored events, or a range of
//! them, to the queue or the topic again, exactly as the dispatcher sent
//! them.
//!
//! ```text
//! resend --stream ID [--from SEQUENCE] [--to SEQUENCE] [--events-table NAME] [--queue-url URL | --topic-arn ARN] [--endpoint-url URL]
//! ```
//!
//! Each event item of the range becomes the record the event store's
//! stream carried for its `INSERT`, and goes through the dispatcher's own
//! code ([`dispatch`]): the same `MessageGroupId`, `MessageDeduplicationId`
//! and body (byte for byte), in stream order, at most ten per
//! `SendMessageBatch` (or `PublishBatch`), refusals sent again. The consumer's guard absorbs
//! what it applied already. The producer's trace header is not stored with
//! the event as read here, so a resent message carries no `AWSTraceHeader`.
//!
//! SQS (and SNS) drop a message whose deduplication id they took in the
//! last five minutes: resend a hole once its events are older than that
//! (`verify` finds the hole first). The target is the dispatcher's: the
//! queue `QUEUE_URL` (`--queue-url`) or the topic `TOPIC_ARN`
//! (`--topic-arn`), exactly one of them. Through a topic, every consumer's
//! queue gets the events again, and each consumer's guard absorbs what it
//! applied. The SQS and SNS endpoints are the SDK's
//! (`AWS_ENDPOINT_URL_SQS`, `AWS_ENDPOINT_URL_SNS`), `--endpoint-url` is
//! DynamoDB's.
//!
//! It prints one JSON line, `{"streamId": ..., "from": n, "to": n, "sent":
//! n, "requests": n}` (`to` is `null` when open). Exit status: 0 when every
//! event of the range was taken; 1 when one was not (the first such is
//! named, with its sequence and why; nothing after it is read) or the range
//! holds no event, or the event store cannot be read; 2 for bad arguments
//! or a missing variable. The caller needs `dynamodb:DescribeTable` and
//! `dynamodb:Query` on the event store and `sqs:SendMessage` on the queue
//! (or `sns:Publish` on the topic, and the topic key's
//! `kms:GenerateDataKey*` when it is encrypted with a customer key).

use std::collections::HashMap;
use std::process::ExitCode;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use clap::Parser;
use clap::builder::NonEmptyStringValueParser;
use serde_json::{Value, json};

use super::{arguments, events_table};
use crate::dispatcher::{
    Destination, Outgoing, Queue, Read, Refused, SendError, Settings, Target, dispatch, read,
};
use crate::domain::Domain;
use crate::producer::{EventStore, StoredEvent};
use crate::store::StoreError;
use crate::store::dynamodb::{check_table, connect};

/// The largest sequence (CONTRACT section 1).
const MAX_SEQUENCE: u64 = i64::MAX as u64;

/// Events read from the event store at a time.
const PAGE: i32 = 100;

const EXAMPLES: &str = "\
Examples:
  resend --stream <stream id> --from 4
      its events from sequence 4 on (verify names where a hole starts)
  resend --stream <stream id> --from 2 --to 3
  QUEUE_URL=https://sqs.<region>.amazonaws.com/<account>/<queue>.fifo EVENTS_TABLE=<event store> resend --stream <stream id>
  TOPIC_ARN=arn:aws:sns:<region>:<account>:<topic>.fifo EVENTS_TABLE=<event store> resend --stream <stream id>
      to every consumer's queue, through the topic the dispatcher publishes to

Exit status: 0 when every event was taken; 1 when one was not (named), the
range holds no event or the event store cannot be read; 2 for bad arguments
or a missing variable.";

/// Sends the stored events of one stream (from `--from` to `--to`) to the
/// queue or the topic again, as the dispatcher sent them.
#[derive(Debug, Parser)]
#[command(name = "resend", version, after_help = EXAMPLES)]
struct Args {
    /// The stream: the aggregateId, or a deduplicated effect's counter id.
    #[arg(long, value_name = "ID", value_parser = NonEmptyStringValueParser::new())]
    stream: String,
    /// The first sequence to send (default: 1).
    #[arg(long, value_name = "SEQUENCE", value_parser = clap::value_parser!(u64).range(1..=MAX_SEQUENCE))]
    from: Option<u64>,
    /// The last sequence to send (default: the stream's last).
    #[arg(long, value_name = "SEQUENCE", value_parser = clap::value_parser!(u64).range(1..=MAX_SEQUENCE))]
    to: Option<u64>,
    /// The event store's table (default: EVENTS_TABLE).
    #[arg(long, value_name = "NAME", env = "EVENTS_TABLE")]
    events_table: Option<String>,
    /// The SQS FIFO queue the dispatcher sends to (default: QUEUE_URL).
    #[arg(long, value_name = "URL", env = "QUEUE_URL")]
    queue_url: Option<String>,
    /// Or the SNS FIFO topic the dispatcher publishes to (default:
    /// TOPIC_ARN).
    #[arg(long, value_name = "ARN", env = "TOPIC_ARN")]
    topic_arn: Option<String>,
    /// The DynamoDB endpoint, e.g. http://localhost:8000 for DynamoDB Local.
    #[arg(long, value_name = "URL")]
    endpoint_url: Option<String>,
}

/// The first event of the range that the queue did not take, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
struct NotTaken {
    sequence: u64,
    reason: String,
}

/// What stopped a resend.
#[derive(Debug)]
enum Stop {
    NotTaken(NotTaken),
    Store(StoreError),
}

/// What a resend sent.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Sent {
    /// Messages the queue (or the topic) took.
    events: u64,
    /// `SendMessageBatch` (or `PublishBatch`) requests.
    requests: u64,
}

/// The line a resend prints.
#[derive(Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct Summary<'a> {
    stream_id: &'a str,
    from: u64,
    /// `null` when the range is open.
    to: Option<u64>,
    /// Messages the queue (or the topic) took.
    sent: u64,
    /// `SendMessageBatch` (or `PublishBatch`) requests.
    requests: u64,
}

/// The `resend` binary of a domain: `fn main() -> ExitCode { cli::resend(my_domain()) }`.
#[tokio::main]
pub async fn resend(domain: Domain) -> ExitCode {
    if let Some(code) = super::refused("resend", &domain) {
        return code;
    }
    // The runner's and the sweep's log lines, to stderr, when RUST_LOG asks.
    crate::logging::init_local();
    let (name, args) = arguments::<Args>("resend", &domain);
    let from = args.from.unwrap_or(1);
    let to = args.to.unwrap_or(MAX_SEQUENCE);
    if from > to {
        eprintln!("{name}: --from {from} is after --to {to}: the range holds nothing");
        return ExitCode::from(2);
    }
    let Some(events_table) = events_table(&name, args.events_table, "--events-table") else {
        return ExitCode::from(2);
    };
    let target = match target(args.queue_url, args.topic_arn) {
        Ok(target) => target,
        Err(message) => {
            eprintln!("{name}: {message}");
            return ExitCode::from(2);
        }
    };
    let client = connect(args.endpoint_url.as_deref()).await;
    if let Err(err) = check_table(&client, &events_table).await {
        eprintln!("{name}: {err}");
        return ExitCode::FAILURE;
    }
    let events = EventStore::new(client, events_table.clone(), domain.clone());
    // Nothing is reported: a refused event stops the resend, named.
    let sdk = sdk().await;
    let queue = Resending::new(Destination::new(
        &target,
        aws_sdk_sqs::Client::new(&sdk),
        || aws_sdk_sns::Client::new(&sdk),
        String::new(),
    ));
    let stream = args.stream;
    let mut sent = Sent::default();
    let outcome = send_range(&events, &domain, &queue, &stream, from..=to, &mut sent).await;
    let summary = Summary {
        stream_id: &stream,
        from,
        to: args.to,
        sent: sent.events,
        requests: sent.requests,
    };
    match serde_json::to_string(&summary) {
        Ok(line) => println!("{line}"),
        Err(err) => eprintln!("{name}: cannot write the summary: {err}"),
    }
    match outcome {
        Ok(()) if sent.events == 0 => {
            let upto = args.to.map_or_else(String::new, |to| format!(" to {to}"));
            eprintln!("{name}: stream {stream} holds no event from {from}{upto}: nothing sent");
            ExitCode::FAILURE
        }
        Ok(()) => ExitCode::SUCCESS,
        Err(Stop::NotTaken(first)) => {
            eprintln!(
                "{name}: stream {stream} sequence {} not taken: {}",
                first.sequence, first.reason
            );
            ExitCode::FAILURE
        }
        Err(Stop::Store(err)) => {
            eprintln!("{name}: cannot read the event store {events_table}: {err}");
            ExitCode::FAILURE
        }
    }
}

/// The dispatcher's target, from `--queue-url`/`QUEUE_URL` and
/// `--topic-arn`/`TOPIC_ARN`: exactly one, as the dispatcher reads them.
fn target(queue_url: Option<String>, topic_arn: Option<String>) -> Result<Target, String> {
    Target::from_values(queue_url, topic_arn).map_err(|err| {
        format!(
            "{err}: name the SQS FIFO queue (--queue-url) or the SNS FIFO topic (--topic-arn) \
             the dispatcher sends to"
        )
    })
}

/// The SDK's configuration for the SQS and SNS clients: its environment
/// (`AWS_ENDPOINT_URL_SQS`, `AWS_ENDPOINT_URL_SNS` and the rest),
/// `us-east-1` when no region is set; a call gives up after 20 s.
async fn sdk() -> aws_config::SdkConfig {
    let timeouts = aws_config::timeout::TimeoutConfig::builder()
        .operation_attempt_timeout(Duration::from_secs(5))
        .operation_timeout(Duration::from_secs(20))
        .build();
    let sdk = crate::sdk::from_env().timeout_config(timeouts).load().await;
    if sdk.region().is_some() {
        return sdk;
    }
    sdk.to_builder()
        .region(aws_config::Region::new("us-east-1"))
        .build()
}

/// The range's events, a page at a time, each page sent before the next is
/// read; stops at the first event not taken.
async fn send_range<Q: Queue>(
    events: &EventStore,
    domain: &Domain,
    queue: &Resending<Q>,
    stream: &str,
    range: std::ops::RangeInclusive<u64>,
    sent: &mut Sent,
) -> Result<(), Stop> {
    let mut after = range.start().saturating_sub(1);
    loop {
        let stored = events
            .read(stream, after, PAGE)
            .await
            .map_err(Stop::Store)?;
        let page: Vec<StoredEvent> = stored
            .into_iter()
            .take_while(|event| event.sequence <= *range.end())
            .collect();
        let Some(last) = page.last() else {
            return Ok(());
        };
        after = last.sequence;
        send_events(domain, queue, stream, &page, sent)
            .await
            .map_err(Stop::NotTaken)?;
        if after >= *range.end() {
            return Ok(());
        }
    }
}

/// Sends events of one stream, in order, through the dispatcher's own
/// [`dispatch`]; up to the first one that the dispatcher would not send
/// (nothing after it goes), or the first the queue did not take.
async fn send_events<Q: Queue>(
    domain: &Domain,
    queue: &Resending<Q>,
    stream: &str,
    events: &[StoredEvent],
    sent: &mut Sent,
) -> Result<(), NotTaken> {
    let records: Vec<Value> = events
        .iter()
        .map(|event| stream_record(stream, event))
        .collect();
    // The dispatcher reports such an item to its failure queue and goes on;
    // here it stops the resend, named, so that no later event goes ahead.
    let mut usable = records.len();
    let mut blocked = None;
    for (index, (record, event)) in records.iter().zip(events).enumerate() {
        let reason = match read(record, domain) {
            Read::Send(_) => continue,
            Read::Corrupt(corrupt) => corrupt.reason,
            Read::Skip(why) => why.to_owned(),
            Read::Unusable(why) => why,
        };
        blocked = Some(NotTaken {
            sequence: event.sequence,
            reason,
        });
        usable = index;
        break;
    }
    if usable > 0 {
        let outcome = dispatch(&records[..usable], domain, queue, Settings::default(), None).await;
        sent.events += outcome.dispatched as u64;
        sent.requests += outcome.requests;
        if let Some(reason) = outcome.unusable {
            return Err(NotTaken {
                sequence: events[0].sequence,
                reason,
            });
        }
        if let Some(failure) = outcome.failure {
            let sequence = failure.parse().unwrap_or(events[0].sequence);
            let reason = queue.why(&failure, outcome.failure_reason);
            return Err(NotTaken { sequence, reason });
        }
    }
    match blocked {
        Some(first) => Err(first),
        None => Ok(()),
    }
}

/// The record the event store's stream carried for the event item's
/// `INSERT` (its new image: the item as appended), with the event's
/// sequence as its `SequenceNumber`: what the dispatcher reads a message
/// from.
fn stream_record(stream: &str, event: &StoredEvent) -> Value {
    let pk = format!("STREAM#{stream}");
    let sk = format!("EVENT#{:020}", event.sequence);
    json!({
        "eventID": format!("resend-{}", event.sequence),
        "eventName": "INSERT",
        "eventVersion": "1.1",
        "eventSource": "aws:dynamodb",
        "awsRegion": "",
        "dynamodb": {
            "Keys": { "pk": { "S": pk }, "sk": { "S": sk } },
            "NewImage": {
                "pk": { "S": pk },
                "sk": { "S": sk },
                "eventId": { "S": event.event_id },
                "type": { "S": event.event_type },
                "sequence": { "N": event.sequence.to_string() },
                "body": { "S": event.body },
                "appendedAt": { "N": event.appended_at.to_string() },
            },
            "SequenceNumber": event.sequence.to_string(),
            "SizeBytes": event.body.len(),
            "StreamViewType": "NEW_IMAGE",
        },
    })
}

/// The dispatcher's queue, for a resend: sends as it does, and reports
/// nothing (a resend has no failure queue). It keeps, for each record, the
/// queue's last answer that did not take it, so that the event not taken is
/// named with its cause; an entry refused for good, which the dispatcher
/// would report, is kept with the reason its report gives, and not taken.
struct Resending<Q> {
    queue: Q,
    /// By `SequenceNumber`: the last refusal, or the failed request's error.
    answers: Mutex<HashMap<String, String>>,
    /// By `SequenceNumber`: the reason of each refusal for good.
    refused: Mutex<HashMap<String, String>>,
}

impl<Q: Queue> Resending<Q> {
    fn new(queue: Q) -> Self {
        Resending {
            queue,
            answers: Mutex::default(),
            refused: Mutex::default(),
        }
    }

    /// Why the record `sequence_number` was not taken: its refusal for
    /// good, else `reason` (the dispatcher's) and the queue's last answer.
    fn why(&self, sequence_number: &str, reason: Option<String>) -> String {
        if let Some(refused) = lock(&self.refused).get(sequence_number) {
            return refused.clone();
        }
        let reason = reason.unwrap_or_else(|| "not sent".to_owned());
        match lock(&self.answers).get(sequence_number) {
            Some(answer) => format!("{reason} (the last answer: {answer})"),
            None => reason,
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl<Q: Queue> Queue for Resending<Q> {
    async fn send(&self, entries: &[Outgoing]) -> Result<Vec<Refused>, SendError> {
        let answer = self.queue.send(entries).await;
        let mut answers = lock(&self.answers);
        match &answer {
            Ok(refused) => {
                for refusal in refused {
                    if let Some(entry) = entries.get(refusal.index) {
                        answers.insert(
                            entry.sequence_number.clone(),
                            format!("{}: {}", refusal.code, refusal.message),
                        );
                    }
                }
            }
            Err(err) => {
                for entry in entries {
                    answers.insert(entry.sequence_number.clone(), err.to_string());
                }
            }
        }
        answer
    }

    async fn report(&self, report: &str) -> Result<(), SendError> {
        // The report's record holds the body: only its reason is kept.
        let document: Value = serde_json::from_str(report).unwrap_or(Value::Null);
        let field = |name: &str| {
            document
                .get(name)
                .and_then(Value::as_str)
                .map(str::to_owned)
        };
        let reason = field("reason").unwrap_or_else(|| "refused by the queue".to_owned());
        lock(&self.refused).insert(field("sequenceNumber").unwrap_or_default(), reason);
        Err(SendError("a resend reports to no failure queue".to_owned()))
    }

    fn blames_message(&self, refusal: &Refused) -> bool {
        self.queue.blames_message(refusal)
    }

    fn service(&self) -> &'static str {
        self.queue.service()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dispatcher::{deduplication_id, group_id};

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
        requests: Mutex<Vec<Vec<Outgoing>>>,
        refuse: Option<(&'static str, &'static str, bool)>,
    }

    impl Fake {
        fn taken(&self) -> Vec<Outgoing> {
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
        async fn send(&self, entries: &[Outgoing]) -> Result<Vec<Refused>, SendError> {
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
        let queue = Resending::new(Fake::default());
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

    #[tokio::test]
    async fn an_event_the_queue_keeps_refusing_is_named_and_not_sent_past() {
        let queue = Resending::new(Fake {
            refuse: Some((":14", "ThrottlingException", false)),
            ..Fake::default()
        });
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
        let ids = |request: &Vec<Outgoing>| -> Vec<String> {
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
            assert_eq!(ids(again), ["n-1:14"]);
        }
        assert_eq!(sent.events, 19);
    }

    #[tokio::test]
    async fn an_event_refused_for_good_is_named_with_the_reason() {
        let queue = Resending::new(Fake {
            refuse: Some((":2", "InvalidMessageContents", true)),
            ..Fake::default()
        });
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
        let queue = Resending::new(Fake::default());
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
        assert_eq!(taken, ["n-1:1", "n-1:2"]);
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
}
