//! An append's personal values sealed before anything is written: for each
//! event of a type the domain declares personal, its subject's key, and
//! each personal field present sealed with the event's id and the field's
//! name. The key item is read (that read is what refuses an erased subject)
//! unless the event store vouches for the key: it read the item since the
//! stream's last event, and every event since is its own, so an erasure
//! since would have broken the chain (see `producer/known.rs`).

use std::collections::HashMap;

use serde_json::Value;

use super::cipher::DataKey;
use super::keys::{KeyError, Known};
use super::{Subject, associated_data, is_sealed};
use crate::domain::Domain;
use crate::envelope::InvalidMessage;
use crate::producer::{AppendError, Checked};

/// The subjects whose keys an append sealed with.
#[derive(Debug, Default)]
pub(crate) struct Sealed {
    /// Whose key item was read now.
    pub(crate) read: Vec<String>,
    /// Whose key the event store vouched for, unread.
    pub(crate) vouched: Vec<String>,
}

impl Sealed {
    /// Every subject.
    pub(crate) fn subjects(&self) -> Vec<String> {
        self.read.iter().chain(&self.vouched).cloned().collect()
    }

    /// Every key item read again (the append's slot is not the one the
    /// keys were read or vouched for at): an erased subject refused.
    pub(crate) async fn read_again(
        &mut self,
        domain: &Domain,
        stream: &str,
    ) -> Result<(), AppendError> {
        let Some(keys) = domain.keys() else {
            return Ok(());
        };
        self.read = self.subjects();
        self.vouched.clear();
        for subject in &self.read {
            keys.for_append(subject, stream).await.map_err(refusal)?;
        }
        Ok(())
    }
}

/// Seals the personal values of `events`, appended to `stream`, with the
/// keys of `vouched` subjects unread; see the module's documentation.
pub(crate) async fn seal(
    domain: &Domain,
    stream: &str,
    events: &mut [Checked],
    vouched: &[String],
) -> Result<Sealed, AppendError> {
    let mut sealed = Sealed::default();
    if domain.personal().is_empty() {
        return Ok(sealed);
    }
    let mut keys_of = Keys {
        vouched,
        used: HashMap::new(),
        sealed: &mut sealed,
    };
    for (index, event) in events.iter_mut().enumerate() {
        let sealing = Sealing {
            domain,
            stream,
            index,
            event_id: &event.event_id,
            event_type: &event.event_type,
        };
        sealing.seal(&mut event.data, &mut keys_of).await?;
    }
    Ok(sealed)
}

/// The keys of one append.
struct Keys<'a> {
    vouched: &'a [String],
    used: HashMap<String, DataKey>,
    sealed: &'a mut Sealed,
}

fn refusal(err: KeyError) -> AppendError {
    match err {
        KeyError::Erased(subject) => AppendError::Erased { subject },
        other => AppendError::Keys(other),
    }
}

/// Seals the personal values of one event's `data` as `append` does
/// (the event `event_id` of type `event_type`, appended to `stream`): for
/// a caller that stores events some other way, and for tests.
pub async fn seal_data(
    domain: &Domain,
    stream: &str,
    event_id: &str,
    event_type: &str,
    data: &mut Value,
) -> Result<(), AppendError> {
    let sealing = Sealing {
        domain,
        stream,
        index: 0,
        event_id,
        event_type,
    };
    let mut sealed = Sealed::default();
    let mut keys = Keys {
        vouched: &[],
        used: HashMap::new(),
        sealed: &mut sealed,
    };
    sealing.seal(data, &mut keys).await
}

/// One event being sealed.
struct Sealing<'a> {
    domain: &'a Domain,
    stream: &'a str,
    index: usize,
    event_id: &'a str,
    event_type: &'a str,
}

impl Sealing<'_> {
    async fn seal(&self, data: &mut Value, keys_of: &mut Keys<'_>) -> Result<(), AppendError> {
        let Some(fields) = self.domain.personal().of(self.event_type) else {
            return Ok(());
        };
        let Value::Object(data) = data else {
            return Ok(());
        };
        let has_personal = fields.fields.iter().any(|field| {
            data.get(*field)
                .is_some_and(|value| !value.is_null() && !value.as_str().is_some_and(is_sealed))
        });
        if !has_personal {
            return Ok(());
        }
        let subject = match fields.subject {
            Subject::Aggregate => Some(self.stream),
            Subject::Field(field) => data.get(field).and_then(Value::as_str),
        }
        .filter(|subject| !subject.is_empty())
        .ok_or_else(|| AppendError::Invalid {
            index: self.index,
            reason: match fields.subject {
                Subject::Aggregate => InvalidMessage::Missing("aggregateId".to_owned()),
                Subject::Field(field) => InvalidMessage::Missing(format!("data.{field}")),
            },
        })?
        .to_owned();
        let key = self.key(&subject, keys_of).await?;
        for field in &fields.fields {
            let Some(value) = data.get_mut(*field) else {
                continue;
            };
            if value.is_null() || value.as_str().is_some_and(is_sealed) {
                continue;
            }
            let plain = serde_json::to_vec(value).unwrap_or_default();
            let sealed = key
                .seal(&plain, &associated_data(self.event_id, field))
                .map_err(|err| AppendError::Keys(KeyError::Kms(err.to_string())))?;
            *value = Value::String(sealed);
        }
        Ok(())
    }

    /// The subject's key: read once per append, unless vouched for and
    /// still kept.
    async fn key(&self, subject: &str, keys_of: &mut Keys<'_>) -> Result<DataKey, AppendError> {
        if let Some(key) = keys_of.used.get(subject) {
            return Ok(key.clone());
        }
        let Some(keys) = self.domain.keys() else {
            return Err(AppendError::Refused(format!(
                "{} carries personal data, and the event store has no key to seal it with: set PERSONAL_DATA_KEY (nothing was written)",
                self.event_type
            )));
        };
        let vouched = keys_of.vouched.iter().any(|known| known == subject);
        let key = match keys.known(subject) {
            Some(Known::Key(key)) if vouched => {
                keys_of.sealed.vouched.push(subject.to_owned());
                key
            }
            _ => {
                let key = keys
                    .for_append(subject, self.stream)
                    .await
                    .map_err(refusal)?;
                keys_of.sealed.read.push(subject.to_owned());
                key
            }
        };
        keys_of.used.insert(subject.to_owned(), key.clone());
        Ok(key)
    }
}
