//! A process's deadline handler tested as the sweep fires it: given a
//! state, when its deadline passes, then its appends, its next deadline and
//! the state, or the rule it broke in the sweep's words.

use super::{Given, assert_appends};
use crate::answer::{Due, DueOutbox};
use crate::entity::{AnyEntity, Entity};
use crate::handling::HandlerFault;
use crate::runner::fire_due;

impl<T: Entity> Given<T> {
    /// Fires the deadline of the state (its id: `stream`) that was due at
    /// `at`, as the sweep fires it at the test's clock ([`Given::at`]):
    /// the process's deadline handler on the state, with a
    /// [`crate::process::DueOutbox`] whose appends to `stream` are at the
    /// state's sequence; its answer checked as the sweep checks it.
    ///
    /// # Panics
    ///
    /// Without a state (a deadline fires on one), or without the process's
    /// domain ([`Given::within`]) whose process has a deadline handler.
    #[track_caller]
    pub fn when_due(self, stream: &str, at: u64) -> Fired<T> {
        let Some(state) = self.entity else {
            panic!("a deadline fires on a state: given(Some(state))");
        };
        let Some(process) = self.domain.as_ref().and_then(|domain| domain.process()) else {
            panic!(
                "a deadline's handler is its process's: give the test the process's domain, given(..).within(&domain())"
            );
        };
        if process.deadline_kind().is_none() {
            panic!(
                "the process {} has no deadline handler (Process::on_deadline): the sweep fires none of its deadlines",
                process.name()
            );
        }
        let due = Due {
            stream: stream.to_owned(),
            at,
            sequence: state.sequence(),
        };
        let mut slot = AnyEntity::new(state.clone());
        let (outbox, answer) = fire_due(process, Some(&mut slot), &due, self.now);
        match answer {
            Ok(_) => Fired {
                fault: None,
                state: slot.get::<T>().cloned().unwrap_or(state),
                outbox,
            },
            Err(fault) => Fired {
                fault: Some(fault),
                state,
                outbox: DueOutbox::new(&due, self.now),
            },
        }
    }
}

/// A deadline fired: the state after it and the handler's answer, or the
/// rule it broke (then nothing is written: the state as it was, nothing
/// appended, and the deadline kept for the next sweep).
#[derive(Debug, Clone)]
#[must_use = "a deadline test asserts nothing until `.then(state)`"]
pub struct Fired<T> {
    fault: Option<HandlerFault>,
    state: T,
    outbox: DueOutbox,
}

impl<T: Entity> Fired<T> {
    /// The rule the handler broke, in the sweep's words, if it broke one.
    pub fn fault(&self) -> Option<&HandlerFault> {
        self.fault.as_ref()
    }

    /// The state as the deadline leaves it.
    pub fn state(&self) -> &T {
        &self.state
    }

    /// What the handler appends and the next deadline it sets (empty when
    /// it broke a rule).
    pub fn outbox(&self) -> &DueOutbox {
        &self.outbox
    }

    /// Asserts that the handler appends events of these types, to these
    /// streams, in this order (`&[]`: none).
    #[track_caller]
    pub fn appends(self, expected: &[(&str, &str)]) -> Self {
        assert_appends(self.outbox.appends(), expected);
        self
    }

    /// Asserts that the handler broke no rule and left the state so.
    #[track_caller]
    pub fn then(self, state: T) {
        assert_eq!(self.fault, None, "the deadline's handler broke a rule");
        assert_eq!(self.state, state, "the state after the deadline");
    }
}
