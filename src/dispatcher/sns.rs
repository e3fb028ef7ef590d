//! The topic on SNS: `PublishBatch` to the FIFO topic (docs/event-store.md, Many consumers),
//! `SendMessage` of reports to the failure queue (SQS).
//!
//! Each entry carries what a queue's would: `MessageGroupId`,
//! `MessageDeduplicationId` and the body as `Message`, byte for byte, in
//! stream order (SNS publishes a FIFO batch in the order sent). SNS's limits
//! are SQS's: ten entries, 262,144 bytes of messages a request, ids of 1 to
//! 128 letters, digits and punctuation. Entry ids are the positions, `0` to
//! `9` (SNS takes 1 to 80 of `a-z A-Z 0-9 - _`).
//!
//! What does not ride along: the producer's trace. `PublishBatch` has no
//! per-entry system attributes; SNS passes on the trace of the request
//! (`X-Amzn-Trace-Id`, the dispatcher's own invocation), and a message
//! attribute would not become the queue's `AWSTraceHeader`.

use aws_sdk_sns::Client;
use aws_sdk_sns::types::PublishBatchRequestEntry;

use super::record::Message;
use super::send::{Queue, Refused, SendError, not_taken};
use super::sqs::{error, report_to};

/// The codes of an entry SNS refused that sending it again cannot cure (with
/// `SenderFault`): a parameter of the message itself is wrong (too long, a
/// bad id). `BatchRequestTooLong` and the other request errors fail the
/// request as a whole, which is sent again; throttling, KMS and SNS's own
/// errors are sent again, then named for redelivery.
pub const TOPIC_ENTRY_FAULTS: [&str; 3] = [
    "InvalidParameter",
    "InvalidParameterValue",
    // The code of SNS's `InvalidParameterValueException`.
    "ParameterValueInvalid",
];

/// The FIFO topic the events are published to, and the queue reports go
/// to. Cheap to clone.
#[derive(Debug, Clone)]
pub struct SnsTopic {
    client: Client,
    topic_arn: String,
    sqs: aws_sdk_sqs::Client,
    failure_queue_url: String,
}

impl SnsTopic {
    /// Events to `topic_arn` (FIFO), reports to `failure_queue_url` (SQS).
    pub fn new(
        client: Client,
        topic_arn: impl Into<String>,
        sqs: aws_sdk_sqs::Client,
        failure_queue_url: impl Into<String>,
    ) -> Self {
        SnsTopic {
            client,
            topic_arn: topic_arn.into(),
            sqs,
            failure_queue_url: failure_queue_url.into(),
        }
    }
}

/// Whether SNS blames the message itself for a refusal.
pub fn topic_blames_message(refusal: &Refused) -> bool {
    refusal.sender_fault && TOPIC_ENTRY_FAULTS.contains(&refusal.code.as_str())
}

impl Queue for SnsTopic {
    async fn send(&self, entries: &[Message]) -> Result<Vec<Refused>, SendError> {
        let mut built = Vec::with_capacity(entries.len());
        for (index, outgoing) in entries.iter().enumerate() {
            built.push(
                PublishBatchRequestEntry::builder()
                    .id(index.to_string())
                    .message(&outgoing.body)
                    .message_group_id(&outgoing.group_id)
                    .message_deduplication_id(&outgoing.deduplication_id)
                    .build()
                    .map_err(|err| SendError(format!("PublishBatch entry: {err}")))?,
            );
        }
        let output = self
            .client
            .publish_batch()
            .topic_arn(&self.topic_arn)
            .set_publish_batch_request_entries(Some(built))
            .send()
            .await
            .map_err(|err| error("PublishBatch", &err))?;
        Ok(not_taken(
            "SNS",
            entries.len(),
            output.failed().iter().map(|failed| {
                (
                    failed.id(),
                    failed.code(),
                    failed.message(),
                    failed.sender_fault(),
                )
            }),
            |id| output.successful().iter().any(|ok| ok.id() == Some(id)),
        ))
    }

    async fn report(&self, report: &str) -> Result<(), SendError> {
        report_to(&self.sqs, &self.failure_queue_url, report).await
    }

    fn blames_message(&self, refusal: &Refused) -> bool {
        topic_blames_message(refusal)
    }

    fn service(&self) -> &'static str {
        "SNS"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(code: &str, sender_fault: bool) -> Refused {
        Refused {
            index: 0,
            code: code.to_owned(),
            message: "m".to_owned(),
            sender_fault,
        }
    }

    #[test]
    fn sns_blames_the_message_for_a_bad_parameter_only() {
        for code in TOPIC_ENTRY_FAULTS {
            assert!(topic_blames_message(&refusal(code, true)), "{code}");
            assert!(!topic_blames_message(&refusal(code, false)), "{code}");
        }
        for code in [
            "Throttled",
            "KMSThrottling",
            "KMSAccessDenied",
            "InternalError",
            "AuthorizationError",
            // SQS's code for a bad body; SNS does not answer it.
            "InvalidMessageContents",
        ] {
            assert!(!topic_blames_message(&refusal(code, true)), "{code}");
        }
    }
}
