//! A body's sealed values opened as it is read, before anything else reads
//! `data` (its upcasts included): for the types the domain declares
//! personal, every sealed field of `data` becomes its plain value, or the
//! placeholder once its subject is erased. A domain that declares none
//! (a consumer that projects no personal data) leaves them sealed and
//! never reads a key; the dispatcher, which only checks the envelope,
//! reads them as the placeholder.

use serde_json::{Map, Value};

use super::keys::{Keyring, Known};
use super::{Declared, ERASURE_TYPE, Subject, associated_data, is_sealed};
use crate::envelope::InvalidMessage;

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
    let subject = match fields.subject {
        Subject::Aggregate => envelope.get("aggregateId").and_then(Value::as_str),
        Subject::Field(field) => data.get(field).and_then(Value::as_str),
    }
    .filter(|subject| !subject.is_empty() && !is_sealed(subject))
    .ok_or_else(|| match fields.subject {
        Subject::Aggregate => InvalidMessage::Missing("aggregateId".to_owned()),
        Subject::Field(field) => InvalidMessage::Missing(format!("data.{field}")),
    })?
    .to_owned();
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
            Known::Key(key) => key
                .open(sealed, &associated_data(&event_id, field))
                .ok()
                .and_then(|plain| serde_json::from_slice(&plain).ok())
                .ok_or_else(|| unopenable(field))?,
        };
    }
    Ok(())
}

/// The subject an erasure event names.
fn erased_subject(envelope: &Map<String, Value>) -> Option<&str> {
    envelope.get("data")?.get("subject")?.as_str()
}

fn unopenable(field: &str) -> InvalidMessage {
    InvalidMessage::Invalid {
        field: format!("data{}", crate::reason::key_segment(field)),
        problem: "is sealed, and cannot be opened with its subject's key (altered, moved from another event, or sealed by another store)".to_owned(),
    }
}

/// The subjects whose keys reading `body` needs and the keyring does not
/// hold: what a reader fetches before it reads bodies in bulk.
pub(crate) fn needed(body: &str, declared: &Declared, keys: &Keyring) -> Option<String> {
    if !body.contains(super::SEALED_PREFIX) {
        return None;
    }
    let Ok(Value::Object(mut envelope)) = serde_json::from_str::<Value>(body) else {
        return None;
    };
    match open(&mut envelope, declared, Opening::With(keys)) {
        Err(InvalidMessage::KeyNeeded(subject)) => Some(subject),
        _ => None,
    }
}
