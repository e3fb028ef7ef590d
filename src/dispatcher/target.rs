//! Where the events go: one SQS FIFO queue (`QUEUE_URL`), or one SNS FIFO
//! topic (`TOPIC_ARN`) that each consumer's queue subscribes to (docs/event-store.md,
//! Many consumers). Exactly one of them.

use super::send::{Queue, Refused, SendError};
use super::{Message, SnsTopic, SqsQueue};

/// The variables that name where the events go: exactly one is set.
pub const TARGETS: [&str; 2] = ["QUEUE_URL", "TOPIC_ARN"];

/// Where the events go, as configured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// `QUEUE_URL`: the URL of an SQS FIFO queue (one consumer).
    Queue(String),
    /// `TOPIC_ARN`: the ARN of an SNS FIFO topic (any number of consumers,
    /// each with its own queue subscribed).
    Topic(String),
}

/// Whether `arn` is an SNS FIFO topic's: `arn:<partition>:sns:<region>:<account>:<name>.fifo`.
pub fn valid_topic_arn(arn: &str) -> bool {
    let parts: Vec<&str> = arn.split(':').collect();
    matches!(parts.as_slice(), ["arn", partition, "sns", region, account, name]
        if !partition.is_empty()
            && !region.is_empty()
            && !account.is_empty()
            && name.len() > ".fifo".len()
            && name.ends_with(".fifo"))
}

/// The dispatcher's [`Queue`]: the queue or the topic of its [`Target`].
#[derive(Debug, Clone)]
pub enum Destination {
    /// `SendMessageBatch` to the queue.
    Queue(SqsQueue),
    /// `PublishBatch` to the topic.
    Topic(SnsTopic),
}

impl Destination {
    /// The destination of `target`, with reports to `failure_queue_url`;
    /// the clients are built once, by the caller.
    pub fn new(
        target: &Target,
        sqs: aws_sdk_sqs::Client,
        sns: impl FnOnce() -> aws_sdk_sns::Client,
        failure_queue_url: impl Into<String>,
    ) -> Self {
        match target {
            Target::Queue(url) => Destination::Queue(SqsQueue::new(sqs, url, failure_queue_url)),
            Target::Topic(arn) => {
                Destination::Topic(SnsTopic::new(sns(), arn, sqs, failure_queue_url))
            }
        }
    }
}

impl Queue for Destination {
    async fn send(&self, entries: &[Message]) -> Result<Vec<Refused>, SendError> {
        match self {
            Destination::Queue(queue) => queue.send(entries).await,
            Destination::Topic(topic) => topic.send(entries).await,
        }
    }

    async fn report(&self, report: &str) -> Result<(), SendError> {
        match self {
            Destination::Queue(queue) => queue.report(report).await,
            Destination::Topic(topic) => topic.report(report).await,
        }
    }

    fn blames_message(&self, refusal: &Refused) -> bool {
        match self {
            Destination::Queue(queue) => queue.blames_message(refusal),
            Destination::Topic(topic) => topic.blames_message(refusal),
        }
    }

    fn service(&self) -> &'static str {
        match self {
            Destination::Queue(queue) => queue.service(),
            Destination::Topic(topic) => topic.service(),
        }
    }
}
