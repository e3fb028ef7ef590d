//! A commit's effects on counters of other keys, as the DynamoDB store
//! writes them: the deltas on each counter summed, the whole commit refused
//! when a sum would leave the 64-bit range.

use std::collections::HashMap;

use crate::handling::{Counter, Effect};
use crate::store::{StoreError, added};

/// A counter's item: the counter and its id.
type Target = (&'static Counter, String);

/// Counters by (counter, id).
type Counters = HashMap<Target, i64>;

/// Each counter's value once the effects are added; refused when one would
/// leave the 64-bit range (then nothing is written).
pub(super) fn sums(
    counters: &Counters,
    effects: &[Effect],
) -> Result<Vec<(Target, i64)>, StoreError> {
    let mut deltas: Vec<((&'static Counter, &str), Vec<i64>)> = Vec::new();
    for effect in effects {
        let target = (effect.counter, effect.id.as_str());
        match deltas.iter_mut().find(|(at, _)| *at == target) {
            Some((_, target_deltas)) => target_deltas.push(effect.delta),
            None => deltas.push((target, vec![effect.delta])),
        }
    }
    deltas
        .into_iter()
        .map(|((counter, id), target_deltas)| {
            let key = (counter, id.to_owned());
            let current = counters.get(&key).copied();
            match added(current, target_deltas) {
                Some(after) => Ok((key, after)),
                None => Err(out_of_range(counter, id)),
            }
        })
        .collect()
}

/// The refusal of effects that would take a counter out of the 64-bit
/// range: the same write would be refused again.
pub(crate) fn out_of_range(counter: &Counter, id: &str) -> StoreError {
    StoreError::Rejected {
        operation: "TransactWriteItems",
        message: format!(
            "the effects on the counter {} of {id} would take it out of the 64-bit range: nothing written",
            counter.label()
        ),
    }
}

/// The refusal of effects without the entity's write: only its guard makes
/// them once per event.
pub(crate) fn unguarded() -> StoreError {
    StoreError::Rejected {
        operation: "TransactWriteItems",
        message: "effects on other keys without the entity's conditional write: only that write makes them once per event".to_owned(),
    }
}
