//! Reading one SQS record: its identity, its stream and its typed event.
//!
//! Each record is read on its own; a record that cannot be read yields an
//! [`InvalidMessage`] naming what was wrong, and nothing else.

use aws_lambda_events::event::sqs::SqsMessage;
use serde::de::value::MapDeserializer;
use serde_json::{Map, Value};

use crate::domain::{Domain, Events};
use crate::entity::EntityKey;
use crate::handling::{Decision, Deduplicated, HandlerFault, Handling, How};
use crate::reason::{Refusal, key_segment, path_from, without_value};
use crate::versions::{self, Table};

/// Largest `sequence` the contract allows: 2^63-1.
pub const MAX_SEQUENCE: u64 = i64::MAX as u64;

/// Every string in `data` holds 0 to 1,024 characters (the types may
/// declare less): an entity, a parked event and a conflict
/// record stay far below DynamoDB's 400 KB item.
pub const MAX_DATA_STRING: usize = 1024;

/// Why a message body was not accepted. These never heal by retrying.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidMessage {
    /// The SQS record has no body.
    #[error("the record has no body")]
    NoBody,
    /// The body is not valid JSON (with serde_json's error).
    #[error("the body is not JSON: {0}")]
    NotJson(String),
    /// The body is JSON but not an object.
    #[error("the body is not a JSON object")]
    NotAnObject,
    /// A required field is absent or null (named by its path: `type`,
    /// `data.sku`).
    #[error("missing field `{0}`")]
    Missing(String),
    /// A field is present but not as the contract or the event type declares
    /// it.
    #[error("field `{field}` {problem}")]
    Invalid {
        /// The field, by its path (`sequence`, `data.quantity`).
        field: String,
        /// What is wrong with it, the rest of the message after the field's
        /// name (`must be a string, got a number`).
        problem: String,
    },
    /// The event's handling writes an entity kind or a counter the domain
    /// does not register (what to add to the domain): the domain is to be
    /// fixed, and the message retried.
    #[error("{0}")]
    Undeclared(String),
    /// The `type` names none of the domain's event types (its first 64
    /// characters).
    #[error("unknown event type `{0}`")]
    UnknownType(String),
    /// A string anywhere in `data` (a field the type does not declare
    /// included: it is kept in the body, parked or recorded) over the limit.
    #[error("field `{field}` must be 0 to {max} characters, got more than {max}")]
    TooLong {
        /// The string, by its path (`data.lines[2].label`).
        field: String,
        /// The limit, in characters.
        max: usize,
    },
}

fn invalid(field: &str, problem: impl Into<String>) -> InvalidMessage {
    InvalidMessage::Invalid {
        field: field.to_owned(),
        problem: problem.into(),
    }
}

/// One record of a batch, read.
#[derive(Debug)]
pub struct Record {
    /// The SQS message id.
    pub message_id: String,
    /// The stream the record belongs to: the event's aggregate id (a
    /// deduplicated effect's counter id), or the `MessageGroupId` when the body could not be
    /// read (the message id when there is none either).
    pub stream: String,
    /// `ApproximateReceiveCount`, when SQS gave it.
    pub receive_count: Option<u32>,
    /// The root of the producer's X-Ray trace (`AWSTraceHeader`'s `Root=`),
    /// when SQS carried one: every log line about the message names it.
    pub trace_id: Option<String>,
    /// The body as received (kept to park the event).
    pub body: String,
    /// The event read from the body, or why it could not be read.
    pub event: Result<Event, InvalidMessage>,
}

impl Record {
    /// Reads a record. `None` when it has no message id: such a record cannot
    /// be reported failed on its own.
    pub fn read(message: &SqsMessage, domain: &Domain) -> Option<Record> {
        let message_id = message
            .message_id
            .as_deref()
            .filter(|id| !id.is_empty())?
            .to_owned();
        let event = match message.body.as_deref() {
            None => Err(InvalidMessage::NoBody),
            Some(body) => domain.parse(body),
        };
        let stream = match &event {
            // An ignored event without an aggregate id keeps its group.
            Ok(event) if !event.stream().is_empty() => event.stream().to_owned(),
            _ => message
                .attributes
                .get("MessageGroupId")
                .filter(|group| !group.is_empty())
                .cloned()
                .unwrap_or_else(|| message_id.clone()),
        };
        let receive_count = message
            .attributes
            .get("ApproximateReceiveCount")
            .and_then(|count| count.parse().ok());
        let trace_id = message
            .attributes
            .get("AWSTraceHeader")
            .and_then(|header| trace_root(header))
            .map(str::to_owned);
        Some(Record {
            message_id,
            stream,
            receive_count,
            trace_id,
            body: message.body.clone().unwrap_or_default(),
            event,
        })
    }
}

/// The `Root=` of an X-Ray trace header (`Root=1-...;Parent=...;Sampled=1`),
/// when it looks like one (at most 64 characters of `0-9 a-f -`).
fn trace_root(header: &str) -> Option<&str> {
    header
        .split(';')
        .find_map(|part| part.trim().strip_prefix("Root="))
        .filter(|root| {
            !root.is_empty()
                && root.len() <= 64
                && root.chars().all(|c| c.is_ascii_hexdigit() || c == '-')
        })
}

/// One event, as read from a message body: its envelope's fields and how
/// its domain handles it.
pub struct Event {
    /// A deduplicated effect's `eventId` (a sequenced event's is in its
    /// handling).
    event_id: String,
    event_type: &'static str,
    handling: How,
}

impl Event {
    /// The envelope's `type`.
    pub fn type_name(&self) -> &'static str {
        self.event_type
    }

    /// The envelope's `eventId`.
    pub fn event_id(&self) -> &str {
        match &self.handling {
            How::Sequenced(apply) | How::Snapshot(apply) => apply.event_id(),
            How::Deduplicated(_) | How::Ignored(_) => &self.event_id,
        }
    }

    /// The ordering key: the aggregate id, or a deduplicated effect's
    /// counter id.
    pub fn stream(&self) -> &str {
        match &self.handling {
            How::Sequenced(apply) | How::Snapshot(apply) => apply.aggregate_id(),
            How::Deduplicated(effect) => &effect.id,
            How::Ignored(ignored) => ignored.aggregate_id.as_deref().unwrap_or_default(),
        }
    }

    /// The event's sequence; `None` for a deduplicated effect.
    pub fn sequence(&self) -> Option<u64> {
        match &self.handling {
            How::Sequenced(apply) | How::Snapshot(apply) => Some(apply.sequence()),
            How::Deduplicated(_) => None,
            How::Ignored(ignored) => ignored.sequence,
        }
    }

    /// The kind of entity the event is projected onto; `None` for a
    /// deduplicated effect.
    pub fn kind(&self) -> Option<&'static crate::entity::Kind> {
        match &self.handling {
            How::Sequenced(apply) | How::Snapshot(apply) => Some(apply.kind()),
            How::Deduplicated(_) | How::Ignored(_) => None,
        }
    }

    /// The entity the event is projected onto; `None` for a deduplicated
    /// effect, which the store applies with its deduplication record.
    pub fn entity_key(&self) -> Option<EntityKey> {
        match &self.handling {
            How::Sequenced(apply) | How::Snapshot(apply) => {
                Some(EntityKey::new(apply.kind(), apply.aggregate_id()))
            }
            How::Deduplicated(_) | How::Ignored(_) => None,
        }
    }

    /// The deduplicated effect, for an event handled so.
    pub fn deduplicated(&self) -> Option<&Deduplicated> {
        match &self.handling {
            How::Deduplicated(effect) => Some(effect),
            _ => None,
        }
    }

    /// Whether this consumer ignores it ([`Handling::ignore`]): done,
    /// nothing read or written.
    pub fn is_ignored(&self) -> bool {
        matches!(self.handling, How::Ignored(_))
    }

    /// Whether it is a snapshot (applied only if newer; never parked).
    pub fn is_snapshot(&self) -> bool {
        matches!(self.handling, How::Snapshot(_))
    }

    /// The handler's name, for logs.
    pub fn handler(&self) -> &'static str {
        match &self.handling {
            How::Sequenced(apply) | How::Snapshot(apply) => apply.handler(),
            How::Deduplicated(effect) => effect.handler,
            How::Ignored(_) => "ignored",
        }
    }

    /// Runs the event's handler on the entity slot (`None` while the entity
    /// does not exist), checked (see [`crate::handling`]). A deduplicated
    /// effect has no slot: `NotCreated`, the answer that cannot lose it.
    pub fn decide(
        &self,
        slot: &mut Option<crate::entity::AnyEntity>,
    ) -> Result<Decision, HandlerFault> {
        match &self.handling {
            How::Sequenced(apply) | How::Snapshot(apply) => apply.apply(slot),
            How::Deduplicated(_) => Ok(Decision::NotCreated),
            How::Ignored(_) => Ok(Decision::Duplicate),
        }
    }
}

impl Event {
    /// [`Event::decide`] for a dry run: the handler's answer without the
    /// check and without copying the entity; `None` when it could not run.
    pub(crate) fn decide_unchecked(
        &self,
        slot: &mut Option<crate::entity::AnyEntity>,
    ) -> Option<Decision> {
        match &self.handling {
            How::Sequenced(apply) | How::Snapshot(apply) => apply.apply_unchecked(slot),
            How::Deduplicated(_) => Some(Decision::NotCreated),
            How::Ignored(_) => Some(Decision::Duplicate),
        }
    }
}

impl std::fmt::Debug for Event {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Event")
            .field("type", &self.event_type)
            .field("event_id", &self.event_id)
            .field("stream", &self.stream())
            .field("sequence", &self.sequence())
            .finish()
    }
}

/// Parses and checks one message body: the envelope of the contract's field
/// table, and `data` as the event type declares it (`read`: a domain's
/// [`payload`]), upcast first from the body's `version` to the current one.
pub(crate) fn parse_body(
    read: fn(&Value, &Value) -> Result<Handling, InvalidMessage>,
    types: &'static [&'static str],
    versions: &Table,
    body: &str,
) -> Result<Event, InvalidMessage> {
    let value: Value =
        serde_json::from_str(body).map_err(|err| InvalidMessage::NotJson(err.to_string()))?;
    let Value::Object(mut envelope) = value else {
        return Err(InvalidMessage::NotAnObject);
    };
    string(&envelope, "eventId", 128)?;
    let event_id = take_string(&mut envelope, "eventId");
    let event_type = match envelope.get("type") {
        None | Some(Value::Null) => return Err(missing("type")),
        Some(event_type @ Value::String(_)) => event_type,
        Some(_) => return Err(invalid("type", "must be a string")),
    };
    let data = match envelope.get("data") {
        None | Some(Value::Null) => return Err(missing("data")),
        Some(data @ Value::Object(fields)) => {
            check_strings(fields)?;
            data
        }
        Some(_) => return Err(invalid("data", "must be an object")),
    };
    let type_name = event_type.as_str().unwrap_or_default();
    let plan = match versions.plan(type_name, versions::of_envelope(&envelope)?) {
        // An unknown type is named as such by `read`.
        Err(_) if !types.contains(&type_name) => None,
        plan => plan?,
    };
    // An older version: its `data`, moved out of the envelope (not copied),
    // upcast to the current one and checked again.
    let upcast;
    let (event_type, data) = match plan {
        None => (event_type, data),
        Some(plan) => {
            let original = envelope.remove("data").unwrap_or_default();
            upcast = plan.run(original)?;
            if let Value::Object(fields) = &upcast {
                check_strings(fields)?;
            }
            (envelope.get("type").unwrap_or(&Value::Null), &upcast)
        }
    };
    let Handling(mut handling) = read(event_type, data)?;
    let type_name = event_type.as_str().unwrap_or_default();
    // The name as the events enum has it (read succeeded: it is one of them).
    let event_type = types
        .iter()
        .copied()
        .find(|name| *name == type_name)
        .unwrap_or("?");
    let mut event_id = event_id;
    match &mut handling {
        How::Sequenced(apply) | How::Snapshot(apply) => {
            string(&envelope, "aggregateId", 256)?;
            let sequence = sequence(&envelope)?;
            let aggregate_id = take_string(&mut envelope, "aggregateId");
            apply.bind(std::mem::take(&mut event_id), aggregate_id, sequence);
        }
        How::Deduplicated(_) => {
            if envelope
                .get("sequence")
                .is_some_and(|sequence| !sequence.is_null())
            {
                return Err(invalid(
                    "sequence",
                    format!("must be absent for {event_type}"),
                ));
            }
            if envelope.get("aggregateId").is_some_and(|id| !id.is_null()) {
                string(&envelope, "aggregateId", 256)?;
            }
        }
        How::Ignored(ignored) => {
            // Not this consumer's: its envelope is checked as far as it goes.
            if envelope.get("aggregateId").is_some_and(|id| !id.is_null()) {
                string(&envelope, "aggregateId", 256)?;
                ignored.aggregate_id = Some(take_string(&mut envelope, "aggregateId"));
            }
            if envelope
                .get("sequence")
                .is_some_and(|sequence| !sequence.is_null())
            {
                ignored.sequence = Some(sequence(&envelope)?);
            }
        }
    }
    Ok(Event {
        event_id,
        event_type,
        handling,
    })
}

/// A string of the envelope, moved out of it (checked before).
fn take_string(envelope: &mut Map<String, Value>, field: &str) -> String {
    match envelope.remove(field) {
        Some(Value::String(text)) => text,
        _ => String::new(),
    }
}

/// Reads `data` as the event type's payload, through serde and the limits
/// its types declare; a refusal names the field by its path.
pub(crate) fn payload<E: Events>(
    event_type: &Value,
    data: &Value,
) -> Result<Handling, InvalidMessage> {
    let fields = || {
        MapDeserializer::<_, serde_json::Error>::new(
            [("type", event_type), ("data", data)].into_iter(),
        )
    };
    // The common case pays for no path; a refusal is read again with its
    // path, to name the field.
    let events = E::deserialize(fields()).or_else(|_| {
        serde_path_to_error::deserialize::<_, E>(fields()).map_err(|err| {
            let path = path_from("", err.path());
            let message = err.into_inner().to_string();
            refusal(event_type.as_str().unwrap_or_default(), &path, &message)
        })
    })?;
    Ok(events.handling())
}

/// serde's error at `path` as a reason. Values are not repeated: a string
/// may be personal data, and the reason is logged.
fn refusal(event_type: &str, path: &str, message: &str) -> InvalidMessage {
    if path == "type" {
        return InvalidMessage::UnknownType(event_type.chars().take(64).collect());
    }
    match without_value(message) {
        Refusal::Missing => missing(path),
        Refusal::MissingField(name) => missing(&format!("{path}.{name}")),
        Refusal::Problem(problem) => invalid(path, problem),
    }
}

fn missing(field: &str) -> InvalidMessage {
    InvalidMessage::Missing(field.to_owned())
}

/// A required envelope string of 1 to `max` characters.
fn string<'a>(
    object: &'a Map<String, Value>,
    field: &'static str,
    max: usize,
) -> Result<&'a str, InvalidMessage> {
    bounded_string(object, field, (1, max))
}

/// Every string in `data`, however deep and whether declared or not, holds
/// at most [`MAX_DATA_STRING`] characters; the first one over it is named
/// by its path (`data.notes`, `data.lines[2].label`).
fn check_strings(data: &Map<String, Value>) -> Result<(), InvalidMessage> {
    /// The path, innermost first, to the first string over the limit.
    fn too_long(value: &Value) -> Option<Vec<String>> {
        match value {
            // Bytes bound characters: most strings need no counting.
            Value::String(text) => (text.len() > MAX_DATA_STRING
                && text.chars().take(MAX_DATA_STRING + 1).count() > MAX_DATA_STRING)
                .then(Vec::new),
            Value::Object(object) => object.iter().find_map(|(key, value)| {
                if key.len() > MAX_DATA_STRING
                    && key.chars().take(MAX_DATA_STRING + 1).count() > MAX_DATA_STRING
                {
                    return Some(vec![" (a key in it over the limit)".to_owned()]);
                }
                let mut path = too_long(value)?;
                path.push(key_segment(key));
                Some(path)
            }),
            Value::Array(items) => items.iter().enumerate().find_map(|(index, value)| {
                let mut path = too_long(value)?;
                path.push(format!("[{index}]"));
                Some(path)
            }),
            _ => None,
        }
    }
    for (key, value) in data {
        if key.chars().take(MAX_DATA_STRING + 1).count() > MAX_DATA_STRING {
            // Named without itself: a key is as long, and may hold anything.
            return Err(invalid(
                "data",
                format!("has a key of more than {MAX_DATA_STRING} characters"),
            ));
        }
        if let Some(inner) = too_long(value) {
            let mut field = format!("data{}", key_segment(key));
            for segment in inner.iter().rev() {
                field.push_str(segment);
            }
            return Err(InvalidMessage::TooLong {
                field,
                max: MAX_DATA_STRING,
            });
        }
    }
    Ok(())
}

/// A required string of `min` to `max` characters.
fn bounded_string<'a>(
    object: &'a Map<String, Value>,
    field: &str,
    (min, max): (usize, usize),
) -> Result<&'a str, InvalidMessage> {
    match object.get(field) {
        None | Some(Value::Null) => Err(missing(field)),
        Some(Value::String(text)) => {
            let count = text.chars().take(max + 1).count();
            if count < min || count > max {
                let got = if count > max {
                    format!("more than {max}")
                } else {
                    count.to_string()
                };
                Err(invalid(
                    field,
                    format!("must be {min} to {max} characters, got {got}"),
                ))
            } else {
                Ok(text)
            }
        }
        Some(other) => Err(invalid(
            field,
            format!("must be a string, got {}", kind(other)),
        )),
    }
}

fn sequence(envelope: &Map<String, Value>) -> Result<u64, InvalidMessage> {
    match envelope.get("sequence") {
        None | Some(Value::Null) => Err(missing("sequence")),
        Some(Value::Number(number)) => match number.as_u64() {
            Some(sequence @ 1..=MAX_SEQUENCE) => Ok(sequence),
            _ => Err(invalid(
                "sequence",
                format!("must be an integer from 1 to 2^63-1, got {number}"),
            )),
        },
        Some(other) => Err(invalid(
            "sequence",
            format!("must be an integer, got {}", kind(other)),
        )),
    }
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A key in `data` may be data itself (an email as a map key): a path
    /// names it only when it reads as a field name.
    #[test]
    fn paths_do_not_name_keys_that_are_data() {
        let data = serde_json::json!({
            "notes": { "ada@example.com": "x".repeat(MAX_DATA_STRING + 1) }
        });
        let Value::Object(fields) = data else {
            unreachable!()
        };
        match check_strings(&fields) {
            Err(InvalidMessage::TooLong { field, .. }) => assert_eq!(field, "data.notes.<key>"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_producers_trace_root_is_read_from_aws_trace_header() {
        assert_eq!(
            trace_root(
                "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"
            ),
            Some("1-5759e988-bd862e3fe1be46a994272793")
        );
        assert_eq!(
            trace_root("Parent=53995c3f42cd8ad8;Root=1-abc"),
            Some("1-abc")
        );
        assert_eq!(trace_root("Root=<script>"), None);
        assert_eq!(trace_root("Sampled=1"), None);
    }
}
