//! Reading one SQS record: its identity, its stream and its typed event.
//!
//! Each record is read on its own; a record that cannot be read yields an
//! [`InvalidMessage`] naming what was wrong, and nothing else.
//!
//! | file | what it does |
//! | --- | --- |
//! | `envelope.rs` | the [`Event`] read from a body, and why a body is refused |
//! | `record.rs` | one SQS record read: [`Record::read`] |
//! | `body.rs` | one body read: the envelope's fields, `data` upcast and read, the fields bound |
//! | `versions.rs` | the domain's [`crate::versions::Versions`] resolved for reading: the plan of upcasts a body's `version` needs |
//!
//! A domain reads a body through this module ([`crate::Domain::parse`], in
//! `reading.rs`): the envelope builds on the domain's declarations, never
//! the other way round.

mod body;
mod reading;
mod record;
mod sealed;

pub(crate) use sealed::sealed_subject;

pub(crate) use body::parse_body;
pub use record::Record;

pub use crate::reason::InvalidMessage;

use crate::entity::{AnyEntity, EntityKey, Kind};
use crate::handling::{Addition, Decision, HandlerFault, How};

/// Largest `sequence` the contract allows: 2^63-1.
pub const MAX_SEQUENCE: u64 = i64::MAX as u64;

/// Every string in `data` holds 0 to 1,024 characters (the types may
/// declare less): an entity, a parked event and a conflict
/// record stay far below DynamoDB's 400 KB item.
pub const MAX_DATA_STRING: usize = 1024;

/// What reads a message body into an [`Event`]: a registered
/// [`crate::Domain`] (its events, their versions, its entity kinds and
/// counters).
pub trait Parser {
    /// Reads one message body.
    fn parse(&self, body: &str) -> Result<Event, InvalidMessage>;
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
            How::Addition(_) | How::Ignored(_) => &self.event_id,
        }
    }

    /// The ordering key: the aggregate id, or a deduplicated effect's
    /// counter id.
    pub fn stream(&self) -> &str {
        match &self.handling {
            How::Sequenced(apply) | How::Snapshot(apply) => apply.aggregate_id(),
            How::Addition(effect) => &effect.id,
            How::Ignored(ignored) => ignored.aggregate_id.as_deref().unwrap_or_default(),
        }
    }

    /// The event's sequence; `None` for a deduplicated effect.
    pub fn sequence(&self) -> Option<u64> {
        match &self.handling {
            How::Sequenced(apply) | How::Snapshot(apply) => Some(apply.sequence()),
            How::Addition(_) => None,
            How::Ignored(ignored) => ignored.sequence,
        }
    }

    /// The kind of entity the event is projected onto; `None` for a
    /// deduplicated effect.
    pub fn kind(&self) -> Option<&'static Kind> {
        match &self.handling {
            How::Sequenced(apply) | How::Snapshot(apply) => Some(apply.kind()),
            How::Addition(_) | How::Ignored(_) => None,
        }
    }

    /// The entity the event is projected onto; `None` for a deduplicated
    /// effect, which the store applies with its deduplication record.
    pub fn entity_key(&self) -> Option<EntityKey> {
        match &self.handling {
            How::Sequenced(apply) | How::Snapshot(apply) => {
                Some(EntityKey::new(apply.kind(), apply.aggregate_id()))
            }
            How::Addition(_) | How::Ignored(_) => None,
        }
    }

    /// Whether the event is projected onto the entity `key` (whether
    /// [`Event::entity_key`] is `key`, without building it).
    pub(crate) fn is_on(&self, key: &EntityKey) -> bool {
        match &self.handling {
            How::Sequenced(apply) | How::Snapshot(apply) => {
                apply.kind() == key.kind() && apply.aggregate_id() == key.id()
            }
            How::Addition(_) | How::Ignored(_) => false,
        }
    }

    /// The deduplicated effect, for an event handled so.
    pub fn deduplicated(&self) -> Option<&Addition> {
        match &self.handling {
            How::Addition(effect) => Some(effect),
            _ => None,
        }
    }

    /// Whether this consumer ignores it ([`crate::Handling::ignore`]): done,
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
            How::Addition(effect) => effect.handler,
            How::Ignored(_) => "ignored",
        }
    }

    /// Runs the event's handler on the entity slot (`None` while the entity
    /// does not exist), checked (see [`crate::handling`]). A deduplicated
    /// effect has no slot: `NotCreated`, the answer that cannot lose it.
    pub fn decide(&self, slot: &mut Option<AnyEntity>) -> Result<Decision, HandlerFault> {
        match &self.handling {
            How::Sequenced(apply) | How::Snapshot(apply) => apply.apply(slot),
            How::Addition(_) => Ok(Decision::NotCreated),
            How::Ignored(_) => Ok(Decision::Duplicate),
        }
    }
}

impl Event {
    /// [`Event::decide`] for a process's step: a process handler fills
    /// the reaction's outbox, a handler with effects its effects (any other
    /// leaves it empty).
    pub(crate) fn react(
        &self,
        slot: &mut Option<AnyEntity>,
        reaction: &mut crate::handling::Reaction,
    ) -> Result<Decision, HandlerFault> {
        match &self.handling {
            How::Sequenced(apply) | How::Snapshot(apply) => apply.react(slot, reaction),
            How::Addition(_) | How::Ignored(_) => self.decide(slot),
        }
    }

    /// [`Event::decide`] for a dry run: the handler's answer without the
    /// check and without copying the entity; `None` when it could not run.
    pub(crate) fn decide_unchecked(&self, slot: &mut Option<AnyEntity>) -> Option<Decision> {
        match &self.handling {
            How::Sequenced(apply) | How::Snapshot(apply) => apply.apply_unchecked(slot),
            How::Addition(_) => Some(Decision::NotCreated),
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
