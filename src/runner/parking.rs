//! What a written step parked and drained, as its report says it and as
//! it is logged; and a parked event that cannot be applied.

use tracing::{error, info, warn};

use super::plan::{Step, Stuck, StuckWhy};
use super::{DrainedEvent, ParkingReport, StuckEvent};
use crate::entity::EntityKey;

/// A parked event that cannot be applied, logged with why: it stays parked
/// (the next event of its stream, or the next sweep, tries it again).
pub(super) fn stuck_event(stream: &str, stuck: &Stuck) -> StuckEvent {
    let sequence = stuck.sequence;
    let (reason, handler_error) = match &stuck.why {
        StuckWhy::Missing => ("its item is not in the table".to_owned(), false),
        StuckWhy::Unreadable(reason) => (format!("its body cannot be read: {reason}"), false),
        StuckWhy::Refused(decision) => {
            (format!("its handler answered {}", decision.as_str()), false)
        }
        StuckWhy::Fault(fault) => (fault.to_string(), true),
    };
    if handler_error {
        error!(
            stream,
            sequence,
            reason = %reason,
            "a handler broke its rule on a parked event that follows the entity: nothing written, it stays parked"
        );
    } else {
        error!(
            stream,
            sequence,
            reason = %reason,
            "a parked event that follows the entity cannot be applied: it stays parked"
        );
    }
    StuckEvent {
        sequence,
        reason,
        handler_error,
    }
}

/// What a written step parked and drained.
pub(super) fn parking_report(
    stream: &str,
    key: &EntityKey,
    step: &Step,
    now: u64,
    stuck: Option<StuckEvent>,
) -> ParkingReport {
    let parking = &step.parking;
    let oldest = step
        .drained
        .iter()
        .map(|parked| parked.parked_at)
        .chain(parking.since)
        .min();
    ParkingReport {
        stream: stream.to_owned(),
        entity: key.clone(),
        parked: step
            .commit
            .park
            .iter()
            .map(|parked| parked.sequence)
            .collect(),
        drained: step.drained.iter().map(DrainedEvent::from).collect(),
        parked_now: parking.sequences.len(),
        waiting_for: (!parking.sequences.is_empty()).then(|| {
            step.entity_after()
                .map_or(1, |entity| entity.sequence().saturating_add(1))
        }),
        oldest_parked_age_seconds: oldest.map(|at| now.saturating_sub(at)),
        cleared: step.cleared.clone(),
        conflicts: step.parked_conflicts.clone(),
        stuck,
    }
}

pub(super) fn log_parking(report: &ParkingReport) {
    let drained: Vec<u64> = report
        .drained
        .iter()
        .map(|parked| parked.sequence)
        .collect();
    if !report.cleared.is_empty() {
        let level_error = !report.conflicts.is_empty();
        if level_error {
            error!(
                stream = %report.stream,
                cleared = ?report.cleared,
                conflicts = ?report.conflicts,
                "parked events behind the entity cleared; those that differ from the event applied at their sequence recorded as conflicts"
            );
        } else {
            warn!(
                stream = %report.stream,
                cleared = ?report.cleared,
                "parked events behind the entity cleared (duplicates)"
            );
        }
    }
    info!(
        stream = %report.stream,
        parked = ?report.parked,
        drained = ?drained,
        parked_now = report.parked_now,
        waiting_for = report.waiting_for,
        oldest_parked_age_seconds = report.oldest_parked_age_seconds,
        "{}",
        if !drained.is_empty() {
            "parked events drained"
        } else if !report.parked.is_empty() {
            "events parked"
        } else {
            "parked events cleared"
        }
    );
}
