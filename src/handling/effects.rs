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
//! [`crate::envelope::Event::decide`] and the [`crate::testkit`] run the handler and
//! drop them: test them by calling the handler with an [`Effects`] of your
//! own.

use super::checks::{misapplied, misplaced};
use super::{Apply, Call, Counter, Decision, HandlerFault, Meta, Sequenced, typed, unwound};
use crate::entity::{AnyEntity, Entity};
use crate::process::Outbox;

/// The most items of other keys one event's effects touch (a transaction
/// holds 100 items: the stream's entity, what the step parks and drains,
/// and these).
pub const MAX_EFFECT_ITEMS: usize = 50;

/// The longest id an effect's counter takes, in bytes (a DynamoDB
/// partition key holds 2,048).
pub const MAX_EFFECT_ID: usize = 1024;

/// One effect on an item of another key: `delta` added to the counter
/// `id` (the item `<kind>#<id>`, `sort_key`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Effect {
    /// The counter added to (registered in the domain).
    pub counter: &'static Counter,
    /// The counter's id: the key of the item, other than the stream.
    pub id: String,
    /// The amount added (negative to subtract).
    pub delta: i64,
}

/// What a handler of [`super::Handling::sequenced_with_effects`] does to
/// items of other keys, besides moving its stream's entity. Written with
/// the entity's write, once per event; only an `Applied` answer may fill it.
///
/// ```
/// use sequence_guard::handling::{Counter, Effects};
///
/// static ON_LOAN: Counter = Counter { kind: "MEMBER", sort_key: "LOANS", attribute: "onLoan" };
///
/// let mut effects = Effects::default();
/// effects.add(&ON_LOAN, "ada", 1);
/// assert_eq!(effects.effects()[0].delta, 1);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Effects {
    effects: Vec<Effect>,
}

impl Effects {
    /// Adds `delta` to the counter `id` (negative to subtract), in the same
    /// write as the event's entity.
    pub fn add(&mut self, counter: &'static Counter, id: impl Into<String>, delta: i64) {
        self.effects.push(Effect {
            counter,
            id: id.into(),
            delta,
        });
    }

    /// The effects so far, in the order given.
    pub fn effects(&self) -> &[Effect] {
        &self.effects
    }

    /// Whether nothing was added.
    pub fn is_empty(&self) -> bool {
        self.effects.is_empty()
    }

    /// The items they touch: one per counter's item (`<kind>#<id>`,
    /// `sort_key`), however many attributes or additions.
    pub fn items(&self) -> usize {
        items(&self.effects)
    }

    /// What is wrong with them, if anything.
    fn problem(&self) -> Option<String> {
        if let Some(effect) = self.effects.iter().find(|effect| effect.id.is_empty()) {
            return Some(format!(
                "added to the counter {} with an empty id",
                effect.counter.label()
            ));
        }
        if let Some(effect) = self.effects.iter().find(|e| e.id.len() > MAX_EFFECT_ID) {
            return Some(format!(
                "added to the counter {} with an id of {} bytes: at most {MAX_EFFECT_ID}",
                effect.counter.label(),
                effect.id.len()
            ));
        }
        let items = self.items();
        (items > MAX_EFFECT_ITEMS).then(|| {
            format!(
                "added to {items} items of other keys for one event: at most {MAX_EFFECT_ITEMS} (one transaction)"
            )
        })
    }
}

/// The items `effects` touch: one per counter's item.
pub fn items(effects: &[Effect]) -> usize {
    let mut keys: Vec<(&str, &str, &str)> = effects
        .iter()
        .map(|effect| {
            (
                effect.counter.kind,
                effect.id.as_str(),
                effect.counter.sort_key,
            )
        })
        .collect();
    keys.sort_unstable();
    keys.dedup();
    keys.len()
}

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
        self.react(slot, &mut Outbox::default())
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
    /// go in the outbox, with the entity as it was (for a step that cannot
    /// take them to put back).
    fn react(
        &self,
        slot: &mut Option<AnyEntity>,
        outbox: &mut Outbox,
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
            outbox.carry(effects.effects, before);
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

#[cfg(test)]
mod tests {
    use super::{Effects, MAX_EFFECT_ITEMS, items};
    use crate::handling::Counter;

    static ON_LOAN: Counter = Counter {
        kind: "MEMBER",
        sort_key: "LOANS",
        attribute: "onLoan",
    };
    static LENT: Counter = Counter {
        kind: "MEMBER",
        sort_key: "LOANS",
        attribute: "lent",
    };
    static DAILY: Counter = Counter {
        kind: "DAY",
        sort_key: "LOANS",
        attribute: "lent",
    };

    #[test]
    fn counters_on_one_item_are_one_item() {
        let mut effects = Effects::default();
        effects.add(&ON_LOAN, "ada", 1);
        effects.add(&LENT, "ada", 1);
        effects.add(&ON_LOAN, "ada", -1);
        effects.add(&DAILY, "2026-12-03", 1);
        effects.add(&ON_LOAN, "bob", 1);
        assert_eq!(effects.items(), 3);
        assert_eq!(items(&[]), 0);
        assert_eq!(effects.problem(), None);
    }

    #[test]
    fn an_empty_id_or_too_many_items_is_a_problem() {
        let mut effects = Effects::default();
        effects.add(&ON_LOAN, "", 1);
        let problem = effects.problem().unwrap_or_default();
        assert!(problem.contains("empty id"), "{problem}");

        let mut effects = Effects::default();
        for member in 0..=MAX_EFFECT_ITEMS {
            effects.add(&ON_LOAN, member.to_string(), 1);
        }
        let problem = effects.problem().unwrap_or_default();
        assert!(problem.contains("51 items"), "{problem}");
    }
}
