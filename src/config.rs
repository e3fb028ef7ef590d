//! Configuration from the environment, read in one place.
//!
//! | variable             | meaning                                              | default   |
//! | -------------------- | ---------------------------------------------------- | --------- |
//! | `TABLE_NAME`         | the DynamoDB table (required)                        |           |
//! | `DEDUP_TTL_SECONDS`  | how long deduplication records are kept              | 604800 (7 days) |
//! | `DEADLINE_MARGIN_MS` | time kept in hand before the invocation's deadline   | 500       |
//! | `CONDITION_RETRIES`  | re-decisions after a lost conditional write          | 3         |
//! | `GAP_POLICY`         | `park`: park a gap that keeps coming back; `retry`: always fail it | `park` |
//! | `PARK_AFTER_RECEIVES`| the delivery (`ApproximateReceiveCount`) from which a gap is parked; keep it below the queue's `maxReceiveCount` | 3 |
//! | `MAX_PARKED_PER_STREAM` | the most events parked on one entity (1 to 10000) | 1000 |
//! | `METRICS_NAMESPACE`  | CloudWatch namespace of the metrics                  | `SequenceGuard` |
//! | `METRICS_SERVICE`    | the `Service` dimension of the metrics               | `sequence-guard` |
//!
//! The AWS SDK reads its own variables (`AWS_REGION`,
//! `AWS_ENDPOINT_URL_DYNAMODB`, ...).

use std::time::Duration;

use crate::runner::{GapPolicy, RunnerConfig};

/// The largest `MAX_PARKED_PER_STREAM`: the entity item's `parked` number set
/// must stay far below DynamoDB's 400 KB item size.
pub const MAX_PARKED_LIMIT: u64 = 10_000;

/// Every variable the projector reads (besides the SDK's and the runtime's).
pub const VARIABLES: [&str; 9] = [
    "TABLE_NAME",
    "DEDUP_TTL_SECONDS",
    "DEADLINE_MARGIN_MS",
    "CONDITION_RETRIES",
    "GAP_POLICY",
    "PARK_AFTER_RECEIVES",
    "MAX_PARKED_PER_STREAM",
    "METRICS_NAMESPACE",
    "METRICS_SERVICE",
];

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("the environment variable {0} is required (the DynamoDB table to project into)")]
    Missing(&'static str),
    #[error("the environment variable {name} must be {expected}, got `{value}`")]
    Invalid {
        name: &'static str,
        expected: &'static str,
        value: String,
    },
}

/// The projector's configuration.
#[derive(Debug, Clone)]
pub struct Config {
    pub table_name: String,
    pub runner: RunnerConfig,
    pub metrics_namespace: String,
    pub metrics_service: String,
}

impl Config {
    pub fn from_env() -> Result<Config, ConfigError> {
        Config::from_lookup(|name| std::env::var(name).ok())
    }

    /// Reads the configuration through `lookup` (the environment, or a map in tests).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Config, ConfigError> {
        let table_name = lookup("TABLE_NAME")
            .filter(|name| !name.trim().is_empty())
            .ok_or(ConfigError::Missing("TABLE_NAME"))?;
        let defaults = RunnerConfig::default();
        let number = |name: &'static str, default: u64| -> Result<u64, ConfigError> {
            match lookup(name) {
                None => Ok(default),
                Some(value) => value.trim().parse().map_err(|_| ConfigError::Invalid {
                    name,
                    expected: "a whole number",
                    value,
                }),
            }
        };
        let within = |name: &'static str,
                      default: u64,
                      range: std::ops::RangeInclusive<u64>,
                      expected: &'static str|
         -> Result<u64, ConfigError> {
            let value = number(name, default)?;
            if range.contains(&value) {
                Ok(value)
            } else {
                Err(ConfigError::Invalid {
                    name,
                    expected,
                    value: value.to_string(),
                })
            }
        };
        let gap_policy = match lookup("GAP_POLICY").map(|value| value.trim().to_ascii_lowercase()) {
            None => defaults.gap_policy,
            Some(value) if value.is_empty() || value == "park" => GapPolicy::Park,
            Some(value) if value == "retry" => GapPolicy::Retry,
            Some(_) => {
                return Err(ConfigError::Invalid {
                    name: "GAP_POLICY",
                    expected: "`park` or `retry`",
                    value: lookup("GAP_POLICY").unwrap_or_default(),
                });
            }
        };
        let park_after = within(
            "PARK_AFTER_RECEIVES",
            u64::from(defaults.park_after_receives),
            1..=u64::from(u32::MAX),
            "a whole number from 1 (the first delivery)",
        )?;
        let max_parked = within(
            "MAX_PARKED_PER_STREAM",
            defaults.max_parked_per_stream as u64,
            1..=MAX_PARKED_LIMIT,
            "a whole number from 1 to 10000",
        )?;
        let margin_ms = u64::try_from(defaults.deadline_margin.as_millis()).unwrap_or(u64::MAX);
        let retries = number("CONDITION_RETRIES", u64::from(defaults.condition_retries))?;
        let text = |name: &str, default: &str| {
            lookup(name)
                .filter(|value| !value.trim().is_empty())
                .unwrap_or_else(|| default.to_owned())
        };
        Ok(Config {
            table_name,
            metrics_namespace: text("METRICS_NAMESPACE", "SequenceGuard"),
            metrics_service: text("METRICS_SERVICE", "sequence-guard"),
            runner: RunnerConfig {
                dedup_ttl_seconds: number("DEDUP_TTL_SECONDS", defaults.dedup_ttl_seconds)?,
                deadline_margin: Duration::from_millis(number("DEADLINE_MARGIN_MS", margin_ms)?),
                condition_retries: u32::try_from(retries).map_err(|_| ConfigError::Invalid {
                    name: "CONDITION_RETRIES",
                    expected: "a whole number below 2^32",
                    value: retries.to_string(),
                })?,
                gap_policy,
                park_after_receives: u32::try_from(park_after).unwrap_or(u32::MAX),
                max_parked_per_stream: usize::try_from(max_parked).unwrap_or(usize::MAX),
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn config(vars: &[(&str, &str)]) -> Result<Config, ConfigError> {
        let vars: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Config::from_lookup(|name| vars.get(name).cloned())
    }

    #[test]
    fn table_name_is_required_and_the_error_names_it() {
        let err = config(&[]).expect_err("must fail");
        assert_eq!(err, ConfigError::Missing("TABLE_NAME"));
        assert!(err.to_string().contains("TABLE_NAME"));
        assert_eq!(
            config(&[("TABLE_NAME", " ")]).expect_err("blank"),
            ConfigError::Missing("TABLE_NAME")
        );
    }

    #[test]
    fn defaults_apply_and_variables_override_them() {
        let defaults = config(&[("TABLE_NAME", "t")]).expect("valid");
        assert_eq!(defaults.table_name, "t");
        assert_eq!(defaults.runner.dedup_ttl_seconds, 604_800);
        assert_eq!(defaults.runner.deadline_margin, Duration::from_millis(500));
        assert_eq!(defaults.metrics_namespace, "SequenceGuard");
        assert_eq!(defaults.metrics_service, "sequence-guard");
        let set = config(&[
            ("TABLE_NAME", "t"),
            ("DEDUP_TTL_SECONDS", "60"),
            ("DEADLINE_MARGIN_MS", "250"),
        ])
        .expect("valid");
        assert_eq!(set.runner.dedup_ttl_seconds, 60);
        assert_eq!(set.runner.deadline_margin, Duration::from_millis(250));
    }

    #[test]
    fn parking_defaults_and_bad_values() {
        let defaults = config(&[("TABLE_NAME", "t")]).expect("valid");
        assert_eq!(defaults.runner.gap_policy, GapPolicy::Park);
        assert_eq!(defaults.runner.park_after_receives, 3);
        assert_eq!(defaults.runner.max_parked_per_stream, 1000);
        let set = config(&[
            ("TABLE_NAME", "t"),
            ("GAP_POLICY", "Retry"),
            ("PARK_AFTER_RECEIVES", "2"),
            ("MAX_PARKED_PER_STREAM", "10"),
        ])
        .expect("valid");
        assert_eq!(set.runner.gap_policy, GapPolicy::Retry);
        assert_eq!(set.runner.park_after_receives, 2);
        assert_eq!(set.runner.max_parked_per_stream, 10);
        for (name, value) in [
            ("GAP_POLICY", "drop"),
            ("PARK_AFTER_RECEIVES", "0"),
            ("PARK_AFTER_RECEIVES", "three"),
            ("MAX_PARKED_PER_STREAM", "0"),
            ("MAX_PARKED_PER_STREAM", "10001"),
        ] {
            let err = config(&[("TABLE_NAME", "t"), (name, value)]).expect_err(value);
            assert!(
                err.to_string().contains(name) && err.to_string().contains(value),
                "{err}"
            );
        }
    }

    #[test]
    fn a_malformed_number_is_named() {
        let err =
            config(&[("TABLE_NAME", "t"), ("DEDUP_TTL_SECONDS", "a week")]).expect_err("must fail");
        assert!(
            err.to_string().contains("DEDUP_TTL_SECONDS") && err.to_string().contains("a week")
        );
    }
}
