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
use crate::store::{Addition, Store, Stored};

/// One entity's share of a stream: its messages (positions in the stream, in
/// order), the entity's item as loaded, and the entity as the dry run of the
/// decisions leaves it.
pub(super) struct EntityPlan {
    pub(super) key: EntityKey,
    pub(super) base: Result<Stored, CallError>,
    dry: Option<AnyEntity>,
    pub(super) positions: Vec<usize>,
}

/// What a stream's dry run found.
pub(super) struct StreamPlan {
    /// One per message: those decided without a write (invalid, ignored,
    /// duplicate effects); `None` for the ones settled, and for those not
    /// attempted.
    pub(super) verdicts: Vec<Option<Verdict>>,
    pub(super) entities: Vec<EntityPlan>,
    /// The deduplicated effects to add, with their positions.
    pub(super) additions: Vec<(usize, Addition)>,
}

impl<S: Store> Runner<S> {
    /// Decides a stream's messages in order, without writing, up to the
    /// first that cannot be done: the ones after it are not attempted.
    pub(super) fn dry_run(
        &self,
        stream: &[&Record],
        mut share: Share,
        handled: &Handled,
        invocation: &Invocation,
    ) -> StreamPlan {
        let mut plan = StreamPlan {
            verdicts: vec![None; stream.len()],
            entities: Vec::new(),
            additions: Vec::new(),
        };
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
                    plan.verdicts[position] =
                        Some(Verdict::new(Outcome::StorageError, Some(reason)));
                    break;
                }
                Err(invalid) => {
                    let reason = invalid.to_string();
                    log_invalid(record, &reason);
                    plan.verdicts[position] = Some(Verdict::new(Outcome::Invalid, Some(reason)));
                    break;
                }
                Ok(event) => event,
            };
            if event.is_ignored() {
                plan.verdicts[position] = Some(Verdict::new(Outcome::Ignored, None));
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
                    plan.verdicts[position] = Some(Verdict::new(Outcome::Duplicate, None));
                } else {
                    plan.additions.push((position, addition));
                }
                continue;
            }
            let Some(entity) = entity_of(&mut plan.entities, &mut share, event, lone) else {
                break;
            };
            entity.positions.push(position);
            if !lone && !self.maybe_done(entity, record, event) {
                break; // this message fails: the ones after it are not attempted
            }
        }
        plan
    }

    /// Whether the message may be done, as far as the dry run can tell: it
    /// does not know what parking will do, so a gap that may be parked, or
    /// on an entity with events parked, may be done.
    fn maybe_done(&self, entity: &mut EntityPlan, record: &Record, event: &Event) -> bool {
        match &entity.base {
            Err(_) => false,
            Ok(stored) => {
                event
                    .decide_unchecked(&mut entity.dry)
                    .is_some_and(Decision::is_done)
                    || self.config.parks(record)
                    || !stored.parking.sequences.is_empty()
            }
        }
    }
}

/// The plan of the entity `event` is projected onto, begun from its item in
/// the share the first time (a `lone` stream's without the copy its dry
/// decisions would need); `None` for an event on no entity.
fn entity_of<'a>(
    entities: &'a mut Vec<EntityPlan>,
    share: &mut Share,
    event: &Event,
    lone: bool,
) -> Option<&'a mut EntityPlan> {
    let index = match entities.iter().position(|plan| event.is_on(&plan.key)) {
        Some(index) => index,
        None => {
            let (key, base) = share.take(event)?;
            let dry = match &base {
                Ok(stored) if !lone => stored.entity.clone(),
                _ => None,
            };
            entities.push(EntityPlan {
                key,
                base,
                dry,
                positions: Vec::new(),
            });
            entities.len() - 1
        }
    };
    entities.get_mut(index)
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
