//! Where the events go: one SQS FIFO queue (`QUEUE_URL`), or one SNS FIFO
//! topic (`TOPIC_ARN`) that each consumer's queue subscribes to (docs/event-store.md,
//! Many consumers). Exactly one of them.

use super::send::{Queue, Refused, SendError};
use super::{Outgoing, SnsTopic, SqsQueue};
use crate::config::ConfigError;

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

impl Target {
    /// Reads `QUEUE_URL` and `TOPIC_ARN` through `lookup`.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        Self::from_values(lookup("QUEUE_URL"), lookup("TOPIC_ARN"))
    }

    /// The target of a queue URL and a topic ARN as given (blank is unset):
    /// exactly one, a FIFO queue's URL or a FIFO topic's ARN.
    pub fn from_values(
        queue_url: Option<String>,
        topic_arn: Option<String>,
    ) -> Result<Self, ConfigError> {
        let set = |value: Option<String>| {
            value
                .map(|value| value.trim().to_owned())
                .filter(|value| !value.is_empty())
        };
        match (set(queue_url), set(topic_arn)) {
            (None, None) => Err(ConfigError::Missing("QUEUE_URL or TOPIC_ARN")),
            (Some(_), Some(arn)) => Err(ConfigError::invalid(
                "TOPIC_ARN",
                "unset while QUEUE_URL is set (the dispatcher sends to one queue or \
                 publishes to one topic, not both)",
                &arn,
            )),
            (Some(url), None) => {
                if !(url.starts_with("https://") || url.starts_with("http://")) {
                    return Err(ConfigError::invalid(
                        "QUEUE_URL",
                        "a queue URL (https://sqs.<region>.amazonaws.com/<account>/<name>.fifo)",
                        &url,
                    ));
                }
                if !url.ends_with(".fifo") {
                    return Err(ConfigError::invalid(
                        "QUEUE_URL",
                        "the URL of a FIFO queue (its name ends in .fifo)",
                        &url,
                    ));
                }
                Ok(Target::Queue(url))
            }
            (None, Some(arn)) => {
                if !valid_topic_arn(&arn) {
                    return Err(ConfigError::invalid(
                        "TOPIC_ARN",
                        "the ARN of an SNS FIFO topic (arn:aws:sns:<region>:<account>:<name>.fifo)",
                        &arn,
                    ));
                }
                Ok(Target::Topic(arn))
            }
        }
    }
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
    async fn send(&self, entries: &[Outgoing]) -> Result<Vec<Refused>, SendError> {
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

#[cfg(test)]
mod tests {
    use super::*;

    const URL: &str = "https://sqs.us-east-1.amazonaws.com/123456789012/events.fifo";
    const ARN: &str = "arn:aws:sns:us-east-1:123456789012:events.fifo";

    fn target(queue: Option<&str>, topic: Option<&str>) -> Result<Target, ConfigError> {
        Target::from_values(queue.map(str::to_owned), topic.map(str::to_owned))
    }

    #[test]
    fn one_of_a_queue_or_a_topic() {
        assert_eq!(target(Some(URL), None), Ok(Target::Queue(URL.to_owned())));
        assert_eq!(target(None, Some(ARN)), Ok(Target::Topic(ARN.to_owned())));
        assert_eq!(
            target(Some(URL), Some(" ")),
            Ok(Target::Queue(URL.to_owned())),
            "blank is unset"
        );
    }

    #[test]
    fn neither_or_both_is_refused_naming_both() {
        for refused in [
            target(None, None),
            target(Some(" "), Some("")),
            target(Some(URL), Some(ARN)),
        ] {
            let message = refused.expect_err("refused").to_string();
            assert!(
                message.contains("QUEUE_URL") && message.contains("TOPIC_ARN"),
                "{message}"
            );
        }
    }

    #[test]
    fn the_topic_must_be_a_fifo_topic_arn() {
        for bad in [
            "arn:aws:sns:us-east-1:123456789012:events",
            "arn:aws:sqs:us-east-1:123456789012:events.fifo",
            "events.fifo",
            "arn:aws:sns:us-east-1:123456789012:.fifo",
            "arn:aws:sns:us-east-1::events.fifo",
        ] {
            let message = target(None, Some(bad)).expect_err(bad).to_string();
            assert!(message.contains("TOPIC_ARN"), "{message}");
        }
        assert!(valid_topic_arn(
            "arn:aws-cn:sns:cn-north-1:123456789012:orders-events.fifo"
        ));
    }
}
