//! An append's personal values sealed before anything is written: for each
//! event of a type the domain declares personal, its subject's key, and
//! each personal field present sealed for the event, the field, the stream
//! and the subject ([`Binding`]). A personal value that already looks sealed
//! is refused: `append` stores as sealed only what it sealed itself. The
//! key item is read (that read is what refuses an erased subject)
//! unless the event store vouches for the key: it read the item since the
//! stream's last event, and every event since is its own, so an erasure
//! since would have broken the chain (see `producer/known.rs`).

use std::collections::HashMap;

use serde_json::Value;

use super::check::stream_id_problem;
use super::{AppendError, Checked};
use crate::domain::Domain;
use crate::personal::{Binding, DataKey, KeyError, Known, SEALED_FAMILY, Subject, looks_sealed};
use crate::reason::InvalidMessage;

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
            aggregate_id: if event.sequenced { stream } else { "" },
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
/// (the event `event_id` of type `event_type`, appended to `stream`, whose
/// body carries `stream` as its `aggregateId`): for a caller that stores
/// events some other way, and for tests. A personal value that already
/// looks sealed is refused, as `append` refuses it.
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
        aggregate_id: stream,
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
    /// The body's `aggregateId`: the stream, or empty for a type whose body
    /// carries none.
    aggregate_id: &'a str,
    index: usize,
    event_id: &'a str,
    event_type: &'a str,
}

/// Why `append` refuses the event of `event_type` whose `data` holds a
/// personal value that already looks sealed (`None`: none does), naming
/// the field: it seals personal values itself. Checked before the event is
/// read as a consumer would, which would try to open the value.
pub(crate) fn sealed_already(
    domain: &Domain,
    event_type: &str,
    data: &Value,
) -> Option<InvalidMessage> {
    let fields = domain.personal().of(event_type)?;
    fields
        .fields
        .iter()
        .find(|field| {
            data.get(**field)
                .and_then(Value::as_str)
                .is_some_and(looks_sealed)
        })
        .map(|field| already_sealed(field))
}

/// A personal value that looks sealed: refused, naming the field.
fn already_sealed(field: &str) -> InvalidMessage {
    InvalidMessage::Invalid {
        field: format!("data{}", crate::reason::key_segment(field)),
        problem: format!(
            "is personal and already looks sealed (it starts with `{SEALED_FAMILY}`): append seals personal values itself, so give the plain value (a sealed value copied from a stored event opens nowhere else)"
        ),
    }
}

impl Sealing<'_> {
    async fn seal(&self, data: &mut Value, keys_of: &mut Keys<'_>) -> Result<(), AppendError> {
        let Some(fields) = self.domain.personal().of(self.event_type) else {
            return Ok(());
        };
        let Value::Object(data) = data else {
            return Ok(());
        };
        let mut has_personal = false;
        for field in &fields.fields {
            match data.get(*field) {
                None | Some(Value::Null) => {}
                Some(Value::String(value)) if looks_sealed(value) => {
                    return Err(AppendError::Invalid {
                        index: self.index,
                        reason: already_sealed(field),
                    });
                }
                Some(_) => has_personal = true,
            }
        }
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
        if let (Subject::Field(field), Some(problem)) =
            (&fields.subject, stream_id_problem(&subject))
        {
            // `erase --subject` takes only what a stream id can be: a
            // subject it could not name could never be forgotten.
            return Err(AppendError::Invalid {
                index: self.index,
                reason: InvalidMessage::Invalid {
                    field: format!("data{}", crate::reason::key_segment(field)),
                    problem: format!(
                        "names the subject of the personal data, and {problem} (what `erase --subject` takes)"
                    ),
                },
            });
        }
        let key = self.key(&subject, keys_of).await?;
        for field in &fields.fields {
            let Some(value) = data.get_mut(*field) else {
                continue;
            };
            if value.is_null() {
                continue;
            }
            let plain = serde_json::to_vec(value).unwrap_or_default();
            let binding = Binding {
                event_id: self.event_id,
                field,
                stream: self.aggregate_id,
                subject: &subject,
            };
            let sealed = key
                .seal(&plain, &binding.associated_data())
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
