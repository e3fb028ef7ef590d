//! A process, as its domain declares it ([`Process`]): its name (in the
//! request ids of what it appends), the event store's domain (what it
//! appends is checked and rendered as the producer's own appends are), and
//! what it does when a deadline passes. A process's handlers answer with an
//! [`crate::answer::Outbox`]; the runner writes a step's state and appends in one
//! transaction (`runner/plan/outbox.rs`), and the sweep fires due deadlines
//! (`runner/due.rs`). docs/processes.md says it all for a team.

use std::fmt;
use std::sync::Arc;

use super::Domain;
use crate::answer::{Due, DueOutbox, HandlerFault, unwound};
use crate::entity::{AnyEntity, Entity, Kind};

/// A process, as its domain declares it: its name (in the request ids of
/// what it appends), the event store's domain (what it appends is checked
/// and rendered as the producer's own appends are), and what it does when a
/// deadline passes.
#[derive(Clone)]
pub struct Process {
    name: &'static str,
    store_domain: Box<Domain>,
    deadline: Option<Arc<dyn OnDeadline>>,
}

impl Process {
    /// A process named `name` (lower-case letters, digits and `-`; it is in
    /// the request ids of every event it appends, so keep it), appending to
    /// the event store whose producer's domain is `store_domain`.
    pub fn new(name: &'static str, store_domain: Domain) -> Self {
        Process {
            name,
            store_domain: Box::new(store_domain),
            deadline: None,
        }
    }

    /// What the process does when a deadline of a state of type `T` passes:
    /// `handler` is given the state, the deadline and its outbox
    /// ([`DueOutbox`]: an append to the state's own stream is at the
    /// sequence the process has seen). It must not move the state's
    /// sequence or last event id (no event was applied). The deadline is
    /// cleared once fired, unless the handler sets another: one already
    /// past (a periodic deadline behind after an outage) fires at the next
    /// sweep. A process without one refuses, at the step, a handler that
    /// sets a deadline (it would never fire).
    #[must_use]
    pub fn on_deadline<T, F>(mut self, handler: F) -> Self
    where
        T: Entity,
        F: Fn(&mut T, &Due, &mut DueOutbox) + Send + Sync + 'static,
    {
        self.deadline = Some(Arc::new(DeadlineCall {
            handler,
            kind: std::marker::PhantomData::<fn() -> T>,
        }));
        self
    }

    /// The process's name.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The domain of the event store it appends to.
    pub fn store_domain(&self) -> &Domain {
        &self.store_domain
    }

    /// The kind of state whose deadlines it handles, if it handles any.
    pub fn deadline_kind(&self) -> Option<&'static Kind> {
        self.deadline.as_ref().map(|deadline| deadline.kind())
    }

    /// The deadline handler's fault: `problem` after its name (its path).
    pub(crate) fn deadline_fault(&self, problem: String) -> HandlerFault {
        HandlerFault {
            handler: self
                .deadline
                .as_ref()
                .map_or("(no deadline handler)", |deadline| deadline.handler()),
            problem,
        }
    }

    /// What is wrong with the declaration, if anything.
    pub(crate) fn problems(&self) -> Vec<String> {
        let fits = !self.name.is_empty()
            && self.name.len() <= 32
            && self
                .name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
        let mut problems = Vec::new();
        if !fits {
            problems.push(format!(
                "the process name `{}` must be 1 to 32 lower-case letters, digits or `-`: it is in the request id of every event the process appends",
                self.name
            ));
        }
        if let Err(err) = self.store_domain.check() {
            problems.push(format!("the process's event store domain: {err}"));
        }
        problems
    }

    /// What a process domain that declares `types` lacks of its event
    /// store's types: its queue receives every event of the store (no
    /// subscription filters by type), and an event of a type it does not
    /// declare is invalid, failed at every delivery until the dead-letter
    /// queue. The erasure's type, where the store declares personal data
    /// (so `erase` will append it), is named with its own fix.
    pub(crate) fn unheard(&self, types: &[&'static str]) -> Vec<String> {
        let store = self.store_domain();
        let missing: Vec<&str> = store
            .types()
            .iter()
            .copied()
            .filter(|event_type| !types.contains(event_type))
            .collect();
        let mut problems = Vec::new();
        let erasure = crate::personal::ERASURE_TYPE;
        if missing.contains(&erasure) && store.declares_personal() {
            problems.push(format!(
                "the event store's domain declares personal data, so `erase` appends {erasure} to a subject's streams, and the process {} does not declare {erasure}: each would fail at every delivery until the dead-letter queue, its stream waiting behind it; declare it and register it with Handling::pass::<State>() (a state that holds nothing personal) or Handling::erasure(data)",
                self.name
            ));
        }
        let others: Vec<&str> = missing
            .into_iter()
            .filter(|event_type| *event_type != erasure || !store.declares_personal())
            .collect();
        if !others.is_empty() {
            problems.push(format!(
                "the process {} does not declare the event store's {} {}: its queue receives every event of the store, and each of those would be invalid at its first message (failed until the dead-letter queue); declare {} (Handling::ignore() for a type of a stream it does not follow)",
                self.name,
                if others.len() == 1 { "type" } else { "types" },
                others.join(", "),
                if others.len() == 1 { "it" } else { "them" },
            ));
        }
        problems
    }

    /// The request id of the `index`th event appended by the step caused by
    /// the event `cause`.
    /// Also the event's `eventId`: at most 128 characters (a digest of
    /// the cause when it is longer).
    pub(crate) fn request_id(&self, cause: &Cause, index: usize) -> String {
        let id = match cause {
            Cause::Event(event_id) => format!("process-{}-{event_id}-{index}", self.name),
            Cause::Deadline { stream, at } => {
                format!("process-{}-due-{stream}-{at}-{index}", self.name)
            }
        };
        if id.len() <= 128 {
            id
        } else {
            format!("process-{}-{}", self.name, crate::digest::digest(&id))
        }
    }

    /// Runs the deadline handler on a state.
    pub(crate) fn fire(
        &self,
        slot: &mut AnyEntity,
        due: &Due,
        outbox: &mut DueOutbox,
    ) -> Result<(), HandlerFault> {
        match &self.deadline {
            Some(deadline) => deadline.fire(slot, due, outbox),
            None => Ok(()),
        }
    }
}

// A domain stays unwind safe with a process in it (it was before): the
// deadline handler is only ever called through `unwound`, on a copy of the
// state, so a panic in it leaves nothing half changed that anyone sees.
impl std::panic::UnwindSafe for Process {}
impl std::panic::RefUnwindSafe for Process {}

impl fmt::Debug for Process {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Process")
            .field("name", &self.name)
            .field("deadline", &self.deadline_kind().map(|kind| kind.name))
            .finish()
    }
}

/// What caused a step's appends: an event (its `eventId`), or a deadline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Cause {
    Event(String),
    Deadline { stream: String, at: u64 },
}

/// A deadline's handler, its state type erased.
trait OnDeadline: Send + Sync {
    fn kind(&self) -> &'static Kind;
    fn handler(&self) -> &'static str;
    fn fire(
        &self,
        slot: &mut AnyEntity,
        due: &Due,
        outbox: &mut DueOutbox,
    ) -> Result<(), HandlerFault>;
}

struct DeadlineCall<T, F> {
    handler: F,
    kind: std::marker::PhantomData<fn() -> T>,
}

impl<T, F> OnDeadline for DeadlineCall<T, F>
where
    T: Entity,
    F: Fn(&mut T, &Due, &mut DueOutbox) + Send + Sync,
{
    fn kind(&self) -> &'static Kind {
        Kind::of::<T>()
    }

    fn handler(&self) -> &'static str {
        std::any::type_name::<F>()
    }

    fn fire(
        &self,
        slot: &mut AnyEntity,
        due: &Due,
        outbox: &mut DueOutbox,
    ) -> Result<(), HandlerFault> {
        let handler = std::any::type_name::<F>();
        let fault = |problem: String| HandlerFault { handler, problem };
        let Some(state) = slot.get::<T>() else {
            return Err(fault(format!(
                "handles deadlines of {} states, and the item holds a {}",
                T::KIND,
                slot.kind().name
            )));
        };
        let mut state = state.clone();
        let (sequence, last_event_id) = (state.sequence(), state.last_event_id().to_owned());
        unwound(handler, || (self.handler)(&mut state, due, outbox))?;
        if state.sequence() != sequence || state.last_event_id() != last_event_id {
            return Err(fault(format!(
                "moved the state from sequence {sequence} to {} when a deadline passed: only an event moves it",
                state.sequence()
            )));
        }
        if let Some(problem) = outbox.outbox().problem() {
            return Err(fault(problem.to_owned()));
        }
        *slot = AnyEntity::new(state);
        Ok(())
    }
}
