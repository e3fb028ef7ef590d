//! A subject's erasure ([`crate::personal::ERASURE_TYPE`], appended by
//! `erase`), applied as a pass that also replaces the entity's personal
//! attributes: [`Handling::erasure`] on whichever entity kind the erasure's
//! stream projects onto in the consumer (a domain with personal data on
//! several kinds), or [`Handling::erase`] on one kind.

use std::marker::PhantomData;

use super::{Apply, pass, unbound, unwound};
use super::{Call, Decision, Guarded, HandlerFault, Handling, How, Ignored, Meta, Raw, Sequenced};
use crate::entity::{AnyEntity, Entity, Kind};
use crate::personal::Erasure;

impl Handling {
    /// A subject's erasure, on the entity its stream projects onto in this
    /// consumer, whatever its kind: the erasure names a type of its stream
    /// (`data.streamType`, written by `erase`), and the entity is the one
    /// this domain's handling of that type names (a type it ignores: the
    /// erasure is ignored too). Under the guard, the entity's personal
    /// attributes ([`Entity::PERSONAL`]) are replaced with its placeholder
    /// and its sequence moved, every other attribute kept; on an entity with
    /// no personal attribute it is a pass. What a domain with personal data
    /// on several kinds registers, and what any domain may.
    pub fn erasure(data: Erasure) -> Handling {
        Handling(Raw::Erasure(data))
    }

    /// A subject's erasure, on entities of kind `T` only: under the guard,
    /// the entity's personal attributes ([`Entity::PERSONAL`]) replaced
    /// with its placeholder and its sequence moved, every other attribute
    /// kept. On an entity with no personal attribute it is a pass. A domain
    /// whose personal data is on another kind too is refused when it is
    /// built: register [`Handling::erasure`] instead.
    pub fn erase<T: Entity>(data: Erasure) -> Handling {
        Handling::from(How::Sequenced(Box::new(Call {
            event: unbound(data),
            handler: erase::<T>,
            reads_data: true,
            style: PhantomData::<fn() -> (T, Guarded)>,
        })))
    }
}

/// The guard of a pass; at the entity's next sequence, its personal
/// attributes replaced first. An entity whose attributes cannot be replaced
/// is left as it is, not created: retried, as a fixed entity may take it.
fn erase<T: Entity>(entity: &mut Option<T>, event: &Sequenced<Erasure>) -> Decision {
    if let Some(current) = entity.as_mut()
        && current.sequence() == event.sequence - 1
        && let Err(reason) = current.erase_personal()
    {
        cannot_erase(T::KIND, &reason);
        return Decision::NotCreated;
    }
    let envelope = Sequenced {
        event_id: event.event_id.clone(),
        aggregate_id: event.aggregate_id.clone(),
        sequence: event.sequence,
        data: (),
    };
    pass(entity, &envelope)
}

fn cannot_erase(kind: &str, reason: &str) {
    tracing::error!(
        kind,
        reason,
        "an erasure cannot replace the entity's personal attributes: check Entity::PERSONAL"
    );
}

/// An erasure registered with [`Handling::erasure`], on `kind` (the kind
/// its stream's events project onto in this consumer), or ignored (`None`:
/// a stream this consumer does not project).
pub(crate) fn erasure_on(data: Erasure, kind: Option<&'static Kind>) -> How {
    match kind {
        Some(kind) => How::Sequenced(Box::new(OnAnyKind {
            kind,
            event: unbound(data),
        })),
        None => How::Ignored(Ignored::default()),
    }
}

/// An erasure on an entity of a kind found as the body was read.
struct OnAnyKind {
    kind: &'static Kind,
    event: Sequenced<Erasure>,
}

impl OnAnyKind {
    /// The guard of an erasure on `entity`, a copy: applied, it is left at
    /// the event, its personal attributes replaced.
    fn decide(&self, entity: &mut Option<AnyEntity>) -> Result<Decision, HandlerFault> {
        let Some(current) = entity else {
            return Ok(Decision::NotCreated);
        };
        if current.kind() != self.kind {
            return Err(self.fault(format!(
                "erases {} entities, and the slot holds a {}",
                self.kind.name,
                current.kind().name
            )));
        }
        let sequence = self.event.sequence;
        if current.sequence() != sequence - 1 {
            return Ok(if current.sequence() >= sequence {
                Decision::Duplicate
            } else {
                Decision::Gap
            });
        }
        if let Err(reason) = current.erase_personal() {
            cannot_erase(self.kind.name, &reason);
            return Ok(Decision::NotCreated);
        }
        current
            .advance(sequence, &self.event.event_id)
            .map_err(|reason| {
                self.fault(format!(
                    "cannot move the {} entity to the erasure: {reason} (implement Entity::advance)",
                    self.kind.name
                ))
            })?;
        Ok(Decision::Applied)
    }

    fn fault(&self, problem: String) -> HandlerFault {
        HandlerFault {
            handler: self.handler(),
            problem,
        }
    }
}

impl Meta for OnAnyKind {
    fn bind(&mut self, event_id: String, aggregate_id: String, sequence: u64) {
        self.event.event_id = event_id;
        self.event.aggregate_id = aggregate_id;
        self.event.sequence = sequence;
    }

    fn kind(&self) -> &'static Kind {
        self.kind
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
        "sequence_guard::Handling::erasure"
    }

    fn reads_data(&self) -> bool {
        true
    }
}

impl Apply for OnAnyKind {
    fn apply(&self, slot: &mut Option<AnyEntity>) -> Result<Decision, HandlerFault> {
        let mut entity = slot.clone();
        let decision = unwound(self.handler(), || self.decide(&mut entity))??;
        if decision == Decision::Applied {
            *slot = entity;
        }
        Ok(decision)
    }

    fn apply_unchecked(&self, slot: &mut Option<AnyEntity>) -> Option<Decision> {
        match unwound(self.handler(), || self.decide(slot)) {
            Ok(Ok(decision)) => Some(decision),
            _ => {
                *slot = None;
                None
            }
        }
    }
}
