//! One entity's share of a stream, decided with parking: the guard's answer
//! for each message, the events parked and drained, and the conflicts,
//! planned as a step that one [`Commit`] writes.
//!
//! | the guard says                    | and                                            | outcome   |
//! | --------------------------------- | ---------------------------------------------- | --------- |
//! | applied                           | parked events that now follow are applied too  | applied   |
//! | duplicate                         | same sequence as applied, other `eventId`      | conflict  |
//! | duplicate                         | otherwise                                      | duplicate |
//! | gap / not created                 | the sequence is parked, same `eventId`         | duplicate |
//! | gap / not created                 | the sequence is parked, other `eventId`        | conflict  |
//! | gap / not created                 | `GAP_POLICY=park`, received `PARK_AFTER_RECEIVES` times, room left | parked |
//! | gap / not created                 | otherwise                                      | failed    |
//!
//! Planning is pure: when it needs parked events it has not read, it asks
//! for them ([`Planned::Fetch`]) and is run again once they are read.
//!
//! | file | what it does |
//! | --- | --- |
//! | `mod.rs` | the step planned: each message decided, the commit that writes them |
//! | `gap.rs` | a gap: parked, found parked already, or failed; conflicts recorded |
//! | `drain.rs` | parked events that follow the entity applied; those behind it cleared |
//! | `outbox.rs` | a process's step: its appends and deadline checked and joined, or the step cut |
//! | `effects.rs` | effects on counters of other keys joined to the step, or the step cut |

mod drain;
mod effects;
mod gap;
mod outbox;

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::verdict::{Verdict, skipped_one};
use super::{Outcome, RunnerConfig};
use crate::domain::Domain;
use crate::entity::{AnyEntity, EntityKey};
use crate::envelope::{Event, Record};
use crate::handling::{Decision, Effect, HandlerFault};
use crate::store::{
    Commit, ConflictRecord, Expected, MAX_COMMIT_BYTES, MAX_COMMIT_ITEMS, Outbound, ParkedEvent,
    Parking, Stored,
};
use outbox::Reacted;

/// A planned step.
pub(super) struct Step {
    /// One per message decided, from the first of the run's rest: all of
    /// them unless `more`.
    pub verdicts: Vec<Verdict>,
    /// What the step writes; its `entity`, the entity's new state.
    pub commit: Commit,
    /// What is parked on the item once the commit is written.
    pub parking: Parking,
    /// The entity the step was planned on, when the step leaves it as it
    /// was (moved here, not copied: the commit's `expected` has it otherwise).
    unchanged: Option<AnyEntity>,
    /// Stored parked events the step applies.
    pub drained: Vec<ParkedEvent>,
    /// Effects on counters of other keys, written with the commit.
    pub effects: Vec<Effect>,
    /// The step stopped at the size of a transaction: plan the rest after
    /// committing it.
    pub more: bool,
    /// A parked event that follows the entity but cannot be applied: it
    /// stays parked.
    pub stuck: Option<Stuck>,
    /// Parked sequences the entity got past another way: cleared.
    pub cleared: Vec<u64>,
    /// Of those, the ones recorded as conflicts.
    pub parked_conflicts: Vec<u64>,
}

/// A parked event that follows the entity and cannot be applied, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Stuck {
    /// Its sequence.
    pub sequence: u64,
    /// Why it cannot be applied.
    pub why: StuckWhy,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum StuckWhy {
    /// Its item is in the entity's set but not in the table.
    Missing,
    /// Its body cannot be read now (the reason), or is another entity's or
    /// sequence's event.
    Unreadable(String),
    /// Its handler answered something other than applied.
    Refused(Decision),
    /// Its handler broke its rule, or panicked.
    Fault(HandlerFault),
}

impl Step {
    /// The entity as the commit leaves it.
    pub(super) fn entity_after(&self) -> Option<&AnyEntity> {
        self.commit.entity.as_ref().or(self.unchanged.as_ref())
    }

    /// The item as the commit leaves it, once it is written.
    pub(super) fn into_stored(self) -> Stored {
        Stored {
            entity: self.commit.entity.or(self.unchanged),
            parking: self.parking,
            due_at: match self.commit.deadline {
                Some(deadline) => deadline,
                None => self.commit.expected.due_at,
            },
        }
    }
}

pub(super) enum Planned {
    /// Read these parked events, then plan again on the item given back.
    Fetch(Vec<u64>, Stored),
    Step(Box<Step>),
}

/// Parked events read so far; `None`: in the item's set, but not found.
pub(super) type Fetched = HashMap<u64, Option<ParkedEvent>>;

/// Plans the next step of a run on the item as `stored`: `rest` are its
/// messages not settled yet.
pub(super) fn plan(
    domain: &Domain,
    key: &EntityKey,
    stored: Stored,
    rest: &[&Record],
    fetched: &Fetched,
    config: &RunnerConfig,
    now: u64,
) -> Planned {
    let mut planner = Planner {
        domain,
        key,
        rest,
        fetched,
        config,
        now,
        slot: stored.entity.clone(),
        parked: stored.parking.sequences.clone(),
        stored,
        new_parks: BTreeMap::new(),
        drained: Vec::new(),
        cleared: Vec::new(),
        parked_conflicts: Vec::new(),
        conflicts: Vec::new(),
        verdicts: Vec::with_capacity(rest.len()),
        more: false,
        stuck: None,
        outgoing: None,
        deadline: None,
        effects: Vec::new(),
    };
    match planner.run() {
        Err(wanted) => Planned::Fetch(wanted, planner.stored),
        Ok(()) => Planned::Step(Box::new(planner.finish())),
    }
}

struct Planner<'a> {
    domain: &'a Domain,
    key: &'a EntityKey,
    /// The item the step is planned on.
    stored: Stored,
    rest: &'a [&'a Record],
    fetched: &'a Fetched,
    config: &'a RunnerConfig,
    now: u64,
    slot: Option<AnyEntity>,
    /// Every sequence parked on the item as the step goes: the stored ones
    /// not drained, and the ones this step parks.
    parked: BTreeSet<u64>,
    /// Parked by this step: sequence -> (position in `rest`, the event).
    new_parks: BTreeMap<u64, (usize, ParkedEvent)>,
    drained: Vec<ParkedEvent>,
    /// Parked sequences removed without being applied (see `clear_behind`).
    cleared: Vec<u64>,
    /// Of those, the ones recorded as conflicts.
    parked_conflicts: Vec<u64>,
    conflicts: Vec<ConflictRecord>,
    verdicts: Vec<Verdict>,
    more: bool,
    stuck: Option<Stuck>,
    /// A process's: what the step appends.
    outgoing: Option<Outbound>,
    /// A process's: the deadline the step sets or clears.
    deadline: Option<Option<u64>>,
    /// Applied events' effects on counters of other keys.
    effects: Vec<Effect>,
}

/// `Err`: the parked events to read before planning again.
type Planning<T> = Result<T, Vec<u64>>;

impl Planner<'_> {
    /// Items the commit would write: the entity's, its entry in the index of
    /// parked entities, one per event parked, drained or in conflict, and
    /// one per item of other keys the effects touch.
    fn items(&self) -> usize {
        2 + self.effect_items()
            + self.new_parks.len()
            + self.drained.len()
            + self.cleared.len()
            + self.conflicts.len()
            + self
                .outgoing
                .as_ref()
                .map_or(0, |outgoing| outgoing.events.len() + 2)
    }

    /// Bytes of the bodies the step parks, drains and records.
    fn bytes(&self) -> usize {
        let parked: usize = self
            .new_parks
            .values()
            .map(|(_, event)| event.body.len())
            .sum();
        let drained: usize = self.drained.iter().map(|event| event.body.len()).sum();
        let conflicts: usize = self
            .conflicts
            .iter()
            .map(|conflict| conflict.body.len())
            .sum();
        let appended = self
            .outgoing
            .as_ref()
            .map_or(0, crate::runner::answer::bytes);
        parked + drained + conflicts + appended
    }

    /// Whether the step has no room for another item or body.
    fn full(&self) -> bool {
        self.items() >= MAX_COMMIT_ITEMS || self.bytes() >= MAX_COMMIT_BYTES
    }

    fn run(&mut self) -> Planning<()> {
        // What the entity's next sequence finds parked (left by a step cut
        // short, or parked while another invocation moved the entity).
        self.drain()?;
        for (position, record) in self.rest.iter().enumerate() {
            if self.more {
                break;
            }
            if self.full() {
                self.more = true;
                break;
            }
            let Ok(event) = &record.event else { break };
            let Some(verdict) = self.decide(position, record, event)? else {
                // A process's appends that cannot join this step: the next.
                self.more = true;
                break;
            };
            let failed = verdict.outcome.is_failure();
            self.verdicts.push(verdict);
            if failed {
                break;
            }
        }
        Ok(())
    }

    fn decide(
        &mut self,
        position: usize,
        record: &Record,
        event: &Event,
    ) -> Planning<Option<Verdict>> {
        let sequence = event.sequence().unwrap_or(0);
        let before = self.slot.as_ref().map(AnyEntity::sequence);
        let decision = match self.react(event, self.config.reacts(record)) {
            Reacted::Decided(decision) => decision,
            Reacted::Fault(fault) => return Ok(Some(handler_error(event, &fault))),
            Reacted::Cut => return Ok(None),
        };
        Ok(Some(match decision {
            Decision::Applied => {
                self.drain()?;
                Verdict::new(Outcome::Applied, None)
            }
            Decision::Duplicate => match &self.slot {
                Some(entity)
                    if entity.sequence() == sequence
                        && entity.last_event_id() != event.event_id() =>
                {
                    let recorded = entity.last_event_id().to_owned();
                    self.conflict(record, event, "applied", &recorded)
                }
                _ => Verdict::new(Outcome::Duplicate, None),
            },
            Decision::Gap | Decision::NotCreated => {
                self.gap(position, record, event, decision, before)?
            }
            Decision::Invalid => Verdict::new(
                Outcome::Invalid,
                Some(format!(
                    "{} refused the {} event: it can never be applied (the handler's log line says why)",
                    event.handler(),
                    event.type_name()
                )),
            ),
        }))
    }

    fn finish(self) -> Step {
        let mut verdicts = self.verdicts;
        if !self.more {
            verdicts.resize_with(self.rest.len(), skipped_one);
        }
        let Stored {
            entity: before,
            parking,
            due_at,
        } = self.stored;
        let sequence = before.as_ref().map(AnyEntity::sequence);
        let since = if self.parked.is_empty() {
            None
        } else {
            parking.since.or(Some(self.now))
        };
        let (entity, unchanged, before) = if self.slot == before {
            (None, self.slot, None)
        } else {
            // Only a write of the entity needs it (for the attributes to remove).
            let before = if self.slot.is_some() { before } else { None };
            (self.slot, None, before)
        };
        let commit = Commit {
            key: self.key.clone(),
            expected: Expected {
                sequence,
                parked: parking.sequences,
                entity: before,
                due_at,
            },
            entity,
            park: self
                .new_parks
                .into_values()
                .map(|(_, parked)| parked)
                .collect(),
            drain: self
                .drained
                .iter()
                .map(|parked| parked.sequence)
                .chain(self.cleared.iter().copied())
                .collect(),
            conflicts: self.conflicts,
            now: self.now,
            deadline: self.deadline.filter(|deadline| *deadline != due_at),
            outbox: self.outgoing,
        };
        Step {
            verdicts,
            commit,
            parking: Parking {
                sequences: self.parked,
                since,
            },
            unchanged,
            drained: self.drained,
            effects: self.effects,
            more: self.more,
            stuck: self.stuck,
            cleared: self.cleared,
            parked_conflicts: self.parked_conflicts,
        }
    }
}

/// A handler that broke its rule: failed, and logged with the handler's
/// and the event type's names; the slot was left as it was.
fn handler_error(event: &Event, fault: &HandlerFault) -> Verdict {
    tracing::error!(
        stream = event.stream(),
        event_type = event.type_name(),
        handler = fault.handler,
        sequence = event.sequence(),
        problem = %fault.problem,
        "a handler broke its rule: nothing written"
    );
    Verdict::new(
        Outcome::HandlerError,
        Some(format!("{} event: {fault}", event.type_name())),
    )
}
