//! Projections keyed by something other than the stream: a sequenced
//! handler that also adds to counters of other keys ([`Effects`]), given by
//! [`super::Handling::sequenced_with_effects`].
//!
//! A book's events feed the book's entity (keyed by its stream) and, in the
//! same write, a member's numbers (keyed by the member): `onLoan` up on
//! `BookLent`, down on `BookReturned`. The effects are written in the same
//! transaction as the stream's entity, whose write is conditional on its
//! `sequence` (the guard). So they are applied once per event, with no
//! deduplication record: a duplicate, a redelivery after a lost answer and
//! a lost race find the entity at or past the event, and write nothing.
//!
//! | rule | why |
//! | --- | --- |
//! | only an `Applied` answer may have effects | any other writes nothing, so its effects would be lost or applied again |
//! | effects add (a counter's `ADD`), never set | events of several streams reach one member's item in no order: a sum is the same in any order |
//! | the effects of one step on one item are merged | a transaction touches an item once: deltas on one item are summed |
//! | at most [`MAX_EFFECT_ITEMS`] items per event | with the entity's write, one transaction (100 items) |
//! | a counter must be registered in the domain | as for [`super::Handling::add`]: `inspect` names it, its attribute is checked |
//!
//! An item that many streams touch at once (a daily total) is a hot item:
//! DynamoDB may cancel a transaction for another in flight on it
//! (`TransactionConflict`); its messages fail, and their redelivery is
//! applied once, as any retry is.
//!
//! Every path that runs the consumer's steps writes them (a message, a
//! parked event drained, `replay`, `rebuild`, `verify`'s fold);
//! [`crate::envelope::Event::decide`] runs the handler and drops them. The
//! [`crate::testkit`] keeps them, checked as the runner checks them, within
//! the domain: `given(..).within(&domain).when(..).adds_effects(..)`.

use super::checks::{misapplied, misplaced};
use super::{
    Apply, Call, Decision, Effects, HandlerFault, Meta, Projected, Reaction, Sequenced, typed,
    unwound,
};
use crate::entity::{AnyEntity, Entity};

/// A handler with effects: the guard's way, with [`Effects`].
pub(super) struct Projecting;

impl<T, D, F> Apply for Call<T, D, F, Projecting>
where
    T: Entity,
    D: Send + Sync,
    F: Fn(&mut Option<T>, &Sequenced<D>, &mut Effects) -> Decision + Send + Sync,
{
    /// Outside a step: checked, the effects dropped.
    fn apply(&self, slot: &mut Option<AnyEntity>) -> Result<Decision, HandlerFault> {
        self.react(slot, &mut Reaction::default())
    }

    fn apply_unchecked(&self, slot: &mut Option<AnyEntity>) -> Option<Decision> {
        let mut entity: Option<T> = AnyEntity::take(slot).ok()?;
        let mut effects = Effects::default();
        let decision = unwound(self.handler(), || {
            (self.handler)(&mut entity, &self.event, &mut effects)
        });
        *slot = decision
            .is_ok()
            .then(|| entity.map(AnyEntity::new))
            .flatten();
        decision.ok()
    }

    /// Checked as a sequenced handler's answer; an applied one's effects
    /// go in the reaction, with the entity as it was (for a step that
    /// cannot take them to put back).
    fn react(
        &self,
        slot: &mut Option<AnyEntity>,
        reaction: &mut Reaction,
    ) -> Result<Decision, HandlerFault> {
        let mut entity: Option<T> = typed(slot, self.handler())?;
        let mut effects = Effects::default();
        let decision = unwound(self.handler(), || {
            (self.handler)(&mut entity, &self.event, &mut effects)
        })?;
        let before = slot.as_ref().and_then(AnyEntity::get::<T>);
        let at = before.map(Entity::sequence);
        let problem = misapplied(decision, before, entity.as_ref(), &self.event)
            .or_else(|| misplaced(decision, at, self.event.sequence))
            .or_else(|| projected(decision, &effects, self.event.sequence))
            .or_else(|| self.duplicate_behind(decision, at));
        if let Some(problem) = problem {
            return Err(HandlerFault {
                handler: self.handler(),
                problem,
            });
        }
        if decision == Decision::Applied {
            let before = std::mem::replace(slot, entity.map(AnyEntity::new));
            reaction.projected = Some(Projected {
                effects: effects.into_effects(),
                before,
            });
        }
        Ok(decision)
    }
}

impl<T, D, F> Call<T, D, F, Projecting>
where
    T: Entity,
    F: Fn(&mut Option<T>, &Sequenced<D>, &mut Effects) -> Decision,
{
    /// `Duplicate` on an entity behind the event is a creation's answer
    /// only (see the guarded handler's `duplicate_behind`).
    fn duplicate_behind(&self, decision: Decision, at: Option<u64>) -> Option<String> {
        let sequence = self.event.sequence;
        let at = at.filter(|at| decision == Decision::Duplicate && *at < sequence)?;
        let mut nothing: Option<T> = None;
        let creates = matches!(
            unwound(self.handler(), || {
                (self.handler)(&mut nothing, &self.event, &mut Effects::default())
            }),
            Ok(Decision::Applied)
        );
        (!creates).then(|| {
            format!(
                "answered duplicate to event {sequence} on an entity at sequence {at}: only a creation answers so (does the handler check for a gap?)"
            )
        })
    }
}

/// What is wrong with a handler's effects for its answer: only `Applied`
/// has effects (any other answer writes nothing, and a duplicate that
/// added would add again on every redelivery).
fn projected(decision: Decision, effects: &Effects, sequence: u64) -> Option<String> {
    if decision != Decision::Applied && !effects.is_empty() {
        return Some(format!(
            "answered {} to event {sequence} and added to counters: only an applied event has effects",
            decision.as_str()
        ));
    }
    effects.problem()
}
