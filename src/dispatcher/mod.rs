//! The dispatcher: events from the event store's DynamoDB stream to the SQS
//! FIFO queue (docs/event-store.md, The dispatcher), or to the SNS FIFO topic that many
//! consumers' queues subscribe to (docs/event-store.md, Many consumers).
//!
//! A Lambda function on the stream (DynamoDB event source mapping with
//! `ReportBatchItemFailures`). For each `INSERT` of an event item, one
//! message: `MessageGroupId` = the stream id, `MessageDeduplicationId` =
//! `<aggregateId>:<sequence>` (the `eventId` when not sequenced), body = the
//! item's `body` byte for byte, and the producer's trace (`traceHeader`) as
//! `AWSTraceHeader`. The head, request records, removals and changes send
//! nothing. A stream's messages go in stream order, at most ten per
//! `SendMessageBatch`.
//!
//! With `TOPIC_ARN` instead of `QUEUE_URL`, the same messages are published
//! to the topic, ten per `PublishBatch`, by the same code: the same order,
//! the same refusals sent again (SNS's codes that blame the message are
//! [`TOPIC_ENTRY_FAULTS`]), the same reports to `FAILURE_QUEUE_URL`, the same
//! metrics. Only the producer's trace does not ride along (a `PublishBatch`
//! entry has no `AWSTraceHeader`).
//!
//! What it promises, and what it cannot: DynamoDB Streams orders records
//! per item; the events of one stream are different items (one sort key
//! each), and a transaction's items may reach the stream at different
//! moments, or, after a partition split, in different shards. Within a
//! batch, the dispatcher sends each stream's events in sequence order,
//! whatever order their records came in (each still names its own record
//! for redelivery). Across batches and shards it cannot: an event may reach
//! the queue before an earlier one of its stream; the consumer's guard
//! answers such an event "retry later", parks it if the gap lasts, and
//! applies it when the earlier one lands. Redelivered records (a retry after a partial failure,
//! a crash, a timeout) come as duplicates that SQS deduplication (five
//! minutes) and the guard absorb.
//!
//! | file | what it does |
//! | --- | --- |
//! | `record.rs` | one change record read: an event to send (its ids checked for SQS), nothing, or a corrupt event item |
//! | `send.rs` | one batch sent: requests of ten in stream order, refusals retried, corrupt items reported, the redelivery point |
//! | `sqs.rs` | [`SqsQueue`]: the [`Queue`] on SQS |
//! | `sns.rs` | [`SnsTopic`]: the [`Queue`] on an SNS FIFO topic |
//! | `target.rs` | [`Target`]: `QUEUE_URL` or `TOPIC_ARN`; [`Destination`]: the one configured |

mod record;
mod send;
mod sns;
mod sqs;
mod target;

use std::time::Instant;

use lambda_runtime::LambdaEvent;
use serde_json::Value;
use tracing::Instrument;

use crate::config::ConfigError;
use crate::domain::Domain;
use crate::metrics::Emf;

pub use crate::sqs::{MAX_SQS_ID, sqs_body_char, valid_sqs_id, valid_trace_header};
pub use record::{
    Corrupt, Outgoing, Read, deduplication_id, group_id, read, resend_deduplication_id,
};
pub use send::{
    Dispatch, ENTRY_FAULTS, MAX_ENTRIES, MAX_IN_FLIGHT, MAX_REQUEST_BYTES, Queue, Refused,
    SendError, Settings, dispatch,
};
pub use sns::{SnsTopic, TOPIC_ENTRY_FAULTS, topic_blames_message};
pub use sqs::SqsQueue;
pub use target::{Destination, TARGETS, Target, valid_topic_arn};

/// Every environment variable the dispatcher reads.
pub const VARIABLES: [&str; 7] = [
    "QUEUE_URL",
    "TOPIC_ARN",
    "FAILURE_QUEUE_URL",
    "METRICS_NAMESPACE",
    "METRICS_SERVICE",
    "POWERTOOLS_METRICS_NAMESPACE",
    "POWERTOOLS_SERVICE_NAME",
];

/// The variables the dispatcher cannot start without, besides exactly one
/// of [`TARGETS`] (`QUEUE_URL` or `TOPIC_ARN`).
pub const REQUIRED: [&str; 1] = ["FAILURE_QUEUE_URL"];

/// The metrics the dispatcher emits (EMF, dimension `Service`).
///
/// | metric | unit | what |
/// | --- | --- | --- |
/// | `ColdStart` | Count | 1 in the first invocation's document of each process |
/// | `Records` | Count | change records in the batch |
/// | `Dispatched` | Count | messages the queue (or the topic) took |
/// | `SendRequests` | Count | `SendMessageBatch` (or `PublishBatch`) requests |
/// | `Refused` | Count | entries refused, and requests that failed (sent again, or reported) |
/// | `Corrupt` | Count | event items reported to the failure queue |
/// | `BatchItemFailures` | Count | 1 when the batch named a record for redelivery |
/// | `BatchDuration` | Milliseconds | time to send the batch |
pub const METRICS: [&str; 8] = [
    "ColdStart",
    "Records",
    "Dispatched",
    "SendRequests",
    "Refused",
    "Corrupt",
    "BatchItemFailures",
    "BatchDuration",
];

/// The SQS actions the dispatcher calls (`SendMessageBatch` is authorised
/// as `sqs:SendMessage`), on the queue and on the failure queue.
pub const SQS_ACTIONS: [&str; 1] = ["sqs:SendMessage"];

/// The SNS actions the dispatcher calls in topic mode (`PublishBatch` is
/// authorised as `sns:Publish`), on the topic.
pub const SNS_ACTIONS: [&str; 1] = ["sns:Publish"];

/// The dispatcher's configuration, from the environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DispatcherConfig {
    /// `QUEUE_URL` or `TOPIC_ARN`: the FIFO queue, or the FIFO topic, the
    /// events go to.
    pub target: Target,
    /// `FAILURE_QUEUE_URL`: where corrupt event items are reported (the
    /// event source mapping's on-failure destination).
    pub failure_queue_url: String,
    /// The CloudWatch namespace of the metrics.
    pub metrics_namespace: String,
    /// The `Service` dimension of the metrics.
    pub metrics_service: String,
}

impl DispatcherConfig {
    /// Reads the configuration from the process's environment.
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// Reads the configuration through `lookup`.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let target = Target::from_lookup(&lookup)?;
        let name = "FAILURE_QUEUE_URL";
        let failure_queue_url = lookup(name)
            .map(|value| value.trim().to_owned())
            .filter(|value| !value.is_empty())
            .ok_or(ConfigError::Missing(name))?;
        if !(failure_queue_url.starts_with("https://") || failure_queue_url.starts_with("http://"))
        {
            return Err(ConfigError::invalid(
                name,
                "a queue URL (https://sqs.<region>.amazonaws.com/<account>/<name>)",
                &failure_queue_url,
            ));
        }
        let (metrics_namespace, metrics_service) =
            crate::config::metrics_names(&lookup, "sequence-guard-dispatcher")?;
        Ok(DispatcherConfig {
            target,
            failure_queue_url,
            metrics_namespace,
            metrics_service,
        })
    }
}

/// An invocation that fails as a whole (Lambda retries the batch, bisected).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum InvocationError {
    /// The event is not a stream batch.
    #[error("unsupported event: expected a DynamoDB stream batch (`Records`): {0}")]
    Unsupported(String),
    /// The stream is set up wrong ([`Read::Unusable`]): nothing was sent.
    #[error("{0}")]
    Unusable(String),
}

impl From<InvocationError> for lambda_runtime::Diagnostic {
    fn from(err: InvocationError) -> Self {
        let error_type = match err {
            InvocationError::Unsupported(_) => "SequenceGuard.UnsupportedEvent",
            InvocationError::Unusable(_) => "SequenceGuard.StreamViewType",
        };
        lambda_runtime::Diagnostic {
            error_type: error_type.to_owned(),
            error_message: err.to_string(),
        }
    }
}

/// Handles one invocation: sends the stream batch, records its metrics
/// (one EMF document when `emf` is given) and answers with the partial
/// batch response.
pub async fn handle<Q: Queue>(
    domain: &Domain,
    queue: &Q,
    emf: Option<&Emf>,
    event: LambdaEvent<Value>,
) -> Result<Value, InvocationError> {
    let span = crate::lambda::invocation_span(&event.context);
    crate::metrics::record_cold_start();
    let started = Instant::now();
    let deadline = crate::lambda::deadline(event.context.deadline);
    let Some(records) = event.payload.get("Records").and_then(Value::as_array) else {
        let keys: Vec<&str> = event
            .payload
            .as_object()
            .map(|object| object.keys().map(String::as_str).collect())
            .unwrap_or_default();
        return Err(InvocationError::Unsupported(format!("fields {keys:?}")));
    };
    let outcome = dispatch(records, domain, queue, Settings::default(), Some(deadline))
        .instrument(span.clone())
        .await;
    if let Some(reason) = &outcome.unusable {
        span.in_scope(
            || tracing::error!(reason = %reason, "the stream is set up wrong: nothing sent"),
        );
        return Err(InvocationError::Unusable(reason.clone()));
    }
    span.in_scope(|| {
        if let Some(failure) = &outcome.failure {
            tracing::warn!(
                sequence_number = %failure,
                reason = outcome.failure_reason.as_deref().unwrap_or_default(),
                "a record is not sent: it and the records after it come again"
            );
        }
        tracing::info!(
            records = outcome.records,
            dispatched = outcome.dispatched,
            skipped = outcome.skipped,
            requests = outcome.requests,
            refused = outcome.refused,
            corrupt = outcome.corrupt.len(),
            "batch sent"
        );
    });
    record_metrics(&outcome, started);
    if let Some(emf) = emf {
        emf.flush();
    }
    serde_json::to_value(outcome.response())
        .map_err(|err| InvocationError::Unsupported(err.to_string()))
}

fn record_metrics(outcome: &Dispatch, started: Instant) {
    metrics::counter!("Records").increment(outcome.records as u64);
    metrics::counter!("Dispatched").increment(outcome.dispatched as u64);
    metrics::counter!("SendRequests").increment(outcome.requests);
    metrics::counter!("Refused").increment(outcome.refused);
    metrics::counter!("Corrupt").increment(outcome.corrupt.len() as u64);
    metrics::counter!("BatchItemFailures").increment(u64::from(outcome.failure.is_some()));
    metrics::histogram!("BatchDuration").record(started.elapsed().as_secs_f64() * 1000.0);
}

/// Describes the dispatcher's metrics to an installed collector (units).
pub fn describe_metrics() {
    use metrics::Unit;
    metrics::describe_counter!("Records", Unit::Count, "stream records in the batch");
    metrics::describe_counter!(
        "Dispatched",
        Unit::Count,
        "messages the queue or the topic took"
    );
    metrics::describe_counter!(
        "SendRequests",
        Unit::Count,
        "SendMessageBatch or PublishBatch requests"
    );
    metrics::describe_counter!("Refused", Unit::Count, "entries or requests refused");
    metrics::describe_counter!("Corrupt", Unit::Count, "event items reported as corrupt");
    metrics::describe_counter!(
        "BatchItemFailures",
        Unit::Count,
        "batches that named a record for redelivery"
    );
    metrics::describe_histogram!(
        "BatchDuration",
        Unit::Milliseconds,
        "time to send the batch"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(pairs: &[(&str, &str)]) -> Result<DispatcherConfig, ConfigError> {
        DispatcherConfig::from_lookup(|name| {
            pairs
                .iter()
                .find(|(key, _)| *key == name)
                .map(|(_, value)| (*value).to_owned())
        })
    }

    const QUEUE: (&str, &str) = (
        "QUEUE_URL",
        "https://sqs.us-east-1.amazonaws.com/123456789012/events.fifo",
    );
    const FAILURES: (&str, &str) = (
        "FAILURE_QUEUE_URL",
        "https://sqs.us-east-1.amazonaws.com/123456789012/dispatch-failures",
    );

    const TOPIC: (&str, &str) = (
        "TOPIC_ARN",
        "arn:aws:sns:us-east-1:123456789012:events.fifo",
    );

    #[test]
    fn a_target_and_the_failure_queue_are_required_and_named_when_missing() {
        let missing = config(&[FAILURES]).unwrap_err();
        assert_eq!(missing, ConfigError::Missing("QUEUE_URL or TOPIC_ARN"));
        assert!(
            missing.to_string().contains("the SQS FIFO queue")
                && missing.to_string().contains("the SNS FIFO topic"),
            "{missing}"
        );
        let missing = config(&[QUEUE, ("FAILURE_QUEUE_URL", "  ")]).unwrap_err();
        assert_eq!(missing, ConfigError::Missing("FAILURE_QUEUE_URL"));
        let missing = config(&[TOPIC]).unwrap_err();
        assert_eq!(missing, ConfigError::Missing("FAILURE_QUEUE_URL"));
    }

    #[test]
    fn a_topic_instead_of_the_queue_and_never_both() {
        let topic = config(&[TOPIC, FAILURES]).expect("valid");
        assert_eq!(topic.target, Target::Topic(TOPIC.1.to_owned()));
        let queue = config(&[QUEUE, FAILURES]).expect("valid");
        assert_eq!(queue.target, Target::Queue(QUEUE.1.to_owned()));
        let both = config(&[QUEUE, TOPIC, FAILURES]).unwrap_err().to_string();
        assert!(
            both.contains("QUEUE_URL") && both.contains("TOPIC_ARN"),
            "{both}"
        );
    }

    #[test]
    fn the_constants_name_what_the_config_reads() {
        for name in TARGETS.iter().chain(&REQUIRED) {
            assert!(VARIABLES.contains(name), "{name}");
        }
        assert!(!REQUIRED.iter().any(|name| TARGETS.contains(name)));
    }

    #[test]
    fn the_queue_must_be_a_fifo_queue_url() {
        let standard = config(&[
            ("QUEUE_URL", "https://sqs.us-east-1.amazonaws.com/1/events"),
            FAILURES,
        ])
        .unwrap_err();
        assert!(standard.to_string().contains(".fifo"), "{standard}");
        let not_a_url = config(&[("QUEUE_URL", "events.fifo"), FAILURES]).unwrap_err();
        assert!(not_a_url.to_string().contains("QUEUE_URL"), "{not_a_url}");
    }

    #[test]
    fn defaults_and_powertools_names() {
        let ok = config(&[QUEUE, FAILURES]).expect("valid");
        assert_eq!(ok.metrics_namespace, "SequenceGuard");
        assert_eq!(ok.metrics_service, "sequence-guard-dispatcher");
        let named = config(&[QUEUE, FAILURES, ("POWERTOOLS_SERVICE_NAME", "orders")]).unwrap();
        assert_eq!(named.metrics_service, "orders");
    }
}
