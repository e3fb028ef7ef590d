//! A stream's deduplicated effects (counter additions): one transaction with
//! their deduplication records, duplicates left out, a step that would leave
//! the 64-bit range refused at the addition that crosses it, and an
//! `eventId` that another stream's event was handled under recorded as a
//! conflict on this stream.

use super::verdict::{Verdict, skipped_one};
use super::{Invocation, Outcome, Runner};
use crate::envelope::{Event, Record};
use crate::handling::Counter;
use crate::store::{
    Added, ConflictRecord, DedupAddition, DedupKey, Existing, MAX_ADDITIONS, MAX_STORED_BODY, Store,
};

/// An addition and its position in the stream.
type Positioned = (usize, DedupAddition);

/// How a chunk of additions ended.
enum Chunk<'a> {
    /// Every addition of it has its verdict.
    Settled,
    /// A refused addition stops the stream: these, behind it, are not
    /// attempted.
    Cut(Vec<&'a Positioned>),
    /// Nothing of these was written.
    Failed(Vec<&'a Positioned>, (Outcome, String)),
}

/// What an answer leaves of a chunk.
enum Left {
    /// Nothing to write.
    Nothing,
    /// The rest, to write again (an addition was refused).
    Rest,
    /// The rest, to write again after a race lost (another invocation
    /// recorded some, or the counter moved): a bounded number of times.
    Raced,
}

/// A chunk being written: the additions still to write, the ones behind a
/// refused one, where in the verdicts the refused one is, the ones whose
/// `eventId` another stream's event was handled under (with that stream),
/// and the attempts made.
struct Attempts<'a> {
    pending: Vec<&'a Positioned>,
    cut: Option<Vec<&'a Positioned>>,
    rejected: Option<usize>,
    reused: Vec<(&'a Positioned, String)>,
    attempt: u32,
}

impl<S: Store> Runner<S> {
    /// Writes a stream's additions to counters, with their deduplication records,
    /// in one transaction (in chunks of [`MAX_ADDITIONS`]); additions
    /// another invocation recorded meanwhile are duplicates, and the rest is
    /// written again, a bounded number of times.
    pub(super) async fn settle_additions(
        &self,
        additions: Vec<Positioned>,
        stream: &[&Record],
        invocation: &Invocation,
    ) -> Vec<(usize, Verdict)> {
        let mut verdicts = Vec::with_capacity(additions.len());
        let mut chunks = additions.chunks(MAX_ADDITIONS);
        while let Some(chunk) = chunks.next() {
            let settled = self
                .settle_chunk(chunk, stream, invocation, &mut verdicts)
                .await;
            match settled {
                Chunk::Settled => {}
                Chunk::Cut(cut) => {
                    // After a refused addition, the stream stops.
                    let rest = cut.into_iter().chain(chunks.by_ref().flatten());
                    verdicts.extend(rest.map(|(position, _)| (*position, skipped_one())));
                    break;
                }
                Chunk::Failed(rest, (outcome, reason)) => {
                    // Nothing of this chunk was written, nor of the chunks after it.
                    let rest = rest.into_iter().chain(chunks.by_ref().flatten());
                    verdicts.extend(rest.map(|(position, _)| {
                        (*position, Verdict::new(outcome, Some(reason.clone())))
                    }));
                    break;
                }
            }
        }
        verdicts
    }

    /// Writes one chunk, again without the duplicates and refusals each
    /// answer finds, until it is written or fails.
    async fn settle_chunk<'a>(
        &self,
        chunk: &'a [Positioned],
        stream: &[&Record],
        invocation: &Invocation,
        verdicts: &mut Vec<(usize, Verdict)>,
    ) -> Chunk<'a> {
        let mut attempts = Attempts {
            pending: chunk.iter().collect(),
            cut: None,
            rejected: None,
            reused: Vec::new(),
            attempt: 0,
        };
        let failure = loop {
            let batch: Vec<DedupAddition> = attempts
                .pending
                .iter()
                .map(|(_, addition)| addition.clone())
                .collect();
            let add = self.store.add(&batch);
            let answer = match self.timed("TransactWriteItems", invocation, add).await {
                Ok(answer) => answer,
                Err(err) => break Some(err.outcome()),
            };
            attempts.attempt += 1;
            let left =
                match answer {
                    Added::Applied => {
                        verdicts.extend(attempts.pending.iter().map(|(position, _)| {
                            (*position, Verdict::new(Outcome::Applied, None))
                        }));
                        attempts.pending.clear();
                        Left::Nothing
                    }
                    Added::Existing(existing) => attempts.existing(&existing, verdicts),
                    Added::OutOfRange { counter, id, value } => {
                        attempts.out_of_range(counter, &id, value, verdicts)
                    }
                };
            match left {
                Left::Nothing => break None,
                Left::Rest => {}
                Left::Raced if attempts.attempt > self.config.condition_retries => {
                    break Some(lost_race(attempts.attempt));
                }
                Left::Raced => {}
            }
        };
        for (reused, recorded) in std::mem::take(&mut attempts.reused) {
            let verdict = self
                .record_reuse(reused, &recorded, stream, invocation)
                .await;
            verdicts.push((reused.0, verdict));
        }
        match (failure, attempts.cut) {
            (Some(failure), cut) => {
                let rest = attempts
                    .pending
                    .into_iter()
                    .chain(cut.into_iter().flatten());
                Chunk::Failed(rest.collect(), failure)
            }
            (None, Some(cut)) => Chunk::Cut(cut),
            (None, None) => Chunk::Settled,
        }
    }

    /// An addition whose `eventId` another stream's event (of `recorded`)
    /// was handled under: not applied, recorded as a conflict on its own
    /// stream, with its body.
    async fn record_reuse(
        &self,
        (position, addition): &Positioned,
        recorded: &str,
        stream: &[&Record],
        invocation: &Invocation,
    ) -> Verdict {
        let body = stream
            .get(*position)
            .map_or("", |record| record.body.as_str());
        let what = format!(
            "conflict: event {} was handled by {} for stream {recorded}; this event of stream {} is another",
            addition.event_id, addition.handler, addition.id
        );
        if body.len() > MAX_STORED_BODY {
            return Verdict::new(
                Outcome::Invalid,
                Some(format!(
                    "{what}, and its body of {} bytes is too large to record",
                    body.len()
                )),
            );
        }
        let conflict = ConflictRecord {
            sequence: 0,
            event_id: addition.event_id.clone(),
            body: body.to_owned(),
            seen_at: invocation.now,
        };
        let record = self.store.record_counter_conflicts(
            addition.counter,
            &addition.id,
            std::slice::from_ref(&conflict),
        );
        match self.timed("UpdateItem", invocation, record).await {
            Ok(()) => Verdict::new(
                Outcome::Conflict,
                Some(format!("{what}: recorded, not applied")),
            ),
            Err(err) => {
                let (outcome, reason) = err.outcome();
                Verdict::new(outcome, Some(reason))
            }
        }
    }
}

impl<'a> Attempts<'a> {
    /// Additions whose records exist (positions in the pending ones): another
    /// invocation recorded them meanwhile (duplicates), or another stream's
    /// event under the same `eventId` (reused: recorded as conflicts).
    fn existing(&mut self, existing: &[Existing], verdicts: &mut Vec<(usize, Verdict)>) -> Left {
        let mut index = 0;
        let reused = &mut self.reused;
        self.pending.retain(|pending| {
            let (position, addition) = pending;
            let found = existing.iter().find(|existing| existing.index == index);
            index += 1;
            let Some(found) = found else {
                return true;
            };
            match &found.stream {
                Some(recorded) if !same_stream(Some(recorded), &addition.id) => {
                    reused.push((*pending, recorded.clone()));
                }
                _ => verdicts.push((*position, Verdict::new(Outcome::Duplicate, None))),
            }
            false
        });
        if self.pending.is_empty() {
            Left::Nothing
        } else {
            Left::Raced
        }
    }

    /// In stream order, the first addition that takes the counter (at
    /// `value`) out of range is refused; the ones before it are written
    /// again without it, the ones after it wait. None refused: the counter
    /// moved meanwhile.
    fn out_of_range(
        &mut self,
        counter: &'static Counter,
        id: &str,
        value: Option<i64>,
        verdicts: &mut Vec<(usize, Verdict)>,
    ) -> Left {
        let mut running = Some(value.unwrap_or(0));
        let refused = self.pending.iter().position(|(_, addition)| {
            if addition.counter == counter && addition.id == id {
                running = running.and_then(|at| at.checked_add(addition.delta));
            }
            running.is_none()
        });
        let Some(at) = refused else {
            return Left::Raced;
        };
        let (position, addition) = self.pending[at];
        // An earlier refusal behind this one: not attempted after all.
        if let Some(earlier) = self.rejected.take()
            && let Some((_, verdict)) = verdicts.get_mut(earlier)
        {
            *verdict = skipped_one();
        }
        self.rejected = Some(verdicts.len());
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
        let after = self.pending.split_off(at);
        // Behind it: the rest, and what an earlier refusal in this chunk cut
        // already.
        let earlier = self.cut.take().into_iter().flatten();
        self.cut = Some(after.into_iter().skip(1).chain(earlier).collect());
        if self.pending.is_empty() {
            Left::Nothing
        } else {
            Left::Rest
        }
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

/// Whether a deduplication record written for `recorded` (`None`: by an
/// earlier release, which did not say) guards an event of `stream`.
pub(super) fn same_stream(recorded: Option<&str>, stream: &str) -> bool {
    recorded.is_none_or(|recorded| recorded == stream)
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
pub fn addition(event: &Event, now: u64, dedup_ttl_seconds: u64) -> Option<DedupAddition> {
    event.deduplicated().map(|effect| DedupAddition {
        event_id: event.event_id().to_owned(),
        handler: effect.handler,
        counter: effect.counter,
        id: effect.id.clone(),
        delta: effect.delta,
        handled_at: now,
        expires_at: now.saturating_add(dedup_ttl_seconds),
    })
}
