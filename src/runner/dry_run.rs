//! A stream's dry run: its messages decided in order, without writing,
//! up to the first that cannot be done; what it finds is the stream's plan
//! (each entity's share of the messages, the additions, the verdicts known
//! already).

use std::collections::HashSet;

use tracing::error;

use super::additions::{addition, dedup_key, same_stream};
use super::batch::{Handled, Share};
use super::deadline::CallError;
use super::verdict::Verdict;
use super::{Invocation, Outcome, Runner};
use crate::entity::{AnyEntity, EntityKey};
use crate::envelope::{Event, InvalidMessage, Record};
use crate::handling::Decision;
use crate::store::{DedupAddition, Store, Stored};

/// One entity's share of a stream: its messages (positions in the stream, in
/// order), the entity's item as loaded, and the entity as the dry run of the
/// decisions leaves it.
pub(super) struct EntityPlan {
    pub(super) key: EntityKey,
    pub(super) base: Result<Stored, CallError>,
    dry: Option<AnyEntity>,
    pub(super) positions: Positions,
}

/// One entity's run to settle: its stream's index and its plan.
pub(super) type EntityJob = (usize, EntityPlan);

/// An entity's messages, by their positions in its stream: most entities
/// have their stream's first messages, a count and no list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Positions {
    /// The stream's first `n` messages.
    First(usize),
    /// Any others, in order.
    List(Vec<usize>),
}

impl Positions {
    fn push(&mut self, position: usize) {
        match self {
            Positions::First(count) if *count == position => *count += 1,
            Positions::First(count) => {
                let mut list: Vec<usize> = (0..*count).collect();
                list.push(position);
                *self = Positions::List(list);
            }
            Positions::List(list) => list.push(position),
        }
    }

    /// The positions, in order.
    pub(super) fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        let (first, list) = match self {
            Positions::First(count) => (0..*count, &[][..]),
            Positions::List(list) => (0..0, list.as_slice()),
        };
        first.chain(list.iter().copied())
    }
}

impl<S: Store> Runner<S> {
    /// Decides a stream's messages in order, without writing, up to the
    /// first that cannot be done: the ones after it are not attempted.
    /// The stream is the batch's `index`-th; `verdicts` (one per message)
    /// gets those decided without a write (invalid, ignored, duplicate
    /// effects), and `entities` each of its entities' plans. Returns the
    /// deduplicated effects to add, with their positions.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn dry_run(
        &self,
        index: usize,
        stream: &[&Record],
        mut share: Share<'_>,
        handled: &Handled,
        invocation: &Invocation,
        verdicts: &mut [Option<Verdict>],
        entities: &mut Vec<EntityJob>,
    ) -> Vec<(usize, DedupAddition)> {
        let mut additions = Vec::new();
        // This stream's plans, at the end of the batch's.
        let first = entities.len();
        // A stream whose every message is an event on its one entity (the
        // common case) needs no dry decisions: settling it decides in order
        // and stops at the first that cannot be done, which is all this run
        // would find. Only a stream shared by several entities, or with
        // additions, must know here where every one of them stops.
        let lone = share.lone().is_some_and(|key| {
            stream.iter().all(|record| {
                record.event.as_ref().is_ok_and(|event| {
                    !event.is_ignored() && event.deduplicated().is_none() && event.is_on(key)
                })
            })
        });
        let mut seen: HashSet<&str> = HashSet::new();
        for (position, record) in stream.iter().enumerate() {
            let event = match &record.event {
                Err(InvalidMessage::KeyNeeded(_)) => {
                    // Its key could not be read (logged with the batch):
                    // retried, like any store call that failed.
                    let reason = if self.domain.keys().is_some() {
                        "the key of its personal data could not be read"
                    } else {
                        "it holds personal data, and no key is configured to open it (PERSONAL_DATA_KEY)"
                    }
                    .to_owned();
                    verdicts[position] = Some(Verdict::new(Outcome::StorageError, Some(reason)));
                    break;
                }
                Err(invalid) => {
                    let reason = invalid.to_string();
                    log_invalid(record, &reason);
                    verdicts[position] = Some(Verdict::new(Outcome::Invalid, Some(reason)));
                    break;
                }
                Ok(event) => event,
            };
            if event.is_ignored() {
                verdicts[position] = Some(Verdict::new(Outcome::Ignored, None));
                continue;
            }
            if let Some(addition) = addition(event, invocation.now, self.config.dedup_ttl_seconds) {
                // A record of another stream's event under this `eventId` is
                // found again by the additions' write, which records the
                // conflict.
                let known = dedup_key(event)
                    .and_then(|key| handled.get(&key))
                    .is_some_and(|recorded| same_stream(recorded.as_deref(), event.stream()));
                if known || !seen.insert(event.event_id()) {
                    verdicts[position] = Some(Verdict::new(Outcome::Duplicate, None));
                } else {
                    additions.push((position, addition));
                }
                continue;
            }
            let Some(entity) = entity_of(entities, first, index, &mut share, event, lone) else {
                break;
            };
            entity.positions.push(position);
            if !lone && !self.maybe_done(entity, record, event) {
                break; // this message fails: the ones after it are not attempted
            }
        }
        additions
    }

    /// Whether the message may be done, as far as the dry run can tell: it
    /// does not know what parking or the event store will do, so a gap that
    /// may be parked, or on an entity with events parked, or whose events
    /// the event store may hold (`fill.rs`), may be done.
    fn maybe_done(&self, entity: &mut EntityPlan, record: &Record, event: &Event) -> bool {
        match &entity.base {
            Err(_) => false,
            Ok(stored) => {
                event
                    .decide_unchecked(&mut entity.dry)
                    .is_some_and(Decision::is_done)
                    || self.config.parks(record)
                    || !stored.parking.sequences.is_empty()
                    || self.store.reads_event_store()
            }
        }
    }
}

/// The plan of the entity `event` is projected onto, among the stream's
/// (`entities` from `first`), begun from its item in the share the first
/// time (a `lone` stream's without the copy its dry decisions would need);
/// `None` for an event on no entity.
fn entity_of<'a>(
    entities: &'a mut Vec<EntityJob>,
    first: usize,
    index: usize,
    share: &mut Share<'_>,
    event: &Event,
    lone: bool,
) -> Option<&'a mut EntityPlan> {
    let found = entities[first..]
        .iter()
        .position(|(_, plan)| event.is_on(&plan.key));
    let at = match found {
        Some(at) => first + at,
        None => {
            let (key, base) = share.take(event)?;
            let dry = match &base {
                Ok(stored) if !lone => stored.entity.clone(),
                _ => None,
            };
            entities.push((
                index,
                EntityPlan {
                    key,
                    base,
                    dry,
                    positions: Positions::First(0),
                },
            ));
            entities.len() - 1
        }
    };
    entities.get_mut(at).map(|(_, plan)| plan)
}

fn log_invalid(record: &Record, reason: &str) {
    error!(
        message_id = %record.message_id,
        trace_id = record.trace_id.as_deref(),
        stream = %record.stream,
        decision = Outcome::Invalid.as_str(),
        reason = %reason,
        "invalid message"
    );
}

#[cfg(test)]
mod tests {
    use super::Positions;

    fn after(pushed: &[usize]) -> Positions {
        let mut positions = Positions::First(0);
        for &position in pushed {
            positions.push(position);
        }
        positions
    }

    #[test]
    fn an_entitys_first_messages_are_a_count_and_any_others_a_list() {
        assert_eq!(after(&[0, 1, 2]), Positions::First(3));
        assert_eq!(after(&[]), Positions::First(0));
        assert_eq!(after(&[1, 2]), Positions::List(vec![1, 2]));
        assert_eq!(after(&[0, 2, 3]), Positions::List(vec![0, 2, 3]));
        for pushed in [&[0, 1, 2][..], &[1, 2], &[0, 2, 3], &[]] {
            assert_eq!(after(pushed).iter().collect::<Vec<_>>(), pushed);
        }
    }
}
