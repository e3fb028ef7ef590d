//! The event store on DynamoDB (CONTRACT section 6): where a sequence is
//! assigned, atomically with the stored event.
//!
//! | item | pk | sk |
//! | --- | --- | --- |
//! | head | `STREAM#<stream id>` | `HEAD` |
//! | event | `STREAM#<stream id>` | `EVENT#<sequence, 20 digits>` |
//! | request | `REQUEST#<request id>` | `REQUEST` |
//!
//! One append is one `TransactWriteItems`: the head updated on the condition
//! that it is where the append expects it (or absent, for a new stream), each
//! event put on the condition that it does not exist, the request record put
//! on the condition that it does not exist, and the caller's writes. The
//! transaction carries a `ClientRequestToken`, so that its own retries after
//! an ambiguous failure (a timeout, a 500 after the write) are answered from
//! the first; a retry from another process finds the request record.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::error::ProvideErrorMetadata;
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::{
    AttributeValue, CancellationReason, Put, ReturnValuesOnConditionCheckFailure,
    TransactWriteItem, Update,
};

use super::{Append, AppendError, Appended, Checked, ExpectedSequence, check};
use crate::domain::Domain;
use crate::entity::Item;
use crate::store::StoreError;
use crate::store::dynamodb::errors::{build_error, request_error, service_error};

/// How many transactions an append tries: with [`ExpectedSequence::Any`],
/// when other writers keep moving the head, and for any append, when the
/// outcome of one is unknown (a timeout, a 5xx after the SDK's own retries).
/// The pauses between tries are random, from 5 ms growing to at most 100 ms
/// (about 3 s in all at worst): a writer that lost a race does not fall ever
/// further behind the ones that won it.
pub const MAX_ATTEMPTS: u32 = 50;

/// How long a request record is kept (`expiresAt`): 7 days, far longer than
/// any caller retries a command.
pub const REQUEST_TTL_SECONDS: u64 = 7 * 24 * 60 * 60;

/// Why a transaction was not written.
enum Failed {
    /// Cancelled: a reason per item.
    Cancelled(Vec<CancellationReason>),
    /// The token was used before with other parameters.
    Mismatch(StoreError),
    /// Will fail again (a missing table, no permission, a refused request).
    Permanent(StoreError),
    /// It may or may not have been written (a timeout, a 5xx, throttling).
    Unknown(StoreError),
}

/// Service errors that sending again will not heal.
const PERMANENT: [&str; 5] = [
    "ResourceNotFoundException",
    "AccessDeniedException",
    "UnrecognizedClientException",
    "MissingAuthenticationTokenException",
    "ValidationException",
];

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

/// The event store: one DynamoDB table. Cheap to clone; counts its requests.
#[derive(Debug, Clone)]
pub struct EventStore {
    client: Client,
    table: String,
    domain: Domain,
    requests: Arc<AtomicU64>,
}

impl EventStore {
    /// The store in `table`, checking events against `domain`.
    pub fn new(client: Client, table: impl Into<String>, domain: Domain) -> Self {
        EventStore {
            client,
            table: table.into(),
            domain,
            requests: Arc::new(AtomicU64::new(0)),
        }
    }

    /// DynamoDB requests sent so far.
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }

    /// The table's name.
    pub fn table(&self) -> &str {
        &self.table
    }

    /// Appends the events, with gapless sequences, in one transaction; see
    /// the module's documentation. Nothing is written unless all of it is.
    pub async fn append(&self, append: Append) -> Result<Appended, AppendError> {
        let events = check(&self.domain, &append)?;
        let now = now();
        let mut at = match append.expected {
            ExpectedSequence::Exact(sequence) => sequence,
            ExpectedSequence::Any => self.head(&append.stream_id).await?,
        };
        // Without a request id, this call's own: its retries stay safe.
        let request = append
            .request_id
            .clone()
            .unwrap_or_else(super::new_event_id);
        let written = |at: u64| Appended {
            stream_id: append.stream_id.clone(),
            sequence: at + events.len() as u64,
            event_id: events
                .last()
                .map(|event| event.event_id.clone())
                .unwrap_or_default(),
            duplicate_request: false,
            first_sequence: at + 1,
        };
        // The head of the last try whose outcome is unknown: if the head
        // has moved past it since, the events there may be this call's own.
        let mut uncertain: Option<u64> = None;
        let mut attempt = 0;
        loop {
            attempt += 1;
            let items = self.items(&append, &events, at, now)?;
            let token = token(&request, at, &events, &append.writes, now);
            match self.transact(items, &token).await {
                Ok(()) => return Ok(written(at)),
                Err(Failed::Cancelled(reasons)) => {
                    let failed = |index: usize| {
                        reasons.get(index).and_then(CancellationReason::code)
                            == Some("ConditionalCheckFailed")
                    };
                    let request_at = 1 + events.len();
                    if append.request_id.is_some() && failed(request_at) {
                        return self.answered(&request).await;
                    }
                    if uncertain == Some(at)
                        && self.stored_at(&append.stream_id, at, &events).await?
                    {
                        // An earlier try took effect after all.
                        return Ok(written(at));
                    }
                    if failed(0) {
                        // The head as the failed condition found it (read
                        // again when the table did not return it).
                        let current = match reasons
                            .first()
                            .and_then(CancellationReason::item)
                            .filter(|item| !item.is_empty())
                        {
                            Some(item) => number(item, "sequence").unwrap_or(0),
                            None => self.head(&append.stream_id).await?,
                        };
                        tracing::debug!(at, current, attempt, "append: the head moved");
                        if let ExpectedSequence::Exact(expected) = append.expected {
                            return Err(AppendError::ExpectedSequence { expected, current });
                        }
                        at = current;
                    } else if let Some(index) = (1..=events.len()).find(|&index| failed(index)) {
                        return Err(StoreError::Corrupt {
                            key: format!("STREAM#{}", append.stream_id),
                            message: format!(
                                "an event is stored at sequence {} past the head",
                                at + index as u64
                            ),
                        }
                        .into());
                    } else {
                        let first_write = request_at + usize::from(append.request_id.is_some());
                        if let Some(index) =
                            (0..append.writes.len()).find(|&index| failed(first_write + index))
                        {
                            return Err(AppendError::Condition { index });
                        }
                        let codes: Vec<&str> = reasons
                            .iter()
                            .filter_map(CancellationReason::code)
                            .collect();
                        if codes.contains(&"ValidationError") {
                            return Err(StoreError::Rejected {
                                operation: "TransactWriteItems",
                                message: format!("transaction cancelled: {codes:?}"),
                            }
                            .into());
                        }
                        // TransactionConflict (another transaction on the
                        // head), ThrottlingError: try again, from the head as
                        // it is now when the caller takes any.
                        tracing::debug!(?codes, attempt, "append: cancelled, trying again");
                        if append.expected == ExpectedSequence::Any {
                            at = self.head(&append.stream_id).await?;
                        }
                    }
                }
                // The same token was used with other parameters: another
                // call of this request, answered by its record.
                Err(Failed::Mismatch(_)) if append.request_id.is_some() => {
                    return self.answered(&request).await;
                }
                Err(Failed::Mismatch(err) | Failed::Permanent(err)) => return Err(err.into()),
                // Unknown outcome: the same transaction again, under the same
                // token, is answered from the first if it took effect.
                Err(Failed::Unknown(err)) if attempt < MAX_ATTEMPTS => {
                    tracing::warn!(error = %err, attempt, "append: the outcome is unknown, trying again");
                    uncertain = Some(at);
                }
                Err(Failed::Unknown(err)) => return Err(err.into()),
            }
            if attempt >= MAX_ATTEMPTS {
                return Err(AppendError::Contention { attempts: attempt });
            }
            tokio::time::sleep(pause(attempt)).await;
        }
    }

    /// Whether the stream holds these very events right after `at` (an
    /// earlier try of this call took effect).
    async fn stored_at(
        &self,
        stream_id: &str,
        at: u64,
        events: &[Checked],
    ) -> Result<bool, StoreError> {
        let limit = i32::try_from(events.len()).unwrap_or(i32::MAX);
        let stored = self.read(stream_id, at, limit).await?;
        Ok(stored.len() == events.len()
            && stored
                .iter()
                .zip(events)
                .all(|(stored, event)| stored.event_id == event.event_id))
    }

    /// The stream's head: the sequence of its last event (0: none).
    pub async fn head(&self, stream_id: &str) -> Result<u64, StoreError> {
        self.requests.fetch_add(1, Ordering::Relaxed);
        let output = self
            .client
            .get_item()
            .table_name(&self.table)
            .set_key(Some(key(format!("STREAM#{stream_id}"), "HEAD".to_owned())))
            .consistent_read(true)
            .send()
            .await
            .map_err(|err| request_error("GetItem", &err))?;
        Ok(output
            .item
            .as_ref()
            .and_then(|item| number(item, "sequence"))
            .unwrap_or(0))
    }

    /// The stream's events after `after`, in order, at most `limit` (one
    /// strongly consistent `Query`).
    pub async fn read(
        &self,
        stream_id: &str,
        after: u64,
        limit: i32,
    ) -> Result<Vec<StoredEvent>, StoreError> {
        self.requests.fetch_add(1, Ordering::Relaxed);
        let output = self
            .client
            .query()
            .table_name(&self.table)
            .key_condition_expression("pk = :pk AND sk > :after")
            .expression_attribute_values(":pk", AttributeValue::S(format!("STREAM#{stream_id}")))
            .expression_attribute_values(":after", AttributeValue::S(event_sk(after)))
            .consistent_read(true)
            .limit(limit.max(1))
            .send()
            .await
            .map_err(|err| request_error("Query", &err))?;
        output
            .items
            .unwrap_or_default()
            .iter()
            .filter(|item| text(item, "sk").is_some_and(|sk| sk.starts_with("EVENT#")))
            .map(|item| {
                Ok(StoredEvent {
                    sequence: number(item, "sequence")
                        .ok_or_else(|| corrupt(stream_id, "sequence"))?,
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
            })
            .collect()
    }

    /// One page of the store's streams (their heads), from a `Scan`: the
    /// stream ids and their heads, and where the next page starts (the
    /// table's own cursor; `None`: this was the last).
    pub async fn streams(
        &self,
        after: Option<Item>,
    ) -> Result<(Vec<(String, u64)>, Option<Item>), StoreError> {
        self.requests.fetch_add(1, Ordering::Relaxed);
        let start = after;
        let output = self
            .client
            .scan()
            .table_name(&self.table)
            .filter_expression("sk = :head")
            .expression_attribute_values(":head", AttributeValue::S("HEAD".to_owned()))
            .consistent_read(true)
            .set_exclusive_start_key(start)
            .send()
            .await
            .map_err(|err| request_error("Scan", &err))?;
        let streams = output
            .items
            .unwrap_or_default()
            .iter()
            .filter_map(|item| {
                let stream = text(item, "pk")?.strip_prefix("STREAM#")?;
                Some((stream.to_owned(), number(item, "sequence").unwrap_or(0)))
            })
            .collect();
        // The whole key: a page may end on any item of a partition.
        let next = output.last_evaluated_key.filter(|last| !last.is_empty());
        Ok((streams, next))
    }

    /// The transaction of one try, with the stream at `at`.
    fn items(
        &self,
        append: &Append,
        events: &[Checked],
        at: u64,
        now: u64,
    ) -> Result<Vec<TransactWriteItem>, AppendError> {
        let stream = format!("STREAM#{}", append.stream_id);
        let last = at + events.len() as u64;
        // Set by the Lambda runtime for each invocation of a function that
        // appends (and by X-Ray's SDKs elsewhere).
        let trace = std::env::var("_X_AMZN_TRACE_ID")
            .ok()
            .filter(|trace| crate::dispatcher::valid_trace_header(trace));
        let build = |err| AppendError::Store(build_error("TransactWriteItems", err));
        let head = Update::builder()
            .table_name(&self.table)
            .set_key(Some(key(stream.clone(), "HEAD".to_owned())))
            .update_expression("SET #sequence = :last")
            .condition_expression(if at == 0 {
                "attribute_not_exists(#sequence)"
            } else {
                "#sequence = :at"
            })
            .expression_attribute_names("#sequence", "sequence")
            .set_expression_attribute_values(Some(
                [(":last".to_owned(), number_value(last))]
                    .into_iter()
                    .chain((at > 0).then(|| (":at".to_owned(), number_value(at))))
                    .collect(),
            ))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .build()
            .map_err(build)?;
        let mut items = vec![TransactWriteItem::builder().update(head).build()];
        for (offset, event) in events.iter().enumerate() {
            let sequence = at + 1 + offset as u64;
            let mut item = key(stream.clone(), event_sk(sequence));
            item.insert(
                "eventId".to_owned(),
                AttributeValue::S(event.event_id.clone()),
            );
            item.insert(
                "type".to_owned(),
                AttributeValue::S(event.event_type.clone()),
            );
            item.insert("sequence".to_owned(), number_value(sequence));
            item.insert(
                "body".to_owned(),
                AttributeValue::S(event.body(&append.stream_id, sequence)),
            );
            item.insert("appendedAt".to_owned(), number_value(now));
            if let Some(trace) = &trace {
                // The caller's X-Ray trace, for the dispatcher to send on as
                // the message's AWSTraceHeader.
                item.insert("traceHeader".to_owned(), AttributeValue::S(trace.clone()));
            }
            items.push(self.put_new(item).map_err(build)?);
        }
        if let Some(request_id) = &append.request_id {
            let mut item = key(format!("REQUEST#{request_id}"), "REQUEST".to_owned());
            item.insert(
                "streamId".to_owned(),
                AttributeValue::S(append.stream_id.clone()),
            );
            item.insert("sequence".to_owned(), number_value(last));
            item.insert(
                "eventId".to_owned(),
                AttributeValue::S(
                    events
                        .last()
                        .map(|event| event.event_id.clone())
                        .unwrap_or_default(),
                ),
            );
            item.insert("firstSequence".to_owned(), number_value(at + 1));
            item.insert(
                "expiresAt".to_owned(),
                number_value(now.saturating_add(REQUEST_TTL_SECONDS)),
            );
            items.push(self.put_new(item).map_err(build)?);
        }
        items.extend(append.writes.iter().cloned());
        Ok(items)
    }

    fn put_new(
        &self,
        item: Item,
    ) -> Result<TransactWriteItem, aws_sdk_dynamodb::error::BuildError> {
        let put = Put::builder()
            .table_name(&self.table)
            .set_item(Some(item))
            .condition_expression("attribute_not_exists(pk)")
            .build()?;
        Ok(TransactWriteItem::builder().put(put).build())
    }

    /// Sends one transaction.
    async fn transact(&self, items: Vec<TransactWriteItem>, token: &str) -> Result<(), Failed> {
        self.requests.fetch_add(1, Ordering::Relaxed);
        let result = self
            .client
            .transact_write_items()
            .set_transact_items(Some(items))
            .client_request_token(token)
            .send()
            .await;
        let Err(err) = result else {
            return Ok(());
        };
        match err.as_service_error() {
            Some(TransactWriteItemsError::TransactionCanceledException(cancelled)) => Err(
                Failed::Cancelled(cancelled.cancellation_reasons.clone().unwrap_or_default()),
            ),
            Some(TransactWriteItemsError::IdempotentParameterMismatchException(_)) => {
                Err(Failed::Mismatch(request_error("TransactWriteItems", &err)))
            }
            // Still running under this token: its outcome is unknown.
            Some(TransactWriteItemsError::TransactionInProgressException(_)) => {
                Err(Failed::Unknown(request_error("TransactWriteItems", &err)))
            }
            Some(other) => {
                let error = service_error("TransactWriteItems", other);
                let permanent = matches!(error, StoreError::Rejected { .. })
                    || other.code().is_some_and(|code| PERMANENT.contains(&code));
                Err(if permanent {
                    Failed::Permanent(error)
                } else {
                    Failed::Unknown(error)
                })
            }
            // No answer (a timeout, a connection lost): unknown.
            None => Err(Failed::Unknown(request_error("TransactWriteItems", &err))),
        }
    }

    /// The first answer to a request id seen before.
    async fn answered(&self, request_id: &str) -> Result<Appended, AppendError> {
        self.requests.fetch_add(1, Ordering::Relaxed);
        let output = self
            .client
            .get_item()
            .table_name(&self.table)
            .set_key(Some(key(
                format!("REQUEST#{request_id}"),
                "REQUEST".to_owned(),
            )))
            .consistent_read(true)
            .send()
            .await
            .map_err(|err| request_error("GetItem", &err))?;
        let item = output.item.unwrap_or_default();
        let missing = |field| StoreError::Corrupt {
            key: format!("REQUEST#{request_id}"),
            message: format!("the request record has no readable {field}"),
        };
        let sequence = number(&item, "sequence").ok_or_else(|| missing("sequence"))?;
        Ok(Appended {
            stream_id: text(&item, "streamId")
                .ok_or_else(|| missing("streamId"))?
                .to_owned(),
            sequence,
            event_id: text(&item, "eventId")
                .ok_or_else(|| missing("eventId"))?
                .to_owned(),
            duplicate_request: true,
            first_sequence: number(&item, "firstSequence").unwrap_or(sequence),
        })
    }
}

fn key(pk: String, sk: String) -> Item {
    HashMap::from([
        ("pk".to_owned(), AttributeValue::S(pk)),
        ("sk".to_owned(), AttributeValue::S(sk)),
    ])
}

fn event_sk(sequence: u64) -> String {
    format!("EVENT#{sequence:020}")
}

fn number_value(number: u64) -> AttributeValue {
    AttributeValue::N(number.to_string())
}

fn number(item: &Item, name: &str) -> Option<u64> {
    match item.get(name) {
        Some(AttributeValue::N(number)) => number.parse().ok(),
        _ => None,
    }
}

fn text<'a>(item: &'a Item, name: &str) -> Option<&'a str> {
    match item.get(name) {
        Some(AttributeValue::S(text)) => Some(text),
        _ => None,
    }
}

fn corrupt(stream_id: &str, field: &str) -> StoreError {
    StoreError::Corrupt {
        key: format!("STREAM#{stream_id}"),
        message: format!("an event item has no readable {field}"),
    }
}

/// The transaction's idempotency token, 32 hex digits: the same for the
/// same request, head, events, caller's writes and time (so that this call's
/// resend of a transaction whose outcome it does not know is answered from the
/// first), another for another call (whose transaction DynamoDB would
/// otherwise refuse as a token reused with other parameters; the request
/// record answers it).
fn token(
    request: &str,
    at: u64,
    events: &[Checked],
    writes: &[TransactWriteItem],
    now: u64,
) -> String {
    let half = |seed: u64| {
        let mut hasher = Fnv(seed);
        request.hash(&mut hasher);
        at.hash(&mut hasher);
        now.hash(&mut hasher);
        for event in events {
            event.event_id.hash(&mut hasher);
            event.event_type.hash(&mut hasher);
            event.data.to_string().hash(&mut hasher);
        }
        format!("{writes:?}").hash(&mut hasher);
        hasher.finish()
    };
    format!(
        "{:016x}{:016x}",
        half(0xcbf2_9ce4_8422_2325),
        half(0x8422_2325_cbf2_9ce4)
    )
}

/// FNV-1a: a stable hash (the standard library's may change between
/// releases, and a token must not).
struct Fnv(u64);

impl Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for byte in bytes {
            self.0 ^= u64::from(*byte);
            self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
        }
    }
}

/// The pause before try `attempt + 1`: random, up to 5 ms more per try,
/// at most 100 ms.
fn pause(attempt: u32) -> Duration {
    use std::hash::BuildHasher;
    let ceiling = u64::from(attempt.saturating_mul(5)).clamp(5, 100);
    let random = std::collections::hash_map::RandomState::new().hash_one(attempt);
    Duration::from_millis(1 + random % ceiling)
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_is_stable_per_call_and_head_and_fits_dynamodb() {
        let event = |id: &str| Checked {
            event_id: id.to_owned(),
            event_type: "T".to_owned(),
            data: serde_json::json!({}),
            sequenced: true,
            version: 1,
        };
        let one = [event("e-1")];
        let token = |request, at, events: &[Checked], now| token(request, at, events, &[], now);
        let mut other_data = event("e-1");
        other_data.data = serde_json::json!({"x": 1});
        assert_ne!(token("r-1", 4, &one, 9), token("r-1", 4, &[other_data], 9));
        assert_eq!(token("r-1", 4, &one, 9), token("r-1", 4, &one, 9));
        assert_ne!(token("r-1", 4, &one, 9), token("r-1", 5, &one, 9));
        assert_ne!(token("r-1", 4, &one, 9), token("r-2", 4, &one, 9));
        assert_ne!(
            token("r-1", 4, &one, 9),
            token("r-1", 4, &[event("e-2")], 9)
        );
        assert_ne!(token("r-1", 4, &one, 9), token("r-1", 4, &one, 10));
        assert_eq!(token("r-1", 4, &one, 9).len(), 32);
    }

    #[test]
    fn pauses_grow_and_stay_bounded() {
        assert!(pause(1) <= Duration::from_millis(5));
        assert!(pause(MAX_ATTEMPTS) <= Duration::from_millis(100));
        assert!((1..=MAX_ATTEMPTS).map(pause).sum::<Duration>() < Duration::from_secs(5));
    }
}
