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

pub use crate::sqs::{MAX_SQS_ID, sqs_body_char, valid_sqs_id, valid_trace_header};
pub use record::{
    Corrupt, Message, Read, deduplication_id, group_id, read, resend_deduplication_id,
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
