//! The embedded event store a process appends to: each stream's events in
//! order, the request ids written, the streams' places seen elsewhere
//! (`replay`'s input); a step's appends taken as the event store's
//! transaction takes them.

use super::{MemoryStore, Tables};
use crate::entity::EntityKey;
use crate::producer::{Append, AppendError, ExpectedSequence, MemoryEvents};
use crate::store::{Committed, Outbound, StoreError, Stored};

/// An event in the embedded event store a process appends to.
#[derive(Debug, Clone, PartialEq)]
pub struct LoggedEvent {
    /// Its stream.
    pub stream: String,
    /// Its sequence in the stream.
    pub sequence: u64,
    /// Its `eventId`.
    pub event_id: String,
    /// Its type.
    pub event_type: String,
    /// Its `data`.
    pub data: serde_json::Value,
}

impl Tables {
    /// A process's step's appends, as the event store's transaction takes
    /// them: `Err` the answer when it does not (nothing written).
    pub(super) fn outbox_fits(&self, outbound: &Outbound) -> Result<(), Committed> {
        if self.requests.contains(&outbound.request_id) {
            // Written by an earlier try of the step: its state moved too.
            return Err(Committed::LostRace {
                current: Stored::default(),
            });
        }
        let current = self.head(&outbound.stream);
        match outbound.expected {
            ExpectedSequence::Exact(expected) if expected != current => Err(Committed::Moved {
                stream: outbound.stream.clone(),
                expected,
                current,
            }),
            _ => Ok(()),
        }
    }

    /// Where a stream of the embedded event store stands: its last event,
    /// or the last one seen elsewhere.
    pub(super) fn head(&self, stream: &str) -> u64 {
        let logged = self
            .streams
            .get(stream)
            .and_then(|events| events.last())
            .map_or(0, |event| event.sequence);
        logged.max(self.observed.get(stream).copied().unwrap_or(0))
    }

    /// Appends a step's events at the stream's next sequences.
    pub(super) fn append(&mut self, outbound: &Outbound) {
        self.requests.insert(outbound.request_id.clone());
        let mut sequence = self.head(&outbound.stream);
        let events = self.streams.entry(outbound.stream.clone()).or_default();
        for event in &outbound.events {
            sequence += 1;
            self.appended.insert((outbound.stream.clone(), sequence));
            events.push(LoggedEvent {
                stream: outbound.stream.clone(),
                sequence,
                event_id: event.event_id.clone().unwrap_or_default(),
                event_type: event.event_type.clone(),
                data: event.data.clone(),
            });
        }
    }
}

/// A step's appends to an event store in memory that others read too:
/// `Ok(Err(answer))` when it does not take them (nothing appended), an
/// `Err` when it refuses them for good (as the DynamoDB store answers); an
/// append written before under the step's request id is taken (the state
/// is written alone, as the DynamoDB store writes it).
pub(super) fn append_to(
    events: &MemoryEvents,
    outbound: &Outbound,
) -> Result<Result<(), Committed>, StoreError> {
    let append = Append {
        stream_id: outbound.stream.clone(),
        events: outbound.events.clone(),
        expected: outbound.expected,
        request_id: Some(outbound.request_id.clone()),
        writes: Vec::new(),
    };
    match events.append_now(&append) {
        Ok(_) => Ok(Ok(())),
        Err(AppendError::ExpectedSequence { expected, current }) => Ok(Err(Committed::Moved {
            stream: outbound.stream.clone(),
            expected,
            current,
        })),
        Err(other) => Err(StoreError::Rejected {
            operation: "TransactWriteItems",
            message: format!("the event store refused the process's append: {other}"),
        }),
    }
}

impl MemoryStore {
    /// Appends an event to the embedded event store (as a producer would),
    /// at the stream's next sequence, which it answers.
    pub fn append_event(
        &self,
        stream: &str,
        event_id: &str,
        event_type: &str,
        data: serde_json::Value,
    ) -> u64 {
        let mut tables = self.tables();
        let sequence = tables.head(stream) + 1;
        let events = tables.streams.entry(stream.to_owned()).or_default();
        events.push(LoggedEvent {
            stream: stream.to_owned(),
            sequence,
            event_id: event_id.to_owned(),
            event_type: event_type.to_owned(),
            data,
        });
        sequence
    }

    /// Every event a process appended to the embedded event store (those
    /// of [`MemoryStore::append_event`] aside), by stream, then sequence.
    pub fn appended(&self) -> Vec<LoggedEvent> {
        let tables = self.tables();
        let mut events: Vec<LoggedEvent> = tables
            .streams
            .values()
            .flatten()
            .filter(|event| {
                tables
                    .appended
                    .contains(&(event.stream.clone(), event.sequence))
            })
            .cloned()
            .collect();
        events.sort_by(|a, b| (&a.stream, a.sequence).cmp(&(&b.stream, b.sequence)));
        events
    }

    /// Notes that `stream` holds an event at `sequence` elsewhere (an
    /// event `replay` reads from its input): what the embedded event store
    /// appends to it goes after it, and an exact expectation is checked
    /// against it.
    pub fn observe(&self, stream: &str, sequence: u64) {
        let mut tables = self.tables();
        let seen = tables.observed.entry(stream.to_owned()).or_default();
        *seen = (*seen).max(sequence);
    }

    /// A stream of the embedded event store, in order.
    pub fn stream_events(&self, stream: &str) -> Vec<LoggedEvent> {
        self.tables()
            .streams
            .get(stream)
            .cloned()
            .unwrap_or_default()
    }

    /// Every deadline set, ordered by key: for tests and `replay`.
    pub fn deadlines(&self) -> Vec<(EntityKey, u64)> {
        let mut due: Vec<(EntityKey, u64)> = self
            .tables()
            .due
            .iter()
            .map(|(key, at)| (key.clone(), *at))
            .collect();
        due.sort();
        due
    }
}
