//! [`Handling::erase`]: a subject's erasure
//! ([`crate::personal::ERASURE_TYPE`], appended by `erase`), applied as a
//! pass that also replaces the entity's personal attributes.

use std::marker::PhantomData;

use super::{Call, Decision, Guarded, Handling, How, Sequenced, pass, unbound};
use crate::entity::Entity;
use crate::personal::Erasure;

impl Handling {
    /// A subject's erasure: under the guard, the entity's personal
    /// attributes ([`Entity::PERSONAL`]) replaced with its placeholder and
    /// its sequence moved, every other attribute kept. On an entity with no
    /// personal attribute it is a pass.
    pub fn erase<T: Entity>(data: Erasure) -> Handling {
        Handling(How::Sequenced(Box::new(Call {
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
        tracing::error!(
            kind = T::KIND,
            reason = %reason,
            "an erasure cannot replace the entity's personal attributes: check Entity::PERSONAL"
        );
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
