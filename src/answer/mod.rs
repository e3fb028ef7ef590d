//! What a handler answers and asks for, below everything a team declares:
//! the guard's answer ([`Decision`]), the event as a handler sees it
//! ([`Sequenced`]), a handler that broke its rule ([`HandlerFault`]), the
//! effects it adds to counters of other keys ([`Effects`]), the events a
//! process's handler appends and the deadline it sets ([`Outbox`]), and a
//! new event with where its stream must stand ([`NewEvent`],
//! [`ExpectedSequence`]). Plain data: nothing here reads or writes a table,
//! or knows an entity.
//!
//! | file | what it holds |
//! | --- | --- |
//! | `mod.rs` | [`Decision`], [`Sequenced`], [`HandlerFault`] |
//! | `effects.rs` | [`Counter`], [`Addition`], [`Effects`]: numbers added to items of their own |
//! | `outbox.rs` | [`Outbox`], [`Outgoing`], [`Due`], [`DueOutbox`]: what a process's step appends, and its deadline |
//! | `event.rs` | [`NewEvent`], [`ExpectedSequence`]: an event to append, and where its stream must stand |

use std::any::Any;
use std::panic::{AssertUnwindSafe, catch_unwind};

mod effects;
mod event;
mod outbox;

pub use effects::{
    Addition, Counter, Effect, Effects, MAX_EFFECT_ID, MAX_EFFECT_ITEMS, items as effect_items,
};
pub use event::{ExpectedSequence, NewEvent};
pub use outbox::{Due, DueOutbox, MAX_OUTGOING, Outbox, Outgoing};

/// What a handler decided for one event.
///
/// `Applied` and `Duplicate` are the guard's `true` (done: acknowledge the
/// message); `Gap` and `NotCreated` are its `false` (retry later); `Invalid`
/// says the event can never be applied (fail it, as an invalid body).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// The event was applied; the entity's `sequence` is now the event's.
    Applied,
    /// Already applied (or, for a creation, the entity already exists).
    Duplicate,
    /// An earlier event of the aggregate has not been applied yet.
    Gap,
    /// An update for an entity whose creation has not been processed yet.
    NotCreated,
    /// The event can never be applied to the entity (an amount that would
    /// take a sum past the integer range): nothing written, and the
    /// message failed as an invalid one is (retried until the dead-letter
    /// queue, its stream waiting behind it). Right only where `Applied`
    /// would be (the entity's next sequence, or a creation); log why.
    Invalid,
}

impl Decision {
    /// The guard's answer: `true` means done, `false` means retry later.
    pub fn is_done(self) -> bool {
        matches!(self, Decision::Applied | Decision::Duplicate)
    }

    /// The decision as logs and errors name it (`not created`).
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Applied => "applied",
            Decision::Duplicate => "duplicate",
            Decision::Gap => "gap",
            Decision::NotCreated => "not created",
            Decision::Invalid => "invalid",
        }
    }
}

/// A sequenced event as its handler sees it: the envelope's fields and the
/// event type's data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sequenced<T> {
    /// The envelope's `eventId`.
    pub event_id: String,
    /// The envelope's `aggregateId`: the entity's id, and the event's stream.
    pub aggregate_id: String,
    /// 1 up to `i64::MAX`, checked when the message is read.
    pub sequence: u64,
    /// The event's `data`, read as its event type declares it.
    pub data: T,
}

/// A handler that broke the rule its answer must keep.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("handler {handler} {problem}")]
pub struct HandlerFault {
    /// The handler's name (its path).
    pub handler: &'static str,
    /// What it did wrong, the rest of the message after the handler's name
    /// (`answered applied to event 3 and left no entity`).
    pub problem: String,
}

/// Runs a user's handler; a panic becomes a [`HandlerFault`] of this event
/// alone, so that one bad handler never fails a whole batch. The panic's
/// message is not kept (it may quote the event's data): the panic hook has
/// logged it, with where it happened.
pub(crate) fn unwound<R>(
    handler: &'static str,
    call: impl FnOnce() -> R,
) -> Result<R, HandlerFault> {
    catch_unwind(AssertUnwindSafe(call)).map_err(|payload: Box<dyn Any + Send>| {
        drop(payload);
        HandlerFault {
            handler,
            problem: "panicked (the log line before this one says where): nothing written"
                .to_owned(),
        }
    })
}
