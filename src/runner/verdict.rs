//! One message's verdict inside its stream, before it becomes a report.

use super::Outcome;

/// The outcome of one message, as decided inside its stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Verdict {
    pub(super) outcome: Outcome,
    pub(super) reason: Option<String>,
    pub(super) waiting_for: Option<u64>,
    pub(super) parking_full: bool,
    /// Done only once its step's write is: applied, parked, recorded as a
    /// conflict, or found behind an entity this step moves.
    pub(super) written: bool,
}

impl Verdict {
    pub(super) fn new(outcome: Outcome, reason: Option<String>) -> Self {
        Verdict {
            outcome,
            reason,
            waiting_for: None,
            parking_full: false,
            written: matches!(
                outcome,
                Outcome::Applied | Outcome::Parked | Outcome::Conflict
            ),
        }
    }
}

pub(super) const SKIPPED_REASON: &str = "not attempted: an earlier message of its stream failed";
pub(super) const SETTLED_AFTER_FAILURE_REASON: &str = "an earlier message of its stream failed; this one was written at the same time and will be found done";

/// Outcomes before `from` stand (duplicates decided on a consistent read);
/// the message at `from` gets `outcome` with `reason`; the ones after it are
/// skipped.
pub(super) fn fail_from(
    outcomes: Vec<Verdict>,
    from: usize,
    outcome: Outcome,
    reason: &str,
) -> Vec<Verdict> {
    outcomes
        .into_iter()
        .enumerate()
        .map(|(index, decided)| match index.cmp(&from) {
            std::cmp::Ordering::Less => decided,
            std::cmp::Ordering::Equal => Verdict::new(outcome, Some(reason.to_owned())),
            std::cmp::Ordering::Greater => skipped_one(),
        })
        .collect()
}

pub(super) fn skipped_one() -> Verdict {
    Verdict::new(Outcome::Skipped, Some(SKIPPED_REASON.to_owned()))
}

pub(super) fn skipped(len: usize) -> Vec<Verdict> {
    vec![skipped_one(); len]
}
