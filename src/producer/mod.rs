//! The producer's half: events appended to an event store with gapless
//! sequences, each event stored at its sequence on the condition that the
//! slot is empty.
//!
//! An append ([`Append`]) names a stream, one or more events, the sequence the
//! caller expects the stream at ([`ExpectedSequence`]) and, to make a retried
//! command safe, a request id. [`EventStore::append`] validates every event
//! with the consumer's own declarations (the [`Domain`](crate::domain::Domain): an event the
//! projector would refuse is refused before anything is written), then puts
//! the events right after the stream's last one (docs/event-store.md): one
//! conditional `PutItem` for one event, or one `TransactWriteItems` with the
//! request record and the caller's own writes. The event items are the whole
//! stream: no head item, so there is never a gap, a head ahead of its events,
//! or two appends for one request id.
//!
//! | file | what it does |
//! | --- | --- |
//! | `mod.rs` | the request and its answer |
//! | `check.rs` | the events checked and rendered as message bodies |
//! | `store.rs` | [`EventStore`]: reading the stream, its streams, the request record |
//! | `append/` | one append: a try planned and sent, retries; its answer absorbed (`answer.rs`) |
//! | `send.rs` | one try sent, its units counted, the answer told |
//! | `items.rs` | the items, their conditions, the transaction's token |
//! | `kind.rs` | a stream is one kind's: the kind an event projects onto, checked |
//! | `capacity.rs` | capacity units, reported and by AWS's rules |
//! | `turn.rs` | one append at a time per stream within a store |
//! | `known.rs` | the streams' events a store saw: an append after one needs no read nor check |
//! | `sealing.rs` | an append's personal values sealed before it is written |
//! | `erase.rs` | [`erase`]: a subject's key deleted, and each of its streams told |
//! | `memory.rs` | [`MemoryEvents`]: the event store in memory, for a system run on one machine |

mod append;
pub mod capacity;
mod check;
mod erase;
mod items;
mod kind;
mod known;
mod memory;
mod sealing;
mod send;
mod store;
mod turn;

use serde::Serialize;

use crate::envelope::InvalidMessage;
use crate::table::StoreError;

pub use crate::answer::{ExpectedSequence, NewEvent};
pub use crate::sqs::MAX_BODY;
pub use capacity::{Consumed, Units};
pub(crate) use check::{Checked, stream_id_problem};
pub use erase::{EraseError, Erased, erase};
pub use memory::MemoryEvents;
pub(crate) use sealing::Sealed;
pub use sealing::seal_data;
pub use store::{EventStore, ExactCheck, REQUEST_TTL_SECONDS, RETRY_BUDGET, StoredEvent};

/// The most items one append writes: DynamoDB's transaction limit.
pub const MAX_ITEMS: usize = 100;

/// The most bytes one append writes: DynamoDB's transaction limit (4 MB),
/// less room for keys and attributes.
pub const MAX_BYTES: usize = 4_000_000 - 100 * 1024;

/// What holds a domain's events and appends to them: the event store on
/// DynamoDB ([`EventStore`]) or in memory ([`MemoryEvents`]). What
/// [`erase`] needs of one.
#[allow(async_fn_in_trait)]
pub trait EventLog {
    /// The domain of its events.
    fn domain(&self) -> &crate::domain::Domain;
    /// Appends the events ([`EventStore::append`]).
    async fn append(&self, append: Append) -> Result<Appended, AppendError>;
    /// The stream's events after `after`, in order, at most `limit`.
    async fn read(
        &self,
        stream: &str,
        after: u64,
        limit: i32,
    ) -> Result<Vec<StoredEvent>, StoreError>;
}

impl EventLog for EventStore {
    fn domain(&self) -> &crate::domain::Domain {
        EventStore::domain(self)
    }

    async fn append(&self, append: Append) -> Result<Appended, AppendError> {
        EventStore::append(self, append).await
    }

    async fn read(
        &self,
        stream: &str,
        after: u64,
        limit: i32,
    ) -> Result<Vec<StoredEvent>, StoreError> {
        EventStore::read(self, stream, after, limit).await
    }
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
#[non_exhaustive]
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
    /// The stream holds events that project onto another kind than this
    /// append's (an entity kind, or a counter): a stream is one
    /// aggregate's, or one counter's.
    #[error(
        "the stream `{stream}` holds events of {found}, and {event_type} projects onto {appending}: a stream is one kind's"
    )]
    OtherKind {
        /// The stream.
        stream: String,
        /// The kind of its events (`the entity kind PRODUCT`).
        found: String,
        /// The type of the append's first event.
        event_type: String,
        /// The kind the append's events project onto (`the counter SKU#STOCK`).
        appending: String,
    },
    /// The stream is not at the expected sequence.
    #[error("the stream is at sequence {current}, not {expected}")]
    ExpectedSequence {
        /// The sequence the caller expected.
        expected: u64,
        /// The sequence the stream is at (0: it has no event).
        current: u64,
    },
    /// Other writers kept moving the stream for the whole retry budget:
    /// given up after this many tries.
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
    /// The append carries personal data of an erased subject: refused for
    /// ever, nothing written.
    #[error("the subject `{subject}` is erased: no personal data of theirs can be appended")]
    Erased {
        /// The subject.
        subject: String,
    },
    /// The subject's key could not be had (the key table or KMS did not
    /// answer); nothing written, safe to try again.
    #[error("the personal data's key: {0}")]
    Keys(crate::personal::KeyError),
    /// The table did not take it (after retries); with a request id, safe to
    /// run again.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Whether `append` would be taken, as [`EventStore::append`] checks it
/// before anything is written (a process's step checks what it appends
/// before it commits).
pub(crate) fn check_append(
    domain: &crate::domain::Domain,
    append: &Append,
) -> Result<(), AppendError> {
    check::check(domain, append).map(|_| ())
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
    use super::check::check;
    use super::*;
    use crate::domain::Domain;
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

#[cfg(test)]
mod stream_ids {
    use super::check::{check, stream_id_problem};
    use super::*;
    use crate::domain::Domain;
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
    #[serde(tag = "type", content = "data")]
    enum Notes {
        NoteWritten(serde::de::IgnoredAny),
    }

    fn on_note(_: &mut Option<Note>, _: &Sequenced<serde::de::IgnoredAny>) -> Decision {
        Decision::Duplicate
    }

    impl Events for Notes {
        fn handling(self) -> Handling {
            match self {
                Notes::NoteWritten(data) => Handling::sequenced(data, on_note),
            }
        }
    }

    #[test]
    fn an_id_is_refused_as_a_stream_id_exactly_when_append_refuses_it() {
        let domain = Domain::new::<Notes>().entity::<Note>();
        let ids = [
            (String::new(), Some("must be 1 to 256 characters, got 0")),
            ("x".repeat(256), None),
            (
                "x".repeat(257),
                Some("must be 1 to 256 characters, got more than 256"),
            ),
            ("é".repeat(256), None),
            ("é".repeat(257), Some("got more than 256")),
            (" ".to_owned(), None),
            (" n-1 ".to_owned(), None),
            ("n\t1".to_owned(), None),
            ("n-\u{FFFE}".to_owned(), Some("holds U+FFFE")),
            ("n-\u{FFFF}".to_owned(), Some("holds U+FFFF")),
            ("n-\u{1}".to_owned(), Some("holds U+0001")),
        ];
        for (id, says) in ids {
            let problem = stream_id_problem(&id);
            match says {
                Some(says) => assert!(
                    problem
                        .as_deref()
                        .is_some_and(|problem| problem.contains(says)),
                    "{id:?}: {problem:?}"
                ),
                None => assert_eq!(problem, None, "{id:?}"),
            }
            let event = NewEvent::new("NoteWritten", serde_json::json!({}));
            let refused = check(&domain, &Append::one(id.as_str(), event)).is_err();
            assert_eq!(
                refused,
                problem.is_some(),
                "{id:?}: append and the rule agree"
            );
        }
    }
}
