//! The event store on DynamoDB (docs/event-store.md): where a sequence is
//! assigned, by the event item itself.
//!
//! | item | pk | sk |
//! | --- | --- | --- |
//! | event | `STREAM#<stream id>` | `EVENT#<sequence, 20 digits>` |
//! | request | `REQUEST#<request id>` | `REQUEST` |
//!
//! An event is put on the condition that its slot is empty, right after an
//! event known to exist: read first (the stream's last event, for
//! [`ExpectedSequence::Any`](super::ExpectedSequence::Any)), checked in the
//! same transaction (a `ConditionCheck`, for an exact sequence), or none (the
//! first). Events are never changed nor removed, so a stream stays gapless.
//! One event alone is one conditional `PutItem`; several events, a request
//! id or the caller's writes make one `TransactWriteItems`, with a
//! `ClientRequestToken` so that its own resend after an unknown outcome is
//! answered from the first; a retry from another process finds the request
//! record. Tables written by earlier releases also hold a `HEAD` item per
//! stream: it is ignored.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::{AttributeValue, ReturnConsumedCapacity};

use super::capacity::{Consumed, Meter, item_bytes, read_units};
use super::items::{event_sk, number, request_key, stream_pk, text};
use super::kind::recorded;
use super::known::KnownStreams;
use super::turn::Turns;
use super::{AppendError, Appended};
use crate::domain::Domain;
use crate::entity::Item;
use crate::table::StoreError;
use crate::table::request_error;

/// How long an append keeps trying by default: when other writers keep
/// taking the next sequence, and when the outcome of a try is unknown (a
/// timeout, a 5xx after the SDK's own retries). The pauses between tries
/// are random (full jitter, from up to 2 ms doubling with each race lost in
/// a row to up to 1 s), so that writers in other processes spread their
/// tries. Waiting for a turn behind this store's other appends to the
/// stream does not count.
pub const RETRY_BUDGET: Duration = Duration::from_secs(20);

/// How long a request record is kept (`expiresAt`): 7 days, far longer than
/// any caller retries a command.
pub const REQUEST_TTL_SECONDS: u64 = 7 * 24 * 60 * 60;

/// How an append at [`ExpectedSequence::Exact`](super::ExpectedSequence::Exact)
/// `n`, `n` > 0, proves that the stream is at `n` (its event `n` exists).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ExactCheck {
    /// A `ConditionCheck` of event `n` in the append's transaction: one
    /// request; the check and the put are transactional writes (2 units
    /// each for an event under 1 KB).
    #[default]
    InTransaction,
    /// The stream's last event read first (a strongly consistent `Query`,
    /// 1 read unit), then one conditional `PutItem` (1 write unit): the
    /// fewest units, one more round trip, and a stale sequence refused
    /// without a write.
    ReadFirst,
}

/// One stored event, as read back in stream order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredEvent {
    /// Its sequence in the stream.
    pub sequence: u64,
    /// Its `eventId`.
    pub event_id: String,
    /// Its type.
    pub event_type: String,
    /// The message body, exactly as it will be sent.
    pub body: String,
    /// When it was appended, epoch seconds.
    pub appended_at: u64,
}

impl StoredEvent {
    /// The event as its SQS message is read back from the store (by a
    /// rebuild, or to close a gap): its body, its stream as the group, and
    /// sent when it was appended (a process reacts to it or not by that),
    /// under `message_id`.
    pub fn message(
        &self,
        stream: &str,
        message_id: String,
    ) -> aws_lambda_events::event::sqs::SqsMessage {
        let mut message = aws_lambda_events::event::sqs::SqsMessage::default();
        message.message_id = Some(message_id);
        message.body = Some(self.body.clone());
        message
            .attributes
            .insert("MessageGroupId".to_owned(), stream.to_owned());
        message.attributes.insert(
            "SentTimestamp".to_owned(),
            self.appended_at.saturating_mul(1000).to_string(),
        );
        message
    }
}

/// The event store: one DynamoDB table. Cheap to clone; counts its requests
/// and the capacity they consumed. Its appends to one stream (its clones'
/// too) take turns, one at a time, first come first served: they would
/// only race for the same sequence.
#[derive(Debug, Clone)]
pub struct EventStore {
    pub(super) client: Client,
    pub(super) table: String,
    pub(super) domain: Domain,
    requests: Arc<AtomicU64>,
    pub(super) meter: Meter,
    pub(super) budget: Duration,
    pub(super) exact: ExactCheck,
    pub(super) turns: Turns,
    /// The streams' events it saw (wrote or read).
    pub(super) known: KnownStreams,
}

impl EventStore {
    /// The store in `table`, checking events against `domain`.
    pub fn new(client: Client, table: impl Into<String>, domain: Domain) -> Self {
        EventStore {
            client,
            table: table.into(),
            domain,
            requests: Arc::new(AtomicU64::new(0)),
            meter: Meter::default(),
            budget: RETRY_BUDGET,
            exact: ExactCheck::default(),
            turns: Turns::default(),
            known: KnownStreams::default(),
        }
    }

    /// How long an append keeps trying (default [`RETRY_BUDGET`]): within a
    /// Lambda function, less than its timeout.
    pub fn with_retry_budget(mut self, budget: Duration) -> Self {
        self.budget = budget;
        self
    }

    /// How an exact expected sequence is checked (default
    /// [`ExactCheck::InTransaction`]).
    pub fn with_exact_check(mut self, exact: ExactCheck) -> Self {
        self.exact = exact;
        self
    }

    /// DynamoDB requests sent so far.
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }

    /// The capacity units consumed so far, as reported and by AWS's rules.
    pub fn consumed(&self) -> Consumed {
        self.meter.total()
    }

    /// The DynamoDB client.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The domain its appends are checked (and sealed) with.
    pub fn domain(&self) -> &Domain {
        &self.domain
    }

    /// The table's name.
    pub fn table(&self) -> &str {
        &self.table
    }

    /// Counts one request.
    pub(super) fn sent(&self) {
        self.requests.fetch_add(1, Ordering::Relaxed);
    }

    /// The sequence of the stream's last event (0: none), from one strongly
    /// consistent `Query`, newest first, one item.
    pub async fn last_sequence(&self, stream_id: &str) -> Result<u64, StoreError> {
        Ok(self.last_event(stream_id).await?.0)
    }

    /// The sequence of the stream's last event (0: none) and the kind its
    /// events project onto (`None`: no event, or none known), from one
    /// strongly consistent `Query`, newest first, one item.
    pub(super) async fn last_event(
        &self,
        stream_id: &str,
    ) -> Result<(u64, Option<String>), StoreError> {
        self.sent();
        let output = self
            .client
            .query()
            .table_name(&self.table)
            .key_condition_expression("pk = :pk AND begins_with(sk, :event)")
            .expression_attribute_values(":pk", AttributeValue::S(stream_pk(stream_id)))
            .expression_attribute_values(":event", AttributeValue::S("EVENT#".to_owned()))
            .scan_index_forward(false)
            .limit(1)
            .consistent_read(true)
            .return_consumed_capacity(ReturnConsumedCapacity::Total)
            .send()
            .await
            .map_err(|err| request_error("Query", &err))?;
        let items = output.items.unwrap_or_default();
        let bytes = items.iter().map(item_bytes).sum();
        self.meter
            .read(output.consumed_capacity.iter(), read_units(bytes));
        match items.first() {
            None => Ok((0, None)),
            Some(item) => {
                let sequence =
                    number(item, "sequence").ok_or_else(|| corrupt(stream_id, "sequence"))?;
                let kind = recorded(&self.domain, item);
                self.known.note(stream_id, sequence, kind.as_deref());
                Ok((sequence, kind))
            }
        }
    }

    /// The stream's events after `after`, in order, at most `limit` (one
    /// strongly consistent `Query`).
    pub async fn read(
        &self,
        stream_id: &str,
        after: u64,
        limit: i32,
    ) -> Result<Vec<StoredEvent>, StoreError> {
        self.sent();
        let output = self
            .client
            .query()
            .table_name(&self.table)
            .key_condition_expression("pk = :pk AND sk BETWEEN :after AND :last")
            .expression_attribute_values(":pk", AttributeValue::S(stream_pk(stream_id)))
            .expression_attribute_values(
                ":after",
                AttributeValue::S(event_sk(after.saturating_add(1))),
            )
            .expression_attribute_values(":last", AttributeValue::S(event_sk(u64::MAX >> 1)))
            .consistent_read(true)
            .limit(limit.max(1))
            .return_consumed_capacity(ReturnConsumedCapacity::Total)
            .send()
            .await
            .map_err(|err| request_error("Query", &err))?;
        let items = output.items.unwrap_or_default();
        let bytes = items.iter().map(item_bytes).sum();
        self.meter
            .read(output.consumed_capacity.iter(), read_units(bytes));
        items
            .iter()
            .map(|item| stored_event(stream_id, item))
            .collect()
    }

    /// One page of the store's streams, from a `Scan` for each stream's
    /// first event (any table, with or without the heads of earlier
    /// releases): the stream ids, and where the next page starts (the
    /// table's own cursor; `None`: this was the last). Its units are counted
    /// as reported (the rules need the sizes of the items the filter drops).
    pub async fn streams(
        &self,
        after: Option<Item>,
    ) -> Result<(Vec<String>, Option<Item>), StoreError> {
        self.sent();
        let output = self
            .client
            .scan()
            .table_name(&self.table)
            .filter_expression("sk = :first")
            .expression_attribute_values(":first", AttributeValue::S(event_sk(1)))
            .projection_expression("pk")
            .consistent_read(true)
            .set_exclusive_start_key(after)
            .return_consumed_capacity(ReturnConsumedCapacity::Total)
            .send()
            .await
            .map_err(|err| request_error("Scan", &err))?;
        let reported = output
            .consumed_capacity
            .as_ref()
            .and_then(|consumed| consumed.capacity_units())
            .unwrap_or(0.0);
        self.meter.read(output.consumed_capacity.iter(), reported);
        let streams = output
            .items
            .unwrap_or_default()
            .iter()
            .filter_map(|item| Some(text(item, "pk")?.strip_prefix("STREAM#")?.to_owned()))
            .collect();
        // The whole key: a page may end on any item of a partition.
        let next = output.last_evaluated_key.filter(|last| !last.is_empty());
        Ok((streams, next))
    }

    /// The first answer to a request id seen before: from the record the
    /// failed condition returned, or read.
    pub(super) async fn answered(
        &self,
        request_id: &str,
        found: Option<Item>,
    ) -> Result<Appended, AppendError> {
        let item = match found.filter(|item| !item.is_empty()) {
            Some(item) => item,
            None => {
                self.sent();
                let output = self
                    .client
                    .get_item()
                    .table_name(&self.table)
                    .set_key(Some(request_key(request_id)))
                    .consistent_read(true)
                    .return_consumed_capacity(ReturnConsumedCapacity::Total)
                    .send()
                    .await
                    .map_err(|err| request_error("GetItem", &err))?;
                let item = output.item.unwrap_or_default();
                self.meter.read(
                    output.consumed_capacity.iter(),
                    read_units(item_bytes(&item)),
                );
                item
            }
        };
        request_answer(request_id, &item)
    }
}

/// The answer a request record holds.
fn request_answer(request_id: &str, item: &Item) -> Result<Appended, AppendError> {
    let missing = |field| StoreError::Corrupt {
        key: format!("REQUEST#{request_id}"),
        message: format!("the request record has no readable {field}"),
    };
    let sequence = number(item, "sequence").ok_or_else(|| missing("sequence"))?;
    Ok(Appended {
        stream_id: text(item, "streamId")
            .ok_or_else(|| missing("streamId"))?
            .to_owned(),
        sequence,
        event_id: text(item, "eventId")
            .ok_or_else(|| missing("eventId"))?
            .to_owned(),
        duplicate_request: true,
        first_sequence: number(item, "firstSequence").unwrap_or(sequence),
    })
}

/// An event item as read back.
pub(super) fn stored_event(stream_id: &str, item: &Item) -> Result<StoredEvent, StoreError> {
    Ok(StoredEvent {
        sequence: number(item, "sequence").ok_or_else(|| corrupt(stream_id, "sequence"))?,
        event_id: text(item, "eventId")
            .ok_or_else(|| corrupt(stream_id, "eventId"))?
            .to_owned(),
        event_type: text(item, "type")
            .ok_or_else(|| corrupt(stream_id, "type"))?
            .to_owned(),
        body: text(item, "body")
            .ok_or_else(|| corrupt(stream_id, "body"))?
            .to_owned(),
        appended_at: number(item, "appendedAt").unwrap_or(0),
    })
}

pub(super) fn corrupt(stream_id: &str, field: &str) -> StoreError {
    StoreError::Corrupt {
        key: stream_pk(stream_id),
        message: format!("an event item has no readable {field}"),
    }
}
