//! The guard's gap (or not created): the message parked when it may be,
//! found parked already (a duplicate, or a conflict), or failed; and the
//! conflicts recorded.

use super::Planner;
use super::Planning;
use crate::envelope::{Event, Record};
use crate::handling::Decision;
use crate::runner::Outcome;
use crate::runner::verdict::Verdict;
use crate::store::{ConflictRecord, MAX_STORED_BODY, ParkedEvent};

impl Planner<'_> {
    /// A gap or a missing entity (`decision`) for the message at `position`
    /// of the rest, the entity at sequence `before`.
    pub(super) fn gap(
        &mut self,
        position: usize,
        record: &Record,
        event: &Event,
        decision: Decision,
        before: Option<u64>,
    ) -> Planning<Verdict> {
        let sequence = event.sequence().unwrap_or(0);
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
        if self.parked.len() >= self.config.max_parked_per_entity {
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
        self.park(position, record, event);
        Ok(Verdict {
            outcome: Outcome::Parked,
            reason: Some(format!("{waiting}; parked until it arrives")),
            waiting_for: Some(waiting_for),
            parking_full: false,
            written: true,
        })
    }

    /// Parks the message at `position` of the rest with this step.
    fn park(&mut self, position: usize, record: &Record, event: &Event) {
        let sequence = event.sequence().unwrap_or(0);
        self.parked.insert(sequence);
        let parked = ParkedEvent {
            sequence,
            event_id: event.event_id().to_owned(),
            event_type: event.type_name().to_owned(),
            body: record.body.clone(),
            message_id: record.message_id.clone(),
            parked_at: self.now,
        };
        self.new_parks.insert(sequence, (position, parked));
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
    pub(super) fn conflict(
        &mut self,
        record: &Record,
        event: &Event,
        state: &str,
        recorded: &str,
    ) -> Verdict {
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

    /// Adds a conflict record, once per sequence and event.
    pub(super) fn record_conflict(&mut self, sequence: u64, event_id: &str, body: &str) {
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
}
