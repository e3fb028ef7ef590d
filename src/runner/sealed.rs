//! A batch's sealed personal data: the key items of every subject whose
//! values its records hold read again at once (kept keys are used again
//! only while their items hold them, so that no instance opens a subject's
//! values once its key is deleted, however recently it read the key), and
//! the records that need it read again. A key that cannot be read leaves
//! its records (and only its own) refused as [`InvalidMessage::KeyNeeded`],
//! which the dry run answers as a storage error: retried. And an erasure's
//! conflict records: the entity's `CONFLICT#` items, bodies of the
//! forgotten subject's events, deleted before the erasure is applied.

use std::time::Instant;

use aws_lambda_events::event::sqs::SqsEvent;
use tracing::warn;

use super::{Invocation, Runner};
use crate::envelope::sealed_subject;
use crate::envelope::{InvalidMessage, Record};
use crate::personal::ERASURE_TYPE;
use crate::store::Store;

impl<S: Store> Runner<S> {
    /// Confirms the keys `records` opened or need, and reads again those
    /// records whose subject is erased or whose key was missing.
    pub(super) async fn open_sealed(&self, event: &SqsEvent, records: &mut [Record]) {
        let Some(keys) = self.domain.keys() else {
            return;
        };
        let sealed: Vec<(usize, String)> = records
            .iter()
            .enumerate()
            .filter_map(|(index, record)| match &record.event {
                Err(InvalidMessage::KeyNeeded(subject)) => Some((index, subject.clone())),
                Ok(_) => sealed_subject(&record.body, self.domain.personal())
                    .map(|subject| (index, subject)),
                Err(_) => None,
            })
            .collect();
        if sealed.is_empty() {
            return;
        }
        let subjects: Vec<String> = sealed.iter().map(|(_, subject)| subject.clone()).collect();
        let since = Instant::now();
        if let Err(err) = keys.confirm(&subjects).await {
            // The keys read are kept: their records are read again below,
            // the others refused (retried).
            warn!(error = %err, subjects = subjects.len(), "reading the batch's keys failed");
        }
        for (index, subject) in sealed {
            let Some(record) = records.get_mut(index) else {
                continue;
            };
            let needed = matches!(record.event, Err(InvalidMessage::KeyNeeded(_)));
            if !keys.is_erased(&subject) && !keys.read_since(&subject, since) {
                // Its key item could not be read: not opened with a key kept
                // from before.
                record.event = Err(InvalidMessage::KeyNeeded(subject));
                continue;
            }
            if !needed && !keys.is_erased(&subject) {
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
