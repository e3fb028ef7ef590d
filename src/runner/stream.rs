//! One stream of a batch: its messages decided in order up to the first
//! that cannot be done, then settled, each entity with one write and the
//! deduplicated effects with one transaction, all at once.

use std::collections::HashSet;

use futures::future::join_all;
use tracing::{error, warn};

use super::additions::{addition, dedup_key};
use super::deadline::CallError;
use super::verdict::{SETTLED_AFTER_FAILURE_REASON, Verdict, report, skipped_one};
use super::{Invocation, MessageReport, Outcome, ParkingReport, Runner};
use crate::entity::{AnyEntity, EntityKey};
use crate::envelope::Record;
use crate::handling::Decision;
use crate::store::{Addition, Loaded, Store, Stored};

/// One entity's share of a stream: its messages (positions in the stream, in
/// order), the entity's item as loaded, and the entity as the dry run of the
/// decisions leaves it.
struct EntityPlan {
    key: EntityKey,
    base: Result<Stored, CallError>,
    dry: Option<AnyEntity>,
    positions: Vec<usize>,
}

impl<S: Store> Runner<S> {
    /// Runs one stream: decides its messages in order up to the first that
    /// cannot be done, then settles them with at most one write per entity and
    /// one transaction for its deduplicated effects, all at once.
    pub(super) async fn run_stream(
        &self,
        stream: &[&Record],
        loaded: &Result<Loaded, CallError>,
        invocation: &Invocation,
    ) -> (Vec<MessageReport>, Vec<ParkingReport>) {
        let mut verdicts: Vec<Option<Verdict>> = vec![None; stream.len()];
        let mut entities: Vec<EntityPlan> = Vec::new();
        let mut additions: Vec<(usize, Addition)> = Vec::new();
        let mut seen: HashSet<&str> = HashSet::new();
        for (position, record) in stream.iter().enumerate() {
            let event = match &record.event {
                Err(invalid) => {
                    error!(
                        message_id = %record.message_id,
                        trace_id = record.trace_id.as_deref(),
                        stream = %record.stream,
                        decision = Outcome::Invalid.as_str(),
                        reason = %invalid,
                        "invalid message"
                    );
                    verdicts[position] =
                        Some(Verdict::new(Outcome::Invalid, Some(invalid.to_string())));
                    break;
                }
                Ok(event) => event,
            };
            if event.is_ignored() {
                verdicts[position] = Some(Verdict::new(Outcome::Ignored, None));
                continue;
            }
            if let Some(addition) = addition(event, invocation.now, self.config.dedup_ttl_seconds) {
                let known = loaded.as_ref().is_ok_and(|loaded| {
                    dedup_key(event).is_some_and(|key| loaded.handled.contains(&key))
                });
                if known || !seen.insert(event.event_id()) {
                    verdicts[position] = Some(Verdict::new(Outcome::Duplicate, None));
                } else {
                    additions.push((position, addition));
                }
                continue;
            }
            let Some(key) = event.entity_key() else { break };
            let index = match entities.iter().position(|plan| plan.key == key) {
                Some(index) => index,
                None => {
                    let base = match loaded {
                        Err(err) => Err(err.clone()),
                        Ok(loaded) => match loaded.entities.get(&key).cloned().transpose() {
                            Err(err) => Err(CallError::Store(err)),
                            Ok(entity) => Ok(Stored {
                                entity,
                                parking: loaded.parking.get(&key).cloned().unwrap_or_default(),
                            }),
                        },
                    };
                    let dry = base.as_ref().ok().and_then(|stored| stored.entity.clone());
                    entities.push(EntityPlan {
                        key,
                        base,
                        dry,
                        positions: Vec::new(),
                    });
                    entities.len() - 1
                }
            };
            let plan = &mut entities[index];
            plan.positions.push(position);
            // The dry run does not know what parking will do: a gap that may
            // be parked, or on an entity with events parked, may be done.
            let maybe_done = match &plan.base {
                Err(_) => false,
                Ok(stored) => {
                    event
                        .decide_unchecked(&mut plan.dry)
                        .is_some_and(Decision::is_done)
                        || self.config.parks(record)
                        || !stored.parking.sequences.is_empty()
                }
            };
            if !maybe_done {
                break; // this message fails: the ones after it are not attempted
            }
        }

        // Settle every entity and the additions concurrently.
        let entity_runs = entities.into_iter().map(
            |EntityPlan {
                 key,
                 base,
                 positions,
                 ..
             }| async move {
                let run: Vec<&Record> =
                    positions.iter().map(|&position| stream[position]).collect();
                let name = run.first().map_or("", |record| record.stream.as_str());
                let settled = self.run_entity(&key, name, &run, base, invocation).await;
                (positions, settled)
            },
        );
        let (settled, added) = futures::join!(
            join_all(entity_runs),
            self.settle_additions(additions, invocation)
        );
        let mut parking = Vec::new();
        for (positions, (outcomes, parked)) in settled {
            for (position, verdict) in positions.into_iter().zip(outcomes) {
                verdicts[position] = Some(verdict);
            }
            parking.extend(parked);
        }
        for (position, verdict) in added {
            verdicts[position] = Some(verdict);
        }

        // After the first failure in stream order, every message is failed.
        let mut failed = false;
        let mut reports = Vec::with_capacity(stream.len());
        for (record, verdict) in stream.iter().zip(verdicts) {
            let verdict = match verdict {
                Some(verdict) if failed && !verdict.outcome.is_failure() => {
                    // Settled concurrently with the failure before it: done, but
                    // reported failed; its redelivery will find it done.
                    Verdict::new(
                        Outcome::Skipped,
                        Some(SETTLED_AFTER_FAILURE_REASON.to_owned()),
                    )
                }
                Some(verdict) => verdict,
                None => skipped_one(),
            };
            failed |= verdict.outcome.is_failure();
            reports.push(report(record, verdict));
        }
        for message in &reports {
            if message.outcome == Outcome::Conflict {
                error!(
                    message_id = %message.message_id,
                    trace_id = message.trace_id.as_deref(),
                    stream = %message.stream,
                    sequence = message.sequence,
                    decision = message.outcome.as_str(),
                    reason = message.reason.as_deref().unwrap_or(""),
                    "conflicting event recorded"
                );
            }
            if message.parking_full {
                error!(
                    message_id = %message.message_id,
                    trace_id = message.trace_id.as_deref(),
                    stream = %message.stream,
                    sequence = message.sequence,
                    waiting_for = message.waiting_for,
                    max_parked_per_stream = self.config.max_parked_per_stream,
                    "parking full: the gap is failed instead"
                );
            }
        }
        for message in reports
            .iter()
            .filter(|message| message.outcome.is_failure())
        {
            if message.outcome != Outcome::Invalid {
                warn!(
                    message_id = %message.message_id,
                    trace_id = message.trace_id.as_deref(),
                    stream = %message.stream,
                    sequence = message.sequence,
                    waiting_for = message.waiting_for,
                    decision = message.outcome.as_str(),
                    reason = message.reason.as_deref().unwrap_or(""),
                    "message failed"
                );
            }
        }
        (reports, parking)
    }
}
