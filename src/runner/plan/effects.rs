//! A step's effects on counters of other keys ([`crate::handling::Effects`]):
//! an applied event's joined to the step's, written in its commit; or the
//! step cut before the event when they do not fit its transaction.

use super::{Planner, Reacted};
use crate::envelope::Event;
use crate::handling::Projected;
use crate::handling::{HandlerFault, effect_items};
use crate::runner::answer::effects_problem;
use crate::store::MAX_COMMIT_ITEMS;

impl Planner<'_> {
    /// Joins an applied event's effects to the step's. `Err`: they cannot
    /// join (a counter the domain does not register: a fault; no room: the
    /// step is cut before the event), and the slot is put back as it was
    /// before the event.
    pub(super) fn project(
        &mut self,
        event: &Event,
        projected: Option<Projected>,
    ) -> Result<(), Reacted> {
        let Some(Projected { effects, before }) = projected else {
            return Ok(());
        };
        if effects.is_empty() {
            return Ok(());
        }
        let fault = |problem: String| {
            Reacted::Fault(HandlerFault {
                handler: event.handler(),
                problem,
            })
        };
        if let Some(problem) = effects_problem(self.domain, &effects) {
            self.slot = before;
            return Err(fault(problem));
        }
        let had = self.effects.len();
        let items_before = self.items();
        self.effects.extend(effects);
        if self.items() > MAX_COMMIT_ITEMS {
            let added = self.items() - items_before;
            self.effects.truncate(had);
            self.slot = before;
            return Err(if self.has_work() {
                Reacted::Cut
            } else {
                fault(format!(
                    "added to {added} items of other keys: with the entity's write they do not fit one transaction ({MAX_COMMIT_ITEMS} items)"
                ))
            });
        }
        Ok(())
    }

    /// The items the step's effects write: one per counter's item.
    pub(super) fn effect_items(&self) -> usize {
        effect_items(&self.effects)
    }
}
