//! A domain's erasures checked on its samples ([`check_erasures`]): an
//! entity that copies a personal value into an attribute it does not
//! declare personal keeps it in clear after the erasure, and nothing else
//! would say so.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::domain::Domain;
use crate::entity::{AnyEntity, EntityKey};
use crate::envelope::Event;
use crate::personal::{ERASURE_TYPE, Erasure, Subject, looks_sealed};

/// Checks that an erasure forgets every personal value the samples carry:
/// folds the samples' bodies through `domain` (each entity's events in the
/// order of their sequences), every value of a field the domain declares
/// personal replaced by a marker of its own (the value with each letter and
/// digit changed, so that it keeps its shape and passes the type's limits;
/// the value itself when the marked body is refused), then folds an erasure
/// of each subject on each stream that carried its values, as `erase`
/// appends it, and looks for the markers in every entity. Answers how many
/// personal values it followed (0: the samples carry none, and nothing was
/// checked).
///
/// `samples` are the files of `events/` as they are (an SQS event as Lambda
/// delivers it, one body, or bodies one a line); a body the domain refuses
/// is left out, as are the scheduled events.
///
/// `Err` names each entity kind and attribute that keeps a personal value
/// in clear after its subject's erasure (declare the attribute personal:
/// `#[entity(personal("..."))]`), or why the samples cannot be checked.
///
/// ```
/// # use sequence_guard::{Decision, Domain, Entity, Events, Handling, Sequenced};
/// # use sequence_guard::personal::{Erasure, Personal};
/// # use serde::{Deserialize, Serialize};
/// #[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Entity)]
/// #[serde(rename_all = "camelCase")]
/// #[entity(kind = "MEMBER", personal("name"))]
/// struct Member { sequence: u64, last_event_id: String, name: String, greeting: String }
///
/// #[derive(Debug, Deserialize)]
/// struct Joined { name: String }
///
/// #[derive(Debug, Deserialize)]
/// #[serde(tag = "type", content = "data")]
/// enum ClubEvent { Joined(Joined), PersonalDataErased(Erasure) }
///
/// fn on_joined(member: &mut Option<Member>, event: &Sequenced<Joined>) -> Decision {
///     if member.is_some() { return Decision::Duplicate }
///     *member = Some(Member {
///         sequence: event.sequence,
///         last_event_id: event.event_id.clone(),
///         name: event.data.name.clone(),
///         // A copy of a personal value that `personal(..)` does not name.
///         greeting: format!("Welcome, {}", event.data.name),
///     });
///     Decision::Applied
/// }
///
/// impl Events for ClubEvent {
///     fn handling(self) -> Handling {
///         match self {
///             ClubEvent::Joined(data) => Handling::sequenced(data, on_joined),
///             ClubEvent::PersonalDataErased(data) => Handling::erasure(data),
///         }
///     }
///     fn personal() -> Personal { Personal::new().fields("Joined", &["name"]) }
/// }
///
/// let sample = r#"{"eventId":"e1","type":"Joined","aggregateId":"m-1","sequence":1,"data":{"name":"Ada Lovelace"}}"#;
/// let leak = sequence_guard::testkit::check_erasures(&Domain::new::<ClubEvent>(), &[sample])
///     .unwrap_err();
/// assert!(leak.contains("MEMBER entities"), "{leak}");
/// assert!(leak.contains("`greeting`"), "{leak}");
/// ```
pub fn check_erasures(domain: &Domain, samples: &[&str]) -> Result<usize, String> {
    domain.check().map_err(|err| err.to_string())?;
    let mut marked = Marked::default();
    for body in samples.iter().flat_map(|sample| bodies(sample)) {
        marked.read(domain, body);
    }
    let mut entities = marked.fold();
    let followed = marked.markers.len();
    for (subject, stream) in marked.erasures() {
        marked.erase(domain, &mut entities, &subject, &stream)?;
    }
    let leaks = marked.leaks(&entities);
    if leaks.is_empty() {
        Ok(followed)
    } else {
        Err(leaks.join("; "))
    }
}

/// A personal value followed through the fold.
struct Marker {
    /// What it reads as in the folded bodies.
    text: String,
    subject: String,
    stream: String,
    event_type: String,
    field: String,
}

/// The samples read, their personal values marked.
#[derive(Default)]
struct Marked {
    events: Vec<Event>,
    markers: Vec<Marker>,
    /// Each stream's first event type (the erasure's `streamType`), by
    /// its lowest sequence seen.
    first_types: BTreeMap<String, (u64, String)>,
}

impl Marked {
    /// Reads one body, its personal values marked; a body the domain
    /// refuses is left out.
    fn read(&mut self, domain: &Domain, body: Value) {
        let Some(event_type) = body.get("type").and_then(Value::as_str) else {
            return;
        };
        let event_type = event_type.to_owned();
        let stream = text(&body, "aggregateId").unwrap_or_default();
        if let Some(sequence) = body.get("sequence").and_then(Value::as_u64) {
            let first = self
                .first_types
                .entry(stream.clone())
                .or_insert((sequence, event_type.clone()));
            if sequence < first.0 {
                *first = (sequence, event_type.clone());
            }
        }
        let Some(fields) = domain.personal().of(&event_type) else {
            if let Ok(event) = domain.parse(&body.to_string()) {
                self.events.push(event);
            }
            return;
        };
        let subject = match &fields.subject {
            Subject::Aggregate => Some(stream.clone()),
            Subject::Field(field) => body.get("data").and_then(|data| text(data, field)),
        };
        let mut marked = body.clone();
        let mut markers = Vec::new();
        if let (Some(subject), Some(Value::Object(data))) = (subject, marked.get_mut("data")) {
            for field in &fields.fields {
                let Some(Value::String(value)) = data.get(*field) else {
                    continue;
                };
                if value.is_empty() || looks_sealed(value) {
                    continue;
                }
                let marker = scrambled(value, self.markers.len() + markers.len());
                markers.push(Marker {
                    text: value.clone(),
                    subject: subject.clone(),
                    stream: stream.clone(),
                    event_type: event_type.clone(),
                    field: (*field).to_owned(),
                });
                data.insert((*field).to_owned(), Value::String(marker));
            }
        }
        let (event, markers) = match domain.parse(&marked.to_string()) {
            Ok(event) => {
                // The markers, as the marked body carries them.
                let data = marked.get("data");
                let markers = markers
                    .into_iter()
                    .map(|mut marker| {
                        if let Some(text) = data.and_then(|data| text(data, &marker.field)) {
                            marker.text = text;
                        }
                        marker
                    })
                    .collect();
                (event, markers)
            }
            // Refused marked (a limit of the type's own): the values as given.
            Err(_) => match domain.parse(&body.to_string()) {
                Ok(event) => (event, markers),
                Err(_) => return,
            },
        };
        self.events.push(event);
        self.markers.extend(markers);
    }

    /// Each entity's events folded in the order of their sequences.
    fn fold(&mut self) -> BTreeMap<EntityKey, Option<AnyEntity>> {
        let mut by_entity: BTreeMap<EntityKey, Vec<&Event>> = BTreeMap::new();
        for event in &self.events {
            if let Some(key) = event.entity_key() {
                by_entity.entry(key).or_default().push(event);
            }
        }
        by_entity
            .into_iter()
            .map(|(key, mut events)| {
                events.sort_by_key(|event| event.sequence());
                let mut slot = None;
                for event in events {
                    // A duplicate, a conflict or a fault changes nothing.
                    let _ = event.decide(&mut slot);
                }
                (key, slot)
            })
            .collect()
    }

    /// Each subject and stream whose values were followed, once.
    fn erasures(&self) -> Vec<(String, String)> {
        let mut erasures: Vec<(String, String)> = self
            .markers
            .iter()
            .map(|marker| (marker.subject.clone(), marker.stream.clone()))
            .collect();
        erasures.sort();
        erasures.dedup();
        erasures
    }

    /// Folds the erasure of `subject` that `erase` appends to `stream`
    /// into the stream's entities.
    fn erase(
        &self,
        domain: &Domain,
        entities: &mut BTreeMap<EntityKey, Option<AnyEntity>>,
        subject: &str,
        stream: &str,
    ) -> Result<(), String> {
        let stream_type = self
            .first_types
            .get(stream)
            .map(|(_, event_type)| event_type.clone())
            .unwrap_or_default();
        // What `erase` appends to the stream.
        let data = serde_json::to_value(Erasure::new(subject, stream_type))
            .map_err(|err| format!("the erasure of subject `{subject}`: {err}"))?;
        for (key, slot) in entities.iter_mut().filter(|(key, _)| key.id() == stream) {
            let Some(entity) = slot else { continue };
            let body = serde_json::json!({
                "eventId": format!("erasure-check-{}", entity.sequence() + 1),
                "type": ERASURE_TYPE,
                "aggregateId": stream,
                "sequence": entity.sequence() + 1,
                "data": data,
            });
            let event = domain.parse(&body.to_string()).map_err(|err| {
                format!("the erasure of subject `{subject}` on stream `{stream}` is refused: {err}")
            })?;
            match event.decide(slot) {
                Ok(_) => {}
                Err(fault) => {
                    return Err(format!(
                        "the erasure of subject `{subject}` on {key}: {fault}"
                    ));
                }
            }
        }
        Ok(())
    }

    /// Where a marker stays in an entity after the erasures.
    /// Each entity kind and attribute where a marker stays after the
    /// erasures, said once (with the first value and subject found).
    fn leaks(&self, entities: &BTreeMap<EntityKey, Option<AnyEntity>>) -> Vec<String> {
        let mut seen = Vec::new();
        let mut leaks = Vec::new();
        for entity in entities.values().flatten() {
            let Value::Object(attributes) = entity.to_json() else {
                continue;
            };
            let kind = entity.kind();
            for (attribute, value) in &attributes {
                let Some(marker) = self.markers.iter().find(|m| holds(value, &m.text)) else {
                    continue;
                };
                let place = (kind.name, attribute.clone());
                if seen.contains(&place) {
                    continue;
                }
                seen.push(place);
                leaks.push(format!(
                    "{} entities ({}) keep the value of {}'s personal field `{}` in clear in the attribute `{attribute}` after the erasure of its subject (`{}`, for one): declare the attribute personal, #[entity(personal(\"{attribute}\"))] (Entity::PERSONAL), so that an erasure replaces it",
                    kind.name,
                    kind.type_name(),
                    marker.event_type,
                    marker.field,
                    marker.subject
                ));
            }
        }
        leaks
    }
}

/// Whether `value` (an attribute, at any depth) holds `marker`: as a part
/// of a string for a marker of six characters or more, as the whole
/// string otherwise.
fn holds(value: &Value, marker: &str) -> bool {
    match value {
        Value::String(text) if marker.chars().count() >= 6 => text.contains(marker),
        Value::String(text) => text == marker,
        Value::Array(values) => values.iter().any(|value| holds(value, marker)),
        Value::Object(fields) => fields.values().any(|value| holds(value, marker)),
        _ => false,
    }
}

/// A string field of an object.
fn text(value: &Value, field: &str) -> Option<String> {
    value.get(field).and_then(Value::as_str).map(str::to_owned)
}

/// The bodies of one sample: an SQS event's records' bodies, one body, or
/// bodies one a line; a scheduled event has none.
fn bodies(sample: &str) -> Vec<Value> {
    match serde_json::from_str::<Value>(sample) {
        Ok(Value::Object(event)) => match event.get("Records") {
            Some(Value::Array(records)) => records
                .iter()
                .filter_map(|record| record.get("body").and_then(Value::as_str))
                .filter_map(|body| serde_json::from_str(body).ok())
                .collect(),
            Some(_) => Vec::new(),
            None if event.contains_key("source") => Vec::new(),
            None => vec![Value::Object(event)],
        },
        Ok(_) => Vec::new(),
        Err(_) => sample
            .lines()
            .filter_map(|line| serde_json::from_str::<Map<String, Value>>(line).ok())
            .map(Value::Object)
            .collect(),
    }
}

/// `value` with each letter and digit changed (a letter for a letter of
/// the same case, a digit for a digit), the rest kept: a value of the same
/// shape, unlike any other (`seed` makes each marker its own).
fn scrambled(value: &str, seed: usize) -> String {
    let mut state = 0x9e37_79b9_7f4a_7c15_u64 ^ (seed as u64).wrapping_mul(0x2545_f491_4f6c_dd1d);
    let mut next = move |range: u8| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        u8::try_from(state % u64::from(range)).unwrap_or(0)
    };
    value
        .chars()
        .map(|c| {
            if c.is_ascii_lowercase() {
                char::from(b'a' + next(26))
            } else if c.is_ascii_uppercase() {
                char::from(b'A' + next(26))
            } else if c.is_ascii_digit() {
                char::from(b'0' + next(10))
            } else {
                c
            }
        })
        .collect()
}
