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

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::verdict::{Verdict, skipped_one};
use super::{Outcome, RunnerConfig};
use crate::domain::Domain;
use crate::entity::{AnyEntity, EntityKey};
use crate::envelope::{Event, Record};
use crate::handling::{Decision, HandlerFault};
use crate::store::{
    Commit, ConflictRecord, Expected, MAX_COMMIT_BYTES, MAX_COMMIT_ITEMS, MAX_PARKED_READ,
    MAX_STORED_BODY, ParkedEvent, Parking, Stored,
};

/// A planned step.
pub(super) struct Step {
    /// One per message decided, from the first of the run's rest: all of
    /// them unless `more`.
    pub verdicts: Vec<Verdict>,
    pub commit: Commit,
    /// The item as the commit leaves it.
    pub after: Stored,
    /// Stored parked events the step applies.
    pub drained: Vec<ParkedEvent>,
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

pub(super) enum Planned {
    /// Read these parked events, then plan again.
    Fetch(Vec<u64>),
    Step(Box<Step>),
}

/// Parked events read so far; `None`: in the item's set, but not found.
pub(super) type Fetched = HashMap<u64, Option<ParkedEvent>>;

/// Plans the next step of a run: `rest` are its messages not settled yet.
pub(super) fn plan(
    domain: &Domain,
    key: &EntityKey,
    stored: &Stored,
    rest: &[&Record],
    fetched: &Fetched,
    config: &RunnerConfig,
    now: u64,
) -> Planned {
    let mut planner = Planner {
        domain,
        key,
        stored,
        rest,
        fetched,
        config,
        now,
        slot: stored.entity.clone(),
        parked: stored.parking.sequences.clone(),
        new_parks: BTreeMap::new(),
        drained: Vec::new(),
        cleared: Vec::new(),
        parked_conflicts: Vec::new(),
        conflicts: Vec::new(),
        verdicts: Vec::new(),
        more: false,
        stuck: None,
    };
    match planner.run() {
        Err(wanted) => Planned::Fetch(wanted),
        Ok(()) => Planned::Step(Box::new(planner.finish())),
    }
}

struct Planner<'a> {
    domain: &'a Domain,
    key: &'a EntityKey,
    stored: &'a Stored,
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
}

/// `Err`: the parked events to read before planning again.
type Planning<T> = Result<T, Vec<u64>>;

impl Planner<'_> {
    /// Items the commit would write: the entity's, its entry in the index of
    /// parked entities, and one per event parked, drained or in conflict.
    fn items(&self) -> usize {
        2 + self.new_parks.len() + self.drained.len() + self.cleared.len() + self.conflicts.len()
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
        parked + drained + conflicts
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
            let verdict = self.decide(position, record, event)?;
            let failed = verdict.outcome.is_failure();
            self.verdicts.push(verdict);
            if failed {
                break;
            }
        }
        Ok(())
    }

    fn decide(&mut self, position: usize, record: &Record, event: &Event) -> Planning<Verdict> {
        let sequence = event.sequence().unwrap_or(0);
        let before = self.slot.as_ref().map(AnyEntity::sequence);
        let decision = match event.decide(&mut self.slot) {
            Ok(decision) => decision,
            Err(fault) => return Ok(handler_error(event, &fault)),
        };
        match decision {
            Decision::Applied => {
                self.drain()?;
                Ok(Verdict::new(Outcome::Applied, None))
            }
            Decision::Duplicate => match &self.slot {
                Some(entity)
                    if entity.sequence() == sequence
                        && entity.last_event_id() != event.event_id() =>
                {
                    let recorded = entity.last_event_id().to_owned();
                    Ok(self.conflict(record, event, "applied", &recorded))
                }
                _ => Ok(Verdict::new(Outcome::Duplicate, None)),
            },
            Decision::Gap | Decision::NotCreated => {
                let waiting_for = before.map_or(1, |at| at.saturating_add(1));
                if let Some((_, parked)) = self.new_parks.get(&sequence) {
                    let recorded = parked.event_id.clone();
                    return Ok(self.against_parked(record, event, &recorded));
                }
                if self.parked.contains(&sequence) {
                    match self.fetched.get(&sequence) {
                        None => return Err(vec![sequence]),
                        Some(Some(parked)) => {
                            return Ok(self.against_parked(record, event, &parked.event_id));
                        }
                        Some(None) => {} // listed, but missing: not parked after all
                    }
                }
                let failed = |reason: String, parking_full: bool| Verdict {
                    outcome: Outcome::from(decision),
                    reason: Some(reason),
                    waiting_for: Some(waiting_for),
                    parking_full,
                    written: false,
                };
                let waiting = match before {
                    Some(at) => {
                        format!("gap: the entity is at sequence {at}, waiting for {waiting_for}")
                    }
                    None => "the entity has not been created yet".to_owned(),
                };
                if !self.config.parks(record) {
                    return Ok(failed(waiting, false));
                }
                if self.parked.len() >= self.config.max_parked_per_stream {
                    return Ok(failed(
                        format!(
                            "{waiting}; not parked: {} events are parked on this stream already (MAX_PARKED_PER_STREAM)",
                            self.parked.len()
                        ),
                        true,
                    ));
                }
                if record.body.len() > MAX_STORED_BODY {
                    return Ok(failed(
                        format!(
                            "{waiting}; not parked: the body is {} bytes, more than the {MAX_STORED_BODY} a parked event can hold",
                            record.body.len()
                        ),
                        false,
                    ));
                }
                self.parked.insert(sequence);
                self.new_parks.insert(
                    sequence,
                    (
                        position,
                        ParkedEvent {
                            sequence,
                            event_id: event.event_id().to_owned(),
                            event_type: event.type_name().to_owned(),
                            body: record.body.clone(),
                            message_id: record.message_id.clone(),
                            parked_at: self.now,
                        },
                    ),
                );
                Ok(Verdict {
                    outcome: Outcome::Parked,
                    reason: Some(format!("{waiting}; parked until it arrives")),
                    waiting_for: Some(waiting_for),
                    parking_full: false,
                    written: true,
                })
            }
        }
    }

    /// A message for a sequence that is parked: the same event again, or a
    /// different one.
    fn against_parked(&mut self, record: &Record, event: &Event, recorded: &str) -> Verdict {
        if recorded == event.event_id() {
            Verdict::new(
                Outcome::Duplicate,
                Some("already parked: applied when the events before it arrive".to_owned()),
            )
        } else {
            self.conflict(record, event, "parked", recorded)
        }
    }

    /// Records a different event for a sequence that is `state` (applied or
    /// parked) as event `recorded`.
    fn conflict(&mut self, record: &Record, event: &Event, state: &str, recorded: &str) -> Verdict {
        let sequence = event.sequence().unwrap_or(0);
        if record.body.len() > MAX_STORED_BODY {
            return Verdict::new(
                Outcome::Invalid,
                Some(format!(
                    "conflict: sequence {sequence} is {state} as event {recorded}, and this body of {} bytes is too large to record",
                    record.body.len()
                )),
            );
        }
        self.record_conflict(sequence, event.event_id(), &record.body);
        Verdict::new(
            Outcome::Conflict,
            Some(format!(
                "conflict: sequence {sequence} is {state} as event {recorded}, not {}",
                event.event_id()
            )),
        )
    }

    /// Takes back a sequence this step parked. One the item listed already
    /// (parked again because its item was missing) is cleared with the write.
    fn unpark(&mut self, sequence: u64) {
        self.parked.remove(&sequence);
        if self.stored.parking.sequences.contains(&sequence) {
            self.cleared.push(sequence);
        }
    }

    /// Adds a conflict record, once per sequence and event.
    fn record_conflict(&mut self, sequence: u64, event_id: &str, body: &str) {
        let known = self
            .conflicts
            .iter()
            .any(|conflict| conflict.sequence == sequence && conflict.event_id == event_id);
        if !known {
            self.conflicts.push(ConflictRecord {
                sequence,
                event_id: event_id.to_owned(),
                body: body.to_owned(),
                seen_at: self.now,
            });
        }
    }

    /// Parked sequences at or behind the entity can never be applied: the
    /// entity got there another way (a creation at a later sequence, or a
    /// message applied while its parked copy could not be read). They are
    /// cleared with the write; one at the entity's own sequence that is
    /// another event than the one applied is recorded as a conflict, as the
    /// guard's duplicates behind it are not. `Ok(false)`: no room left.
    fn clear_behind(&mut self, at: u64) -> Planning<bool> {
        let behind: Vec<u64> = self.parked.range(..=at).copied().collect();
        let applied = self
            .slot
            .as_ref()
            .map(|entity| entity.last_event_id().to_owned())
            .unwrap_or_default();
        for sequence in behind {
            // Room for two items: the cleared slot and a conflict record.
            if self.items() + 2 > MAX_COMMIT_ITEMS {
                self.more = true;
                return Ok(false);
            }
            if let Some((position, parked)) = self.new_parks.remove(&sequence) {
                // Parked by this very step: its message is decided again, and
                // stands only if this step's write does.
                self.unpark(sequence);
                let mut verdict = if sequence == at && parked.event_id != applied {
                    self.record_conflict(sequence, &parked.event_id, &parked.body);
                    Verdict::new(
                        Outcome::Conflict,
                        Some(format!(
                            "conflict: sequence {sequence} is applied as event {applied}, not {}",
                            parked.event_id
                        )),
                    )
                } else {
                    Verdict::new(Outcome::Duplicate, None)
                };
                verdict.written = true;
                self.verdicts[position] = verdict;
                continue;
            }
            if sequence == at {
                match self.fetched.get(&sequence) {
                    None => return Err(vec![sequence]),
                    Some(Some(parked)) if parked.event_id != applied => {
                        let (event_id, body) = (parked.event_id.clone(), parked.body.clone());
                        self.record_conflict(sequence, &event_id, &body);
                        self.parked_conflicts.push(sequence);
                    }
                    Some(_) => {}
                }
            }
            self.parked.remove(&sequence);
            self.cleared.push(sequence);
        }
        Ok(true)
    }

    /// Applies the parked events that follow the entity, in order, while
    /// the step has room.
    fn drain(&mut self) -> Planning<()> {
        while let Some(at) = self.slot.as_ref().map(AnyEntity::sequence) {
            if !self.clear_behind(at)? {
                return Ok(());
            }
            let next = at.saturating_add(1);
            if let Some((position, parked)) = self.new_parks.remove(&next) {
                // Parked by this very step: applied instead.
                let applied = match &self.rest[position].event {
                    Ok(event) => event.decide(&mut self.slot) == Ok(Decision::Applied),
                    Err(_) => false,
                };
                if !applied {
                    self.new_parks.insert(next, (position, parked));
                    return Ok(());
                }
                self.unpark(next);
                self.verdicts[position] = Verdict::new(Outcome::Applied, None);
                continue;
            }
            if !self.parked.contains(&next) {
                return Ok(());
            }
            if self.full() {
                self.more = true;
                return Ok(());
            }
            let parked = match self.fetched.get(&next) {
                None => {
                    let room = MAX_COMMIT_ITEMS - self.items();
                    let wanted = (next..)
                        .take_while(|sequence| {
                            self.parked.contains(sequence) && !self.fetched.contains_key(sequence)
                        })
                        .take(room.min(MAX_PARKED_READ))
                        .collect();
                    return Err(wanted);
                }
                Some(None) => {
                    self.stuck = Some(Stuck {
                        sequence: next,
                        why: StuckWhy::Missing,
                    });
                    return Ok(());
                }
                Some(Some(parked)) => parked,
            };
            if let Err(why) = self.apply_parked(parked, next) {
                self.stuck = Some(Stuck {
                    sequence: next,
                    why,
                });
                return Ok(());
            }
            self.parked.remove(&next);
            self.drained.push(parked.clone());
        }
        Ok(())
    }

    /// Applies a stored parked event (at `sequence`) to the slot.
    fn apply_parked(&mut self, parked: &ParkedEvent, sequence: u64) -> Result<(), StuckWhy> {
        let event = self
            .domain
            .parse(&parked.body)
            .map_err(|err| StuckWhy::Unreadable(err.to_string()))?;
        if event.entity_key().as_ref() != Some(self.key) || event.sequence() != Some(sequence) {
            return Err(StuckWhy::Unreadable(format!(
                "its body is not the event at sequence {sequence} of this entity"
            )));
        }
        match event.decide(&mut self.slot) {
            Ok(Decision::Applied) => Ok(()),
            Ok(other) => Err(StuckWhy::Refused(other)),
            Err(fault) => Err(StuckWhy::Fault(fault)),
        }
    }

    fn finish(self) -> Step {
        let mut verdicts = self.verdicts;
        if !self.more {
            verdicts.resize_with(self.rest.len(), skipped_one);
        }
        let entity = if self.slot == self.stored.entity {
            None
        } else {
            self.slot.clone()
        };
        let since = if self.parked.is_empty() {
            None
        } else {
            self.stored.parking.since.or(Some(self.now))
        };
        let commit = Commit {
            key: self.key.clone(),
            expected: Expected {
                sequence: self.stored.entity.as_ref().map(AnyEntity::sequence),
                parked: self.stored.parking.sequences.clone(),
                // Only a write of the entity needs it (for the attributes to remove).
                entity: entity.as_ref().and(self.stored.entity.clone()),
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
        };
        Step {
            verdicts,
            commit,
            after: Stored {
                entity: self.slot,
                parking: Parking {
                    sequences: self.parked,
                    since,
                },
            },
            drained: self.drained,
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
        event_type = event.type_name(),
        handler = fault.handler,
        sequence = event.sequence(),
        problem = %fault.problem,
        "a handler broke its rule: nothing written"
    );
    Verdict::new(Outcome::HandlerError, Some(fault.to_string()))
}
