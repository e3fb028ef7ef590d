//! The queue on SQS: `SendMessageBatch` to the FIFO queue, `SendMessage` of
//! reports to the failure queue.

use aws_sdk_sqs::Client;
use aws_sdk_sqs::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use aws_sdk_sqs::types::{
    MessageSystemAttributeNameForSends, MessageSystemAttributeValue, SendMessageBatchRequestEntry,
};

use super::record::Message;
use super::send::{Queue, Refused, SendError, not_taken};

/// The FIFO queue the events go to, and the queue reports go to. Cheap to
/// clone.
#[derive(Debug, Clone)]
pub struct SqsQueue {
    client: Client,
    queue_url: String,
    failure_queue_url: String,
}

impl SqsQueue {
    /// Events to `queue_url` (FIFO), reports to `failure_queue_url`.
    pub fn new(
        client: Client,
        queue_url: impl Into<String>,
        failure_queue_url: impl Into<String>,
    ) -> Self {
        SqsQueue {
            client,
            queue_url: queue_url.into(),
            failure_queue_url: failure_queue_url.into(),
        }
    }
}

/// A failed call's error, as the service said it (code and message). SQS's
/// and SNS's SDKs share the error types.
pub(super) fn error<E: ProvideErrorMetadata + std::error::Error + 'static, R: std::fmt::Debug>(
    operation: &str,
    err: &SdkError<E, R>,
) -> SendError {
    let detail = match (err.code(), err.message()) {
        (Some(code), Some(message)) => format!("{code}: {message}"),
        (Some(code), None) => code.to_owned(),
        _ => DisplayErrorContext(err).to_string(),
    };
    SendError(format!("{operation}: {detail}"))
}

impl Queue for SqsQueue {
    async fn send(&self, entries: &[Message]) -> Result<Vec<Refused>, SendError> {
        let mut built = Vec::with_capacity(entries.len());
        for (index, outgoing) in entries.iter().enumerate() {
            let mut entry = SendMessageBatchRequestEntry::builder()
                .id(index.to_string())
                .message_body(&outgoing.body)
                .message_group_id(&outgoing.group_id)
                .message_deduplication_id(&outgoing.deduplication_id);
            if let Some(header) = &outgoing.trace_header {
                let value = MessageSystemAttributeValue::builder()
                    .data_type("String")
                    .string_value(header)
                    .build()
                    .map_err(|err| SendError(format!("AWSTraceHeader: {err}")))?;
                entry = entry.message_system_attributes(
                    MessageSystemAttributeNameForSends::AwsTraceHeader,
                    value,
                );
            }
            built.push(
                entry
                    .build()
                    .map_err(|err| SendError(format!("SendMessageBatch entry: {err}")))?,
            );
        }
        let output = self
            .client
            .send_message_batch()
            .queue_url(&self.queue_url)
            .set_entries(Some(built))
            .send()
            .await
            .map_err(|err| error("SendMessageBatch", &err))?;
        Ok(not_taken(
            "SQS",
            entries.len(),
            output.failed().iter().map(|failed| {
                (
                    failed.id(),
                    failed.code(),
                    failed.message(),
                    failed.sender_fault(),
                )
            }),
            |id| output.successful().iter().any(|ok| ok.id() == id),
        ))
    }

    async fn report(&self, report: &str) -> Result<(), SendError> {
        report_to(&self.client, &self.failure_queue_url, report).await
    }
}

/// Sends one report to the failure queue (`SendMessage`).
pub(super) async fn report_to(client: &Client, url: &str, report: &str) -> Result<(), SendError> {
    client
        .send_message()
        .queue_url(url)
        .message_body(report)
        .send()
        .await
        .map_err(|err| error("SendMessage (failure queue)", &err))?;
    Ok(())
}
