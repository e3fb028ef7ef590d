//! What a try's answer means for an append: written; refused by the
//! request record (answered as the first), by the slot taken (this call's
//! own, or another writer's: the next try goes after it), by the expected
//! event missing, by a caller's write or by an erased subject's key; or an
//! outcome not known (sent again as it was).

use super::{Layout, Next, Try};
use crate::entity::Item;
use crate::producer::items::stream_pk;
use crate::producer::kind::recorded;
use crate::producer::send::{Answer, CONDITION_FAILED, Refusal};
use crate::producer::store::EventStore;
use crate::producer::{AppendError, ExpectedSequence};
use crate::table::StoreError;

impl EventStore {
    /// What a try's answer means for the append.
    pub(super) async fn absorb(
        &self,
        attempt: &mut Try<'_>,
        layout: Layout,
        answer: Answer,
        subjects: &[String],
    ) -> Result<Next, AppendError> {
        attempt.unknown = None;
        match answer {
            Answer::Written => Ok(Next::Done(attempt.written())),
            Answer::Refused(reasons) => self.refused(attempt, layout, reasons, subjects).await,
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
        subjects: &[String],
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
        if let Some(subject) = (0..layout.keys)
            .find(|&index| failed(layout.first_key() + index))
            .and_then(|index| subjects.get(index))
        {
            // Erased since its key was read: nothing of it is appended.
            if let Some(keys) = self.domain.keys() {
                keys.forget(subject);
            }
            return Err(AppendError::Erased {
                subject: subject.clone(),
            });
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
            return Ok(crate::producer::items::text(item, "eventId") == first);
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
}
