//! Processes: consumers that react to events with events.
//!
//! A process (a saga, a process manager) is a consumer whose state is an
//! entity like any other, moved under the guard, and whose handlers also
//! answer with events to append to the event store and a deadline to set
//! or clear ([`Outbox`]). The state change and the appended events are one
//! unit: one `TransactWriteItems` across the process's table and the event
//! store, or nothing (the outbox, without an outbox table: the event
//! store's own change records and dispatcher carry the events on). Each
//! appended event's request id derives from the process and what caused it
//! (an event, or a deadline), so that a retried, duplicated or raced
//! delivery appends it once.
//!
//! A deadline is the engine's, kept on the state's item (`dueAt`, and
//! `dueShard`: the sparse index `due` spread over 16 partitions, as the
//! parked index is). The scheduled sweep fires the due ones, each once,
//! through the same guard and the same transaction ([`Process::on_deadline`]).
//! Its precision is the schedule's period.
//!
//! An append at an exact expected sequence ([`Outbox::append_at`]) that
//! finds its stream moved writes nothing, the state change included: for a
//! deadline, nothing happened (it fires again at the next sweep if the
//! state, by then decided again on the event that moved the stream, still
//! keeps it); for a message, the message is retried.
//!
//! | file | what it holds |
//! | --- | --- |
//!
//! [`Process`], [`Outbox`] and [`Due`] are what a domain declares and a
//! handler answers; the runner gathers a step's appends
//! (`runner/plan/outbox.rs`) and fires due deadlines (`runner/due.rs`).

use std::fmt;
use std::sync::Arc;

use serde::Serialize;

use crate::domain::Domain;
use crate::entity::{AnyEntity, Entity, Kind};
use crate::handling::HandlerFault;
use crate::producer::{ExpectedSequence, NewEvent};

/// What a sweep did with the deadlines that were due.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeadlineReport {
    /// Deadlines fired: their steps written.
    pub fired: u64,
    /// Deadlines whose step appended at an exact sequence to a stream that
    /// had moved: nothing written; each fires again at the next sweep if
    /// the state still keeps it.
    pub moved: u64,
    /// Deadlines not fired: a store error, or a handler that broke its
    /// rule (logged); each is tried again at the next sweep.
    pub failed: u64,
    /// Whether the sweep's time ran out before every due deadline was seen.
    pub cut_short: bool,
}

/// The partitions of the index of due deadlines (`DUE#0` to `DUE#f`).
pub const DUE_SHARDS: u8 = 16;

/// The partition of the index of due deadlines an item's deadline is in
/// (0 to [`DUE_SHARDS`] - 1), from its `pk`.
pub fn due_shard(pk: &str) -> u8 {
    let digest = crate::digest::digest(pk);
    u8::from_str_radix(&digest[..1], 16).unwrap_or(0) % DUE_SHARDS
}

/// The most events one step of a process appends: a transaction holds 100
/// items, an appended event takes two (the event and its request record)
/// and the state's write one, with room for what the step parks.
pub const MAX_OUTGOING: usize = 40;

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
    /// `handler` is given the state, the deadline and the outbox, as
    /// [`crate::Handling::process`]'s handlers are. It must not move the
    /// state's sequence or last event id (no event was applied). The
    /// deadline is cleared once fired, unless the handler sets a later one.
    #[must_use]
    pub fn on_deadline<T, F>(mut self, handler: F) -> Self
    where
        T: Entity,
        F: Fn(&mut T, &Due, &mut Outbox) + Send + Sync + 'static,
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
        outbox: &mut Outbox,
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

/// A deadline that passed, as its handler sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Due {
    /// The state's id: the stream the process follows.
    pub stream: String,
    /// When it was due, epoch seconds.
    pub at: u64,
    /// The state's sequence: the last event of the stream it has seen
    /// (for [`Outbox::append_at`]).
    pub sequence: u64,
}

/// One event a step appends.
#[derive(Debug, Clone, PartialEq)]
pub struct Outgoing {
    /// The stream it is appended to.
    pub stream: String,
    /// Where the stream must stand for it (the first event of a step's to
    /// a stream sets it for the others, which follow it).
    pub expected: ExpectedSequence,
    /// The event.
    pub event: NewEvent,
}

/// What a process handler answers besides its decision and the new state:
/// the events to append and the deadline to set or clear. Only an
/// `Applied` answer (or a deadline's handler) may fill it.
#[derive(Debug, Clone, Default)]
pub struct Outbox {
    now: u64,
    appends: Vec<Outgoing>,
    deadline: Option<Option<u64>>,
    problem: Option<String>,
    /// A handler with effects' ([`crate::handling::Effects`]): they ride
    /// here from the handler's call to the step, with the entity as it was
    /// before the event (for a step that cannot take them to put back).
    projected: Option<Projected>,
}

/// An applied event's effects, and the entity before it.
#[derive(Debug, Clone, Default)]
pub(crate) struct Projected {
    pub(crate) effects: Vec<crate::handling::Effect>,
    pub(crate) before: Option<AnyEntity>,
}

impl Outbox {
    /// An empty outbox, at `now` (epoch seconds).
    pub fn at(now: u64) -> Self {
        Outbox {
            now,
            ..Outbox::default()
        }
    }

    /// Now, in epoch seconds: the invocation's clock (a deadline is set
    /// from it).
    pub fn now(&self) -> u64 {
        self.now
    }

    /// Appends an event of `event_type` with `data` to `stream`, at its
    /// next sequence wherever it stands.
    pub fn append(&mut self, stream: &str, event_type: &str, data: &impl Serialize) {
        self.push(stream, ExpectedSequence::Any, event_type, data);
    }

    /// Appends an event to `stream` only if the stream is at `expected`
    /// (its last event's sequence; 0: no event yet). If it has moved, the
    /// whole step writes nothing: the process decides again when the event
    /// that moved it arrives.
    pub fn append_at(
        &mut self,
        stream: &str,
        expected: u64,
        event_type: &str,
        data: &impl Serialize,
    ) {
        self.push(stream, ExpectedSequence::Exact(expected), event_type, data);
    }

    fn push(
        &mut self,
        stream: &str,
        expected: ExpectedSequence,
        event_type: &str,
        data: &impl Serialize,
    ) {
        match serde_json::to_value(data) {
            Ok(data) => self.appends.push(Outgoing {
                stream: stream.to_owned(),
                expected,
                event: NewEvent::new(event_type, data),
            }),
            Err(err) => {
                self.problem.get_or_insert_with(|| {
                    format!("appended a {event_type} whose data cannot be written as JSON: {err}")
                });
            }
        }
    }

    /// Sets the state's deadline to `at` (epoch seconds): the sweep that
    /// runs after it fires it once.
    pub fn set_deadline(&mut self, at: u64) {
        self.deadline = Some(Some(at));
    }

    /// Clears the state's deadline.
    pub fn clear_deadline(&mut self) {
        self.deadline = Some(None);
    }

    /// The events appended so far.
    pub fn appends(&self) -> &[Outgoing] {
        &self.appends
    }

    /// The deadline set (`Some(Some(at))`), cleared (`Some(None)`), or left
    /// as it was (`None`).
    pub fn deadline(&self) -> Option<Option<u64>> {
        self.deadline
    }

    /// Whether the handler answered nothing besides its decision.
    pub fn is_empty(&self) -> bool {
        self.appends.is_empty() && self.deadline.is_none() && self.problem.is_none()
    }

    /// What went wrong filling it (data that is not JSON), if anything.
    pub(crate) fn problem(&self) -> Option<&str> {
        self.problem.as_deref()
    }

    /// Keeps an applied event's effects and the entity before it.
    pub(crate) fn carry(
        &mut self,
        effects: Vec<crate::handling::Effect>,
        before: Option<AnyEntity>,
    ) {
        self.projected = Some(Projected { effects, before });
    }

    /// Takes what [`Outbox::carry`] kept.
    pub(crate) fn take_projected(&mut self) -> Option<Projected> {
        self.projected.take()
    }

    /// Takes the appends and the deadline, leaving it empty (at the same
    /// time).
    pub(crate) fn take(&mut self) -> (Vec<Outgoing>, Option<Option<u64>>) {
        self.problem = None;
        (
            std::mem::take(&mut self.appends),
            std::mem::take(&mut self.deadline),
        )
    }
}

/// A deadline's handler, its state type erased.
trait OnDeadline: Send + Sync {
    fn kind(&self) -> &'static Kind;
    fn fire(
        &self,
        slot: &mut AnyEntity,
        due: &Due,
        outbox: &mut Outbox,
    ) -> Result<(), HandlerFault>;
}

struct DeadlineCall<T, F> {
    handler: F,
    kind: std::marker::PhantomData<fn() -> T>,
}

impl<T, F> OnDeadline for DeadlineCall<T, F>
where
    T: Entity,
    F: Fn(&mut T, &Due, &mut Outbox) + Send + Sync,
{
    fn kind(&self) -> &'static Kind {
        Kind::of::<T>()
    }

    fn fire(
        &self,
        slot: &mut AnyEntity,
        due: &Due,
        outbox: &mut Outbox,
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
        crate::handling::unwound(handler, || (self.handler)(&mut state, due, outbox))?;
        if state.sequence() != sequence || state.last_event_id() != last_event_id {
            return Err(fault(format!(
                "moved the state from sequence {sequence} to {} when a deadline passed: only an event moves it",
                state.sequence()
            )));
        }
        if let Some(problem) = outbox.problem() {
            return Err(fault(problem.to_owned()));
        }
        *slot = AnyEntity::new(state);
        Ok(())
    }
}
