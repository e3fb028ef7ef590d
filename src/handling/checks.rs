//! The checks of a guarded handler's answer: where it stands against the
//! entity's sequence (`misplaced`), and what it left of the entity
//! (`misapplied`).

use super::{Decision, Sequenced};
use crate::entity::Entity;

/// What is wrong with a guarded handler's answer for the entity's sequence
/// before it (`None`: no entity) and the event's, as the contract decides:
/// `Applied` only on the entity's next sequence (or with no entity: a
/// creation); `Duplicate` never with no entity (and on an entity behind
/// the event only from a creation: [`Call::duplicate_behind`]); `Gap` only
/// when events are missing between them; `NotCreated` only with no entity;
/// `Invalid` only where `Applied` would be right.
pub(super) fn misplaced(decision: Decision, before: Option<u64>, sequence: u64) -> Option<String> {
    let answered = decision.as_str();
    let next = sequence.saturating_sub(1);
    match (decision, before) {
        (Decision::Applied, Some(at)) if at >= sequence => Some(format!(
            "answered applied to event {sequence} on an entity already at sequence {at}"
        )),
        (Decision::Applied, Some(at)) if at < next => Some(format!(
            "answered applied to event {sequence} on an entity at sequence {at}: applied is right only on its next sequence, {} (does the handler check the entity's sequence?)",
            at.saturating_add(1)
        )),
        (Decision::Duplicate, None) => Some(format!(
            "answered duplicate to event {sequence} with no entity: nothing was applied that it could duplicate"
        )),
        (Decision::Gap, Some(at)) if at >= next => Some(format!(
            "answered gap to event {sequence} on an entity at sequence {at}: no event is missing between them"
        )),
        (Decision::NotCreated, Some(at)) => Some(format!(
            "answered {answered} to event {sequence}, and the entity exists (at sequence {at})"
        )),
        (Decision::Invalid, Some(at)) if at != next => Some(format!(
            "answered invalid to event {sequence} on an entity at sequence {at}: invalid is right only where applied would be, its next sequence {} (a duplicate or a gap is not refused)",
            at.saturating_add(1)
        )),
        _ => None,
    }
}

/// What is wrong with the entity as a guarded handler's answer left it:
/// `Applied` leaves an entity at the event's sequence and id; any other
/// answer leaves it as it was.
pub(super) fn misapplied<T: Entity, D>(
    decision: Decision,
    before: Option<&T>,
    after: Option<&T>,
    event: &Sequenced<D>,
) -> Option<String> {
    let sequence = event.sequence;
    match (decision, after) {
        (Decision::Applied, None) => Some(format!(
            "answered applied to event {sequence} and left no entity"
        )),
        (Decision::Applied, Some(after)) if after.sequence() != sequence => Some(format!(
            "answered applied to event {sequence} and left the entity at sequence {}",
            after.sequence()
        )),
        (Decision::Applied, Some(after)) if after.last_event_id() != event.event_id => {
            Some(format!(
                "answered applied to event {sequence} and left the entity's last event id at `{}`, not the event's",
                after.last_event_id()
            ))
        }
        (Decision::Applied, Some(_)) => None,
        (other, after) if after != before => Some(format!(
            "answered {} to event {sequence} and changed the entity",
            other.as_str()
        )),
        _ => None,
    }
}
