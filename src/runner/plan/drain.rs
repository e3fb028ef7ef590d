//! Parked events that follow the entity, applied in order while the step
//! has room; those at or behind it cleared.

use super::{Planner, Planning, Reacted, Stuck, StuckWhy};
use crate::entity::AnyEntity;
use crate::handling::{Decision, HandlerFault};
use crate::runner::Outcome;
use crate::runner::verdict::Verdict;
use crate::store::{MAX_COMMIT_ITEMS, MAX_PARKED_READ, ParkedEvent};

impl Planner<'_> {
    /// Takes back a sequence this step parked. One the item listed already
    /// (parked again because its item was missing) is cleared with the write.
    fn unpark(&mut self, sequence: u64) {
        self.parked.remove(&sequence);
        if self.stored.parking.sequences.contains(&sequence) {
            self.cleared.push(sequence);
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
        if behind.is_empty() {
            return Ok(true);
        }
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
    pub(super) fn drain(&mut self) -> Planning<()> {
        // Most items have nothing parked: nothing to clear or apply.
        if self.parked.is_empty() && self.new_parks.is_empty() {
            return Ok(());
        }
        while let Some(at) = self.slot.as_ref().map(AnyEntity::sequence) {
            if !self.clear_behind(at)? {
                return Ok(());
            }
            let next = at.saturating_add(1);
            if let Some((position, parked)) = self.new_parks.remove(&next) {
                // Parked by this very step: applied instead.
                let reacted = match &self.rest[position].event {
                    Ok(event) => Some(self.react(event, self.config.appends)),
                    Err(_) => None,
                };
                if matches!(reacted, Some(Reacted::Cut)) {
                    self.new_parks.insert(next, (position, parked));
                    self.more = true;
                    return Ok(());
                }
                if !matches!(reacted, Some(Reacted::Decided(Decision::Applied))) {
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
            let applied = self.apply_parked(parked, next);
            if applied == Err(None) {
                self.more = true;
                return Ok(());
            }
            if let Err(Some(why)) = applied {
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

    /// Applies a stored parked event (at `sequence`) to the slot;
    /// `Err(None)`: a process's appends that cannot join this step (in the
    /// next).
    fn apply_parked(
        &mut self,
        parked: &ParkedEvent,
        sequence: u64,
    ) -> Result<(), Option<StuckWhy>> {
        let event = self
            .domain
            .parse(&parked.body)
            .map_err(|err| Some(StuckWhy::Unreadable(err.to_string())))?;
        if event.entity_key().as_ref() != Some(self.key) || event.sequence() != Some(sequence) {
            return Err(Some(StuckWhy::Unreadable(format!(
                "its body is not the event at sequence {sequence} of this entity"
            ))));
        }
        match self.react(&event, self.config.appends) {
            Reacted::Decided(Decision::Applied) => Ok(()),
            Reacted::Decided(other) => Err(Some(StuckWhy::Refused(other))),
            Reacted::Fault(fault) => Err(Some(StuckWhy::Fault(HandlerFault {
                problem: format!("{} ({} event)", fault.problem, event.type_name()),
                ..fault
            }))),
            Reacted::Cut => Err(None),
        }
    }
}
