//! A batch's sealed personal data: the keys its records need and the
//! keyring does not hold, fetched at once, and those records read again.
//! A key that cannot be read leaves its records (and only its own) refused as
//! [`InvalidMessage::KeyNeeded`], which the dry run answers as a storage
//! error: retried. And an erasure's conflict records: the entity's
//! `CONFLICT#` items, bodies of the forgotten subject's events, deleted
//! before the erasure is applied.

use aws_lambda_events::event::sqs::SqsEvent;
use tracing::warn;

use super::{Invocation, Runner};
use crate::envelope::{InvalidMessage, Record};
use crate::personal::ERASURE_TYPE;
use crate::store::Store;

impl<S: Store> Runner<S> {
    /// Fetches the keys `records` need, and reads those records again.
    pub(super) async fn open_sealed(&self, event: &SqsEvent, records: &mut [Record]) {
        let needed: Vec<String> = records
            .iter()
            .filter_map(|record| match &record.event {
                Err(InvalidMessage::KeyNeeded(subject)) => Some(subject.clone()),
                _ => None,
            })
            .collect();
        if needed.is_empty() {
            return;
        }
        let Some(keys) = self.domain.keys() else {
            return;
        };
        if let Err(err) = keys.fetch(&needed).await {
            // The keys read are kept: their records are read again below,
            // the others stay refused (retried).
            warn!(error = %err, subjects = needed.len(), "reading the batch's keys failed");
        }
        for record in records.iter_mut() {
            if !matches!(record.event, Err(InvalidMessage::KeyNeeded(_))) {
                continue;
            }
            let message = event
                .records
                .iter()
                .find(|message| message.message_id.as_deref() == Some(&record.message_id));
            if let Some(read) = message.and_then(|message| Record::read(message, &self.domain)) {
                *record = read;
            }
        }
    }

    /// Deletes the conflict records of the entities the batch's erasures
    /// are on. A failure is logged: the records hold only sealed values
    /// whose key is gone, and the next erasure of the subject deletes them.
    pub(super) async fn forget_conflicts(&self, records: &[Record], invocation: &Invocation) {
        for event in records
            .iter()
            .filter_map(|record| record.event.as_ref().ok())
        {
            if event.type_name() != ERASURE_TYPE {
                continue;
            }
            let Some(key) = event.entity_key() else {
                continue;
            };
            // The item is read again: an erasure is decided on the item as
            // stored, never on one this process remembers.
            self.warm_forget(&key);
            let forget = self.store.forget_conflicts(&key);
            match self.timed("Query", invocation, forget).await {
                Ok(0) => {}
                Ok(count) => {
                    tracing::info!(entity = %key, count, "an erasure deleted the entity's conflict records")
                }
                Err(err) => {
                    warn!(entity = %key, error = ?err, "an erasure could not delete the entity's conflict records")
                }
            }
        }
    }
}
