//! One append, in phases: where its events go ([`Try`]: after the stream's
//! last event, read, or after the expected sequence, checked), one try
//! planned ([`Plan`]: one conditional `PutItem`, or one transaction), sent
//! ([`Answer`]), and its answer absorbed ([`Next`]: done, refused, or again
//! after a short random pause, at the next sequence when another writer took
//! this one).
//!
//! Why no try can leave a gap or a duplicate: an event is put only on the
//! condition that its slot is empty, right after an event seen (read, or
//! found in the slot a lost race was for), checked in the same transaction,
//! or none (sequence 1); events are never changed nor removed. A try whose
//! outcome is unknown (a timeout, a 5xx) is sent again as it was: a
//! transaction under the same `ClientRequestToken` is answered from the
//! first, and an event put found in its slot is this call's own when it
//! bears its `eventId`.

use std::time::{Duration, Instant};

use super::check::{Checked, append_kind, cannot_open, check};
use super::items::{TokenOf, event_exists, event_item, put_new, request_item, stream_pk, token};
use super::kind::{recorded, same_kind};
use super::send::{Answer, CONDITION_FAILED, Plan, Refusal};
use super::store::{EventStore, ExactCheck};
use super::{Append, AppendError, Appended, ExpectedSequence};
use crate::entity::Item;
use crate::personal::writing::seal;
use crate::store::StoreError;

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

impl Try<'_> {
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
        let (mut ground, vouched) = self.vouched(&append);
        let mut sealed = seal(&self.domain, stream, &mut events, &vouched).await?;
        super::check::sealed_sizes(&append, &events)?;
        let mut attempt = self.start(&append, &events).await?;
        loop {
            if !sealed.vouched.is_empty() && ground != Some(attempt.at) {
                // Another writer's event came first: it may be an erasure.
                sealed.read_again(&self.domain, stream).await?;
                ground = Some(attempt.at).filter(|&at| at > 0);
            }
            attempt.tries += 1;
            let (plan, layout) = self.plan(&attempt)?;
            let answer = self.send(plan).await;
            match self.absorb(&mut attempt, layout, answer).await? {
                Next::Done(appended) => {
                    if !appended.duplicate_request {
                        let kind = attempt.kind().map(|(kind, _)| kind);
                        let first = appended.first_sequence;
                        let subjects = if ground == Some(first - 1) {
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

    /// Where the first try will go without reading (an event there is
    /// known to exist), and the subjects whose keys are vouched for there.
    fn vouched(&self, append: &Append) -> (Option<u64>, Vec<String>) {
        let Some(seen) = self.known.get(&append.stream_id) else {
            return (None, Vec::new());
        };
        let at = match append.expected {
            ExpectedSequence::Any => seen.sequence,
            ExpectedSequence::Exact(expected)
                if expected > 0
                    && expected <= seen.sequence
                    && self.exact != ExactCheck::ReadFirst =>
            {
                expected
            }
            ExpectedSequence::Exact(_) => return (None, Vec::new()),
        };
        let vouched = if at == seen.sequence {
            seen.vouched
        } else {
            Vec::new()
        };
        (Some(at), vouched)
    }

    /// Where the events go first: after the stream's last event (read), or
    /// after the expected sequence.
    async fn start<'a>(
        &self,
        append: &'a Append,
        events: &'a [Checked],
    ) -> Result<Try<'a>, AppendError> {
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
        let attempt = Try {
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
        };
        attempt.same_kind(found.as_deref())?;
        if let Some(first) = closed.filter(|_| at == 0) {
            return Err(cannot_open(&append.stream_id, first));
        }
        Ok(attempt)
    }

    /// The try with the stream at `attempt.at`: one event alone after one
    /// seen is one conditional put; anything more, one transaction.
    fn plan(&self, attempt: &Try<'_>) -> Result<(Plan, Layout), AppendError> {
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
        };
        if layout.events == 1 && !layout.check && !layout.request && layout.writes == 0 {
            let item = event(0);
            return Ok((Plan::Put(item), layout));
        }
        let mut items = Vec::with_capacity(layout.first_write() + layout.writes);
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
        let token = token(&TokenOf {
            request: &attempt.request,
            at: attempt.at,
            checked: layout.check,
            events: attempt.events,
            writes: &append.writes,
            now: attempt.now,
        });
        Ok((Plan::Transaction { items, token }, layout))
    }

    /// What a try's answer means for the append.
    async fn absorb(
        &self,
        attempt: &mut Try<'_>,
        layout: Layout,
        answer: Answer,
    ) -> Result<Next, AppendError> {
        attempt.unknown = None;
        match answer {
            Answer::Written => Ok(Next::Done(attempt.written())),
            Answer::Refused(reasons) => self.refused(attempt, layout, reasons).await,
            // The same token used with other parameters: another call of
            // this request, answered by its record.
            Answer::Mismatch(_) if attempt.append.request_id.is_some() => {
                Ok(Next::Done(self.answered(&attempt.request, None).await?))
            }
            Answer::Mismatch(err) | Answer::Permanent(err) => Err(err.into()),
            // Sent again as it was: answered from the first if it took effect.
            Answer::Unknown(err) => {
                tracing::warn!(error = %err, tries = attempt.tries, "append: the outcome is unknown, trying again");
                if !attempt.uncertain.contains(&attempt.at) {
                    attempt.uncertain.push(attempt.at);
                }
                attempt.unknown = Some(err);
                Ok(Next::Again { lost: false })
            }
        }
    }

    /// A try refused: by the request record, by the slot taken, by the
    /// expected event missing, by a caller's write; or cancelled for
    /// another reason (a conflicting transaction, throttling).
    async fn refused(
        &self,
        attempt: &mut Try<'_>,
        layout: Layout,
        mut reasons: Vec<Refusal>,
    ) -> Result<Next, AppendError> {
        let failed = |index: usize| {
            reasons.get(index).and_then(|reason| reason.code.as_deref()) == Some(CONDITION_FAILED)
        };
        if let Some(at) = layout.request_at().filter(|&at| failed(at)) {
            let found = reasons.get_mut(at).and_then(|reason| reason.item.take());
            return Ok(Next::Done(self.answered(&attempt.request, found).await?));
        }
        let first = layout.first_event();
        if failed(first) {
            let found = reasons.get_mut(first).and_then(|reason| reason.item.take());
            return self.taken(attempt, found).await;
        }
        if layout.check && failed(0) {
            // Event `at` is of another kind, or does not exist: the stream
            // is behind.
            let found = reasons.get_mut(0).and_then(|reason| reason.item.take());
            if let Some(found) = found.filter(|item| !item.is_empty()) {
                attempt.same_kind(recorded(&self.domain, &found).as_deref())?;
            }
            return Err(self.elsewhere(attempt).await);
        }
        if let Some(index) = (1..layout.events).find(|&index| failed(first + index)) {
            return Err(StoreError::Corrupt {
                key: stream_pk(&attempt.append.stream_id),
                message: format!(
                    "an event is stored at sequence {} and none at {}",
                    attempt.at + 1 + index as u64,
                    attempt.at + 1
                ),
            }
            .into());
        }
        if let Some(index) = (0..layout.writes).find(|&index| failed(layout.first_write() + index))
        {
            return Err(AppendError::Condition { index });
        }
        let codes: Vec<&str> = reasons
            .iter()
            .filter_map(|reason| reason.code.as_deref())
            .collect();
        if codes.contains(&"ValidationError") {
            return Err(StoreError::Rejected {
                operation: "TransactWriteItems",
                message: format!("transaction cancelled: {codes:?}"),
            }
            .into());
        }
        tracing::debug!(
            ?codes,
            tries = attempt.tries,
            "append: cancelled, trying again"
        );
        Ok(Next::Again { lost: false })
    }

    /// The slot after `at` holds an event: this call's own (from a try whose
    /// outcome was unknown, or resent by the SDK itself), or another
    /// writer's.
    async fn taken(&self, attempt: &mut Try<'_>, found: Option<Item>) -> Result<Next, AppendError> {
        let kind = found.as_ref().map(|item| recorded(&self.domain, item));
        if self.ours(attempt, found).await? {
            return Ok(Next::Done(attempt.written()));
        }
        match attempt.append.expected {
            ExpectedSequence::Exact(_) => Err(self.elsewhere(attempt).await),
            ExpectedSequence::Any => {
                // Event `at + 1` exists: the next try goes right after it,
                // after an event of its kind (one not seen is checked in
                // the next try's transaction).
                attempt.at += 1;
                attempt.proven = kind.is_some();
                attempt.same_kind(kind.flatten().as_deref())?;
                Ok(Next::Again { lost: true })
            }
        }
    }

    /// Whether the events after `at` are this call's: the item found there
    /// bears the `eventId` of its first event (an id of this call's own, or
    /// the caller's: written with the others, all or nothing); read when the
    /// item did not come back and a try there had an unknown outcome.
    async fn ours(&self, attempt: &Try<'_>, found: Option<Item>) -> Result<bool, StoreError> {
        let first = attempt.events.first().map(|event| event.event_id.as_str());
        if let Some(item) = &found {
            return Ok(super::items::text(item, "eventId") == first);
        }
        if !attempt.uncertain.contains(&attempt.at) {
            return Ok(false);
        }
        let limit = i32::try_from(attempt.events.len()).unwrap_or(i32::MAX);
        let stored = self
            .read(&attempt.append.stream_id, attempt.at, limit)
            .await?;
        Ok(stored.len() == attempt.events.len()
            && stored
                .iter()
                .zip(attempt.events)
                .all(|(stored, event)| stored.event_id == event.event_id))
    }

    /// The stream is not at the expected sequence: where it is.
    async fn elsewhere(&self, attempt: &Try<'_>) -> AppendError {
        match self.last_sequence(&attempt.append.stream_id).await {
            Ok(current) => AppendError::ExpectedSequence {
                expected: attempt.at,
                current,
            },
            Err(err) => err.into(),
        }
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
        };
        assert_eq!(
            (
                layout.first_event(),
                layout.request_at(),
                layout.first_write()
            ),
            (1, Some(3), 4)
        );
        let bare = Layout {
            check: false,
            events: 1,
            request: false,
            writes: 0,
        };
        assert_eq!((bare.first_event(), bare.request_at()), (0, None));
    }
}
