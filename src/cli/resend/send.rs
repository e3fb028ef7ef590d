//! Sending a range: the event store read a page at a time, each event
//! turned back into the change record the dispatcher read it from, and sent
//! through the dispatcher's own [`dispatch`], up to the first not taken.

use serde_json::{Value, json};

use super::resending::Resending;
use crate::dispatcher::{Queue, Read, Settings, dispatch, read};
use crate::domain::Domain;
use crate::producer::{EventStore, StoredEvent};
use crate::store::StoreError;

/// Events read from the event store at a time.
const PAGE: i32 = 100;

/// The first event of the range that the queue did not take, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct NotTaken {
    pub(super) sequence: u64,
    pub(super) reason: String,
}

/// What stopped a resend.
#[derive(Debug)]
pub(super) enum Stop {
    NotTaken(NotTaken),
    Store(StoreError),
}

/// What a resend sent.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(super) struct Sent {
    /// Messages the queue (or the topic) took.
    pub(super) events: u64,
    /// `SendMessageBatch` (or `PublishBatch`) requests.
    pub(super) requests: u64,
}

/// The range's events, a page at a time, each page sent before the next is
/// read; stops at the first event not taken.
pub(super) async fn send_range<Q: Queue>(
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
pub(super) async fn send_events<Q: Queue>(
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
pub(super) fn stream_record(stream: &str, event: &StoredEvent) -> Value {
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
