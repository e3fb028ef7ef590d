//! What a process's handler answers besides its decision: the events it
//! appends ([`Outgoing`]) and the deadline it sets or clears, in its
//! [`Outbox`]; and what a deadline's handler is given ([`Due`]) and
//! answers with ([`DueOutbox`]: its appends to the state's own stream are
//! at the sequence the process has seen, whatever it writes).

use serde::Serialize;

use super::event::{ExpectedSequence, NewEvent};

/// The most events one step of a process appends: a transaction holds 100
/// items, an appended event takes two (the event and its request record)
/// and the state's write one, with room for what the step parks.
pub const MAX_OUTGOING: usize = 40;

/// A deadline that passed, as its handler sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Due {
    /// The state's id: the stream the process follows.
    pub stream: String,
    /// When it was due, epoch seconds.
    pub at: u64,
    /// The state's sequence: the last event of the stream it has seen
    /// (where [`DueOutbox::append`] appends).
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
    /// runs after it fires it once. A time already past is kept too: the
    /// next sweep fires it.
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

/// What a deadline's handler answers with: an [`Outbox`] whose appends to
/// the state's own stream ([`DueOutbox::append`]) are at the sequence the
/// process has seen ([`Due::sequence`]). A deadline fires on what the
/// process has seen; an event of its stream it has not seen yet (a payment,
/// a return) may change what it would do, so an append to that stream
/// after such an event is never written: the step writes nothing, and the
/// event decides when it arrives. There is no way to append to the
/// state's own stream wherever it stands.
///
/// ```
/// use sequence_guard::process::{Due, DueOutbox};
/// use sequence_guard::producer::ExpectedSequence;
///
/// let due = Due { stream: "order-1".into(), at: 1_800_000_900, sequence: 4 };
/// let mut outbox = DueOutbox::new(&due, 1_800_000_900);
/// outbox.append("OrderCancelled", &serde_json::json!({"reason": "not paid"}));
/// assert_eq!(outbox.appends()[0].stream, "order-1");
/// assert_eq!(outbox.appends()[0].expected, ExpectedSequence::Exact(4));
/// ```
#[derive(Debug, Clone)]
pub struct DueOutbox {
    outbox: Outbox,
    stream: String,
    sequence: u64,
}

impl DueOutbox {
    /// An empty outbox for the deadline `due`, at `now` (epoch seconds).
    pub fn new(due: &Due, now: u64) -> Self {
        DueOutbox {
            outbox: Outbox::at(now),
            stream: due.stream.clone(),
            sequence: due.sequence,
        }
    }

    /// Now, in epoch seconds: the sweep's clock (a next deadline is set
    /// from it, or from [`Due::at`]).
    pub fn now(&self) -> u64 {
        self.outbox.now()
    }

    /// Appends an event of `event_type` with `data` to the state's own
    /// stream ([`Due::stream`]), at the sequence the process has seen
    /// ([`Due::sequence`]); the step's further appends follow it. If the
    /// stream has moved since, the whole step writes nothing (the state's
    /// change included), and the deadline fires again at the next sweep if
    /// the state still keeps it.
    pub fn append(&mut self, event_type: &str, data: &impl Serialize) {
        let expected = if self.outbox.appends.is_empty() {
            ExpectedSequence::Exact(self.sequence)
        } else {
            ExpectedSequence::Any
        };
        let stream = self.stream.clone();
        self.outbox.push(&stream, expected, event_type, data);
    }

    /// Appends an event to another stream than the state's, at its next
    /// sequence wherever it stands. The state's own stream is refused here
    /// (the step is a handler error): append to it with
    /// [`DueOutbox::append`].
    pub fn append_to(&mut self, stream: &str, event_type: &str, data: &impl Serialize) {
        if stream == self.stream {
            self.outbox.problem.get_or_insert_with(|| {
                format!(
                    "appended a {event_type} to the state's own stream `{stream}` with DueOutbox::append_to, wherever the stream stands: it would land after events the process has not seen; append to it with DueOutbox::append, at the sequence the process has seen"
                )
            });
            return;
        }
        self.outbox.append(stream, event_type, data);
    }

    /// Sets the state's next deadline to `at` (epoch seconds), as
    /// [`Outbox::set_deadline`] does.
    pub fn set_deadline(&mut self, at: u64) {
        self.outbox.set_deadline(at);
    }

    /// Clears the state's deadline (a deadline that fired is cleared
    /// unless the handler sets another).
    pub fn clear_deadline(&mut self) {
        self.outbox.clear_deadline();
    }

    /// The events appended so far.
    pub fn appends(&self) -> &[Outgoing] {
        self.outbox.appends()
    }

    /// The deadline set (`Some(Some(at))`), cleared (`Some(None)`), or left
    /// to the engine (`None`: cleared, since it fired).
    pub fn deadline(&self) -> Option<Option<u64>> {
        self.outbox.deadline()
    }

    /// Whether the handler answered nothing.
    pub fn is_empty(&self) -> bool {
        self.outbox.is_empty()
    }

    /// The outbox inside, as the step's checks read it.
    pub(crate) fn outbox(&mut self) -> &mut Outbox {
        &mut self.outbox
    }
}
