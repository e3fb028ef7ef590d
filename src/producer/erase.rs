//! [`erase`]: a subject forgotten. Its key is deleted first (every stored
//! copy of its values is unreadable from then on, and an append of its
//! personal data is refused), then each of its streams is told with an
//! [`ERASURE_TYPE`] event, which every consumer applies under the guard.
//! Run again, it appends nothing it appended before (request ids) and
//! ends with nothing more to do.

use serde_json::json;

use super::{Append, AppendError, EventLog, ExpectedSequence, NewEvent};
use crate::digest::digest;
use crate::personal::{ERASURE_TYPE, Erasure, KeyError};

/// What [`erase`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Erased {
    /// The subject.
    pub subject: String,
    /// Whether its key was deleted now (`false`: it had none, or it was
    /// deleted before).
    pub key_deleted: bool,
    /// The streams told now, with the sequence of the erasure event.
    pub told: Vec<(String, u64)>,
    /// Whether there was nothing left to do.
    pub already_done: bool,
    /// Whether the event store had a key item of the subject (`false`: no
    /// personal data of theirs was ever sealed here), read from the item
    /// the erasure replaced, so that `erase` needs no other read of it.
    pub had_key_item: bool,
}

/// Why an erasure stopped; safe to run again.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EraseError {
    /// The event store's domain declares no personal data, or has no key
    /// source.
    #[error("{0}")]
    NotConfigured(String),
    /// The key could not be deleted.
    #[error(transparent)]
    Keys(#[from] KeyError),
    /// A stream could not be told.
    #[error("telling the stream `{stream}`: {reason}")]
    Append {
        /// The stream.
        stream: String,
        /// Why.
        reason: AppendError,
    },
}

/// Forgets `subject` in the event store `store`: see the module's
/// documentation.
pub async fn erase<L: EventLog>(store: &L, subject: &str) -> Result<Erased, EraseError> {
    let keys = store.domain().keys().cloned().ok_or_else(|| {
        EraseError::NotConfigured(
            "the event store has no key source: set PERSONAL_DATA_KEY (or give the domain a keyring)"
                .to_owned(),
        )
    })?;
    let before = keys.source().erase(subject).await?;
    keys.forget(subject);
    let key_deleted = before
        .as_ref()
        .is_some_and(|stored| stored.wrapped.is_some());
    let already_done = before
        .as_ref()
        .is_some_and(|stored| stored.wrapped.is_none() && stored.told);
    let mut erased = Erased {
        subject: subject.to_owned(),
        key_deleted,
        told: Vec::new(),
        already_done,
        had_key_item: before.is_some(),
    };
    if already_done {
        return Ok(erased);
    }
    let streams = before.map(|stored| stored.streams).unwrap_or_default();
    for stream in streams {
        // Its first event's type: by it each consumer finds the entity the
        // stream projects onto (a stream with none is not told).
        let first = store
            .read(&stream, 0, 1)
            .await
            .map_err(|err| EraseError::Append {
                stream: stream.clone(),
                reason: AppendError::Store(err),
            })?;
        let Some(first) = first.first() else {
            continue;
        };
        let erasure = Erasure::new(subject, first.event_type.clone());
        let data = serde_json::to_value(&erasure).unwrap_or_else(|_| json!({ "subject": subject }));
        let mut event = NewEvent::new(ERASURE_TYPE, data);
        event.event_id = Some(format!("erasure-{}-{}", digest(subject), digest(&stream)));
        let append = Append {
            stream_id: stream.clone(),
            events: vec![event],
            expected: ExpectedSequence::Any,
            request_id: Some(format!("erase-{}-{}", digest(subject), digest(&stream))),
            writes: Vec::new(),
        };
        let appended = store
            .append(append)
            .await
            .map_err(|reason| EraseError::Append {
                stream: stream.clone(),
                reason,
            })?;
        if !appended.duplicate_request {
            erased.told.push((stream, appended.sequence));
        }
    }
    keys.source().told(subject).await?;
    Ok(erased)
}
