//! An event to append, and where its stream must stand: what a producer
//! gives `append`, and what a process's handler appends.

use serde_json::Value;

/// One event to append: its type and data, as the consumer reads them.
#[derive(Debug, Clone, PartialEq)]
pub struct NewEvent {
    /// The event type (the envelope's `type`).
    pub event_type: String,
    /// The event's `data`: a JSON object, of the type's current version
    /// ([`Domain::version`](crate::Domain::version): the body says which, when above 1).
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
    /// written and the producer's error says where it stands
    /// (`producer::AppendError::ExpectedSequence`). One request, no read
    /// (see `producer::ExactCheck` for the other way).
    Exact(u64),
    /// Wherever it stands: the stream's last event is read, and the append
    /// is tried again at the next sequence when another writer got there
    /// first, with a short random pause between tries, for at most the
    /// store's retry budget (`producer::RETRY_BUDGET` unless set).
    Any,
}
