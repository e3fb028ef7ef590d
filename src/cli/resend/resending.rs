//! The dispatcher's queue as a resend uses it: sends as the dispatcher
//! does, with a deduplication id of the run's own, reports nothing, and
//! keeps each record's last answer so that the event not taken is named
//! with its cause.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use serde_json::Value;

use crate::dispatcher::{Message, Queue, Refused, SendError, resend_deduplication_id};

/// The dispatcher's queue, for a resend: sends as it does (the group, the
/// body and the order are the dispatcher's), each entry under the run's
/// own deduplication id ([`resend_deduplication_id`]: the dispatcher's,
/// marked with the run, so that SQS and SNS do not drop what they took in
/// the last five minutes), and reports nothing (a resend has no failure
/// queue). It keeps, for each record, the queue's last answer that did not
/// take it, so that the event not taken is named with its cause; an entry
/// refused for good, which the dispatcher would report, is kept with the
/// reason its report gives, and not taken.
pub(super) struct Resending<Q> {
    pub(super) queue: Q,
    /// When the run started, in epoch milliseconds: what makes its
    /// deduplication ids its own.
    run: u64,
    /// By `SequenceNumber`: the last refusal, or the failed request's error.
    answers: Mutex<HashMap<String, String>>,
    /// By `SequenceNumber`: the reason of each refusal for good.
    refused: Mutex<HashMap<String, String>>,
}

impl<Q: Queue> Resending<Q> {
    pub(super) fn new(queue: Q, run: u64) -> Self {
        Resending {
            queue,
            run,
            answers: Mutex::default(),
            refused: Mutex::default(),
        }
    }

    /// Why the record `sequence_number` was not taken: its refusal for
    /// good, else `reason` (the dispatcher's) and the queue's last answer.
    pub(super) fn why(&self, sequence_number: &str, reason: Option<String>) -> String {
        if let Some(refused) = lock(&self.refused).get(sequence_number) {
            return refused.clone();
        }
        let reason = reason.unwrap_or_else(|| "not sent".to_owned());
        match lock(&self.answers).get(sequence_number) {
            Some(answer) => format!("{reason} (the last answer: {answer})"),
            None => reason,
        }
    }
}

/// The map behind `mutex`, even when a panic poisoned it.
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl<Q: Queue> Queue for Resending<Q> {
    async fn send(&self, entries: &[Message]) -> Result<Vec<Refused>, SendError> {
        let resent: Vec<Message> = entries
            .iter()
            .map(|entry| Message {
                deduplication_id: resend_deduplication_id(&entry.deduplication_id, self.run),
                ..entry.clone()
            })
            .collect();
        let answer = self.queue.send(&resent).await;
        let mut answers = lock(&self.answers);
        match &answer {
            Ok(refused) => {
                for refusal in refused {
                    if let Some(entry) = entries.get(refusal.index) {
                        answers.insert(
                            entry.sequence_number.clone(),
                            format!("{}: {}", refusal.code, refusal.message),
                        );
                    }
                }
            }
            Err(err) => {
                for entry in entries {
                    answers.insert(entry.sequence_number.clone(), err.to_string());
                }
            }
        }
        answer
    }

    async fn report(&self, report: &str) -> Result<(), SendError> {
        // The report's record holds the body: only its reason is kept.
        let document: Value = serde_json::from_str(report).unwrap_or(Value::Null);
        let field = |name: &str| {
            document
                .get(name)
                .and_then(Value::as_str)
                .map(str::to_owned)
        };
        let reason = field("reason").unwrap_or_else(|| "refused by the queue".to_owned());
        lock(&self.refused).insert(field("sequenceNumber").unwrap_or_default(), reason);
        Err(SendError("a resend reports to no failure queue".to_owned()))
    }

    fn blames_message(&self, refusal: &Refused) -> bool {
        self.queue.blames_message(refusal)
    }

    fn service(&self) -> &'static str {
        self.queue.service()
    }
}
