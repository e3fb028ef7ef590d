//! A body's sealed values opened as it is read, before anything else reads
//! `data` (its upcasts included): for the types the domain declares
//! personal, every sealed field of `data` becomes its plain value, or the
//! placeholder once its subject is erased. A domain that declares none
//! (a consumer that projects no personal data) leaves them sealed and
//! never reads a key; the dispatcher, which only checks the envelope,
//! reads them as the placeholder.

use serde_json::{Map, Value};

use super::InvalidMessage;
use crate::personal::{Binding, Declared, ERASURE_TYPE, Keyring, Known, Subject, is_sealed};

/// How a reader opens sealed values.
#[derive(Clone, Copy)]
pub(crate) enum Opening<'a> {
    /// With the keys it holds: a subject whose key it does not hold is
    /// [`InvalidMessage::KeyNeeded`].
    With(&'a Keyring),
    /// It has no keyring: a sealed value of a declared type is
    /// [`InvalidMessage::KeyNeeded`], which no fetch heals (a consumer
    /// without `PERSONAL_DATA_KEY`: retried, then the dead-letter queue).
    NoKeys,
    /// Never opened, read as the placeholder: the dispatcher's check of a
    /// body it sends as it is.
    Placeholder,
}

/// Opens the sealed values of `envelope`'s `data`; see the module's
/// documentation. [`InvalidMessage::KeyNeeded`] when the subject's key is
/// not at hand: fetch it ([`Keyring::fetch`]) and read the body again.
pub(crate) fn open(
    envelope: &mut Map<String, Value>,
    declared: &Declared,
    opening: Opening<'_>,
) -> Result<(), InvalidMessage> {
    let Some(Value::String(event_type)) = envelope.get("type") else {
        return Ok(());
    };
    if event_type == ERASURE_TYPE {
        if let (Opening::With(keys), Some(subject)) = (opening, erased_subject(envelope)) {
            keys.forget(subject);
        }
        return Ok(());
    }
    let Some(fields) = declared.of(event_type) else {
        return Ok(());
    };
    let Some(Value::Object(data)) = envelope.get("data") else {
        return Ok(());
    };
    if !data
        .values()
        .any(|value| value.as_str().is_some_and(is_sealed))
    {
        return Ok(());
    }
    let subject = subject_of(envelope, fields.subject.clone())?;
    let known = match opening {
        Opening::Placeholder => Known::Erased,
        Opening::NoKeys => return Err(InvalidMessage::KeyNeeded(subject)),
        Opening::With(keys) => keys
            .known(&subject)
            .ok_or_else(|| InvalidMessage::KeyNeeded(subject.clone()))?,
    };
    let event_id = envelope
        .get("eventId")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let stream = envelope
        .get("aggregateId")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let Some(Value::Object(data)) = envelope.get_mut("data") else {
        return Ok(());
    };
    for (field, value) in data.iter_mut() {
        let Value::String(sealed) = value else {
            continue;
        };
        if !is_sealed(sealed) {
            continue;
        }
        *value = match &known {
            Known::Erased => Value::String(declared.placeholder.to_owned()),
            Known::None => return Err(unopenable(field)),
            Known::Key(key) => {
                let binding = Binding {
                    event_id: &event_id,
                    field,
                    stream: &stream,
                    subject: &subject,
                };
                key.open(sealed, &binding.associated_data_of(sealed))
                    .ok()
                    .and_then(|plain| serde_json::from_slice(&plain).ok())
                    .ok_or_else(|| unopenable(field))?
            }
        };
    }
    Ok(())
}

/// Whose the sealed values of `envelope` are: its aggregate's, or a field
/// of its `data` (which must be a plain, non-empty string).
fn subject_of(envelope: &Map<String, Value>, subject: Subject) -> Result<String, InvalidMessage> {
    let data = envelope.get("data");
    match subject {
        Subject::Aggregate => envelope.get("aggregateId").and_then(Value::as_str),
        Subject::Field(field) => data
            .and_then(|data| data.get(field))
            .and_then(Value::as_str),
    }
    .filter(|subject| !subject.is_empty() && !is_sealed(subject))
    .map(str::to_owned)
    .ok_or_else(|| match subject {
        Subject::Aggregate => InvalidMessage::Missing("aggregateId".to_owned()),
        Subject::Field(field) => InvalidMessage::Missing(format!("data.{field}")),
    })
}

/// The subject whose key reading `body` needs: a body of a type the
/// domain declares personal, with a sealed value in its `data`. What a
/// reader confirms before it trusts a key it keeps.
pub(crate) fn sealed_subject(body: &str, declared: &Declared) -> Option<String> {
    if !body.contains(crate::personal::SEALED_FAMILY) {
        return None;
    }
    let Ok(Value::Object(envelope)) = serde_json::from_str::<Value>(body) else {
        return None;
    };
    let event_type = envelope.get("type").and_then(Value::as_str)?;
    let fields = declared.of(event_type)?;
    let sealed = envelope
        .get("data")
        .and_then(Value::as_object)?
        .values()
        .any(|value| value.as_str().is_some_and(is_sealed));
    if !sealed {
        return None;
    }
    subject_of(&envelope, fields.subject.clone()).ok()
}

/// The subject an erasure event names.
fn erased_subject(envelope: &Map<String, Value>) -> Option<&str> {
    envelope.get("data")?.get("subject")?.as_str()
}

fn unopenable(field: &str) -> InvalidMessage {
    InvalidMessage::Invalid {
        field: format!("data{}", crate::reason::key_segment(field)),
        problem: "is sealed, and cannot be opened with its subject's key (altered, moved from another event, field, stream or subject, or sealed by another store)".to_owned(),
    }
}
