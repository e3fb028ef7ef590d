//! How an event is handled: the handler's [`Decision`], the event as a
//! handler sees it ([`Sequenced`]), and the three ways an event type can be
//! handled ([`Handling`]): sequenced (the guard), snapshot (applied only if
//! newer), or a deduplicated effect (a counter's `ADD`, once per event).
//!
//! The runner checks every answer of a sequenced or snapshot handler against
//! the entity, on every path (a message, a parked event drained, `replay`,
//! `rebuild`, the [`crate::testkit`]): `Applied` only on the entity's next
//! sequence (or creating it), leaving it at the event's sequence and id;
//! `Duplicate` only for an event the entity has (at its sequence or
//! below), or from a creation (a handler that makes the entity from
//! nothing: asked once more, on no entity, to tell); `Gap` only when events
//! are missing; `NotCreated` only with no entity; any answer but `Applied`
//! leaves it unchanged. A handler that breaks this (one that forgot the
//! guard) gets a [`HandlerFault`] for that message, never a write.
//!
//! | file | what it holds |
//! | --- | --- |
//! | `mod.rs` | [`Decision`], [`Sequenced`], [`Counter`], [`Handling`], and the calls of sequenced, snapshot and pass handlers |
//! | `checks.rs` | the checks of a guarded answer against the entity |
//! | `effects.rs` | [`Handling::sequenced_with_effects`]: a sequenced handler that also adds to counters of other keys, once per event |
//! | `erasure.rs` | [`Handling::erasure`] and [`Handling::erase`]: a subject's erasure, a pass that also replaces the entity's personal attributes |
//! | `reacting.rs` | a process's handler: the same checks, and its outbox |

use std::any::type_name;
use std::fmt;
use std::marker::PhantomData;

use crate::answer::unwound;
use crate::entity::{AnyEntity, Entity, Kind};

pub use crate::answer::{
    Addition, Counter, Decision, Effect, Effects, HandlerFault, MAX_EFFECT_ID, MAX_EFFECT_ITEMS,
    Outbox, Sequenced, effect_items,
};

mod checks;
mod effects;
mod erasure;
mod reacting;

use checks::{misapplied, misplaced};
pub(crate) use erasure::erasure_on;

/// How one event is handled: what a domain's registration answers for each
/// event type (see [`crate::domain::Events`]).
pub struct Handling(pub(crate) Raw);

/// A registration's answer: how the event is handled, or an erasure whose
/// entity kind the domain finds from its stream ([`Handling::erasure`]) as
/// the body is read.
pub(crate) enum Raw {
    How(How),
    Erasure(crate::personal::Erasure),
}

impl From<How> for Handling {
    fn from(how: How) -> Self {
        Handling(Raw::How(how))
    }
}

pub(crate) enum How {
    Sequenced(Box<dyn Apply>),
    Snapshot(Box<dyn Apply>),
    Addition(Addition),
    Ignored(Ignored),
}

/// An event of a stream the consumer does not project: done, nothing read
/// or written. Its envelope's stream and sequence, when it has them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Ignored {
    pub(crate) aggregate_id: Option<String>,
    pub(crate) sequence: Option<u64>,
}

impl Handling {
    /// Sequenced: `handler` holds the guard, and is given the entity (`None`
    /// while it does not exist) and the event. It answers `Applied` and
    /// moves the entity to the event's sequence (set it, or increment it),
    /// or answers anything else and leaves the entity as it is. Gaps are
    /// parked, and drained when the events before them arrive.
    pub fn sequenced<T, D, F>(data: D, handler: F) -> Handling
    where
        T: Entity,
        D: fmt::Debug + Send + Sync + 'static,
        F: Fn(&mut Option<T>, &Sequenced<D>) -> Decision + Send + Sync + 'static,
    {
        Handling::from(How::Sequenced(Box::new(Call {
            event: unbound(data),
            handler,
            reads_data: true,
            style: PhantomData::<fn() -> (T, Guarded)>,
        })))
    }

    /// A complete snapshot: `handler` builds the entity at the event's
    /// sequence, and it replaces the stored one only if it is newer. An
    /// older or equal snapshot is a duplicate; gaps are expected and never
    /// parked.
    pub fn snapshot<T, D, F>(data: D, handler: F) -> Handling
    where
        T: Entity,
        D: fmt::Debug + Send + Sync + 'static,
        F: Fn(&Sequenced<D>) -> T + Send + Sync + 'static,
    {
        Handling::from(How::Snapshot(Box::new(Call {
            event: unbound(data),
            handler,
            reads_data: true,
            style: PhantomData::<fn() -> (T, Complete)>,
        })))
    }

    /// Sequenced, with effects on items of other keys (a member's numbers
    /// fed by book events): as [`Handling::sequenced`], and the handler is
    /// also given [`Effects`] to add to counters keyed otherwise than by
    /// the stream. Only an `Applied` answer may fill it; the effects are
    /// written in the same transaction as the entity, whose guard makes
    /// them once per event (see [`Effects`]).
    pub fn sequenced_with_effects<T, D, F>(data: D, handler: F) -> Handling
    where
        T: Entity,
        D: fmt::Debug + Send + Sync + 'static,
        F: Fn(&mut Option<T>, &Sequenced<D>, &mut Effects) -> Decision + Send + Sync + 'static,
    {
        Handling::from(How::Sequenced(Box::new(Call {
            event: unbound(data),
            handler,
            reads_data: true,
            style: PhantomData::<fn() -> (T, effects::Projecting)>,
        })))
    }

    /// A type of a stream this consumer projects whose events change nothing
    /// it keeps (another consumer's concern: an order's address for a status
    /// view): an update that only moves the entity's `sequence` and
    /// `lastEventId` to the event's ([`Entity::advance`]), so that the guard
    /// stays exact. The entity missing, a duplicate and a gap are decided as
    /// for any update (a gap is parked). Its `data` is not read: declare the
    /// variant's payload `serde::de::IgnoredAny`; nor is its `version`.
    pub fn pass<T: Entity>() -> Handling {
        Handling::from(How::Sequenced(Box::new(Call {
            event: unbound(()),
            handler: pass::<T>,
            reads_data: false,
            style: PhantomData::<fn() -> (T, Guarded)>,
        })))
    }

    /// A process's handler ([`crate::process`]): sequenced, with the
    /// guard checked as [`Handling::sequenced`]'s, and given an [`Outbox`]
    /// for the events to append and the deadline to set or clear. Only an
    /// `Applied` answer may fill it; the state's change and the appends
    /// are written in one transaction, or not at all.
    pub fn process<T, D, F>(data: D, handler: F) -> Handling
    where
        T: Entity,
        D: fmt::Debug + Send + Sync + 'static,
        F: Fn(&mut Option<T>, &Sequenced<D>, &mut Outbox) -> Decision + Send + Sync + 'static,
    {
        Handling::from(How::Sequenced(Box::new(Call {
            event: unbound(data),
            handler,
            reads_data: true,
            style: PhantomData::<fn() -> (T, Reacting)>,
        })))
    }

    /// A type of a stream this consumer does not project at all (a product
    /// event for an order view): done, nothing read, nothing written. Its
    /// `data` is not read: declare the variant's payload
    /// `serde::de::IgnoredAny`; nor is its `version`. The rest of the
    /// envelope is still checked.
    pub fn ignore() -> Handling {
        Handling::from(How::Ignored(Ignored::default()))
    }

    /// A deduplicated effect: not sequenced, `delta` added to the counter
    /// `id` once per event and `handler` name. The counter's id is the
    /// event's stream.
    pub fn add(
        handler: &'static str,
        counter: &'static Counter,
        id: impl Into<String>,
        delta: i64,
    ) -> Handling {
        Handling::from(How::Addition(Addition {
            handler,
            counter,
            id: id.into(),
            delta,
        }))
    }
}

impl Handling {
    /// Whether the event's `data` and `version` are read: not for a type
    /// passed or ignored ([`Handling::pass`], [`Handling::ignore`]).
    pub(crate) fn reads_data(&self) -> bool {
        match &self.0 {
            Raw::How(How::Sequenced(apply)) => apply.reads_data(),
            Raw::How(How::Snapshot(_) | How::Addition(_)) | Raw::Erasure(_) => true,
            Raw::How(How::Ignored(_)) => false,
        }
    }
}

impl fmt::Debug for Handling {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Raw::How(How::Sequenced(apply)) => write!(f, "Sequenced({})", apply.handler()),
            Raw::How(How::Snapshot(apply)) => write!(f, "Snapshot({})", apply.handler()),
            Raw::How(How::Addition(effect)) => write!(f, "{effect:?}"),
            Raw::How(How::Ignored(_)) => f.write_str("Ignored"),
            Raw::Erasure(_) => f.write_str("Erasure"),
        }
    }
}

/// The guard of a pass: the entity moves to the event's sequence and id,
/// nothing else changes. Checked as every handler's answer: an entity that
/// [`Entity::advance`] cannot move is a handler error.
fn pass<T: Entity>(entity: &mut Option<T>, event: &Sequenced<()>) -> Decision {
    let Some(entity) = entity else {
        return Decision::NotCreated;
    };
    if entity.sequence() != event.sequence - 1 {
        return if entity.sequence() >= event.sequence {
            Decision::Duplicate
        } else {
            Decision::Gap
        };
    }
    if let Err(reason) = entity.advance(event.sequence, &event.event_id) {
        tracing::error!(
            kind = T::KIND,
            reason = %reason,
            "a pass cannot move the entity: implement Entity::advance"
        );
    }
    Decision::Applied
}

fn unbound<D>(data: D) -> Sequenced<D> {
    Sequenced {
        event_id: String::new(),
        aggregate_id: String::new(),
        sequence: 0,
        data,
    }
}

/// A sequenced or snapshot event's envelope fields and its handler's name,
/// with the types erased.
pub(crate) trait Meta {
    /// Sets the envelope's fields, once read.
    fn bind(&mut self, event_id: String, aggregate_id: String, sequence: u64);
    fn kind(&self) -> &'static Kind;
    fn event_id(&self) -> &str;
    fn aggregate_id(&self) -> &str;
    fn sequence(&self) -> u64;
    /// The handler's name (its path), for errors and logs.
    fn handler(&self) -> &'static str;
    /// Whether the handler reads the event's `data` (and so its
    /// `version`): not a pass's.
    fn reads_data(&self) -> bool;
}

/// A sequenced or snapshot event, its data and its handler, with the types
/// erased: what the runner calls on an entity slot.
pub(crate) trait Apply: Meta + Send + Sync {
    /// Runs the handler on the slot, checked: on a fault the slot is left
    /// as it was.
    fn apply(&self, slot: &mut Option<AnyEntity>) -> Result<Decision, HandlerFault>;
    /// Runs the handler on the slot, unchecked and without a copy: for a
    /// dry run whose slot is thrown away (an entity of another kind: `None`).
    fn apply_unchecked(&self, slot: &mut Option<AnyEntity>) -> Option<Decision>;
    /// [`Apply::apply`] on a step's path: a process's handler fills the
    /// reaction's outbox, a handler with effects its effects (any other
    /// leaves it empty).
    fn react(
        &self,
        slot: &mut Option<AnyEntity>,
        reaction: &mut Reaction,
    ) -> Result<Decision, HandlerFault> {
        let _ = reaction;
        self.apply(slot)
    }
}

/// What a handler answered besides its decision, on a step's path: a
/// process's outbox, with the entity as it was before the event when the
/// outbox is filled, and an applied event's effects on counters of other
/// keys with the entity as it was before the event (for a step that cannot
/// take them to put back).
#[derive(Debug, Default)]
pub(crate) struct Reaction {
    pub(crate) outbox: Outbox,
    /// The slot before an applied event whose handler filled its outbox.
    pub(crate) before: Option<Option<AnyEntity>>,
    pub(crate) projected: Option<Projected>,
}

impl Reaction {
    /// An empty reaction, at `now` (epoch seconds: the outbox's clock).
    pub(crate) fn at(now: u64) -> Self {
        Reaction {
            outbox: Outbox::at(now),
            before: None,
            projected: None,
        }
    }
}

/// An applied event's effects, and the entity before it.
#[derive(Debug, Clone, Default)]
pub(crate) struct Projected {
    pub(crate) effects: Vec<Effect>,
    pub(crate) before: Option<AnyEntity>,
}

/// An event bound to its handler; `S` says how it is handled.
struct Call<T, D, F, S> {
    event: Sequenced<D>,
    handler: F,
    /// `false` for a pass: its `data` and `version` are not read.
    reads_data: bool,
    style: PhantomData<fn() -> (T, S)>,
}

/// The guard's way: the handler answers, the runner checks the answer.
struct Guarded;

/// A complete state: applied only if newer.
struct Complete;

/// A process's way: the guard's, with an outbox.
struct Reacting;

impl<T: Entity, D, F, S> Meta for Call<T, D, F, S> {
    fn bind(&mut self, event_id: String, aggregate_id: String, sequence: u64) {
        self.event.event_id = event_id;
        self.event.aggregate_id = aggregate_id;
        self.event.sequence = sequence;
    }

    fn kind(&self) -> &'static Kind {
        Kind::of::<T>()
    }

    fn event_id(&self) -> &str {
        &self.event.event_id
    }

    fn aggregate_id(&self) -> &str {
        &self.event.aggregate_id
    }

    fn sequence(&self) -> u64 {
        self.event.sequence
    }

    fn handler(&self) -> &'static str {
        type_name::<F>()
    }

    fn reads_data(&self) -> bool {
        self.reads_data
    }
}

/// The slot as a `T`; a fault when it holds another kind.
fn typed<T: Entity>(
    slot: &Option<AnyEntity>,
    handler: &'static str,
) -> Result<Option<T>, HandlerFault> {
    match slot {
        None => Ok(None),
        Some(entity) => match entity.get::<T>() {
            Some(typed) => Ok(Some(typed.clone())),
            None => Err(HandlerFault {
                handler,
                problem: format!(
                    "takes a {} entity, and the slot holds a {}",
                    T::KIND,
                    entity.kind().name
                ),
            }),
        },
    }
}

impl<T, D, F> Apply for Call<T, D, F, Guarded>
where
    T: Entity,
    D: Send + Sync,
    F: Fn(&mut Option<T>, &Sequenced<D>) -> Decision + Send + Sync,
{
    fn apply(&self, slot: &mut Option<AnyEntity>) -> Result<Decision, HandlerFault> {
        let mut entity: Option<T> = typed(slot, self.handler())?;
        let decision = unwound(self.handler(), || (self.handler)(&mut entity, &self.event))?;
        let before = slot.as_ref().and_then(AnyEntity::get::<T>);
        let at = before.map(Entity::sequence);
        let problem = misapplied(decision, before, entity.as_ref(), &self.event)
            .or_else(|| misplaced(decision, at, self.event.sequence))
            .or_else(|| self.duplicate_behind(decision, at));
        if let Some(problem) = problem {
            return Err(HandlerFault {
                handler: self.handler(),
                problem,
            });
        }
        if decision == Decision::Applied {
            *slot = entity.map(AnyEntity::new);
        }
        Ok(decision)
    }

    fn apply_unchecked(&self, slot: &mut Option<AnyEntity>) -> Option<Decision> {
        let mut entity: Option<T> = AnyEntity::take(slot).ok()?;
        let decision = unwound(self.handler(), || (self.handler)(&mut entity, &self.event));
        // After a panic the entity may be half changed: the slot is left empty.
        *slot = decision
            .is_ok()
            .then(|| entity.map(AnyEntity::new))
            .flatten();
        decision.ok()
    }
}

impl<T, D, F> Call<T, D, F, Guarded>
where
    T: Entity,
    F: Fn(&mut Option<T>, &Sequenced<D>) -> Decision,
{
    /// What is wrong with `Duplicate` on an entity behind the event (at
    /// `at`, below the event's sequence): right for a creation (the entity
    /// exists: not applied again), wrong for an update (the event is its
    /// next, or events are missing: a gap answered duplicate would be
    /// completed and lost). A handler that makes the entity from nothing is
    /// a creation: it is asked once more, on no entity, to tell.
    fn duplicate_behind(&self, decision: Decision, at: Option<u64>) -> Option<String> {
        let sequence = self.event.sequence;
        let at = at.filter(|at| decision == Decision::Duplicate && *at < sequence)?;
        let mut nothing: Option<T> = None;
        let creates = matches!(
            unwound(self.handler(), || (self.handler)(&mut nothing, &self.event)),
            Ok(Decision::Applied)
        );
        if creates {
            return None;
        }
        Some(if at == sequence - 1 {
            format!(
                "answered duplicate to event {sequence} on an entity at sequence {at}: the event is its next, not a duplicate"
            )
        } else {
            format!(
                "answered duplicate to event {sequence} on an entity at sequence {at}: events {} to {} are missing, a gap (does the handler check for one?)",
                at + 1,
                sequence - 1
            )
        })
    }
}

impl<T, D, F> Apply for Call<T, D, F, Complete>
where
    T: Entity,
    D: Send + Sync,
    F: Fn(&Sequenced<D>) -> T + Send + Sync,
{
    fn apply(&self, slot: &mut Option<AnyEntity>) -> Result<Decision, HandlerFault> {
        if slot
            .as_ref()
            .is_some_and(|current| current.get::<T>().is_none())
        {
            typed::<T>(slot, self.handler())?;
        }
        if slot
            .as_ref()
            .is_some_and(|current| current.sequence() >= self.event.sequence)
        {
            return Ok(Decision::Duplicate);
        }
        let snapshot = unwound(self.handler(), || (self.handler)(&self.event))?;
        if snapshot.sequence() != self.event.sequence {
            return Err(HandlerFault {
                handler: self.handler(),
                problem: format!(
                    "built a snapshot at sequence {} from event {}",
                    snapshot.sequence(),
                    self.event.sequence
                ),
            });
        }
        if snapshot.last_event_id() != self.event.event_id {
            return Err(HandlerFault {
                handler: self.handler(),
                problem: format!(
                    "built a snapshot whose last event id is `{}`, not the event's",
                    snapshot.last_event_id()
                ),
            });
        }
        *slot = Some(AnyEntity::new(snapshot));
        Ok(Decision::Applied)
    }

    fn apply_unchecked(&self, slot: &mut Option<AnyEntity>) -> Option<Decision> {
        self.apply(slot).ok()
    }
}
