//! A stream's deduplicated effects (counter additions): one transaction with
//! their deduplication records, duplicates left out, a step that would leave
//! the 64-bit range refused at the addition that crosses it.

use super::verdict::{Verdict, skipped_one};
use super::{Invocation, Outcome, Runner};
use crate::envelope::Event;
use crate::store::{Added, Addition, DedupKey, MAX_ADDITIONS, Store};

impl<S: Store> Runner<S> {
    /// Writes a stream's additions to counters, with their deduplication records,
    /// in one transaction (in chunks of [`MAX_ADDITIONS`]); additions
    /// another invocation recorded meanwhile are duplicates, and the rest is
    /// written again, a bounded number of times.
    pub(super) async fn settle_additions(
        &self,
        additions: Vec<(usize, Addition)>,
        invocation: &Invocation,
    ) -> Vec<(usize, Verdict)> {
        let mut verdicts = Vec::with_capacity(additions.len());
        let mut chunks = additions.chunks(MAX_ADDITIONS);
        while let Some(chunk) = chunks.next() {
            let mut pending: Vec<&(usize, Addition)> = chunk.iter().collect();
            // Adjustments behind a refused one: not attempted.
            let mut cut: Option<Vec<&(usize, Addition)>> = None;
            // Where in `verdicts` the refused one is.
            let mut rejected: Option<usize> = None;
            let mut attempt = 0;
            let failure = loop {
                let batch: Vec<Addition> = pending
                    .iter()
                    .map(|(_, addition)| addition.clone())
                    .collect();
                match self
                    .timed("TransactWriteItems", invocation, self.store.add(&batch))
                    .await
                {
                    Ok(Added::Applied) => {
                        verdicts.extend(pending.iter().map(|(position, _)| {
                            (*position, Verdict::new(Outcome::Applied, None))
                        }));
                        break None;
                    }
                    Ok(Added::Duplicates(existing)) => {
                        let mut index = 0;
                        pending.retain(|(position, _)| {
                            let duplicate = existing.contains(&index);
                            index += 1;
                            if duplicate {
                                verdicts.push((*position, Verdict::new(Outcome::Duplicate, None)));
                            }
                            !duplicate
                        });
                        attempt += 1;
                        if pending.is_empty() {
                            break None;
                        }
                        if attempt > self.config.condition_retries {
                            break Some(lost_race(attempt));
                        }
                    }
                    Ok(Added::OutOfRange { counter, id, value }) => {
                        // In stream order, the first addition that takes the
                        // counter out of range is refused; the ones before it are
                        // written again without it, the ones after it wait.
                        let mut running = Some(value.unwrap_or(0));
                        let refused = pending.iter().position(|(_, addition)| {
                            if addition.counter == counter && addition.id == id {
                                running = running.and_then(|at| at.checked_add(addition.delta));
                            }
                            running.is_none()
                        });
                        attempt += 1;
                        match refused {
                            Some(at) => {
                                let (position, addition) = pending[at];
                                // An earlier refusal behind this one: not
                                // attempted after all.
                                if let Some(earlier) = rejected.take()
                                    && let Some((_, verdict)) = verdicts.get_mut(earlier)
                                {
                                    *verdict = skipped_one();
                                }
                                rejected = Some(verdicts.len());
                                verdicts.push((
                                    *position,
                                    Verdict::new(
                                        Outcome::Rejected,
                                        Some(format!(
                                            "{} of {id} is {}: adding {} would take it outside the 64-bit range; retrying will not help",
                                            counter.attribute,
                                            value.unwrap_or(0),
                                            addition.delta
                                        )),
                                    ),
                                ));
                                let after = pending.split_off(at);
                                // Behind it: the rest, and what an earlier
                                // refusal in this chunk cut already.
                                let earlier = cut.take().into_iter().flatten();
                                cut = Some(after.into_iter().skip(1).chain(earlier).collect());
                                if pending.is_empty() {
                                    break None;
                                }
                            }
                            // The counter moved meanwhile: decide again.
                            None if attempt > self.config.condition_retries => {
                                break Some(lost_race(attempt));
                            }
                            None => {}
                        }
                    }
                    Err(err) => break Some(err.outcome()),
                }
            };
            if let Some((outcome, reason)) = failure {
                // Nothing of this chunk was written, nor of the chunks after it.
                let rest = pending
                    .into_iter()
                    .chain(cut.take().into_iter().flatten())
                    .chain(chunks.by_ref().flatten());
                verdicts.extend(
                    rest.map(|(position, _)| {
                        (*position, Verdict::new(outcome, Some(reason.clone())))
                    }),
                );
                break;
            }
            if let Some(cut) = cut {
                // After a refused addition, the stream stops.
                let rest = cut.into_iter().chain(chunks.by_ref().flatten());
                verdicts.extend(rest.map(|(position, _)| (*position, skipped_one())));
                break;
            }
        }
        verdicts
    }
}

/// The failure of an additions transaction that kept losing to other invocations.
fn lost_race(attempts: u32) -> (Outcome, String) {
    (
        Outcome::StorageError,
        format!(
            "the transaction of additions lost the race {attempts} times: another invocation keeps recording these events"
        ),
    )
}

/// The deduplication record an event is guarded by, if any.
pub(super) fn dedup_key(event: &Event) -> Option<DedupKey> {
    event.deduplicated().map(|effect| DedupKey {
        event_id: event.event_id().to_owned(),
        handler: effect.handler,
    })
}

/// What the store must do for a deduplicated event handled `now` (epoch
/// seconds), its dedup record kept `dedup_ttl_seconds`; `None` for an event
/// that is not a deduplicated effect.
pub fn addition(event: &Event, now: u64, dedup_ttl_seconds: u64) -> Option<Addition> {
    event.deduplicated().map(|effect| Addition {
        event_id: event.event_id().to_owned(),
        handler: effect.handler,
        counter: effect.counter,
        id: effect.id.clone(),
        delta: effect.delta,
        handled_at: now,
        expires_at: now.saturating_add(dedup_ttl_seconds),
    })
}
