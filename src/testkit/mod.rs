//! A test kit for a domain's handlers, without a store or a queue: given an
//! entity (or none), when an event, then a decision and a state. The event
//! goes through the domain's registration and the runner's check of the
//! handler's answer, as in the function.
//!
//! It is the runner's twin: what the runner refuses, it refuses, in the
//! same words. A handler that answers beyond its entity (a process's
//! appends and deadline, effects on counters of other keys) is tested
//! within its domain ([`Given::within`]), against which the runner checks
//! that answer (`runner/answer.rs`: one stream, what the event store
//! accepts, a deadline handler for a deadline, registered counters); a
//! process's deadline handler is fired as the sweep fires it
//! ([`Given::when_due`]). [`check_erasures`] checks a domain's erasures on
//! its samples: an entity that keeps a personal value undeclared.
//!
//! | file | what it holds |
//! | --- | --- |
//! | `mod.rs` | [`given`], [`Then`]: a message's handler; [`when_effect`]: a deduplicated effect |
//! | `deadline.rs` | [`Given::when_due`], [`Fired`]: a deadline's handler |
//! | `erasure.rs` | [`check_erasures`]: no personal value kept in clear after an erasure |
//!
//! ```
//! # use sequence_guard::{Decision, Entity, Events, Handling, Sequenced};
//! # use serde::{Deserialize, Serialize};
//! # #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
//! # struct Counter { sequence: u64, last_event_id: String, clicks: u64 }
//! # impl Entity for Counter {
//! #     const KIND: &'static str = "COUNTER";
//! #     fn sequence(&self) -> u64 { self.sequence }
//! #     fn last_event_id(&self) -> &str { &self.last_event_id }
//! # }
//! # #[derive(Debug, Deserialize)]
//! # struct Click {}
//! # #[derive(Debug, Deserialize)]
//! # #[serde(tag = "type", content = "data")]
//! # enum CounterEvent { Clicked(Click) }
//! # fn on_clicked(counter: &mut Option<Counter>, event: &Sequenced<Click>) -> Decision {
//! #     let Some(counter) = counter else { return Decision::NotCreated };
//! #     if counter.sequence != event.sequence - 1 {
//! #         return if counter.sequence >= event.sequence { Decision::Duplicate } else { Decision::Gap };
//! #     }
//! #     counter.clicks += 1;
//! #     counter.sequence += 1;
//! #     counter.last_event_id.clone_from(&event.event_id);
//! #     Decision::Applied
//! # }
//! # impl Events for CounterEvent {
//! #     fn handling(self) -> Handling {
//! #         match self { CounterEvent::Clicked(data) => Handling::sequenced(data, on_clicked) }
//! #     }
//! # }
//! use sequence_guard::testkit::given;
//!
//! let at = |sequence, clicks| Counter { sequence, last_event_id: format!("e{sequence}"), clicks };
//! given(Some(at(1, 1)))
//!     .when("e2", "c-1", 2, CounterEvent::Clicked(Click {}))
//!     .then(Decision::Applied, Some(at(2, 2)));
//! given(Some(at(1, 1)))
//!     .when("e3", "c-1", 3, CounterEvent::Clicked(Click {}))
//!     .then(Decision::Gap, Some(at(1, 1)));
//! given(None::<Counter>)
//!     .when("e2", "c-1", 2, CounterEvent::Clicked(Click {}))
//!     .then(Decision::NotCreated, None);
//!
//! // A message body, read as the function reads it (versions, upcasts and
//! // the limits of its data included): its answer, or why it is refused.
//! let domain = sequence_guard::Domain::new::<CounterEvent>().entity::<Counter>();
//! given(Some(at(1, 1)))
//!     .when_body(&domain, r#"{"eventId":"e2","type":"Clicked","aggregateId":"c-1","sequence":2,"data":{}}"#)
//!     .unwrap()
//!     .then(Decision::Applied, Some(at(2, 2)));
//! let refused = given(Some(at(1, 1)))
//!     .when_body(&domain, r#"{"eventId":"e2","type":"Clicked","aggregateId":"c-1","sequence":2,"version":2,"data":{}}"#)
//!     .unwrap_err();
//! assert_eq!(refused.to_string(), "field `version` names Clicked version 2, newer than this consumer knows (1)");
//! ```

mod deadline;
mod erasure;

pub use deadline::Fired;
pub use erasure::check_erasures;

use crate::answer::Outbox;
use crate::domain::{Cause, Domain, Events};
use crate::entity::{AnyEntity, Entity, Kind};
use crate::envelope::InvalidMessage;
use crate::handling::{Addition, Counter, Decision, HandlerFault, Handling, How, Raw, erasure_on};
use crate::handling::{Effect, Reaction};
use crate::runner::answer::{checked_outbox, effects_problem};

/// The entity before the event.
#[derive(Debug, Clone)]
#[must_use = "a handler test does nothing until `.when(..)` and `.then(..)`"]
pub struct Given<T> {
    entity: Option<T>,
    now: u64,
    domain: Option<Domain>,
}

/// Starts a handler test from this entity (`None`: it does not exist).
pub fn given<T: Entity>(entity: Option<T>) -> Given<T> {
    Given {
        entity,
        now: 0,
        domain: None,
    }
}

impl<T: Entity> Given<T> {
    /// The clock a process's handler reads ([`Outbox::now`]), in epoch
    /// seconds (0 unless set).
    pub fn at(mut self, now: u64) -> Self {
        self.now = now;
        self
    }

    /// The domain the handler is registered in: what its answer does
    /// beyond its entity (a process's appends and deadline, effects on
    /// counters of other keys) is checked as the runner checks it, against
    /// the domain's process and counters, and refused in the runner's
    /// words. A test of a handler that answers so needs it.
    pub fn within(mut self, domain: &Domain) -> Self {
        self.domain = Some(domain.clone());
        self
    }

    /// Handles `event`, with these envelope fields, as the runner would.
    ///
    /// # Panics
    ///
    /// When the handler answers beyond its entity (appends, a deadline,
    /// effects) and the test has no domain ([`Given::within`]) to check
    /// that answer against.
    #[track_caller]
    pub fn when<E: Events>(
        self,
        event_id: &str,
        aggregate_id: &str,
        sequence: u64,
        event: E,
    ) -> Then<T> {
        let how = match event.handling() {
            Handling(Raw::How(how)) => how,
            // An erasure on whichever kind its stream projects onto: here, T.
            Handling(Raw::Erasure(data)) => erasure_on(data, Some(Kind::of::<T>())),
        };
        let mut slot = self.entity.map(AnyEntity::new);
        let mut reaction = Reaction::at(self.now);
        let (handler, decision) = match how {
            How::Sequenced(mut apply) | How::Snapshot(mut apply) => {
                apply.bind(event_id.to_owned(), aggregate_id.to_owned(), sequence);
                (apply.handler(), apply.react(&mut slot, &mut reaction))
            }
            How::Addition(effect) => (
                effect.handler,
                Err(HandlerFault {
                    handler: effect.handler,
                    problem: "is a deduplicated effect: it has no entity to test".to_owned(),
                }),
            ),
            How::Ignored(_) => (
                "ignored",
                Err(HandlerFault {
                    handler: "ignored",
                    problem: "is ignored by this consumer: it has no entity to test (see testkit::is_ignored)".to_owned(),
                }),
            ),
        };
        let answer = Answer {
            handler,
            event_id,
            decision,
            slot,
            reaction,
        };
        answer.checked(self.domain.as_ref())
    }

    /// Handles the message `body` as the runner would: read through
    /// `domain` (its envelope, version and upcasts, and its `data` by the
    /// type's declaration), then its handler on the entity, its answer
    /// beyond the entity checked against `domain` as with
    /// [`Given::within`]. `Err`: the body is refused (the runner's
    /// `Invalid`), with its reason.
    ///
    /// # Panics
    ///
    /// When `domain`'s declarations cannot work ([`Domain::check`]): no
    /// binary would start with it.
    #[track_caller]
    pub fn when_body(self, domain: &Domain, body: &str) -> Result<Then<T>, InvalidMessage> {
        if let Err(err) = domain.check() {
            panic!("{err}");
        }
        let event = domain.parse(body)?;
        let mut slot = self.entity.map(AnyEntity::new);
        let mut reaction = Reaction::at(self.now);
        let decision = match event.deduplicated() {
            Some(effect) => Err(HandlerFault {
                handler: effect.handler,
                problem: "is a deduplicated effect: it has no entity to test".to_owned(),
            }),
            None => event.react(&mut slot, &mut reaction),
        };
        let answer = Answer {
            handler: event.handler(),
            event_id: event.event_id(),
            decision,
            slot,
            reaction,
        };
        Ok(answer.checked(Some(domain)))
    }
}

/// A handler's answer, before the runner's checks of what it does beyond
/// its entity.
struct Answer<'a> {
    handler: &'static str,
    event_id: &'a str,
    decision: Result<Decision, HandlerFault>,
    slot: Option<AnyEntity>,
    reaction: Reaction,
}

impl Answer<'_> {
    /// The answer checked as the runner checks it (`runner/answer.rs`):
    /// on a fault, the entity as it was, nothing appended, no effect.
    #[track_caller]
    fn checked<T: Entity>(self, domain: Option<&Domain>) -> Then<T> {
        let Answer {
            handler,
            event_id,
            mut decision,
            mut slot,
            mut reaction,
        } = self;
        let (mut effects, effects_before) = match reaction.projected.take() {
            Some(projected) => (projected.effects, Some(projected.before)),
            None => (Vec::new(), None),
        };
        let mut outbox = std::mem::take(&mut reaction.outbox);
        if decision.is_ok() && (!effects.is_empty() || !outbox.is_empty()) {
            let Some(domain) = domain else {
                panic!(
                    "{handler} answered beyond its entity ({}): the runner checks that against the handler's domain (its process, its counters); give the test the domain: given(..).within(&domain())",
                    beyond(&outbox, &effects)
                );
            };
            let cause = Cause::Event(event_id.to_owned());
            let problem = effects_problem(domain, &effects)
                .or_else(|| checked_outbox(domain, &cause, outbox.clone(), true).err());
            if let Some(problem) = problem {
                if let Some(before) = effects_before.or(reaction.before.take()) {
                    slot = before;
                }
                decision = Err(HandlerFault { handler, problem });
                effects.clear();
                outbox = Outbox::at(outbox.now());
            }
        }
        Then {
            decision,
            entity: slot.and_then(|entity| entity.get::<T>().cloned()),
            outbox,
            effects,
        }
    }
}

/// What an answer does beyond its entity, in a few words.
fn beyond(outbox: &Outbox, effects: &[Effect]) -> String {
    let mut what = Vec::new();
    if !outbox.appends().is_empty() {
        what.push("appends");
    }
    if outbox.deadline().is_some() {
        what.push("a deadline");
    }
    if !effects.is_empty() {
        what.push("effects on counters");
    }
    what.join(", ")
}

/// The handler's answer, and the entity after it.
#[derive(Debug, Clone)]
#[must_use = "a handler test asserts nothing until `.then(decision, entity)`"]
pub struct Then<T> {
    decision: Result<Decision, HandlerFault>,
    entity: Option<T>,
    outbox: Outbox,
    effects: Vec<Effect>,
}

impl<T: Entity> Then<T> {
    /// The decision, or the rule the handler broke (in the runner's words:
    /// the runner's handler error for the message says the same).
    pub fn decision(&self) -> Result<Decision, &HandlerFault> {
        self.decision.as_ref().copied()
    }

    /// The entity as the event leaves it.
    pub fn entity(&self) -> Option<&T> {
        self.entity.as_ref()
    }

    /// A process handler's outbox: the events it appends and the deadline
    /// it sets or clears (empty for any other handler, and when the answer
    /// is refused).
    pub fn outbox(&self) -> &Outbox {
        &self.outbox
    }

    /// The effects on counters of other keys of a handler registered with
    /// [`Handling::sequenced_with_effects`], as the runner writes them with
    /// the entity (empty for any other handler, and when the answer is
    /// refused).
    pub fn effects(&self) -> &[Effect] {
        &self.effects
    }

    /// Asserts that a process handler appends events of these types, to
    /// these streams, in this order (`&[]`: none).
    #[track_caller]
    pub fn appends(self, expected: &[(&str, &str)]) -> Self {
        assert_appends(self.outbox.appends(), expected);
        self
    }

    /// Asserts that a handler with effects adds these amounts to these
    /// counters' ids, in this order (`&[]`: none).
    #[track_caller]
    pub fn adds_effects(self, expected: &[(&'static Counter, &str, i64)]) -> Self {
        let added: Vec<(&Counter, &str, i64)> = self
            .effects
            .iter()
            .map(|effect| (effect.counter, effect.id.as_str(), effect.delta))
            .collect();
        let expected: Vec<(&Counter, &str, i64)> = expected
            .iter()
            .map(|(counter, id, delta)| (*counter, *id, *delta))
            .collect();
        assert_eq!(added, expected, "the effects (counter, id, amount added)");
        self
    }

    /// Asserts the decision and the entity after it.
    #[track_caller]
    pub fn then(self, decision: Decision, entity: Option<T>) {
        assert_eq!(self.decision, Ok(decision), "the decision");
        assert_eq!(self.entity, entity, "the entity after the event");
    }
}

/// A deduplicated effect's test: when this event, then this addition to a
/// counter (the effect the store applies once per event and handler).
///
/// ```
/// # use sequence_guard::{Counter, Events, Handling};
/// # use serde::Deserialize;
/// static VISITS: Counter = Counter { kind: "PAGE", sort_key: "VISITS", attribute: "count" };
/// #[derive(Debug, Deserialize)]
/// #[serde(tag = "type", content = "data")]
/// enum PageEvent { Visited { page: String } }
/// impl Events for PageEvent {
///     fn handling(self) -> Handling {
///         match self { PageEvent::Visited { page } => Handling::add("Visits", &VISITS, page, 1) }
///     }
/// }
/// use sequence_guard::testkit::when_effect;
/// when_effect(PageEvent::Visited { page: "home".into() }).adds(&VISITS, "home", 1);
/// ```
pub fn when_effect<E: Events>(event: E) -> WhenEffect {
    WhenEffect {
        effect: match event.handling() {
            Handling(Raw::How(How::Addition(effect))) => Some(effect),
            Handling(Raw::How(_) | Raw::Erasure(_)) => None,
        },
    }
}

/// [`when_effect`] for a message body, read through `domain` as the runner
/// reads it; `Err`: the body is refused, with its reason.
///
/// # Panics
///
/// When `domain`'s declarations cannot work ([`Domain::check`]).
#[track_caller]
pub fn when_effect_body(domain: &Domain, body: &str) -> Result<WhenEffect, InvalidMessage> {
    if let Err(err) = domain.check() {
        panic!("{err}");
    }
    let event = domain.parse(body)?;
    Ok(WhenEffect {
        effect: event.deduplicated().cloned(),
    })
}

/// What a deduplicated event adds, and to which counter.
#[derive(Debug, Clone)]
#[must_use = "an effect test asserts nothing until `.adds(counter, id, delta)`"]
pub struct WhenEffect {
    effect: Option<Addition>,
}

impl WhenEffect {
    /// The effect; `None` for an event handled as sequenced or snapshot.
    pub fn effect(&self) -> Option<&Addition> {
        self.effect.as_ref()
    }

    /// Asserts that the event adds `delta` to `counter`'s `id`.
    #[track_caller]
    pub fn adds(self, counter: &'static Counter, id: &str, delta: i64) {
        let Some(effect) = self.effect else {
            panic!("the event is handled as sequenced or snapshot, not as a deduplicated effect");
        };
        assert_eq!(
            (effect.counter, effect.id.as_str(), effect.delta),
            (counter, id, delta),
            "the counter, its id and the amount added"
        );
    }
}

/// Whether this consumer ignores the event ([`Handling::ignore`]): done,
/// nothing read or written, whatever its entity.
pub fn is_ignored<E: Events>(event: E) -> bool {
    matches!(event.handling(), Handling(Raw::How(How::Ignored(_))))
}

/// Asserts that `appends` are events of these types, to these streams, in
/// this order (`&[]`: none).
#[track_caller]
fn assert_appends(appends: &[crate::answer::Outgoing], expected: &[(&str, &str)]) {
    let appended: Vec<(&str, &str)> = appends
        .iter()
        .map(|out| (out.stream.as_str(), out.event.event_type.as_str()))
        .collect();
    assert_eq!(appended, expected, "the events appended (stream, type)");
}
