//! The event store's items (docs/event-store.md) as DynamoDB attributes: keys,
//! the event and request items, the conditional puts of one try, and the
//! transaction's idempotency token.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};

use aws_sdk_dynamodb::types::{
    AttributeValue, ConditionCheck, Put, ReturnValuesOnConditionCheckFailure, TransactWriteItem,
};

use super::check::Checked;
use super::kind::KIND;
use super::store::REQUEST_TTL_SECONDS;
use crate::entity::Item;
use crate::table::StoreError;
use crate::table::build_error;

/// The partition of a stream's events.
pub(super) fn stream_pk(stream_id: &str) -> String {
    format!("STREAM#{stream_id}")
}

/// The sort key of the event at `sequence`: 20 digits, so that the table's
/// order is the stream's.
pub(super) fn event_sk(sequence: u64) -> String {
    format!("EVENT#{sequence:020}")
}

pub(super) fn key(pk: String, sk: String) -> Item {
    HashMap::from([
        ("pk".to_owned(), AttributeValue::S(pk)),
        ("sk".to_owned(), AttributeValue::S(sk)),
    ])
}

pub(super) fn request_key(request_id: &str) -> Item {
    key(format!("REQUEST#{request_id}"), "REQUEST".to_owned())
}

pub(super) fn number_value(number: u64) -> AttributeValue {
    AttributeValue::N(number.to_string())
}

pub(super) fn number(item: &Item, name: &str) -> Option<u64> {
    match item.get(name) {
        Some(AttributeValue::N(number)) => number.parse().ok(),
        _ => None,
    }
}

pub(super) fn text<'a>(item: &'a Item, name: &str) -> Option<&'a str> {
    match item.get(name) {
        Some(AttributeValue::S(text)) => Some(text),
        _ => None,
    }
}

/// The event item at `sequence`, exactly as the dispatcher reads it.
pub(super) fn event_item(
    stream_id: &str,
    event: &Checked,
    sequence: u64,
    now: u64,
    trace: Option<&str>,
) -> Item {
    let mut item = key(stream_pk(stream_id), event_sk(sequence));
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
        AttributeValue::S(event.body(stream_id, sequence)),
    );
    item.insert("appendedAt".to_owned(), number_value(now));
    if let Some(kind) = &event.kind {
        // What the stream's next append checks it against (a stream is one
        // kind's).
        item.insert(KIND.to_owned(), AttributeValue::S(kind.clone()));
    }
    if let Some(trace) = trace {
        // The caller's X-Ray trace, for the dispatcher to send on as the
        // message's AWSTraceHeader.
        item.insert(
            "traceHeader".to_owned(),
            AttributeValue::S(trace.to_owned()),
        );
    }
    item
}

/// The request record: the answer to give a second call of `request_id`.
pub(super) fn request_item(
    request_id: &str,
    stream_id: &str,
    first: u64,
    last: u64,
    event_id: &str,
    now: u64,
) -> Item {
    let mut item = request_key(request_id);
    item.insert(
        "streamId".to_owned(),
        AttributeValue::S(stream_id.to_owned()),
    );
    item.insert("sequence".to_owned(), number_value(last));
    item.insert("eventId".to_owned(), AttributeValue::S(event_id.to_owned()));
    item.insert("firstSequence".to_owned(), number_value(first));
    item.insert(
        "expiresAt".to_owned(),
        number_value(now.saturating_add(REQUEST_TTL_SECONDS)),
    );
    item
}

/// A put on the condition that the item does not exist; a failed condition
/// answers with the item found (`ALL_OLD`).
pub(super) fn put_new(table: &str, item: Item) -> Result<TransactWriteItem, StoreError> {
    let put = Put::builder()
        .table_name(table)
        .set_item(Some(item))
        .condition_expression("attribute_not_exists(pk)")
        .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
        .build()
        .map_err(|err| build_error("TransactWriteItems", err))?;
    Ok(TransactWriteItem::builder().put(put).build())
}

/// The check that the event at `sequence` exists (the stream is at least
/// there), in a transaction, and, given the append's `kind`, that it is of
/// that kind (or of an earlier release, which did not record one); a
/// failed check answers with the event found (`ALL_OLD`).
pub(super) fn event_exists(
    table: &str,
    stream_id: &str,
    sequence: u64,
    kind: Option<&str>,
) -> Result<TransactWriteItem, StoreError> {
    let check = ConditionCheck::builder()
        .table_name(table)
        .set_key(Some(key(stream_pk(stream_id), event_sk(sequence))))
        .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld);
    let check = match kind {
        None => check.condition_expression("attribute_exists(pk)"),
        Some(kind) => check
            .condition_expression(
                "attribute_exists(pk) AND (attribute_not_exists(#kind) OR #kind = :kind)",
            )
            .expression_attribute_names("#kind", KIND)
            .expression_attribute_values(":kind", AttributeValue::S(kind.to_owned())),
    }
    .build()
    .map_err(|err| build_error("TransactWriteItems", err))?;
    Ok(TransactWriteItem::builder().condition_check(check).build())
}

/// What one try of a transaction covers, for its token.
pub(super) struct TokenOf<'a> {
    pub(super) request: &'a str,
    pub(super) at: u64,
    pub(super) checked: bool,
    pub(super) events: &'a [Checked],
    pub(super) writes: &'a [TransactWriteItem],
    /// The checks that the subjects' keys still exist.
    pub(super) keys: &'a [TransactWriteItem],
    pub(super) now: u64,
}

/// The transaction's idempotency token, 32 hex digits: the same for the
/// same request, sequence, check, events, caller's writes and time (so that
/// this call's resend of a transaction whose outcome it does not know is
/// answered from the first), another for another call (whose transaction
/// DynamoDB would otherwise refuse as a token reused with other parameters;
/// the request record answers it).
pub(super) fn token(of: &TokenOf<'_>) -> String {
    let half = |seed: u64| {
        let mut hasher = Fnv(seed);
        of.request.hash(&mut hasher);
        of.at.hash(&mut hasher);
        of.checked.hash(&mut hasher);
        of.now.hash(&mut hasher);
        for event in of.events {
            event.event_id.hash(&mut hasher);
            event.event_type.hash(&mut hasher);
            event.data.to_string().hash(&mut hasher);
        }
        format!("{:?}", of.writes).hash(&mut hasher);
        if !of.keys.is_empty() {
            format!("{:?}", of.keys).hash(&mut hasher);
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_is_stable_per_call_and_sequence_and_fits_dynamodb() {
        let event = |id: &str| Checked {
            event_id: id.to_owned(),
            event_type: "T".to_owned(),
            data: serde_json::json!({}),
            sequenced: true,
            version: 1,
            kind: None,
            opens: true,
        };
        let one = [event("e-1")];
        let token = |request, at, events: &[Checked], now| {
            token(&TokenOf {
                request,
                at,
                checked: false,
                events,
                writes: &[],
                keys: &[],
                now,
            })
        };
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
        let checked = super::token(&TokenOf {
            request: "r-1",
            at: 4,
            checked: true,
            events: &one,
            writes: &[],
            keys: &[],
            now: 9,
        });
        assert_ne!(token("r-1", 4, &one, 9), checked);
    }
}
