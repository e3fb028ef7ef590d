//! One append, in phases: where its events go ([`Try`]: after the stream's
//! last event, read, or after the expected sequence, checked), one try
//! planned ([`Plan`]: one conditional `PutItem`, or one transaction), sent
//! (`Answer`), and its answer absorbed (`answer.rs`) ([`Next`]: done, refused, or again
//! after a short random pause, at the next sequence when another writer took
//! this one).
//!
//! Why no event sealed under an erased subject's key lands after the
//! erasure: the stream's place is found before any key is read, and a key is
//! good for the slot right after an event that existed when it was read (the
//! stream's last event, read; or one this store knows). An erasure deletes
//! the key before it appends to each of the subject's streams that holds an
//! event, so an erasure after the read takes a later slot, or takes this one
//! first: the put finds it taken, and every key is read again before the
//! next try (an erased subject refused). Where no event is known before the
//! slot (a new stream, which an erasure does not tell; an expected sequence
//! not seen yet), the transaction checks that each subject's key item still
//! holds its key ([`crate::personal::KeySource::key_check`]).
//!
//! Why no try can leave a gap or a duplicate: an event is put only on the
//! condition that its slot is empty, right after an event seen (read, or
//! found in the slot a lost race was for), checked in the same transaction,
//! or none (sequence 1); events are never changed nor removed. A try whose
//! outcome is unknown (a timeout, a 5xx) is sent again as it was: a
//! transaction under the same `ClientRequestToken` is answered from the
//! first, and an event put found in its slot is this call's own when it
//! bears its `eventId`.

mod answer;

use std::time::{Duration, Instant};

use super::check::{Checked, append_kind, cannot_open, check};
use super::items::{TokenOf, event_exists, event_item, put_new, request_item, token};
use super::kind::same_kind;
use super::sealing::seal;
use super::send::Plan;
use super::store::{EventStore, ExactCheck};
use super::{Append, AppendError, Appended, ExpectedSequence};
use crate::table::StoreError;

/// Where an append stands between its tries.
struct Try<'a> {
    append: &'a Append,
    events: &'a [Checked],
    /// The request id, or this call's own (for the transaction's token).
    request: String,
    now: u64,
    /// The caller's X-Ray trace (set by the Lambda runtime for each
    /// invocation, and by X-Ray's SDKs elsewhere).
    trace: Option<String>,
    /// The events go right after this sequence.
    at: u64,
    /// Event `at` is known to exist (or `at` is 0): no check is needed.
    proven: bool,
    /// The `at` of tries whose outcome is unknown.
    uncertain: Vec<u64>,
    tries: u32,
    /// Races lost in a row.
    lost: u32,
    /// Why the last try failed, when its outcome was unknown.
    unknown: Option<StoreError>,
    started: Instant,
}

impl<'a> Try<'a> {
    /// The first try of `append`'s `events`, right after `at`.
    fn new(append: &'a Append, events: &'a [Checked], at: u64, proven: bool) -> Self {
        Try {
            append,
            events,
            request: append
                .request_id
                .clone()
                .unwrap_or_else(super::new_event_id),
            now: now(),
            trace: crate::trace::current().filter(|trace| crate::sqs::valid_trace_header(trace)),
            at,
            proven,
            uncertain: Vec::new(),
            tries: 0,
            lost: 0,
            unknown: None,
            started: Instant::now(),
        }
    }

    /// The kind the events project onto and the first such event's type.
    fn kind(&self) -> Option<(&str, &str)> {
        append_kind(self.events)
    }

    /// Whether the stream's events, of `found`, are of this append's kind.
    fn same_kind(&self, found: Option<&str>) -> Result<(), AppendError> {
        let (kind, event_type) = self.kind().unzip();
        same_kind(
            &self.append.stream_id,
            event_type.unwrap_or_default(),
            kind,
            found,
        )
    }

    fn written(&self) -> Appended {
        Appended {
            stream_id: self.append.stream_id.clone(),
            sequence: self.at + self.events.len() as u64,
            event_id: self
                .events
                .last()
                .map(|event| event.event_id.clone())
                .unwrap_or_default(),
            duplicate_request: false,
            first_sequence: self.at + 1,
        }
    }
}

/// Where the items of a transaction stand in it.
#[derive(Debug, Clone, Copy)]
struct Layout {
    check: bool,
    events: usize,
    request: bool,
    writes: usize,
    /// Checks that the subjects' keys still exist, after the writes.
    keys: usize,
}

impl Layout {
    fn first_event(self) -> usize {
        usize::from(self.check)
    }

    fn request_at(self) -> Option<usize> {
        self.request.then(|| self.first_event() + self.events)
    }

    fn first_write(self) -> usize {
        self.first_event() + self.events + usize::from(self.request)
    }

    fn first_key(self) -> usize {
        self.first_write() + self.writes
    }
}

/// What to do after a try.
enum Next {
    Done(Appended),
    /// Try again; `lost`: another writer took the sequence.
    Again {
        lost: bool,
    },
}

impl EventStore {
    /// Appends the events, with gapless sequences, all or nothing; see the
    /// module's documentation.
    pub async fn append(&self, append: Append) -> Result<Appended, AppendError> {
        let mut events = check(&self.domain, &append)?;
        let stream = &append.stream_id;
        let _turn = self.turns.take(stream).await;
        // Where the events go, found before any key is read (the module's
        // documentation says why).
        let (at, proven) = self.start(&append, &events).await?;
        let vouched = self.vouched(&append, at);
        let mut sealed = seal(&self.domain, stream, &mut events, &vouched).await?;
        super::check::sealed_sizes(&append, &events)?;
        let mut attempt = Try::new(&append, &events, at, proven);
        // The slot the keys are good for is the one after `ground`.
        let mut ground = attempt.at;
        let subjects = sealed.subjects();
        loop {
            if !subjects.is_empty() && ground != attempt.at {
                // Another writer's event came first: it may be an erasure.
                sealed.read_again(&self.domain, stream).await?;
                ground = attempt.at;
            }
            attempt.tries += 1;
            let checks = self.key_checks(&attempt, &mut sealed, &subjects).await?;
            let (plan, layout) = self.plan(&attempt, &checks)?;
            let answer = self.send(plan).await;
            match self.absorb(&mut attempt, layout, answer, &subjects).await? {
                Next::Done(appended) => {
                    if !appended.duplicate_request {
                        let kind = attempt.kind().map(|(kind, _)| kind);
                        let first = appended.first_sequence;
                        let subjects = if ground + 1 == first {
                            sealed.subjects()
                        } else {
                            Vec::new()
                        };
                        let span = (first, appended.sequence);
                        self.known.appended(stream, span, kind, &subjects);
                    }
                    return Ok(appended);
                }
                Next::Again { lost } => self.pause(&mut attempt, lost).await?,
            }
        }
    }

    /// The checks, in this try's transaction, that each subject's key still
    /// exists: where no event is known before the slot (a new stream, an
    /// expected sequence not seen). A key source no transaction can see has
    /// its items read again instead.
    async fn key_checks(
        &self,
        attempt: &Try<'_>,
        sealed: &mut super::Sealed,
        subjects: &[String],
    ) -> Result<Vec<aws_sdk_dynamodb::types::TransactWriteItem>, AppendError> {
        if subjects.is_empty() || (attempt.proven && attempt.at > 0) {
            return Ok(Vec::new());
        }
        let Some(keys) = self.domain.keys() else {
            return Ok(Vec::new());
        };
        let checks: Option<Vec<_>> = subjects
            .iter()
            .map(|subject| keys.source().key_check(subject))
            .collect();
        match checks {
            Some(checks) => Ok(checks),
            None => {
                sealed
                    .read_again(&self.domain, &attempt.append.stream_id)
                    .await?;
                Ok(Vec::new())
            }
        }
    }

    /// The subjects whose keys are vouched for right after `at` (see
    /// `known.rs`).
    fn vouched(&self, append: &Append, at: u64) -> Vec<String> {
        match self.known.get(&append.stream_id) {
            Some(seen) if seen.sequence == at => seen.vouched,
            _ => Vec::new(),
        }
    }

    /// Where the events go first: after the stream's last event (read), or
    /// after the expected sequence; and whether an event is known there.
    async fn start(&self, append: &Append, events: &[Checked]) -> Result<(u64, bool), AppendError> {
        // An update cannot be a stream's first event: known before anything
        // is written (a stream expected empty is read, in this case only).
        let closed = events.first().filter(|first| !first.opens);
        let (at, proven, found) = match append.expected {
            ExpectedSequence::Exact(0) if closed.is_some() => {
                let (current, found) = self.last_event(&append.stream_id).await?;
                if current != 0 {
                    return Err(AppendError::ExpectedSequence {
                        expected: 0,
                        current,
                    });
                }
                (0, true, found)
            }
            ExpectedSequence::Exact(0) => (0, true, None),
            ExpectedSequence::Exact(expected) if self.exact == ExactCheck::ReadFirst => {
                let (current, found) = self.last_event(&append.stream_id).await?;
                if current != expected {
                    return Err(AppendError::ExpectedSequence { expected, current });
                }
                (expected, true, found)
            }
            // Event `expected` seen (this store wrote or read it, or a later
            // one): no check, one conditional put; a stream moved past it is
            // found by the put.
            ExpectedSequence::Exact(expected) => match self.known.get(&append.stream_id) {
                Some(seen) if seen.sequence >= expected => (expected, true, seen.kind),
                // The kind is checked in the transaction, with the sequence.
                _ => (expected, false, None),
            },
            // The last event seen: the next put finds a stream moved on.
            ExpectedSequence::Any => match self.known.get(&append.stream_id) {
                Some(seen) => (seen.sequence, true, seen.kind),
                None => {
                    let (last, found) = self.last_event(&append.stream_id).await?;
                    (last, true, found)
                }
            },
        };
        let (kind, event_type) = append_kind(events).unzip();
        same_kind(
            &append.stream_id,
            event_type.unwrap_or_default(),
            kind,
            found.as_deref(),
        )?;
        if let Some(first) = closed.filter(|_| at == 0) {
            return Err(cannot_open(&append.stream_id, first));
        }
        Ok((at, proven))
    }

    /// The try with the stream at `attempt.at`: one event alone after one
    /// seen is one conditional put; anything more, one transaction.
    fn plan(
        &self,
        attempt: &Try<'_>,
        checks: &[aws_sdk_dynamodb::types::TransactWriteItem],
    ) -> Result<(Plan, Layout), AppendError> {
        let append = attempt.append;
        let stream = &append.stream_id;
        let trace = attempt.trace.as_deref();
        let event = |offset: usize| {
            let sequence = attempt.at + 1 + offset as u64;
            event_item(
                stream,
                &attempt.events[offset],
                sequence,
                attempt.now,
                trace,
            )
        };
        let layout = Layout {
            check: !attempt.proven,
            events: attempt.events.len(),
            request: append.request_id.is_some(),
            writes: append.writes.len(),
            keys: checks.len(),
        };
        if layout.events == 1
            && !layout.check
            && !layout.request
            && layout.writes == 0
            && layout.keys == 0
        {
            let item = event(0);
            return Ok((Plan::Put(item), layout));
        }
        let mut items = Vec::with_capacity(layout.first_key() + layout.keys);
        if layout.check {
            let kind = attempt.kind().map(|(kind, _)| kind);
            items.push(event_exists(&self.table, stream, attempt.at, kind)?);
        }
        for offset in 0..layout.events {
            items.push(put_new(&self.table, event(offset))?);
        }
        if let Some(request_id) = &append.request_id {
            let last = attempt.at + layout.events as u64;
            let event_id = attempt.events.last().map_or("", |e| e.event_id.as_str());
            let item = request_item(
                request_id,
                stream,
                attempt.at + 1,
                last,
                event_id,
                attempt.now,
            );
            items.push(put_new(&self.table, item)?);
        }
        items.extend(append.writes.iter().cloned());
        items.extend(checks.iter().cloned());
        let token = token(&TokenOf {
            request: &attempt.request,
            at: attempt.at,
            checked: layout.check,
            events: attempt.events,
            writes: &append.writes,
            keys: checks,
            now: attempt.now,
        });
        Ok((Plan::Transaction { items, token }, layout))
    }

    /// A short random pause before the next try, within the retry budget;
    /// after two races lost in a row, the stream's last event read again.
    async fn pause(&self, attempt: &mut Try<'_>, lost: bool) -> Result<(), AppendError> {
        if attempt.started.elapsed() >= self.budget {
            return Err(match attempt.unknown.take() {
                Some(err) => err.into(),
                None => AppendError::Contention {
                    attempts: attempt.tries,
                },
            });
        }
        attempt.lost = if lost { attempt.lost + 1 } else { 0 };
        let step = if lost { attempt.lost } else { attempt.tries };
        tokio::time::sleep(jitter(step)).await;
        if attempt.lost >= 2 {
            tracing::debug!(
                at = attempt.at,
                lost = attempt.lost,
                "append: the stream moved on"
            );
            let (last, found) = self.last_event(&attempt.append.stream_id).await?;
            if last > attempt.at {
                attempt.at = last;
                attempt.proven = true;
                attempt.same_kind(found.as_deref())?;
            }
        }
        Ok(())
    }
}

/// The pause before the next try, the `step`th of a run: full jitter,
/// random over 0 to 2 ms doubled each step, at most 1 s.
fn jitter(step: u32) -> Duration {
    use std::hash::BuildHasher;
    let ceiling = (2_000u64 << step.saturating_sub(1).min(9)).min(1_024_000);
    let random = std::collections::hash_map::RandomState::new().hash_one(step);
    Duration::from_micros(random % (ceiling + 1))
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pauses_grow_and_stay_bounded() {
        assert!(jitter(1) <= Duration::from_millis(2));
        assert!(jitter(3) <= Duration::from_millis(8));
        assert!(
            (1..=200)
                .map(jitter)
                .all(|pause| pause <= Duration::from_millis(1024))
        );
    }

    #[test]
    fn a_layout_places_the_check_events_request_and_writes() {
        let layout = Layout {
            check: true,
            events: 2,
            request: true,
            writes: 1,
            keys: 2,
        };
        assert_eq!(
            (
                layout.first_event(),
                layout.request_at(),
                layout.first_write(),
                layout.first_key()
            ),
            (1, Some(3), 4, 5)
        );
        let bare = Layout {
            check: false,
            events: 1,
            request: false,
            writes: 0,
            keys: 0,
        };
        assert_eq!((bare.first_event(), bare.request_at()), (0, None));
    }
}
