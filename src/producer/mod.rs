//! The producer's half: events appended to an event store with gapless
//! sequences, each stored with its sequence in one transaction.
//!
//! An append ([`Append`]) names a stream, one or more events, the sequence the
//! caller expects the stream at ([`ExpectedSequence`]) and, to make a retried
//! command safe, a request id. [`EventStore::append`] validates every event
//! with the consumer's own declarations (the [`Domain`]: an event the
//! projector would refuse is refused before anything is written), then writes
//! the stream's head, the events and the request record in one
//! `TransactWriteItems` (CONTRACT section 6), with the caller's own writes if
//! it has any. There is never an event without its head, a head ahead of its
//! events, or two appends for one request id.
//!
//! | file | what it does |
//! | --- | --- |
//! | `mod.rs` | the request and its answer; the events checked and rendered as message bodies |
//! | `store.rs` | [`EventStore`]: the transaction, its conditions, retries and the request record |

mod store;

use serde::Serialize;
use serde_json::Value;

use crate::dispatcher::sqs_body_char;
use crate::domain::Domain;
use crate::envelope::InvalidMessage;
use crate::store::StoreError;

pub use store::{EventStore, MAX_ATTEMPTS, REQUEST_TTL_SECONDS, StoredEvent};

/// The largest message body an append takes, in bytes: what an SQS message
/// holds (256 KiB), so that the dispatcher can send every event it stores.
pub const MAX_BODY: usize = 256 * 1024;

/// The most items one append writes: DynamoDB's transaction limit.
pub const MAX_ITEMS: usize = 100;

/// The most bytes one append writes: DynamoDB's transaction limit (4 MB),
/// less room for keys and attributes.
pub const MAX_BYTES: usize = 4_000_000 - 100 * 1024;

/// One event to append: its type and data, as the consumer reads them.
#[derive(Debug, Clone, PartialEq)]
pub struct NewEvent {
    /// The event type (the envelope's `type`).
    pub event_type: String,
    /// The event's `data`: a JSON object, of the type's current version
    /// ([`Domain::version`]: the body says which, when above 1).
    pub data: Value,
    /// Its `eventId`; one is made up (a random UUID) when `None`.
    pub event_id: Option<String>,
}

impl NewEvent {
    /// An event of `event_type` with `data`, and an id made up for it.
    pub fn new(event_type: impl Into<String>, data: Value) -> Self {
        NewEvent {
            event_type: event_type.into(),
            data,
            event_id: None,
        }
    }
}

/// Where the caller expects the stream to stand.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExpectedSequence {
    /// At this sequence exactly (0: a new stream): otherwise nothing is
    /// written and [`AppendError::ExpectedSequence`] says where it stands.
    /// One request, no read.
    Exact(u64),
    /// Wherever it stands: the head is read, and the append is tried again
    /// from the new head when another writer got there first, at most
    /// [`MAX_ATTEMPTS`] times, with a short random pause between tries.
    Any,
}

/// One append: events for one stream, written together or not at all.
#[derive(Debug, Clone)]
pub struct Append {
    /// The stream: the `aggregateId` of sequenced events, the counter's id
    /// (the sku) of deduplicated effects.
    pub stream_id: String,
    /// In the order they take their sequences.
    pub events: Vec<NewEvent>,
    /// Where the caller expects the stream.
    pub expected: ExpectedSequence,
    /// Makes a retried command safe: a second append with this id writes
    /// nothing and answers as the first did, also from another process.
    pub request_id: Option<String>,
    /// The caller's own writes (its business state), in the same transaction.
    pub writes: Vec<aws_sdk_dynamodb::types::TransactWriteItem>,
}

impl Append {
    /// One event for `stream_id`, wherever the stream stands, without a
    /// request id.
    pub fn one(stream_id: impl Into<String>, event: NewEvent) -> Self {
        Append {
            stream_id: stream_id.into(),
            events: vec![event],
            expected: ExpectedSequence::Any,
            request_id: None,
            writes: Vec::new(),
        }
    }
}

/// What an append wrote (or, for a request seen before, what the first one
/// wrote).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Appended {
    /// The stream.
    pub stream_id: String,
    /// The sequence of the last event appended.
    pub sequence: u64,
    /// The `eventId` of the last event appended.
    pub event_id: String,
    /// Whether the request id was seen before: nothing was written now.
    pub duplicate_request: bool,
    /// The sequence of the first event appended.
    #[serde(skip)]
    pub first_sequence: u64,
}

/// Why an append wrote nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AppendError {
    /// An event the consumer would refuse, or an append it cannot be.
    #[error("event {index}: {reason}")]
    Invalid {
        /// The event's position in the append.
        index: usize,
        /// What is wrong, naming the field.
        reason: InvalidMessage,
    },
    /// The append as a whole cannot be written (no events, an empty stream
    /// id, more than a transaction holds).
    #[error("{0}")]
    Refused(String),
    /// The stream is not at the expected sequence.
    #[error("the stream is at sequence {current}, not {expected}")]
    ExpectedSequence {
        /// The sequence the caller expected.
        expected: u64,
        /// The sequence the stream is at (0: it has no event).
        current: u64,
    },
    /// Other writers kept moving the stream: given up after this many tries.
    #[error(
        "other writers kept appending to the stream: gave up after {attempts} tries; safe to try again"
    )]
    Contention {
        /// How many transactions were tried.
        attempts: u32,
    },
    /// One of the caller's own writes ([`Append::writes`], at this position)
    /// had its condition fail.
    #[error("the caller's write {index} had its condition fail")]
    Condition {
        /// The write's position in [`Append::writes`].
        index: usize,
    },
    /// The table did not take it (after retries); with a request id, safe to
    /// run again.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The message body of section 1, in the contract's field order.
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
    if append.stream_id.is_empty() {
        return Err(AppendError::Invalid {
            index: 0,
            reason: InvalidMessage::Invalid {
                field: "stream".to_owned(),
                problem: "must not be empty".to_owned(),
            },
        });
    }
    if append.events.is_empty() {
        return Err(AppendError::Refused(
            "an append needs at least one event".to_owned(),
        ));
    }
    let items =
        1 + append.events.len() + usize::from(append.request_id.is_some()) + append.writes.len();
    if items > MAX_ITEMS {
        return Err(AppendError::Refused(format!(
            "{items} items (the head, {} events, the request, {} writes of the caller): a transaction holds {MAX_ITEMS}",
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
    let mut checked: Vec<Checked> = Vec::with_capacity(append.events.len());
    let mut bytes = 0;
    for (index, event) in append.events.iter().enumerate() {
        let event_id = event.event_id.clone().unwrap_or_else(new_event_id);
        let invalid = |reason| AppendError::Invalid { index, reason };
        if checked.iter().any(|earlier| earlier.event_id == event_id) {
            // The consumer would take the second for a duplicate.
            return Err(invalid(InvalidMessage::Invalid {
                field: "eventId".to_owned(),
                problem: format!("`{event_id}` is given to two events of this append"),
            }));
        }
        let mut candidate = Checked {
            event_id,
            event_type: event.event_type.clone(),
            data: event.data.clone(),
            sequenced: true,
            version: domain.version(&event.event_type),
        };
        // The body as the consumer will read it: sequenced, unless its type
        // is a deduplicated effect (whose body carries no sequence).
        let parsed = match domain.parse(&candidate.body(&append.stream_id, 1)) {
            Err(InvalidMessage::Invalid { field, .. }) if field == "sequence" => {
                candidate.sequenced = false;
                domain.parse(&candidate.body(&append.stream_id, 1))
            }
            other => other,
        }
        .map_err(invalid)?;
        if parsed.stream() != append.stream_id {
            // A deduplicated effect's stream is its counter's id, in its data.
            let field = match &candidate.data {
                Value::Object(fields) => fields
                    .iter()
                    .find(|(_, value)| value.as_str() == Some(parsed.stream()))
                    .map(|(name, _)| format!("data.{name}")),
                _ => None,
            }
            .unwrap_or_else(|| "data".to_owned());
            return Err(invalid(InvalidMessage::Invalid {
                field,
                problem: format!(
                    "names the stream `{}`, not `{}`",
                    parsed.stream(),
                    append.stream_id
                ),
            }));
        }
        // SQS refuses U+FFFE and U+FFFF (JSON does not escape them): an
        // event holding one could be stored and never sent.
        let unsendable = |text: &str| text.chars().find(|c| !sqs_body_char(*c));
        let bad = unsendable(&append.stream_id)
            .map(|c| ("stream".to_owned(), c))
            .or_else(|| unsendable(&candidate.event_id).map(|c| ("eventId".to_owned(), c)))
            .or_else(|| unsendable_field(&candidate.data, "data"));
        if let Some((field, c)) = bad {
            return Err(invalid(InvalidMessage::Invalid {
                field,
                problem: format!(
                    "holds U+{:04X}, a character SQS does not carry",
                    u32::from(c)
                ),
            }));
        }
        let size = candidate.body(&append.stream_id, u64::MAX >> 1).len();
        if size > MAX_BODY {
            return Err(AppendError::Refused(format!(
                "event {index}: its body is {size} bytes, more than the {MAX_BODY} an SQS message holds"
            )));
        }
        bytes += size;
        checked.push(candidate);
    }
    if bytes > MAX_BYTES {
        return Err(AppendError::Refused(format!(
            "{bytes} bytes of bodies: a transaction holds about {MAX_BYTES}"
        )));
    }
    Ok(checked)
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

/// A random UUID (version 4), from the standard library's random hasher
/// seeds and the clock.
pub fn new_event_id() -> String {
    use std::hash::{BuildHasher, Hasher};
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let word = || {
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
        hasher.write_u128(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |elapsed| elapsed.as_nanos()),
        );
        hasher.finish()
    };
    let bits = (u128::from(word()) << 64 | u128::from(word())) & !(0xf << 76) & !(0x3 << 62)
        | (0x4 << 76)
        | (0x2 << 62);
    let hex = format!("{bits:032x}");
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::versions::Versions;
    use crate::{Decision, Entity, Events, Handling, Sequenced};

    #[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Note {
        sequence: u64,
        last_event_id: String,
    }

    impl Entity for Note {
        const KIND: &'static str = "NOTE";
        fn sequence(&self) -> u64 {
            self.sequence
        }
        fn last_event_id(&self) -> &str {
            &self.last_event_id
        }
    }

    #[derive(Debug, serde::Deserialize)]
    struct Text {}

    fn on_note(_: &mut Option<Note>, _: &Sequenced<Text>) -> Decision {
        Decision::Duplicate
    }

    macro_rules! notes {
        ($name:ident $(, $versions:expr)?) => {
            #[derive(Debug, serde::Deserialize)]
            #[serde(tag = "type", content = "data")]
            enum $name {
                NoteWritten(Text),
            }

            impl Events for $name {
                fn handling(self) -> Handling {
                    match self {
                        $name::NoteWritten(data) => Handling::sequenced(data, on_note),
                    }
                }
                $(fn versions() -> Versions {
                    $versions
                })?
            }
        };
    }

    notes!(Unversioned);
    notes!(Explicit, Versions::none().current("NoteWritten", 1));
    notes!(
        Second,
        Versions::none()
            .current("NoteWritten", 2)
            .upcast("NoteWritten", 1, Ok)
    );

    fn body(domain: &Domain) -> String {
        let mut event = NewEvent::new("NoteWritten", serde_json::json!({"text": "hi"}));
        event.event_id = Some("e-1".to_owned());
        let checked = check(domain, &Append::one("n-1", event)).expect("checked");
        checked[0].body("n-1", 1)
    }

    #[test]
    fn a_body_says_its_version_only_above_1() {
        let at_1 = r#"{"eventId":"e-1","type":"NoteWritten","aggregateId":"n-1","sequence":1,"data":{"text":"hi"}}"#;
        for domain in [
            Domain::new::<Unversioned>().entity::<Note>(),
            Domain::new::<Explicit>().entity::<Note>(),
        ] {
            assert_eq!(body(&domain), at_1, "byte for byte as before versions");
        }
        let domain = Domain::new::<Second>().entity::<Note>();
        assert_eq!(domain.check(), Ok(()));
        assert_eq!(
            body(&domain),
            r#"{"eventId":"e-1","type":"NoteWritten","aggregateId":"n-1","sequence":1,"version":2,"data":{"text":"hi"}}"#
        );
    }

    #[test]
    fn event_ids_are_version_4_uuids_and_differ() {
        let (a, b) = (new_event_id(), new_event_id());
        assert_ne!(a, b);
        for id in [&a, &b] {
            assert_eq!(id.len(), 36, "{id}");
            assert_eq!(&id[14..15], "4", "{id}");
            assert!(matches!(&id[19..20], "8" | "9" | "a" | "b"), "{id}");
        }
    }
}
