//! A stream batch sent: events to the queue (or the topic) in stream order,
//! at most ten per request; refusals retried while that is safe; corrupt
//! items reported; the first record left unsent named for redelivery.

use std::collections::{HashMap, HashSet, VecDeque};
use std::future::Future;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::record::{Corrupt, Message, Read, read};
use crate::domain::Domain;

mod report;
#[cfg(test)]
mod tests;
mod wave;

use report::report;
use wave::next_wave;

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
        entries: &[Message],
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

/// The most requests one batch has in flight at once. A stream is in at
/// most one of them, so its messages still reach the queue in order.
pub const MAX_IN_FLIGHT: usize = 10;

/// A record that could not be done, and what blocks the redelivery point.
struct Unfinished {
    index: usize,
    reason: String,
}

/// Messages waiting to be sent: (record index, message), in record order.
type Pending = Vec<(usize, Message)>;

/// One request of a wave: the record indexes and the entries, in order.
type Request = (Vec<usize>, Vec<Message>);

/// What one invocation works through: the answer being built, the records
/// not done, and the streams with an entry refused and not yet taken (their
/// head goes with no later entry of theirs in the same request, so that the
/// service cannot take a later one and refuse the head again).
struct Batch<'a, Q> {
    records: &'a [Value],
    queue: &'a Q,
    settings: Settings,
    deadline: Option<Instant>,
    dispatch: Dispatch,
    unfinished: Vec<Unfinished>,
    troubled: HashSet<String>,
}

/// One round of sending: what goes again next round, and the streams with
/// an entry refused in this round (their later entries wait behind it).
#[derive(Default)]
struct Round {
    again: Pending,
    held: HashSet<String>,
}

/// Sends one stream batch (the records as Lambda delivers them, in shard
/// order) to `queue`.
///
/// Every event item's `INSERT` becomes one message; a stream's messages go
/// in stream order, up to ten per request, and up to [`MAX_IN_FLIGHT`]
/// requests at once, a stream in only one of them, the streams with the
/// most messages first (a batch takes as many waves of requests as its
/// longest stream needs). A refused entry, or the
/// entries of a failed request, are sent again, first of their stream and
/// alone of it in a request, up to `settings.retries` rounds; meanwhile the
/// later messages of their stream wait. A corrupt event item, or an entry
/// the service refuses for good ([`Queue::blames_message`]), is reported to
/// the failure queue (and logged) and the batch goes on. What is still
/// unsent at the end names the first such record as the batch's failure:
/// Lambda delivers it and everything after it again, and the messages sent
/// after it come back as duplicates that the queue's (or the topic's)
/// deduplication (five minutes) and the consumer's guard absorb. A record
/// that shows the stream set up wrong stops everything
/// ([`Dispatch::unusable`]).
pub async fn dispatch<Q: Queue>(
    records: &[Value],
    domain: &Domain,
    queue: &Q,
    settings: Settings,
    deadline: Option<Instant>,
) -> Dispatch {
    let mut batch = Batch {
        records,
        queue,
        settings,
        deadline,
        dispatch: Dispatch {
            records: records.len(),
            ..Dispatch::default()
        },
        unfinished: Vec::new(),
        troubled: HashSet::new(),
    };
    let Some((pending, corrupt)) = batch.classify(domain) else {
        return batch.dispatch;
    };
    batch.report_corrupt(corrupt).await;
    let pending = in_stream_order(pending);
    batch.send_all(pending).await;
    batch.name_failure();
    batch.dispatch
}

impl<Q: Queue> Batch<'_, Q> {
    /// Reads every record: the messages to send and the corrupt items, or
    /// `None` when a record shows the stream set up wrong.
    fn classify(&mut self, domain: &Domain) -> Option<(Pending, Vec<(usize, Corrupt)>)> {
        let mut pending = Vec::new();
        let mut corrupt = Vec::new();
        for (index, record) in self.records.iter().enumerate() {
            match read(record, domain) {
                Read::Send(outgoing) => pending.push((index, outgoing)),
                Read::Skip(_) => self.dispatch.skipped += 1,
                Read::Corrupt(item) => corrupt.push((index, item)),
                Read::Unusable(reason) => {
                    self.dispatch.unusable = Some(reason);
                    return None;
                }
            }
        }
        Some((pending, corrupt))
    }

    /// Reports the corrupt items to the failure queue, while time is left.
    async fn report_corrupt(&mut self, corrupt: Vec<(usize, Corrupt)>) {
        for (index, item) in corrupt {
            if out_of_time(self.deadline, self.settings) {
                self.unfinished.push(Unfinished {
                    index,
                    reason: "the invocation's deadline came before its report".to_owned(),
                });
                continue;
            }
            if let Err(reason) = report(self.queue, &item, &mut self.dispatch).await {
                self.unfinished.push(Unfinished { index, reason });
            }
        }
    }

    /// Sends the messages, round after round, until all are taken or the
    /// retries (or the time) run out.
    async fn send_all(&mut self, mut pending: Pending) {
        let mut round = 0;
        while !pending.is_empty() {
            if round > 0 {
                let pause = self.settings.backoff * 2u32.saturating_pow(round - 1);
                tokio::time::sleep(pause).await;
            }
            let mut this = Round::default();
            let mut rest: VecDeque<(usize, Message)> = std::mem::take(&mut pending).into();
            while !rest.is_empty() {
                if out_of_time(self.deadline, self.settings) {
                    this.again.extend(rest.drain(..));
                    break;
                }
                let wave = next_wave(&mut rest, &mut this, &self.troubled);
                self.send_wave(wave, &mut this).await;
            }
            this.again.sort_by_key(|(index, _)| *index);
            pending = in_stream_order(this.again);
            round += 1;
            let late = out_of_time(self.deadline, self.settings);
            if !pending.is_empty() && (round > self.settings.retries || late) {
                let service = self.queue.service();
                let reason = if late {
                    format!("the invocation's deadline came before {service} took it")
                } else {
                    format!("{service} did not take it after retries")
                };
                self.unfinished
                    .extend(pending.drain(..).map(|(index, _)| Unfinished {
                        index,
                        reason: reason.clone(),
                    }));
            }
        }
    }

    /// Sends the requests of a wave at once, then absorbs each answer in
    /// the order of the requests.
    async fn send_wave(&mut self, wave: Vec<Request>, round: &mut Round) {
        self.dispatch.requests += wave.len() as u64;
        let queue = self.queue;
        let answers = futures::future::join_all(wave.iter().map(|(_, entries)| async move {
            queue.send(entries).await.and_then(|refused| {
                match refused.iter().find(|r| r.index >= entries.len()) {
                    Some(unknown) => Err(SendError(format!(
                        "the queue refused entry {} of a request of {}",
                        unknown.index,
                        entries.len()
                    ))),
                    None => Ok(refused),
                }
            })
        }))
        .await;
        for ((indexes, entries), answer) in wave.into_iter().zip(answers) {
            match answer {
                Ok(refused) => self.absorb(indexes, entries, &refused, round).await,
                Err(err) => self.failed_request(indexes, entries, &err, round),
            }
        }
    }

    /// A request's answer: what was taken, what goes again, what the
    /// service blames on the message itself (reported).
    async fn absorb(
        &mut self,
        indexes: Vec<usize>,
        entries: Vec<Message>,
        refused: &[Refused],
        round: &mut Round,
    ) {
        let sent = indexes.into_iter().zip(entries);
        for (position, (index, outgoing)) in sent.enumerate() {
            let Some(refusal) = refused.iter().find(|r| r.index == position) else {
                self.dispatch.dispatched += 1;
                // Taken behind nothing refused of its stream: its order
                // holds again.
                if !round.held.contains(&outgoing.stream) {
                    self.troubled.remove(&outgoing.stream);
                }
                continue;
            };
            self.dispatch.refused += 1;
            if !self.queue.blames_message(refusal) {
                tracing::warn!(
                    service = self.queue.service(),
                    stream = %outgoing.stream,
                    sequence_number = %outgoing.sequence_number,
                    code = %refusal.code,
                    message = %refusal.message,
                    "a message refused: sent again, first of its stream"
                );
                round.held.insert(outgoing.stream.clone());
                self.troubled.insert(outgoing.stream.clone());
                round.again.push((index, outgoing));
                continue;
            }
            if !round.held.contains(&outgoing.stream) {
                self.troubled.remove(&outgoing.stream);
            }
            let corrupt = Corrupt {
                sequence_number: Some(outgoing.sequence_number.clone()),
                reason: format!(
                    "{} refused the message: {}: {}",
                    self.queue.service(),
                    refusal.code,
                    refusal.message
                ),
                record: self.records[index].clone(),
            };
            if let Err(reason) = report(self.queue, &corrupt, &mut self.dispatch).await {
                self.unfinished.push(Unfinished { index, reason });
            }
        }
    }

    /// A request that failed as a whole: all of it goes again, first of its
    /// streams.
    fn failed_request(
        &mut self,
        indexes: Vec<usize>,
        entries: Vec<Message>,
        err: &SendError,
        round: &mut Round,
    ) {
        self.dispatch.refused += 1;
        tracing::warn!(
            service = self.queue.service(),
            error = %err,
            entries = entries.len(),
            "a batch request failed"
        );
        for (index, outgoing) in indexes.into_iter().zip(entries) {
            round.held.insert(outgoing.stream.clone());
            self.troubled.insert(outgoing.stream.clone());
            round.again.push((index, outgoing));
        }
    }

    /// Names the first record not done as the batch's failure.
    fn name_failure(&mut self) {
        let Some(first) = self.unfinished.iter().min_by_key(|u| u.index) else {
            return;
        };
        // Without a SequenceNumber, the empty identifier: Lambda then
        // delivers the whole batch again.
        self.dispatch.failure = Some(
            self.records[first.index]
                .pointer("/dynamodb/SequenceNumber")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
        );
        self.dispatch.failure_reason = Some(first.reason.clone());
    }
}

/// The messages with each stream's in sequence order, whatever order their
/// change records came in: DynamoDB Streams orders records per item, and
/// each event is an item of its own, so a transaction's events, or a
/// stream's after a partition split, may come out of order. A stream keeps
/// the places its messages had in the batch (the waves still see the
/// shard's interleaving), filled in sequence order; each message keeps the
/// index of the record that brought it, so a message not sent still names
/// its own record, and the first record not done is redelivered with all
/// after it. Records already in order (nearly always) are left as they are.
fn in_stream_order(pending: Pending) -> Pending {
    let mut last: HashMap<&str, u64> = HashMap::new();
    let ordered = pending.iter().all(|(_, outgoing)| {
        let before = last.insert(&outgoing.stream, outgoing.sequence);
        before.is_none_or(|before| before < outgoing.sequence)
    });
    if ordered {
        return pending;
    }
    let mut places: HashMap<&str, Vec<usize>> = HashMap::new();
    for (place, (_, outgoing)) in pending.iter().enumerate() {
        places.entry(&outgoing.stream).or_default().push(place);
    }
    // The message each place takes: the stream's, in sequence order.
    let mut from: Vec<usize> = (0..pending.len()).collect();
    for places in places.values().filter(|places| places.len() > 1) {
        let mut sorted = places.clone();
        sorted.sort_by_key(|&place| pending[place].1.sequence);
        for (&place, source) in places.iter().zip(sorted) {
            from[place] = source;
        }
    }
    let mut taken: Vec<Option<(usize, Message)>> = pending.into_iter().map(Some).collect();
    from.into_iter()
        .filter_map(|source| taken[source].take())
        .collect()
}

/// Whether less than the margin is left before the deadline.
fn out_of_time(deadline: Option<Instant>, settings: Settings) -> bool {
    deadline.is_some_and(|deadline| {
        deadline.saturating_duration_since(Instant::now()) < settings.margin
    })
}
