//! The dispatcher's environment: where the events go (`QUEUE_URL` or
//! `TOPIC_ARN`, exactly one), where corrupt items are reported
//! (`FAILURE_QUEUE_URL`), and its metrics' names.

use super::ConfigError;
use crate::dispatcher::{Target, valid_topic_arn};

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
        let target = target_from_lookup(&lookup)?;
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
            super::metrics_names(&lookup, "sequence-guard-dispatcher")?;
        Ok(DispatcherConfig {
            target,
            failure_queue_url,
            metrics_namespace,
            metrics_service,
        })
    }
}

/// Reads `QUEUE_URL` and `TOPIC_ARN` through `lookup`.
pub fn target_from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Target, ConfigError> {
    target_from_values(lookup("QUEUE_URL"), lookup("TOPIC_ARN"))
}

/// The target of a queue URL and a topic ARN as given (blank is unset):
/// exactly one, a FIFO queue's URL or a FIFO topic's ARN.
pub fn target_from_values(
    queue_url: Option<String>,
    topic_arn: Option<String>,
) -> Result<Target, ConfigError> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dispatcher::{REQUIRED, TARGETS, VARIABLES};

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

    const URL: &str = "https://sqs.us-east-1.amazonaws.com/123456789012/events.fifo";
    const ARN: &str = "arn:aws:sns:us-east-1:123456789012:events.fifo";

    fn target(queue: Option<&str>, topic: Option<&str>) -> Result<Target, ConfigError> {
        target_from_values(queue.map(str::to_owned), topic.map(str::to_owned))
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
