//! Configuration from the environment, read in one place.
//!
//! Every variable has a range; the function refuses to start outside it,
//! naming the variable and the range. `replay` reads the same variables
//! (all but `TABLE_NAME`, which it takes as an argument).
//!
//! | variable             | meaning                                              | range | default   |
//! | -------------------- | ---------------------------------------------------- | ----- | --------- |
//! | `TABLE_NAME`         | the DynamoDB table (required)                        | a table name (3 to 255 of `a-z A-Z 0-9 _ . -`) or a table ARN | |
//! | `DEDUP_TTL_SECONDS`  | how long deduplication records are kept; keep it above the queue's and the dead-letter queue's retention together, plus the time a redrive may wait | 86400 (1 day) to 31536000 (365 days) | 3024000 (35 days) |
//! | `DEADLINE_MARGIN_MS` | time kept in hand before the invocation's deadline; keep it well below the function's timeout | 0 to 10000 | 500 |
//! | `CONDITION_RETRIES`  | re-decisions after a lost conditional write          | 0 to 10 | 3 |
//! | `GAP_POLICY`         | `park`: park a gap that keeps coming back; `retry`: always fail it | `park`, `retry` | `park` |
//! | `PARK_AFTER_RECEIVES`| the delivery (`ApproximateReceiveCount`) from which a gap is parked; keep it below the queue's `maxReceiveCount` | 1 to 1000 | 3 |
//! | `MAX_PARKED_PER_STREAM` | the most events parked on one entity | 1 to 10000 | 1000 |
//! | `WARM_ENTITIES`      | the most entity items kept as this process last wrote them, so that a hot stream's next batch is not read first; `0`: none | 0 to 100000 | 1000 |
//! | `EVENT_STORE_TABLE`  | every consumer's of an event store: the event store's table, which a gap's events are read from (and applied at once), a process's steps append to (required there), and a consumer that opens personal data reads its subjects' keys in. Unset: gaps wait, then park | as `TABLE_NAME` | |
//! | `PERSONAL_DATA_KEY`  | a consumer's whose domain declares personal data (unread elsewhere): the KMS key (id, ARN or `alias/...`) the subjects' data keys are wrapped under, or `local:<32 bytes in base64url>` for local runs and tests (refused on Lambda: the master key would sit in the function's configuration); their items are read from `EVENT_STORE_TABLE`. Unset: nothing is opened, and a sealed body fails | a KMS key id, ARN or alias | |
//! | `METRICS_NAMESPACE`  | CloudWatch namespace of the metrics                  | 1 to 255 of `a-z A-Z 0-9 . - _ / # : space`, not starting with `AWS/` | `SequenceGuard` |
//! | `METRICS_SERVICE`    | the `Service` dimension of the metrics               | 1 to 1024 characters | `sequence-guard` |
//! | `POWERTOOLS_METRICS_NAMESPACE`, `POWERTOOLS_SERVICE_NAME` | Powertools for AWS Lambda's names for the two above; when set, they win | as above | |
//!
//! The AWS SDK reads its own variables (`AWS_REGION`,
//! `AWS_ENDPOINT_URL_DYNAMODB`, ...).

use std::ops::RangeInclusive;
use std::time::Duration;

use crate::runner::{GapPolicy, RunnerConfig};

/// The largest `MAX_PARKED_PER_STREAM`: the entity item's `parked` number set
/// must stay far below DynamoDB's 400 KB item size.
pub const MAX_PARKED_LIMIT: u64 = 10_000;

/// `DEDUP_TTL_SECONDS`: from a day to a year.
pub const DEDUP_TTL_RANGE: RangeInclusive<u64> = 86_400..=31_536_000;
/// `DEADLINE_MARGIN_MS`: up to 10 s (a Lambda function runs 900 s at most,
/// and mostly far less: a margin as long as the timeout skips every message).
pub const DEADLINE_MARGIN_RANGE: RangeInclusive<u64> = 0..=10_000;
/// `CONDITION_RETRIES`.
pub const CONDITION_RETRIES_RANGE: RangeInclusive<u64> = 0..=10;
/// `PARK_AFTER_RECEIVES`: SQS's `maxReceiveCount` is at most 1000.
pub const PARK_AFTER_RECEIVES_RANGE: RangeInclusive<u64> = 1..=1000;
/// `MAX_PARKED_PER_STREAM`.
pub const MAX_PARKED_RANGE: RangeInclusive<u64> = 1..=MAX_PARKED_LIMIT;
/// `WARM_ENTITIES`: each entry is one entity's item (at most 400 KB, mostly
/// well under 1 KB).
pub const WARM_ENTITIES_RANGE: RangeInclusive<u64> = 0..=100_000;

/// Every variable the projector reads (besides the SDK's and the runtime's).
pub const VARIABLES: [&str; 14] = [
    "TABLE_NAME",
    "EVENT_STORE_TABLE",
    "PERSONAL_DATA_KEY",
    "DEDUP_TTL_SECONDS",
    "DEADLINE_MARGIN_MS",
    "CONDITION_RETRIES",
    "GAP_POLICY",
    "PARK_AFTER_RECEIVES",
    "MAX_PARKED_PER_STREAM",
    "WARM_ENTITIES",
    "METRICS_NAMESPACE",
    "METRICS_SERVICE",
    "POWERTOOLS_METRICS_NAMESPACE",
    "POWERTOOLS_SERVICE_NAME",
];

/// Why the configuration is refused: the variable, and what it must be.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// A required variable is unset or blank (`TABLE_NAME`; the
    /// dispatcher's `QUEUE_URL or TOPIC_ARN`, `FAILURE_QUEUE_URL`).
    #[error("the environment variable {0} is required ({purpose})", purpose = purpose(.0))]
    Missing(&'static str),
    /// A variable is set outside its range.
    #[error("the environment variable {name} must be {expected}, got `{value}`")]
    Invalid {
        /// The variable's name.
        name: &'static str,
        /// What it must be (`a whole number from 0 to 10`).
        expected: String,
        /// The value given: its first 64 characters, and `...` when it is
        /// longer.
        value: String,
    },
}

/// What a required variable names, for the error that says it is missing.
fn purpose(name: &str) -> &'static str {
    match name {
        "TABLE_NAME" => "the DynamoDB table to project into",
        "QUEUE_URL" => "the SQS FIFO queue the dispatcher sends events to",
        "QUEUE_URL or TOPIC_ARN" => {
            "the SQS FIFO queue the dispatcher sends events to, or the SNS FIFO topic it \
             publishes them to"
        }
        "FAILURE_QUEUE_URL" => "the SQS queue corrupt event items are reported to",
        _ => "see docs/deploy.md, Configuration",
    }
}

impl ConfigError {
    pub(crate) fn invalid(name: &'static str, expected: impl Into<String>, value: &str) -> Self {
        // A value can be long: enough of it to recognise.
        let mut shown: String = value.chars().take(64).collect();
        if shown.len() < value.len() {
            shown.push_str("...");
        }
        ConfigError::Invalid {
            name,
            expected: expected.into(),
            value: shown,
        }
    }
}

/// The projector's configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// `TABLE_NAME`: the table's name or ARN, trimmed.
    pub table_name: String,
    /// `EVENT_STORE_TABLE`: the event store's table a process appends to,
    /// trimmed; `None` when unset.
    pub event_store_table: Option<String>,
    /// `PERSONAL_DATA_KEY`: the KMS key personal data's keys are wrapped
    /// under, trimmed; `None` when unset.
    pub personal_data_key: Option<String>,
    /// The runner's part (see [`runner_from_lookup`]).
    pub runner: RunnerConfig,
    /// The CloudWatch namespace of the metrics: `POWERTOOLS_METRICS_NAMESPACE`,
    /// else `METRICS_NAMESPACE`, else `SequenceGuard`.
    pub metrics_namespace: String,
    /// The `Service` dimension of the metrics: `POWERTOOLS_SERVICE_NAME`, else
    /// `METRICS_SERVICE`, else `sequence-guard`.
    pub metrics_service: String,
}

impl Config {
    /// Reads the configuration from the process's environment.
    pub fn from_env() -> Result<Config, ConfigError> {
        Config::from_lookup(|name| std::env::var(name).ok())
    }

    /// Reads the configuration through `lookup` (the environment, or a map in tests).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Config, ConfigError> {
        let table_name = lookup("TABLE_NAME")
            .filter(|name| !name.trim().is_empty())
            .ok_or(ConfigError::Missing("TABLE_NAME"))?;
        if !valid_table(table_name.trim()) {
            return Err(ConfigError::invalid(
                "TABLE_NAME",
                "a table name (3 to 255 of a-z A-Z 0-9 _ . -) or a table ARN",
                &table_name,
            ));
        }
        let event_store_table = lookup("EVENT_STORE_TABLE")
            .map(|name| name.trim().to_owned())
            .filter(|name| !name.is_empty());
        if let Some(name) = &event_store_table
            && !valid_table(name)
        {
            return Err(ConfigError::invalid(
                "EVENT_STORE_TABLE",
                "a table name (3 to 255 of a-z A-Z 0-9 _ . -) or a table ARN",
                name,
            ));
        }
        let personal_data_key = lookup("PERSONAL_DATA_KEY")
            .map(|key| key.trim().to_owned())
            .filter(|key| !key.is_empty());
        if let Some(key) = &personal_data_key
            && (key.len() > 2048 || key.chars().any(char::is_whitespace))
        {
            // Not shown: `local:` holds a key itself.
            return Err(ConfigError::invalid(
                "PERSONAL_DATA_KEY",
                "a KMS key id, ARN or alias, or local:<32 bytes in base64url>",
                "(not shown)",
            ));
        }
        if let Some(key) = &personal_data_key
            && key.starts_with(LOCAL_KEY)
            && on_lambda(&lookup)
        {
            // The master key itself, in the function's configuration.
            return Err(ConfigError::invalid(
                "PERSONAL_DATA_KEY",
                "a KMS key id, ARN or alias on Lambda (local:... holds the master key itself, \
                 in plain text in the function's configuration: it is for local runs and tests)",
                "local:... (not shown)",
            ));
        }
        let (metrics_namespace, metrics_service) = metrics_names(&lookup, "sequence-guard")?;
        Ok(Config {
            table_name: table_name.trim().to_owned(),
            event_store_table,
            personal_data_key,
            runner: runner_from_lookup(lookup)?,
            metrics_namespace,
            metrics_service,
        })
    }
}

/// How `PERSONAL_DATA_KEY` names a master key of the process's own.
const LOCAL_KEY: &str = "local:";

/// Whether the process runs on AWS Lambda (or Lambda Managed Instances):
/// Lambda sets `LAMBDA_TASK_ROOT` and `AWS_LAMBDA_INITIALIZATION_TYPE` for
/// every function, and a function cannot set them itself; a local runtime
/// (`cargo lambda watch`, a test's Runtime API) sets the runtime's
/// variables (`AWS_LAMBDA_RUNTIME_API`, `AWS_LAMBDA_FUNCTION_NAME`), not
/// these.
fn on_lambda(lookup: &impl Fn(&str) -> Option<String>) -> bool {
    ["LAMBDA_TASK_ROOT", "AWS_LAMBDA_INITIALIZATION_TYPE"]
        .iter()
        .any(|name| lookup(name).is_some_and(|value| !value.trim().is_empty()))
}

/// The metrics' namespace and `Service` dimension, through `lookup`:
/// Powertools for AWS Lambda's names win when set, as teams expect; then
/// ours; then `SequenceGuard` and `default_service`.
pub(crate) fn metrics_names(
    lookup: &impl Fn(&str) -> Option<String>,
    default_service: &str,
) -> Result<(String, String), ConfigError> {
    let text = |name: &str, default: &str| {
        lookup(name)
            .map(|value| value.trim().to_owned())
            .filter(|value| !value.is_empty())
            .unwrap_or_else(|| default.to_owned())
    };
    // Powertools for AWS Lambda's names win when set, as teams expect.
    let either = |powertools: &str, ours: &str, default: &str| {
        let named = text(powertools, "");
        if named.is_empty() {
            text(ours, default)
        } else {
            named
        }
    };
    let metrics_namespace = either(
        "POWERTOOLS_METRICS_NAMESPACE",
        "METRICS_NAMESPACE",
        "SequenceGuard",
    );
    if !valid_namespace(&metrics_namespace) {
        return Err(ConfigError::invalid(
            "METRICS_NAMESPACE",
            "1 to 255 of a-z A-Z 0-9 . - _ / # : and space, not starting with AWS/",
            &metrics_namespace,
        ));
    }
    let metrics_service = either(
        "POWERTOOLS_SERVICE_NAME",
        "METRICS_SERVICE",
        default_service,
    );
    if metrics_service.chars().count() > 1024 {
        return Err(ConfigError::invalid(
            "METRICS_SERVICE",
            "1 to 1024 characters",
            &metrics_service,
        ));
    }
    Ok((metrics_namespace, metrics_service))
}

/// The runner's part of the configuration, from the environment: what
/// `replay` reads, as the function does.
pub fn runner_from_env() -> Result<RunnerConfig, ConfigError> {
    runner_from_lookup(|name| std::env::var(name).ok())
}

/// The runner's part of the configuration, through `lookup`.
pub fn runner_from_lookup(
    lookup: impl Fn(&str) -> Option<String>,
) -> Result<RunnerConfig, ConfigError> {
    let defaults = RunnerConfig::default();
    let within = |name: &'static str,
                  default: u64,
                  range: RangeInclusive<u64>|
     -> Result<u64, ConfigError> {
        let expected = || format!("a whole number from {} to {}", range.start(), range.end());
        let Some(value) = lookup(name).filter(|value| !value.trim().is_empty()) else {
            return Ok(default);
        };
        match value.trim().parse::<u64>() {
            Ok(number) if range.contains(&number) => Ok(number),
            _ => Err(ConfigError::invalid(name, expected(), &value)),
        }
    };
    let gap_policy = match lookup("GAP_POLICY") {
        None => defaults.gap_policy,
        Some(value) => match value.trim().to_ascii_lowercase().as_str() {
            "" | "park" => GapPolicy::Park,
            "retry" => GapPolicy::Retry,
            _ => {
                return Err(ConfigError::invalid(
                    "GAP_POLICY",
                    "`park` or `retry`",
                    &value,
                ));
            }
        },
    };
    let margin_ms = u64::try_from(defaults.deadline_margin.as_millis()).unwrap_or(u64::MAX);
    // Each range fits the field's type, so the conversions below cannot fail.
    let narrow = |value: u64| u32::try_from(value).unwrap_or(u32::MAX);
    Ok(RunnerConfig {
        dedup_ttl_seconds: within(
            "DEDUP_TTL_SECONDS",
            defaults.dedup_ttl_seconds,
            DEDUP_TTL_RANGE,
        )?,
        deadline_margin: Duration::from_millis(within(
            "DEADLINE_MARGIN_MS",
            margin_ms,
            DEADLINE_MARGIN_RANGE,
        )?),
        condition_retries: narrow(within(
            "CONDITION_RETRIES",
            u64::from(defaults.condition_retries),
            CONDITION_RETRIES_RANGE,
        )?),
        gap_policy,
        park_after_receives: narrow(within(
            "PARK_AFTER_RECEIVES",
            u64::from(defaults.park_after_receives),
            PARK_AFTER_RECEIVES_RANGE,
        )?),
        max_parked_per_entity: usize::try_from(within(
            "MAX_PARKED_PER_STREAM",
            defaults.max_parked_per_entity as u64,
            MAX_PARKED_RANGE,
        )?)
        .unwrap_or(usize::MAX),
        appends: defaults.appends,
        reacts_from: defaults.reacts_from,
        warm_entities: usize::try_from(within(
            "WARM_ENTITIES",
            defaults.warm_entities as u64,
            WARM_ENTITIES_RANGE,
        )?)
        .unwrap_or(usize::MAX),
    })
}

/// A DynamoDB table name (3 to 255 of `a-z A-Z 0-9 _ . -`) or a table's ARN.
fn valid_table(name: &str) -> bool {
    if name.starts_with("arn:") {
        return name.len() <= 1024 && name.contains(":table/");
    }
    (3..=255).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
}

/// A CloudWatch namespace.
fn valid_namespace(namespace: &str) -> bool {
    (1..=255).contains(&namespace.len())
        && !namespace.starts_with("AWS/")
        && namespace.chars().all(|c| {
            c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | '/' | '#' | ':' | ' ')
        })
}

mod dispatcher;
#[cfg(test)]
mod tests;

pub use dispatcher::{DispatcherConfig, target_from_lookup, target_from_values};
