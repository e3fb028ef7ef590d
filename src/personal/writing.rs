//! An append's personal values sealed before anything is written: for each
//! event of a type the domain declares personal, its subject's key (read
//! each time: that read is what refuses an erased subject), and each
//! personal field present sealed with the event's id and the field's name.

use std::collections::HashMap;

use serde_json::Value;

use super::keys::KeyError;
use super::{Subject, associated_data, is_sealed};
use crate::domain::Domain;
use crate::envelope::InvalidMessage;
use crate::producer::AppendError;
use crate::producer::Checked;

/// Seals the personal values of `events`, appended to `stream`; see the
/// module's documentation.
pub(crate) async fn seal(
    domain: &Domain,
    stream: &str,
    events: &mut [Checked],
) -> Result<(), AppendError> {
    let declared = domain.personal();
    if declared.is_empty() {
        return Ok(());
    }
    let mut keys_of = HashMap::new();
    for (index, event) in events.iter_mut().enumerate() {
        let Some(fields) = declared.of(&event.event_type) else {
            continue;
        };
        let Value::Object(data) = &mut event.data else {
            continue;
        };
        let has_personal = fields.fields.iter().any(|field| {
            data.get(*field)
                .is_some_and(|value| !value.is_null() && !value.as_str().is_some_and(is_sealed))
        });
        if !has_personal {
            continue;
        }
        let subject = match fields.subject {
            Subject::Aggregate => Some(stream),
            Subject::Field(field) => data.get(field).and_then(Value::as_str),
        }
        .filter(|subject| !subject.is_empty())
        .ok_or_else(|| AppendError::Invalid {
            index,
            reason: match fields.subject {
                Subject::Aggregate => InvalidMessage::Missing("aggregateId".to_owned()),
                Subject::Field(field) => InvalidMessage::Missing(format!("data.{field}")),
            },
        })?
        .to_owned();
        let Some(keys) = domain.keys() else {
            return Err(AppendError::Refused(format!(
                "{} carries personal data, and the event store has no key to seal it with: set PERSONAL_DATA_KEY (nothing was written)",
                event.event_type
            )));
        };
        let key = match keys_of.get(&subject) {
            Some(key) => Clone::clone(key),
            None => {
                let key = keys
                    .for_append(&subject, stream)
                    .await
                    .map_err(|err| match err {
                        KeyError::Erased(subject) => AppendError::Erased { subject },
                        other => AppendError::Keys(other),
                    })?;
                keys_of.insert(subject.clone(), key.clone());
                key
            }
        };
        for field in &fields.fields {
            let Some(value) = data.get_mut(*field) else {
                continue;
            };
            if value.is_null() || value.as_str().is_some_and(is_sealed) {
                continue;
            }
            let plain = serde_json::to_vec(value).unwrap_or_default();
            let sealed = key
                .seal(&plain, &associated_data(&event.event_id, field))
                .map_err(|err| AppendError::Keys(KeyError::Kms(err.to_string())))?;
            *value = Value::String(sealed);
        }
    }
    Ok(())
}
