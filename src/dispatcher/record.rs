//! One record of the event store's stream, read: an event to send, a record
//! that sends nothing, or a corrupt event item to report.

use aws_lambda_events::event::dynamodb::EventRecord;
use serde::Deserialize;
use serde_json::Value;

use crate::digest::digest;
use crate::domain::Domain;
use crate::sqs::{MAX_BODY, sqs_body_char, valid_sqs_id, valid_trace_header};

/// One message to send: an event item's body, with its ids.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// The record's `SequenceNumber` (what `batchItemFailures` names).
    pub sequence_number: String,
    /// The stream id (the item's `pk` without `STREAM#`).
    pub stream: String,
    /// The event's place in its stream (the item's sort key): a batch's
    /// messages of one stream go in this order.
    pub sequence: u64,
    /// `MessageGroupId`: the stream id ([`group_id`]).
    pub group_id: String,
    /// `MessageDeduplicationId`: `<aggregateId>:<sequence>`, or the
    /// `eventId` for an event without a sequence ([`deduplication_id`]).
    pub deduplication_id: String,
    /// The item's `body`, byte for byte.
    pub body: String,
    /// The producer's X-Ray trace header (the item's `traceHeader`), sent as
    /// the message's `AWSTraceHeader`.
    pub trace_header: Option<String>,
}

/// A record that is an event item but cannot be sent, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Corrupt {
    /// The record's `SequenceNumber`, when it has one.
    pub sequence_number: Option<String>,
    /// What is wrong with it.
    pub reason: String,
    /// The record as it came: the report reads its keys, type, version
    /// and sequence from it, never its body.
    pub record: Value,
}

/// What one record asks of the dispatcher.
#[derive(Debug, Clone, PartialEq)]
pub enum Read {
    /// An event item's `INSERT`: one message.
    Send(Message),
    /// Anything else (the head, a request record, a removal, a change of an
    /// event item already sent): nothing to send.
    Skip(&'static str),
    /// An event item that cannot be sent: reported, never blocking.
    Corrupt(Corrupt),
    /// A record that says the stream itself is set up wrong (it carries no
    /// new images): every event item would be unusable, so the batch fails
    /// as a whole and waits, rather than sending each to the failure queue.
    Unusable(String),
}

/// The attributes of an event item the dispatcher reads.
#[derive(Debug, Deserialize)]
struct EventItem {
    pk: String,
    sk: String,
    sequence: Option<u64>,
    body: Option<String>,
    #[serde(rename = "traceHeader")]
    trace_header: Option<String>,
}

/// The keys, read from any item.
#[derive(Debug, Deserialize)]
struct Keys {
    pk: Option<String>,
    sk: Option<String>,
}

/// Reads one change record (as Lambda delivers it) against the domain.
pub fn read(record: &Value, domain: &Domain) -> Read {
    let corrupt = |sequence_number: Option<String>, reason: String| {
        Read::Corrupt(Corrupt {
            sequence_number,
            reason,
            record: record.clone(),
        })
    };
    let sequence_number = record
        .pointer("/dynamodb/SequenceNumber")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let parsed = match EventRecord::deserialize(record) {
        Ok(parsed) => parsed,
        Err(err) => {
            return corrupt(
                sequence_number,
                format!("not a DynamoDB stream record: {err}"),
            );
        }
    };
    let Some(sequence_number) = parsed.change.sequence_number.clone() else {
        return corrupt(None, "the record has no SequenceNumber".to_owned());
    };
    let keys: Keys =
        serde_dynamo::from_item(parsed.change.keys).unwrap_or(Keys { pk: None, sk: None });
    let is_event = keys
        .pk
        .as_deref()
        .is_some_and(|pk| pk.starts_with("STREAM#"))
        && keys
            .sk
            .as_deref()
            .is_some_and(|sk| sk.starts_with("EVENT#"));
    if !is_event {
        return Read::Skip("not an event item");
    }
    match parsed.event_name.as_str() {
        "INSERT" => {}
        "MODIFY" => return Read::Skip("an event item changed after it was sent"),
        "REMOVE" => return Read::Skip("an event item removed"),
        other => {
            return corrupt(
                Some(sequence_number),
                format!("unknown eventName `{other}`"),
            );
        }
    }
    if parsed.change.new_image.is_empty() {
        return Read::Unusable(format!(
            "the stream record {sequence_number} has no NewImage: the event store's stream must be \
             NEW_IMAGE or NEW_AND_OLD_IMAGES (StreamViewType {:?})",
            parsed.change.stream_view_type
        ));
    }
    let item: EventItem = match serde_dynamo::from_item(parsed.change.new_image) {
        Ok(item) => item,
        Err(err) => {
            return corrupt(
                Some(sequence_number),
                format!("the event item's attributes: {err}"),
            );
        }
    };
    match outgoing(item, sequence_number.clone(), domain) {
        Ok(outgoing) => Read::Send(outgoing),
        Err(reason) => corrupt(Some(sequence_number), reason),
    }
}

/// The message of an event item, checked as the consumer will read it.
fn outgoing(item: EventItem, sequence_number: String, domain: &Domain) -> Result<Message, String> {
    let stream = item
        .pk
        .strip_prefix("STREAM#")
        .unwrap_or_default()
        .to_owned();
    let body = item.body.ok_or("the event item has no `body`")?;
    if body.len() > MAX_BODY {
        return Err(format!(
            "the body is {} bytes, more than an SQS message holds ({MAX_BODY})",
            body.len()
        ));
    }
    if let Some(bad) = body.chars().find(|c| !sqs_body_char(*c)) {
        return Err(format!(
            "the body holds U+{:04X}, a character SQS refuses",
            u32::from(bad)
        ));
    }
    let event = domain
        .parse_unopened(&body)
        .map_err(|err| format!("the body is not a message of the domain: {err}"))?;
    if event.stream() != stream {
        return Err(format!(
            "the body's stream is `{}`, the item's `{stream}`",
            event.stream()
        ));
    }
    let stored = item
        .sk
        .strip_prefix("EVENT#")
        .and_then(|digits| digits.parse::<u64>().ok());
    if stored.is_none() || stored != item.sequence {
        return Err(format!(
            "the item's sort key `{}` and its `sequence` {:?} disagree",
            item.sk, item.sequence
        ));
    }
    if let Some(sequence) = event.sequence()
        && Some(sequence) != item.sequence
    {
        return Err(format!(
            "the body's sequence is {sequence}, the item's {:?}",
            item.sequence
        ));
    }
    let sequence = stored.unwrap_or_default();
    Ok(Message {
        sequence_number,
        sequence,
        group_id: group_id(&stream),
        deduplication_id: deduplication_id(&stream, event.sequence(), event.event_id()),
        stream,
        body,
        // A header SQS would refuse is dropped: the event goes, untraced.
        trace_header: item
            .trace_header
            .filter(|header| valid_trace_header(header)),
    })
}

/// The prefix of a digested id. An id of this shape is never sent as it
/// is: a stream literally named `h-<hex>` is digested too, so that no two
/// streams, however named, share a group or a deduplication id.
const DIGESTED: &str = "h-";

/// The `MessageGroupId` of a stream: the stream id, or, for one SQS does
/// not take (longer than 128 characters, or other characters than letters,
/// digits and punctuation) or that starts with `h-`, `h-` and a 128-bit
/// digest of it: stable, so the stream keeps one group.
pub fn group_id(stream: &str) -> String {
    if literal(stream) {
        stream.to_owned()
    } else {
        format!("{DIGESTED}{}", digest(stream))
    }
}

/// The `MessageDeduplicationId` of an event: `<aggregateId>:<sequence>` for
/// a sequenced event, the `eventId` otherwise (docs/event-store.md, The dispatcher). Where
/// that would not be unique to its stream, or SQS would not take it, a
/// digest: `h-<digest of the stream>:<sequence>`, or `h-<digest of the
/// eventId>` for an `eventId` that holds a `:` (it could read as another
/// stream's `<aggregateId>:<sequence>`) or starts with `h-`.
///
/// No two events of different streams share one: a sequenced id is split
/// at its last `:` into one stream and one sequence; an unsequenced one
/// has no `:` unless digested, and a digested one has no `:` unless
/// sequenced; a literal one never starts with `h-`.
pub fn deduplication_id(stream: &str, sequence: Option<u64>, event_id: &str) -> String {
    match sequence {
        Some(sequence) => {
            let id = format!("{stream}:{sequence}");
            if literal(stream) && valid_sqs_id(&id) {
                id
            } else {
                format!("{DIGESTED}{}:{sequence}", digest(stream))
            }
        }
        None if literal(event_id) && !event_id.contains(':') => event_id.to_owned(),
        None => format!("{DIGESTED}{}", digest(event_id)),
    }
}

/// What marks a resend's deduplication id ([`resend_deduplication_id`]).
const RESENT: &str = "h-resend-";

/// The `MessageDeduplicationId` of an event that `resend` sends again, in
/// the run that started at `run` (epoch milliseconds):
/// `h-resend-<run>-<the dispatcher's id>`, or, where that is longer than
/// SQS takes, `h-resend-<run>=<digest of the dispatcher's id>`.
///
/// SQS and SNS drop, for five minutes, a message whose deduplication id
/// they took: sent with the dispatcher's own id, an event that the
/// dispatcher sent a minute ago (and that was lost after the topic or the
/// queue took it) would vanish again. A resend's id is new to each run,
/// so a resent event reaches every consumer whatever its age; it stays
/// unique to its stream (the dispatcher's id is), and is never a
/// dispatcher's id (those start with `h-` only as a hex digest). Within a
/// run, an entry sent again keeps its id, so that a request retried after
/// a lost answer is still deduplicated. No consumer keys on the
/// deduplication id: the guard keys on the stream and sequence, or the
/// `eventId`, and absorbs what it already applied.
pub fn resend_deduplication_id(dispatcher_id: &str, run: u64) -> String {
    let id = format!("{RESENT}{run}-{dispatcher_id}");
    if valid_sqs_id(&id) {
        id
    } else {
        format!("{RESENT}{run}={}", digest(dispatcher_id))
    }
}

/// Whether an id is sent as it is: SQS takes it, and it cannot be taken for
/// a digest.
fn literal(id: &str) -> bool {
    valid_sqs_id(id) && !id.starts_with(DIGESTED)
}

/// The keys of a record, for logs and reports: `(pk, sk)`.
pub(crate) fn keys_of(record: &Value) -> (Option<String>, Option<String>) {
    let key = |name: &str| {
        record
            .pointer(&format!("/dynamodb/Keys/{name}/S"))
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    (key("pk"), key("sk"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_sqs_takes_are_kept() {
        assert_eq!(group_id("order-42"), "order-42");
        assert_eq!(deduplication_id("order-42", Some(7), "e"), "order-42:7");
        assert_eq!(deduplication_id("SKU-1", None, "e-1"), "e-1");
    }

    #[test]
    fn ids_sqs_refuses_become_stable_digests() {
        let long = "a".repeat(200);
        let group = group_id(&long);
        assert!(valid_sqs_id(&group), "{group}");
        assert_eq!(group, group_id(&long), "stable");
        assert_ne!(group, group_id(&"a".repeat(201)));
        // Fits as a group id, not with `:<sequence>` after it.
        let edge = "b".repeat(125);
        assert_eq!(group_id(&edge), edge);
        let dedup = deduplication_id(&edge, Some(1_000), "e");
        assert!(valid_sqs_id(&dedup) && dedup.ends_with(":1000"), "{dedup}");
        assert_ne!(dedup, deduplication_id(&edge, Some(1_001), "e"));
        // Spaces and non-ASCII characters are not SQS ids.
        assert!(group_id("order 42").starts_with("h-"));
        assert!(group_id("ordre-é").starts_with("h-"));
        assert!(deduplication_id("s", None, "id with space").starts_with("h-"));
    }

    #[test]
    fn a_resend_id_is_new_to_its_run_and_never_a_dispatchers() {
        let run = 1_764_000_000_000;
        assert_eq!(
            resend_deduplication_id("order-42:7", run),
            "h-resend-1764000000000-order-42:7"
        );
        assert_ne!(
            resend_deduplication_id("order-42:7", run),
            resend_deduplication_id("order-42:7", run + 1),
            "a new run, a new id"
        );
        let long = "c".repeat(120);
        let sent = deduplication_id(&long, Some(9), "e");
        let resent = resend_deduplication_id(&sent, run);
        assert!(valid_sqs_id(&resent), "{resent}");
        assert!(resent.starts_with("h-resend-1764000000000="), "{resent}");
        assert_ne!(
            resent,
            resend_deduplication_id(&deduplication_id(&long, Some(10), "e"), run)
        );
        // Every dispatcher's id that reads like a resend's is digested.
        let stream = format!("h-resend-{run}-order-42");
        assert!(deduplication_id(&stream, Some(7), "e").starts_with("h-"));
        assert_ne!(
            deduplication_id(&stream, Some(7), "e"),
            resend_deduplication_id("order-42:7", run)
        );
        assert_ne!(
            deduplication_id("SKU-1", None, "h-resend-1764000000000-e-1"),
            resend_deduplication_id("e-1", run)
        );
    }

    /// SQS drops, for five minutes, a message whose deduplication id it has
    /// seen: two streams sharing one would lose an event silently.
    #[test]
    fn no_two_streams_share_a_group_or_a_deduplication_id() {
        let long = "a".repeat(200);
        let digested = group_id(&long);
        assert_ne!(
            group_id(&digested),
            digested,
            "a stream named like a digest"
        );
        assert_ne!(
            deduplication_id(&digested, Some(1), "e"),
            deduplication_id(&long, Some(1), "e")
        );
        // An unsequenced event whose id reads as another stream's event.
        assert_ne!(
            deduplication_id("SKU-1", None, "order-1:5"),
            deduplication_id("order-1", Some(5), "e")
        );
        let digest_of_event = deduplication_id("SKU-1", None, &"x".repeat(129));
        assert!(!digest_of_event.contains(':'), "{digest_of_event}");
        assert_ne!(
            deduplication_id("SKU-1", None, &digest_of_event),
            digest_of_event
        );
        // Streams holding `:` split at the last one.
        assert_ne!(
            deduplication_id("a:1", Some(2), "e"),
            deduplication_id("a", Some(12), "e")
        );
        for id in [
            group_id(&digested),
            deduplication_id(&digested, Some(9), "e"),
            deduplication_id("SKU-1", None, "order-1:5"),
        ] {
            assert!(valid_sqs_id(&id), "{id}");
        }
    }
}
