//! A process's handler ([`super::Handling::process`]): the guard's checks,
//! and an outbox that only an applied answer may fill.

use super::checks::{misapplied, misplaced};
use super::{Apply, Call, Decision, HandlerFault, Meta, Outbox, Reacting, Reaction, Sequenced};
use super::{typed, unwound};
use crate::entity::{AnyEntity, Entity};

impl<T, D, F> Apply for Call<T, D, F, Reacting>
where
    T: Entity,
    D: Send + Sync,
    F: Fn(&mut Option<T>, &Sequenced<D>, &mut Outbox) -> Decision + Send + Sync,
{
    /// Outside a process's step (`replay`'s fold, `rebuild`, `verify`):
    /// what it would append is not wanted, the events are in the store.
    fn apply(&self, slot: &mut Option<AnyEntity>) -> Result<Decision, HandlerFault> {
        self.react(slot, &mut Reaction::default())
    }

    fn apply_unchecked(&self, slot: &mut Option<AnyEntity>) -> Option<Decision> {
        let mut entity: Option<T> = AnyEntity::take(slot).ok()?;
        let mut outbox = Outbox::default();
        let decision = unwound(self.handler(), || {
            (self.handler)(&mut entity, &self.event, &mut outbox)
        });
        *slot = decision
            .is_ok()
            .then(|| entity.map(AnyEntity::new))
            .flatten();
        decision.ok()
    }

    fn react(
        &self,
        slot: &mut Option<AnyEntity>,
        reaction: &mut Reaction,
    ) -> Result<Decision, HandlerFault> {
        let mut entity: Option<T> = typed(slot, self.handler())?;
        let mut answered = Outbox::at(reaction.outbox.now());
        let decision = unwound(self.handler(), || {
            (self.handler)(&mut entity, &self.event, &mut answered)
        })?;
        let before = slot.as_ref().and_then(AnyEntity::get::<T>);
        let at = before.map(Entity::sequence);
        let problem = misapplied(decision, before, entity.as_ref(), &self.event)
            .or_else(|| misplaced(decision, at, self.event.sequence))
            .or_else(|| reacted(decision, &answered, self.event.sequence))
            .or_else(|| {
                // A duplicate behind the entity is a creation's answer only.
                let behind = at.filter(|at| decision == Decision::Duplicate && *at < self.event.sequence)?;
                let mut nothing: Option<T> = None;
                let creates = matches!(
                    unwound(self.handler(), || {
                        (self.handler)(&mut nothing, &self.event, &mut Outbox::default())
                    }),
                    Ok(Decision::Applied)
                );
                (!creates).then(|| {
                    format!(
                        "answered duplicate to event {} on an entity at sequence {behind}: only a creation answers so (does the handler check for a gap?)",
                        self.event.sequence
                    )
                })
            });
        if let Some(problem) = problem {
            return Err(HandlerFault {
                handler: self.handler(),
                problem,
            });
        }
        if decision == Decision::Applied {
            let before = std::mem::replace(slot, entity.map(AnyEntity::new));
            if !answered.is_empty() {
                reaction.before = Some(before);
            }
            reaction.outbox = answered;
        }
        Ok(decision)
    }
}

/// What is wrong with a process handler's outbox for its answer: only
/// `Applied` appends or moves the deadline (a duplicate that appended would
/// append again on every redelivery).
fn reacted(decision: Decision, outbox: &Outbox, sequence: u64) -> Option<String> {
    if let Some(problem) = outbox.problem() {
        return Some(problem.to_owned());
    }
    if decision != Decision::Applied && !outbox.is_empty() {
        return Some(format!(
            "answered {} to event {sequence} and filled the outbox: only an applied event appends or sets a deadline",
            decision.as_str()
        ));
    }
    None
}
