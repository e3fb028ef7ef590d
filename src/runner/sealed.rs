//! A batch's sealed personal data: the keys its records need and the
//! keyring does not hold, fetched at once, and those records read again.
//! A key that cannot be read leaves its records refused as
//! [`InvalidMessage::KeyNeeded`], which the dry run answers as a storage
//! error: retried.

use aws_lambda_events::event::sqs::SqsEvent;
use tracing::warn;

use super::Runner;
use crate::envelope::{InvalidMessage, Record};
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
            warn!(error = %err, subjects = needed.len(), "reading the batch's keys failed");
            return;
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
}
