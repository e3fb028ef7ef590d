//! A process's step: what its handlers append and the deadline they set,
//! gathered into the step's commit (one stream, one request id), or the
//! step cut before an event whose appends cannot join it.

use super::Planner;
use crate::entity::AnyEntity;
use crate::envelope::Event;
use crate::handling::{Decision, HandlerFault};
use crate::process::{Cause, MAX_OUTGOING, Outbox, Outgoing};
use crate::producer::{Append, AppendError, ExpectedSequence, MAX_BYTES, check_append};
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
    /// whose appends and deadline join the step.
    pub(super) fn react(&mut self, event: &Event) -> Reacted {
        let mut outbox = Outbox::at(self.now);
        let Some(process) = self.domain.process() else {
            // Any handler but a process's or one with effects leaves it empty.
            let decision = match event.react(&mut self.slot, &mut outbox) {
                Ok(decision) => decision,
                Err(fault) => return Reacted::Fault(fault),
            };
            return match self.project(event, outbox.take_projected()) {
                Ok(()) => Reacted::Decided(decision),
                Err(refused) => refused,
            };
        };
        let before: Option<AnyEntity> = self.slot.clone();
        let decision = match event.react(&mut self.slot, &mut outbox) {
            Ok(decision) => decision,
            Err(fault) => return Reacted::Fault(fault),
        };
        let projected = self.effects.len();
        if let Err(refused) = self.project(event, outbox.take_projected()) {
            return refused;
        }
        let (mut appends, deadline) = outbox.take();
        if !self.config.appends {
            // `rebuild`: what the process appended is in the store already.
            appends.clear();
        }
        if !appends.is_empty() {
            let cause = Cause::Event(event.event_id().to_owned());
            if let Err(refusal) = self.join(process, &cause, appends) {
                self.slot = before;
                self.effects.truncate(projected);
                return match refusal {
                    Refusal::Cut => Reacted::Cut,
                    Refusal::Fault(problem) => Reacted::Fault(HandlerFault {
                        handler: event.handler(),
                        problem: format!("{problem} ({} event)", event.type_name()),
                    }),
                };
            }
        }
        if let Some(deadline) = deadline {
            self.deadline = Some(deadline);
        }
        Reacted::Decided(decision)
    }

    /// Joins a handler's appends to the step's.
    fn join(
        &mut self,
        process: &crate::process::Process,
        cause: &Cause,
        appends: Vec<Outgoing>,
    ) -> Result<(), Refusal> {
        let outbound = gathered(process, cause, appends).map_err(Refusal::Fault)?;
        // With the step's other writes, one transaction: 100 items, 4 MB.
        let items = outbound.events.len() + if self.outgoing.is_none() { 2 } else { 0 };
        let size = bytes(&outbound);
        if self.items() + items > MAX_COMMIT_ITEMS || self.bytes() + size > MAX_BYTES {
            return Err(if self.has_work() {
                Refusal::Cut
            } else {
                Refusal::Fault(format!(
                    "appended {} events of {size} bytes: with the state's write they do not fit one transaction ({MAX_COMMIT_ITEMS} items, 4 MB)",
                    outbound.events.len()
                ))
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

/// What a step's appends take of a transaction's 4 MB, at most: each
/// event's data, its envelope, its item's other attributes and its
/// request record's share.
pub(super) fn bytes(outbound: &Outbound) -> usize {
    outbound
        .events
        .iter()
        .map(|event| event.data.to_string().len() + 1024)
        .sum()
}

enum Refusal {
    Cut,
    Fault(String),
}

/// One handler's appends as one [`Outbound`]: to one stream, the first's
/// expectation for all, each event's id derived from the cause, checked
/// as the event store will check them.
pub(crate) fn gathered(
    process: &crate::process::Process,
    cause: &Cause,
    appends: Vec<Outgoing>,
) -> Result<Outbound, String> {
    let Some(first) = appends.first() else {
        return Err("appended nothing".to_owned());
    };
    let (stream, expected) = (first.stream.clone(), first.expected);
    if appends.len() > MAX_OUTGOING {
        return Err(format!(
            "appended {} events in one step: at most {MAX_OUTGOING} (a transaction holds 100 items, two an event)",
            appends.len()
        ));
    }
    if let Some(other) = appends.iter().find(|append| append.stream != stream) {
        return Err(format!(
            "appended to the streams `{stream}` and `{}` in one step: a step appends to one stream, in one transaction",
            other.stream
        ));
    }
    if appends
        .iter()
        .skip(1)
        .any(|append| append.expected != ExpectedSequence::Any)
    {
        return Err(
            "gave an expected sequence to an event that is not the step's first to its stream: the ones after it follow it"
                .to_owned(),
        );
    }
    let request_id = process.request_id(cause, 0);
    let events = appends
        .into_iter()
        .enumerate()
        .map(|(index, append)| {
            let mut event = append.event;
            event.event_id = Some(process.request_id(cause, index));
            event
        })
        .collect();
    let outbound = Outbound {
        stream,
        expected,
        request_id,
        events,
    };
    let append = Append {
        stream_id: outbound.stream.clone(),
        events: outbound.events.clone(),
        expected: outbound.expected,
        request_id: Some(outbound.request_id.clone()),
        writes: Vec::new(),
    };
    check_append(process.store_domain(), &append).map_err(|err| match err {
        AppendError::Invalid { index, reason } => {
            format!("appended an event the event store refuses: event {index}: {reason}")
        }
        other => format!("appended what the event store refuses: {other}"),
    })?;
    Ok(outbound)
}
