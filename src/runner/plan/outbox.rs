//! A process's step: what its handlers append and the deadline they set,
//! checked (`runner/answer.rs`) and joined to the step's commit (one
//! stream, one request id), or the step cut before an event whose appends
//! cannot join it.

use super::Planner;
use crate::answer::MAX_OUTGOING;
use crate::domain::Cause;
use crate::envelope::Event;
use crate::handling::Reaction;
use crate::handling::{Decision, HandlerFault};
use crate::producer::{ExpectedSequence, MAX_BYTES};
use crate::runner::answer::{bytes, checked_outbox, too_big};
use crate::store::MAX_COMMIT_ITEMS;
use crate::store::Outbound;

/// A handler's answer within a step.
pub(super) enum Reacted {
    /// Decided; for a process, what it appends joined the step.
    Decided(Decision),
    /// The handler broke its rule: the slot is as it was.
    Fault(HandlerFault),
    /// What it appends cannot join this step (another stream, another
    /// expectation, no room): the slot is as it was, and the event is
    /// decided again in the next step.
    Cut,
}

impl Planner<'_> {
    /// Runs the event's handler on the slot; for a process, with an outbox
    /// whose appends and deadline join the step (its appends only if it
    /// `reacts`: a rebuild folds what happened before the process's start
    /// without reacting). The answer beyond the entity is checked first
    /// (`runner/answer.rs`): a fault writes nothing of the event.
    pub(super) fn react(&mut self, event: &Event, reacts: bool) -> Reacted {
        let mut reaction = Reaction::at(self.now);
        let decision = match event.react(&mut self.slot, &mut reaction) {
            Ok(decision) => decision,
            Err(fault) => return Reacted::Fault(fault),
        };
        let projected = self.effects.len();
        if let Err(refused) = self.project(event, reaction.projected.take()) {
            return refused;
        }
        if reaction.outbox.is_empty() {
            return Reacted::Decided(decision);
        }
        let before = reaction.before.take();
        let cause = Cause::Event(event.event_id().to_owned());
        let outbox = std::mem::take(&mut reaction.outbox);
        let refusal = match checked_outbox(self.domain, &cause, outbox, reacts) {
            Ok((outbound, deadline)) => match outbound.map(|outbound| self.join(outbound)) {
                Some(Err(refusal)) => refusal,
                None | Some(Ok(())) => {
                    if let Some(deadline) = deadline {
                        self.deadline = Some(deadline);
                    }
                    return Reacted::Decided(decision);
                }
            },
            Err(problem) => Refusal::Fault(problem),
        };
        if let Some(before) = before {
            self.slot = before;
        }
        self.effects.truncate(projected);
        match refusal {
            Refusal::Cut => Reacted::Cut,
            Refusal::Fault(problem) => Reacted::Fault(HandlerFault {
                handler: event.handler(),
                problem,
            }),
        }
    }

    /// Joins a handler's appends, gathered, to the step's.
    fn join(&mut self, outbound: Outbound) -> Result<(), Refusal> {
        // With the step's other writes, one transaction: 100 items, 4 MB.
        let items = outbound.events.len() + if self.outgoing.is_none() { 2 } else { 0 };
        let size = bytes(&outbound);
        if self.items() + items > MAX_COMMIT_ITEMS || self.bytes() + size > MAX_BYTES {
            return Err(if self.has_work() {
                Refusal::Cut
            } else {
                Refusal::Fault(too_big(outbound.events.len(), size))
            });
        }
        let Some(step) = &mut self.outgoing else {
            self.outgoing = Some(outbound);
            return Ok(());
        };
        // Another stream, an expectation of its own, or no room: in the
        // next step (this one has an event already, so each makes progress).
        if step.stream != outbound.stream
            || outbound.expected != ExpectedSequence::Any
            || step.events.len() + outbound.events.len() > MAX_OUTGOING
        {
            return Err(Refusal::Cut);
        }
        step.events.extend(outbound.events);
        Ok(())
    }
}

impl Planner<'_> {
    /// Whether the step writes something already (so that cutting it before
    /// an event makes progress).
    pub(super) fn has_work(&self) -> bool {
        !self.verdicts.is_empty()
            || !self.drained.is_empty()
            || !self.new_parks.is_empty()
            || !self.cleared.is_empty()
            || !self.conflicts.is_empty()
            || self.outgoing.is_some()
            || !self.effects.is_empty()
    }
}

enum Refusal {
    Cut,
    Fault(String),
}
