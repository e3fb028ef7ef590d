//! One message body read, in phases: the envelope's fields as the
//! contract's field table has them, `data` upcast to the type's current
//! version, `data` read as the event type declares it, and the envelope's
//! remaining fields bound to the event as its handling needs them.

use serde_json::{Map, Value};

use super::sealed::{self, Opening};
use super::{Event, InvalidMessage, MAX_DATA_STRING, MAX_SEQUENCE};
use crate::domain::ReadData;
use crate::handling::{Handling, How, Raw};
use crate::personal::{Declared, is_sealed};
use crate::reason::{invalid, key_segment, missing};
use crate::versions::{self, Table};

/// Parses and checks one message body: the envelope of the contract's field
/// table, and `data` as the event type declares it (`read`: a domain's
/// reading of its events), upcast first from the body's `version` to the
/// current one.
pub(crate) fn parse_body(
    read: ReadData,
    types: &'static [&'static str],
    versions: &Table,
    (personal, opening): (&Declared, Opening<'_>),
    erasure: &dyn Fn(crate::personal::Erasure) -> Result<How, InvalidMessage>,
    body: &str,
) -> Result<Event, InvalidMessage> {
    let mut envelope = object(body)?;
    if !personal.is_empty() || matches!(opening, Opening::With(_)) {
        sealed::open(&mut envelope, personal, opening)?;
    }
    string(&envelope, "eventId", 128)?;
    let event_id = take_string(&mut envelope, "eventId");
    check_type_and_data(&envelope)?;
    let upcast = upcast(types, versions, &mut envelope)?;
    let event_type = envelope.get("type").unwrap_or(&Value::Null);
    let data = match &upcast {
        Some(data) => data,
        None => envelope.get("data").unwrap_or(&Value::Null),
    };
    let mut handling = match read(event_type, data)? {
        Handling(Raw::How(how)) => how,
        // Its entity kind, from its stream's type, as this domain handles it.
        Handling(Raw::Erasure(data)) => erasure(data)?,
    };
    let type_name = event_type.as_str().unwrap_or_default();
    // The name as the events enum has it (read succeeded: it is one of them).
    let event_type = types
        .iter()
        .copied()
        .find(|name| *name == type_name)
        .unwrap_or("?");
    let event_id = bind(&mut handling, &mut envelope, event_id, event_type)?;
    Ok(Event {
        event_id,
        event_type,
        handling,
    })
}

/// The body as a JSON object.
fn object(body: &str) -> Result<Map<String, Value>, InvalidMessage> {
    let value: Value =
        serde_json::from_str(body).map_err(|err| InvalidMessage::NotJson(err.to_string()))?;
    match value {
        Value::Object(envelope) => Ok(envelope),
        _ => Err(InvalidMessage::NotAnObject),
    }
}

/// `type` a string; `data` an object whose strings are within the limit.
fn check_type_and_data(envelope: &Map<String, Value>) -> Result<(), InvalidMessage> {
    match envelope.get("type") {
        None | Some(Value::Null) => return Err(missing("type")),
        Some(Value::String(_)) => {}
        Some(_) => return Err(invalid("type", "must be a string")),
    }
    match envelope.get("data") {
        None | Some(Value::Null) => Err(missing("data")),
        Some(Value::Object(fields)) => check_strings(fields),
        Some(_) => Err(invalid("data", "must be an object")),
    }
}

/// `data` upcast from the body's `version` to the type's current one,
/// moved out of the envelope (not copied) and checked again; `None` at the
/// current version, for a type the events enum does not have (named as
/// such when `data` is read), and for a type the consumer passes or
/// ignores (its `version` is not read).
fn upcast(
    types: &[&str],
    versions: &Table,
    envelope: &mut Map<String, Value>,
) -> Result<Option<Value>, InvalidMessage> {
    let type_name = envelope
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if versions.is_unread(type_name) {
        return Ok(None);
    }
    let plan = match versions.plan(type_name, versions::of_envelope(envelope)?) {
        Err(_) if !types.contains(&type_name) => None,
        plan => plan?,
    };
    let Some(plan) = plan else {
        return Ok(None);
    };
    let original = envelope.remove("data").unwrap_or_default();
    let upcast = plan.run(original)?;
    if let Value::Object(fields) = &upcast {
        check_strings(fields)?;
    }
    Ok(Some(upcast))
}

/// The envelope's fields the handling needs, checked and bound to it: a
/// sequenced event's aggregate id and sequence; a deduplicated effect has
/// no sequence; an ignored event keeps what it has. Returns the `eventId`
/// the event keeps itself (a sequenced event's is in its handling).
fn bind(
    handling: &mut How,
    envelope: &mut Map<String, Value>,
    event_id: String,
    event_type: &str,
) -> Result<String, InvalidMessage> {
    let present = |envelope: &Map<String, Value>, field: &str| {
        envelope.get(field).is_some_and(|value| !value.is_null())
    };
    match handling {
        How::Sequenced(apply) | How::Snapshot(apply) => {
            string(envelope, "aggregateId", 256)?;
            let sequence = sequence(envelope)?;
            let aggregate_id = take_string(envelope, "aggregateId");
            apply.bind(event_id, aggregate_id, sequence);
            return Ok(String::new());
        }
        How::Addition(_) => {
            if present(envelope, "sequence") {
                return Err(invalid(
                    "sequence",
                    format!("must be absent for {event_type}"),
                ));
            }
            if present(envelope, "aggregateId") {
                string(envelope, "aggregateId", 256)?;
            }
        }
        How::Ignored(ignored) => {
            // Not this consumer's: its envelope is checked as far as it goes.
            if present(envelope, "aggregateId") {
                string(envelope, "aggregateId", 256)?;
                ignored.aggregate_id = Some(take_string(envelope, "aggregateId"));
            }
            if present(envelope, "sequence") {
                ignored.sequence = Some(sequence(envelope)?);
            }
        }
    }
    Ok(event_id)
}

/// A string of the envelope, moved out of it (checked before).
fn take_string(envelope: &mut Map<String, Value>, field: &str) -> String {
    match envelope.remove(field) {
        Some(Value::String(text)) => text,
        _ => String::new(),
    }
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
    for (key, value) in data {
        if over_limit(key) {
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

/// Whether a string holds more than [`MAX_DATA_STRING`] characters. Bytes
/// bound characters: most strings need no counting.
fn over_limit(text: &str) -> bool {
    if is_sealed(text) {
        // Sealed: its plain value is held to the limit where it is opened.
        return text.len() > MAX_SEALED_STRING;
    }
    text.len() > MAX_DATA_STRING && text.chars().take(MAX_DATA_STRING + 1).count() > MAX_DATA_STRING
}

/// The longest sealed value read without opening it: a value of
/// [`MAX_DATA_STRING`] characters of 4 bytes each, sealed.
const MAX_SEALED_STRING: usize = 8 * 1024;

/// The path, innermost first, to the first string in `value` over the limit.
fn too_long(value: &Value) -> Option<Vec<String>> {
    match value {
        Value::String(text) => over_limit(text).then(Vec::new),
        Value::Object(object) => object.iter().find_map(|(key, value)| {
            if over_limit(key) {
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
}
