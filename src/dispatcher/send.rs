//! A stream batch sent: events to the queue (or the topic) in stream order,
//! at most ten per request; refusals retried while that is safe; corrupt
//! items reported; the first record left unsent named for redelivery.

use std::collections::{HashSet, VecDeque};
use std::future::Future;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::record::{Corrupt, Outgoing, Read, keys_of, read};
use crate::domain::Domain;

/// The most entries of one `SendMessageBatch` (or `PublishBatch`).
pub const MAX_ENTRIES: usize = 10;

/// The most body bytes of one `SendMessageBatch` (SQS's limit on the sum of
/// a request's messages; SNS's `PublishBatch` has the same, 262,144 bytes).
pub const MAX_REQUEST_BYTES: usize = 256 * 1024;

/// The codes of an entry SQS refused that sending it again cannot cure: the
/// message itself is wrong (with `SenderFault`). Any other refusal
/// (throttling, a KMS key, an error on SQS's side) is sent again, and then
/// named for redelivery. SNS's are
/// [`TOPIC_ENTRY_FAULTS`](super::TOPIC_ENTRY_FAULTS).
pub const ENTRY_FAULTS: [&str; 3] = [
    "InvalidMessageContents",
    "MessageTooLong",
    "InvalidParameterValue",
];

/// An entry the queue did not take.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    /// Its position in the entries sent.
    pub index: usize,
    /// The service's error code.
    pub code: String,
    /// The service's message.
    pub message: String,
    /// Whether the service blames the caller (`SenderFault`); with a code
    /// of [`Queue::blames_message`], sending it again will not help.
    pub sender_fault: bool,
}

/// A batch request's answer, absorbed the same for SQS and SNS: the
/// entries refused, as the service named them (`(id, code, message,
/// sender fault)`; the id is the entry's position), and, as `NoAnswer`,
/// every entry of the `count` sent that `taken` does not name either: an
/// entry not known to be sent is not taken.
pub(crate) fn not_taken<'a>(
    service: &str,
    count: usize,
    failed: impl Iterator<Item = (&'a str, &'a str, Option<&'a str>, bool)>,
    taken: impl Fn(&str) -> bool,
) -> Vec<Refused> {
    let mut refused: Vec<Refused> = failed
        .filter_map(|(id, code, message, sender_fault)| {
            Some(Refused {
                index: id.parse().ok()?,
                code: code.to_owned(),
                message: message.unwrap_or_default().to_owned(),
                sender_fault,
            })
        })
        .collect();
    for index in 0..count {
        let answered = taken(&index.to_string()) || refused.iter().any(|r| r.index == index);
        if !answered {
            refused.push(Refused {
                index,
                code: "NoAnswer".to_owned(),
                message: format!("{service} answered neither success nor failure for this entry"),
                sender_fault: false,
            });
        }
    }
    refused
}

/// A request that failed as a whole (after the SDK's own retries).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SendError(pub String);

/// Where the dispatcher sends: the FIFO queue or FIFO topic, and the failure
/// queue for reports. [`SqsQueue`](super::SqsQueue) is SQS,
/// [`SnsTopic`](super::SnsTopic) SNS; tests bring their own.
pub trait Queue: Send + Sync {
    /// Sends up to [`MAX_ENTRIES`] messages in one request, in order;
    /// answers with the entries refused (none: all taken).
    fn send(
        &self,
        entries: &[Outgoing],
    ) -> impl Future<Output = Result<Vec<Refused>, SendError>> + Send;

    /// Sends one report (a JSON document) to the failure queue.
    fn report(&self, report: &str) -> impl Future<Output = Result<(), SendError>> + Send;

    /// Whether a refusal blames the message itself, so that sending it
    /// again cannot cure it: the event is reported to the failure queue and
    /// its stream goes on. SQS's rule unless the target says otherwise: the
    /// service blames the caller (`SenderFault`) with a code of
    /// [`ENTRY_FAULTS`].
    fn blames_message(&self, refusal: &Refused) -> bool {
        refusal.sender_fault && ENTRY_FAULTS.contains(&refusal.code.as_str())
    }

    /// The service's name in reasons and logs: `SQS`, `SNS`.
    fn service(&self) -> &'static str {
        "SQS"
    }
}

/// How hard one invocation tries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settings {
    /// Rounds of sending again what was refused, after the first.
    pub retries: u32,
    /// The pause before the first retry; doubled each time.
    pub backoff: Duration,
    /// No request starts with less than this left before the deadline.
    pub margin: Duration,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            retries: 3,
            backoff: Duration::from_millis(50),
            // More than one SQS call may take (the function's client gives
            // up on a call after 3 s).
            margin: Duration::from_secs(4),
        }
    }
}

/// What one batch did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Dispatch {
    /// Records in the batch.
    pub records: usize,
    /// Records that send nothing (the head, requests, removals).
    pub skipped: usize,
    /// Messages the queue (or the topic) took.
    pub dispatched: usize,
    /// `SendMessageBatch` (or `PublishBatch`) requests made.
    pub requests: u64,
    /// Entries refused, and requests failed, along the way.
    pub refused: u64,
    /// Corrupt event items reported to the failure queue: (sequence
    /// number, reason).
    pub corrupt: Vec<(Option<String>, String)>,
    /// The `SequenceNumber` of the first record not done: Lambda delivers
    /// it and every record after it again.
    pub failure: Option<String>,
    /// Why that record is not done.
    pub failure_reason: Option<String>,
    /// The stream is set up wrong (see [`Read::Unusable`]): nothing was
    /// sent, and the invocation fails as a whole.
    pub unusable: Option<String>,
}

impl Dispatch {
    /// The partial batch response of a stream batch.
    pub fn response(&self) -> aws_lambda_events::event::streams::DynamoDbEventResponse {
        let mut response = aws_lambda_events::event::streams::DynamoDbEventResponse::default();
        if let Some(failure) = &self.failure {
            let mut item = aws_lambda_events::event::streams::DynamoDbBatchItemFailure::default();
            item.item_identifier = Some(failure.clone());
            response.batch_item_failures.push(item);
        }
        response
    }
}

/// A record that could not be done, and what blocks the redelivery point.
struct Unfinished {
    index: usize,
    reason: String,
}

/// Sends one stream batch (the records as Lambda delivers them, in shard
/// order) to `queue`.
///
/// Every event item's `INSERT` becomes one message; a stream's messages go
/// in stream order, up to ten per request. A refused entry, or the entries
/// of a failed request, are sent again, first of their stream and alone of
/// it in a request, up to `settings.retries` rounds; meanwhile the later
/// messages of their stream wait. A corrupt event item, or an entry the
/// service refuses for good ([`Queue::blames_message`]), is reported to the
/// failure queue (and logged) and the batch goes on. What is still unsent at
/// the end names the first such record as the batch's failure: Lambda
/// delivers it and everything after it again, and the messages sent after it
/// come back as duplicates that the queue's (or the topic's) deduplication
/// (five minutes) and the consumer's guard absorb. A record that shows the stream set up wrong stops everything
/// ([`Dispatch::unusable`]).
pub async fn dispatch<Q: Queue>(
    records: &[Value],
    domain: &Domain,
    queue: &Q,
    settings: Settings,
    deadline: Option<Instant>,
) -> Dispatch {
    let mut dispatch = Dispatch {
        records: records.len(),
        ..Dispatch::default()
    };
    let mut unfinished: Vec<Unfinished> = Vec::new();
    // (record index, message), in record order.
    let mut pending: Vec<(usize, Outgoing)> = Vec::new();
    let mut corrupt: Vec<(usize, Corrupt)> = Vec::new();
    for (index, record) in records.iter().enumerate() {
        match read(record, domain) {
            Read::Send(outgoing) => pending.push((index, outgoing)),
            Read::Skip(_) => dispatch.skipped += 1,
            Read::Corrupt(item) => corrupt.push((index, item)),
            Read::Unusable(reason) => {
                dispatch.unusable = Some(reason);
                return dispatch;
            }
        }
    }
    for (index, item) in corrupt {
        if out_of_time(deadline, settings) {
            unfinished.push(Unfinished {
                index,
                reason: "the invocation's deadline came before its report".to_owned(),
            });
            continue;
        }
        if let Err(reason) = report(queue, &item, &mut dispatch).await {
            unfinished.push(Unfinished { index, reason });
        }
    }
    // Streams with an entry refused and not yet taken: their head goes
    // with no later entry of theirs in the same request, so that SQS cannot
    // take a later one and refuse the head again.
    let mut troubled: HashSet<String> = HashSet::new();
    let mut round = 0;
    while !pending.is_empty() {
        if round > 0 {
            tokio::time::sleep(settings.backoff * 2u32.saturating_pow(round - 1)).await;
        }
        let mut again: Vec<(usize, Outgoing)> = Vec::new();
        // Streams with an entry refused in this round: their later entries
        // wait for the next round, behind it.
        let mut held: HashSet<String> = HashSet::new();
        let mut rest: VecDeque<(usize, Outgoing)> = std::mem::take(&mut pending).into();
        while !rest.is_empty() {
            if out_of_time(deadline, settings) {
                again.extend(rest.drain(..));
                break;
            }
            let mut request: Vec<(usize, Outgoing)> = Vec::new();
            let mut bytes = 0;
            let mut position = 0;
            while position < rest.len() && request.len() < MAX_ENTRIES {
                let next = &rest[position].1;
                if held.contains(&next.stream) {
                    again.extend(rest.remove(position));
                    continue;
                }
                let alone = troubled.contains(&next.stream)
                    && request.iter().any(|(_, o)| o.stream == next.stream);
                if alone {
                    position += 1;
                    continue;
                }
                if !request.is_empty() && bytes + next.body.len() > MAX_REQUEST_BYTES {
                    break;
                }
                bytes += next.body.len();
                request.extend(rest.remove(position));
            }
            if request.is_empty() {
                continue;
            }
            let (indexes, entries): (Vec<usize>, Vec<Outgoing>) = request.into_iter().unzip();
            dispatch.requests += 1;
            let answer = queue.send(&entries).await.and_then(|refused| {
                match refused.iter().find(|r| r.index >= entries.len()) {
                    Some(unknown) => Err(SendError(format!(
                        "the queue refused entry {} of a request of {}",
                        unknown.index,
                        entries.len()
                    ))),
                    None => Ok(refused),
                }
            });
            match answer {
                Ok(refused) => {
                    let sent = indexes.into_iter().zip(entries);
                    for (position, (index, outgoing)) in sent.enumerate() {
                        let Some(refusal) = refused.iter().find(|r| r.index == position) else {
                            dispatch.dispatched += 1;
                            // Taken behind nothing refused of its stream:
                            // its order holds again.
                            if !held.contains(&outgoing.stream) {
                                troubled.remove(&outgoing.stream);
                            }
                            continue;
                        };
                        dispatch.refused += 1;
                        if queue.blames_message(refusal) {
                            if !held.contains(&outgoing.stream) {
                                troubled.remove(&outgoing.stream);
                            }
                            let corrupt = Corrupt {
                                sequence_number: Some(outgoing.sequence_number.clone()),
                                reason: format!(
                                    "{} refused the message: {}: {}",
                                    queue.service(),
                                    refusal.code,
                                    refusal.message
                                ),
                                record: records[index].clone(),
                            };
                            if let Err(reason) = report(queue, &corrupt, &mut dispatch).await {
                                unfinished.push(Unfinished { index, reason });
                            }
                        } else {
                            tracing::warn!(
                                service = queue.service(),
                                stream = %outgoing.stream,
                                sequence_number = %outgoing.sequence_number,
                                code = %refusal.code,
                                message = %refusal.message,
                                "a message refused: sent again, first of its stream"
                            );
                            held.insert(outgoing.stream.clone());
                            troubled.insert(outgoing.stream.clone());
                            again.push((index, outgoing));
                        }
                    }
                }
                Err(err) => {
                    dispatch.refused += 1;
                    tracing::warn!(
                        service = queue.service(),
                        error = %err,
                        entries = entries.len(),
                        "a batch request failed"
                    );
                    for (index, outgoing) in indexes.into_iter().zip(entries) {
                        held.insert(outgoing.stream.clone());
                        troubled.insert(outgoing.stream.clone());
                        again.push((index, outgoing));
                    }
                }
            }
        }
        again.sort_by_key(|(index, _)| *index);
        pending = again;
        round += 1;
        let late = out_of_time(deadline, settings);
        if !pending.is_empty() && (round > settings.retries || late) {
            let reason = if late {
                format!(
                    "the invocation's deadline came before {} took it",
                    queue.service()
                )
            } else {
                format!("{} did not take it after retries", queue.service())
            };
            unfinished.extend(pending.drain(..).map(|(index, _)| Unfinished {
                index,
                reason: reason.clone(),
            }));
        }
    }
    if let Some(first) = unfinished.iter().min_by_key(|unfinished| unfinished.index) {
        // Without a SequenceNumber, the empty identifier: Lambda then
        // delivers the whole batch again.
        dispatch.failure = Some(
            records[first.index]
                .pointer("/dynamodb/SequenceNumber")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
        );
        dispatch.failure_reason = Some(first.reason.clone());
    }
    dispatch
}

/// A JSON document with the characters SQS refuses (U+FFFE, U+FFFF: JSON
/// leaves them raw, and only strings hold them) written as `\u` escapes:
/// the same document, as SQS carries it.
fn sendable(json: &str) -> String {
    json.chars()
        .fold(String::with_capacity(json.len()), |mut out, c| {
            if super::record::sqs_body_char(c) {
                out.push(c);
            } else {
                out.push_str(&format!("\\u{:04x}", u32::from(c)));
            }
            out
        })
}

/// Whether less than the margin is left before the deadline.
fn out_of_time(deadline: Option<Instant>, settings: Settings) -> bool {
    deadline.is_some_and(|deadline| {
        deadline.saturating_duration_since(Instant::now()) < settings.margin
    })
}

/// Reports a corrupt event item to the failure queue (and the log); `Err`
/// with the reason when the report could not be sent.
async fn report<Q: Queue>(
    queue: &Q,
    corrupt: &Corrupt,
    dispatch: &mut Dispatch,
) -> Result<(), String> {
    let (pk, sk) = keys_of(&corrupt.record);
    tracing::error!(
        sequence_number = corrupt.sequence_number.as_deref(),
        pk = pk.as_deref(),
        sk = sk.as_deref(),
        reason = %corrupt.reason,
        "corrupt event item: not sent, reported to the failure queue"
    );
    let mut document = json!({
        "source": "sequence-guard dispatcher",
        "condition": "CorruptEventItem",
        "reason": corrupt.reason,
        "sequenceNumber": corrupt.sequence_number,
        "eventSourceARN": corrupt.record.get("eventSourceARN"),
        "keys": { "pk": pk, "sk": sk },
        "record": corrupt.record,
    });
    let mut text = sendable(&document.to_string());
    if text.len() > MAX_REQUEST_BYTES {
        // The item itself is too big for a message: its keys say where it is.
        document["record"] = Value::Null;
        document["recordOmitted"] = json!("larger than an SQS message");
        text = sendable(&document.to_string());
    }
    match queue.report(&text).await {
        Ok(()) => {
            dispatch
                .corrupt
                .push((corrupt.sequence_number.clone(), corrupt.reason.clone()));
            Ok(())
        }
        Err(err) => {
            tracing::error!(error = %err, "cannot report a corrupt event item: it will come again");
            if corrupt.sequence_number.is_none() {
                // Nothing names it for redelivery; the batch fails as a whole.
                return Err(format!(
                    "the report failed ({err}) for a record without SequenceNumber"
                ));
            }
            Err(format!("its report to the failure queue failed: {err}"))
        }
    }
}
