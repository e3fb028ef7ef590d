//! An event's `data` read as its type's payload, and the types whose
//! `data` is never read (passed or ignored), found as the domain is built.

use serde::de::value::MapDeserializer;
use serde_json::Value;

use super::Events;
use crate::handling::Handling;
use crate::reason::path_from;
use crate::reason::{InvalidMessage, refusal};

/// How a domain reads `data`: the envelope's `type` and `data` in, the
/// event's handling out.
pub(crate) type ReadData = fn(&Value, &Value) -> Result<Handling, InvalidMessage>;

/// Reads `data` as the event type's payload, through serde and the limits
/// its types declare; a refusal names the field by its path.
pub(super) fn payload<E: Events>(
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

/// The types `E` passes or ignores ([`Handling::pass`], [`Handling::ignore`]):
/// their `data` and `version` are not read. Found once, as the domain is
/// registered, by reading each type with an empty `data`: only a payload
/// that reads nothing (`IgnoredAny`) takes it and can be one of them.
pub(super) fn unread_types<E: Events>(types: &'static [&'static str]) -> Vec<&'static str> {
    let empty = Value::Object(serde_json::Map::new());
    types
        .iter()
        .copied()
        .filter(|name| {
            let event_type = Value::String((*name).to_owned());
            // A registration that panics on an empty `data` reads it.
            std::panic::catch_unwind(|| payload::<E>(&event_type, &empty))
                .is_ok_and(|handling| handling.is_ok_and(|handling| !handling.reads_data()))
        })
        .collect()
}
