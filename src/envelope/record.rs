//! One SQS record, read: its identity, its stream, and its event as the
//! domain reads the body.

use aws_lambda_events::event::sqs::SqsMessage;

use super::{Event, InvalidMessage, Parser};

/// One record of a batch, read.
#[derive(Debug)]
pub struct Record {
    /// The SQS message id.
    pub message_id: String,
    /// The stream the record belongs to: the event's aggregate id (a
    /// deduplicated effect's counter id), or the `MessageGroupId` when the body could not be
    /// read (the message id when there is none either).
    pub stream: String,
    /// `ApproximateReceiveCount`, when SQS gave it.
    pub receive_count: Option<u32>,
    /// The root of the producer's X-Ray trace (`AWSTraceHeader`'s `Root=`),
    /// when SQS carried one: every log line about the message names it.
    pub trace_id: Option<String>,
    /// When the message was sent, epoch seconds (`SentTimestamp`, in
    /// milliseconds): for a record `rebuild` reads from the event store,
    /// when its event was appended. Whether a process reacts to an event
    /// its rebuild folds depends on it ([`crate::runner::RunnerConfig::reacts_from`]).
    pub sent_at: Option<u64>,
    /// The body as received (kept to park the event).
    pub body: String,
    /// The event read from the body, or why it could not be read.
    pub event: Result<Event, InvalidMessage>,
}

impl Record {
    /// Reads a record, its body by `domain` (a [`crate::Domain`]). `None`
    /// when it has no message id: such a record cannot be reported failed
    /// on its own.
    pub fn read(message: &SqsMessage, domain: &impl Parser) -> Option<Record> {
        let message_id = message
            .message_id
            .as_deref()
            .filter(|id| !id.is_empty())?
            .to_owned();
        let event = match message.body.as_deref() {
            None => Err(InvalidMessage::NoBody),
            Some(body) => domain.parse(body),
        };
        let stream = match &event {
            // An ignored event without an aggregate id keeps its group.
            Ok(event) if !event.stream().is_empty() => event.stream().to_owned(),
            _ => message
                .attributes
                .get("MessageGroupId")
                .filter(|group| !group.is_empty())
                .cloned()
                .unwrap_or_else(|| message_id.clone()),
        };
        let receive_count = message
            .attributes
            .get("ApproximateReceiveCount")
            .and_then(|count| count.parse().ok());
        let trace_id = message
            .attributes
            .get("AWSTraceHeader")
            .and_then(|header| trace_root(header))
            .map(str::to_owned);
        let sent_at = message
            .attributes
            .get("SentTimestamp")
            .and_then(|millis| millis.parse::<u64>().ok())
            .map(|millis| millis / 1000);
        Some(Record {
            message_id,
            stream,
            receive_count,
            trace_id,
            sent_at,
            body: message.body.clone().unwrap_or_default(),
            event,
        })
    }
}

/// The `Root=` of an X-Ray trace header (`Root=1-...;Parent=...;Sampled=1`),
/// when it looks like one (at most 64 characters of `0-9 a-f -`).
fn trace_root(header: &str) -> Option<&str> {
    header
        .split(';')
        .find_map(|part| part.trim().strip_prefix("Root="))
        .filter(|root| {
            !root.is_empty()
                && root.len() <= 64
                && root.chars().all(|c| c.is_ascii_hexdigit() || c == '-')
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_producers_trace_root_is_read_from_aws_trace_header() {
        assert_eq!(
            trace_root(
                "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"
            ),
            Some("1-5759e988-bd862e3fe1be46a994272793")
        );
        assert_eq!(
            trace_root("Parent=53995c3f42cd8ad8;Root=1-abc"),
            Some("1-abc")
        );
        assert_eq!(trace_root("Root=<script>"), None);
        assert_eq!(trace_root("Sampled=1"), None);
    }
}
