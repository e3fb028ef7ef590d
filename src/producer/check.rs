//! An append checked before anything is written: the append as a whole
//! (a stream, at least one event, what a transaction holds), then each event
//! rendered as the message body the projector will read and read by the same
//! [`Domain`].

use serde::Serialize;
use serde_json::Value;

use super::kind::{kind_of, same_kind};
use super::{Append, AppendError, ExpectedSequence, MAX_BODY, MAX_BYTES, MAX_ITEMS};
use crate::domain::Domain;
use crate::envelope::InvalidMessage;
use crate::sqs::sqs_body_char;

/// The message body (docs/behaviour.md, The message), its fields in that order.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Body<'a> {
    event_id: &'a str,
    #[serde(rename = "type")]
    event_type: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    aggregate_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    sequence: Option<u64>,
    /// Absent at version 1: a version-1 domain's bodies are as they were
    /// before versions.
    #[serde(skip_serializing_if = "Option::is_none")]
    version: Option<u16>,
    data: &'a Value,
}

/// An event checked: its id and whether its body carries the sequence.
#[derive(Debug, Clone)]
pub(crate) struct Checked {
    pub(crate) event_id: String,
    pub(crate) event_type: String,
    pub(crate) data: Value,
    /// Sequenced (or a snapshot): the body carries `aggregateId` and
    /// `sequence`; a deduplicated effect's carries neither.
    pub(crate) sequenced: bool,
    /// The type's current version: what `data` is, and what the body says.
    pub(crate) version: u16,
    /// The kind it projects onto (see `kind.rs`); `None` for a type the
    /// domain ignores.
    pub(crate) kind: Option<String>,
    /// Whether it can open its stream: its handler makes its entity from
    /// nothing (a creation, a snapshot), or it has no entity (a counter's,
    /// an ignored type). An update cannot: with no entity every consumer
    /// answers not created, for ever.
    pub(crate) opens: bool,
}

impl Checked {
    /// The body as it will be stored and sent, at `sequence`.
    pub(crate) fn body(&self, stream_id: &str, sequence: u64) -> String {
        let body = Body {
            event_id: &self.event_id,
            event_type: &self.event_type,
            aggregate_id: self.sequenced.then_some(stream_id),
            sequence: self.sequenced.then_some(sequence),
            version: (self.version > 1).then_some(self.version),
            data: &self.data,
        };
        // A struct of strings, a number and a JSON value always serializes.
        serde_json::to_string(&body).unwrap_or_default()
    }
}

/// Checks every event of an append as the consumer would read it.
pub(crate) fn check(domain: &Domain, append: &Append) -> Result<Vec<Checked>, AppendError> {
    check_append(append)?;
    let mut checked: Vec<Checked> = Vec::with_capacity(append.events.len());
    let mut bytes = 0;
    for index in 0..append.events.len() {
        let event = check_event(domain, append, index, &checked)?;
        let size = event.body(&append.stream_id, u64::MAX >> 1).len();
        if size > MAX_BODY {
            return Err(AppendError::Refused(format!(
                "event {index}: its body is {size} bytes, more than the {MAX_BODY} an SQS message holds"
            )));
        }
        bytes += size;
        checked.push(event);
    }
    if bytes > MAX_BYTES {
        return Err(AppendError::Refused(format!(
            "{bytes} bytes of bodies: a transaction holds about {MAX_BYTES}"
        )));
    }
    one_kind(append, &checked)?;
    Ok(checked)
}

/// The bodies' sizes again, once their personal values are sealed
/// (a sealed value is longer than its plain one).
pub(crate) fn sealed_sizes(append: &Append, events: &[Checked]) -> Result<(), AppendError> {
    let mut bytes = 0;
    for (index, event) in events.iter().enumerate() {
        let size = event.body(&append.stream_id, u64::MAX >> 1).len();
        if size > MAX_BODY {
            return Err(AppendError::Refused(format!(
                "event {index}: its body is {size} bytes once its personal data is sealed, more than the {MAX_BODY} an SQS message holds"
            )));
        }
        bytes += size;
    }
    if bytes > MAX_BYTES {
        return Err(AppendError::Refused(format!(
            "{bytes} bytes of bodies once sealed: a transaction holds about {MAX_BYTES}"
        )));
    }
    Ok(())
}

/// The kind an append's events project onto (the first that projects onto
/// one), and the type of that event.
pub(crate) fn append_kind(events: &[Checked]) -> Option<(&str, &str)> {
    events
        .iter()
        .find_map(|event| Some((event.kind.as_deref()?, event.event_type.as_str())))
}

/// Every event of an append projects onto one kind: a stream is one kind's.
fn one_kind(append: &Append, events: &[Checked]) -> Result<(), AppendError> {
    let Some((first, _)) = append_kind(events) else {
        return Ok(());
    };
    for event in events {
        same_kind(
            &append.stream_id,
            &event.event_type,
            event.kind.as_deref(),
            Some(first),
        )?;
    }
    Ok(())
}

/// The append as a whole: a stream, events, no more items than a
/// transaction holds, sequences that fit.
fn check_append(append: &Append) -> Result<(), AppendError> {
    if append.stream_id.is_empty() {
        return Err(AppendError::Invalid {
            index: 0,
            reason: invalid("stream", "must not be empty".to_owned()),
        });
    }
    if append.events.is_empty() {
        return Err(AppendError::Refused(
            "an append needs at least one event".to_owned(),
        ));
    }
    // An exact sequence past 0 is checked in the transaction: one item more.
    let check = matches!(append.expected, ExpectedSequence::Exact(at) if at > 0);
    let items = append.events.len()
        + usize::from(append.request_id.is_some())
        + append.writes.len()
        + usize::from(check);
    if items > MAX_ITEMS {
        return Err(AppendError::Refused(format!(
            "{items} items ({} events, the request, {} writes of the caller, the check of the expected sequence): a transaction holds {MAX_ITEMS}",
            append.events.len(),
            append.writes.len()
        )));
    }
    if let ExpectedSequence::Exact(expected) = append.expected
        && expected.saturating_add(append.events.len() as u64) > crate::envelope::MAX_SEQUENCE
    {
        return Err(AppendError::Refused(format!(
            "the stream cannot be at {expected}: sequences end at 2^63-1"
        )));
    }
    Ok(())
}

/// The most characters of a stream id: the envelope's `aggregateId`.
pub(crate) const MAX_STREAM_ID: usize = 256;

/// Why no stream can have `id` as `append` reads it (`None`: one can): it
/// is empty, longer than [`MAX_STREAM_ID`] characters (the envelope's
/// `aggregateId`), or holds a character SQS does not carry. Taken exactly
/// as given: no trimming, no normalising.
pub(crate) fn stream_id_problem(id: &str) -> Option<String> {
    let count = id.chars().take(MAX_STREAM_ID + 1).count();
    if count == 0 || count > MAX_STREAM_ID {
        let got = if count > MAX_STREAM_ID {
            format!("more than {MAX_STREAM_ID}")
        } else {
            count.to_string()
        };
        return Some(format!(
            "must be 1 to {MAX_STREAM_ID} characters, got {got}"
        ));
    }
    id.chars().find(|c| !sqs_body_char(*c)).map(|c| {
        format!(
            "holds U+{:04X}, a character SQS does not carry",
            u32::from(c)
        )
    })
}

fn invalid(field: &str, problem: String) -> InvalidMessage {
    InvalidMessage::Invalid {
        field: field.to_owned(),
        problem,
    }
}

/// Event `index` of the append, read by the domain as the consumer will.
fn check_event(
    domain: &Domain,
    append: &Append,
    index: usize,
    earlier: &[Checked],
) -> Result<Checked, AppendError> {
    let event = &append.events[index];
    let event_id = event.event_id.clone().unwrap_or_else(super::new_event_id);
    let refuse = |reason| AppendError::Invalid { index, reason };
    if earlier.iter().any(|earlier| earlier.event_id == event_id) {
        // The consumer would take the second for a duplicate.
        return Err(refuse(invalid(
            "eventId",
            format!("`{event_id}` is given to two events of this append"),
        )));
    }
    // A personal value that looks sealed, named before the body is read as
    // a consumer reads it (which would try to open it).
    if let Some(reason) = super::sealing::sealed_already(domain, &event.event_type, &event.data) {
        return Err(refuse(reason));
    }
    let mut candidate = Checked {
        event_id,
        event_type: event.event_type.clone(),
        data: event.data.clone(),
        sequenced: true,
        version: domain.version(&event.event_type),
        kind: None,
        opens: true,
    };
    // The body as the consumer will read it: sequenced, unless its type is a
    // deduplicated effect (whose body carries no sequence).
    let parsed = match domain.parse(&candidate.body(&append.stream_id, 1)) {
        Err(InvalidMessage::Invalid { field, .. }) if field == "sequence" => {
            candidate.sequenced = false;
            domain.parse(&candidate.body(&append.stream_id, 1))
        }
        other => other,
    }
    .map_err(refuse)?;
    if parsed.stream() != append.stream_id {
        return Err(refuse(other_stream(&candidate, parsed.stream(), append)));
    }
    sendable(append, &candidate).map_err(refuse)?;
    candidate.kind = kind_of(&parsed);
    candidate.opens = parsed.entity_key().is_none()
        || matches!(parsed.decide(&mut None), Ok(crate::Decision::Applied));
    Ok(candidate)
}

/// The refusal of an append whose first event would open `stream` (it has
/// no event yet) but cannot: an update with no entity before it. A store
/// switched on over a projection that producers fed directly starts so:
/// the consumers hold the stream at some sequence and would take the
/// store's 1, 2, ... for duplicates of theirs.
pub(crate) fn cannot_open(stream: &str, event: &Checked) -> AppendError {
    AppendError::Invalid {
        index: 0,
        reason: invalid(
            "type",
            format!(
                "{} cannot be the first event of the stream `{stream}`, which holds no event: its handler does not create the entity from nothing, so every consumer would wait for its creation for ever. If the consumers were fed directly before this store, import each stream's history first (docs/event-store.md, Switching the producer on over a projection fed directly)",
                event.event_type
            ),
        ),
    }
}

/// A deduplicated effect naming another stream, by the field of its data
/// that names it.
fn other_stream(candidate: &Checked, named: &str, append: &Append) -> InvalidMessage {
    let field = match &candidate.data {
        Value::Object(fields) => fields
            .iter()
            .find(|(_, value)| value.as_str() == Some(named))
            .map(|(name, _)| format!("data.{name}")),
        _ => None,
    }
    .unwrap_or_else(|| "data".to_owned());
    invalid(
        &field,
        format!("names the stream `{named}`, not `{}`", append.stream_id),
    )
}

/// SQS refuses U+FFFE and U+FFFF (JSON does not escape them): an event
/// holding one could be stored and never sent.
fn sendable(append: &Append, candidate: &Checked) -> Result<(), InvalidMessage> {
    let unsendable = |text: &str| text.chars().find(|c| !sqs_body_char(*c));
    let bad = unsendable(&append.stream_id)
        .map(|c| ("stream".to_owned(), c))
        .or_else(|| unsendable(&candidate.event_id).map(|c| ("eventId".to_owned(), c)))
        .or_else(|| unsendable_field(&candidate.data, "data"));
    match bad {
        Some((field, c)) => Err(invalid(
            &field,
            format!(
                "holds U+{:04X}, a character SQS does not carry",
                u32::from(c)
            ),
        )),
        None => Ok(()),
    }
}

/// The first string under `value` (its keys included) holding a character
/// SQS does not carry, by its path, and that character.
fn unsendable_field(value: &Value, path: &str) -> Option<(String, char)> {
    match value {
        Value::String(text) => text
            .chars()
            .find(|c| !sqs_body_char(*c))
            .map(|c| (path.to_owned(), c)),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .find_map(|(index, item)| unsendable_field(item, &format!("{path}[{index}]"))),
        Value::Object(fields) => fields.iter().find_map(|(name, item)| {
            let path = format!("{path}.{name}");
            name.chars()
                .find(|c| !sqs_body_char(*c))
                .map(|c| (path.clone(), c))
                .or_else(|| unsendable_field(item, &path))
        }),
        _ => None,
    }
}
