//! The environment read: each variable's defaults, ranges and refusals.

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
fn the_personal_data_key_is_read_trimmed_and_never_shown_in_an_error() {
    assert_eq!(
        config(&[("TABLE_NAME", "t-1")])
            .expect("valid")
            .personal_data_key,
        None
    );
    let set = config(&[("TABLE_NAME", "t-1"), ("PERSONAL_DATA_KEY", " alias/pd ")]).expect("valid");
    assert_eq!(set.personal_data_key.as_deref(), Some("alias/pd"));
    let secret = "local:c2VjcmV0IGtleSBtYXRlcmlhbCB0aGF0IG11c3Qgbm90IGxlYWs with space";
    let err = config(&[("TABLE_NAME", "t-1"), ("PERSONAL_DATA_KEY", secret)]).expect_err("refused");
    let text = err.to_string();
    assert!(
        text.contains("PERSONAL_DATA_KEY") && !text.contains("c2VjcmV0"),
        "{text}"
    );
}

/// A local master key is for local runs and tests: on Lambda it would
/// sit in the function's configuration in plain text, readable by
/// whoever may read the function, and outlive any erasure's reach.
#[test]
fn a_local_master_key_is_refused_on_lambda_naming_the_variable() {
    let local = "local:c2VjcmV0IGtleSBtYXRlcmlhbCB0aGF0IG11c3Qgbm90IGxlYWs";
    let with = |extra: &[(&str, &str)]| {
        let mut vars = vec![("TABLE_NAME", "t-1"), ("PERSONAL_DATA_KEY", local)];
        vars.extend_from_slice(extra);
        config(&vars)
    };
    // Locally, and under a local runtime (cargo lambda watch, the tests'
    // Runtime API: they set the runtime's variables, not Lambda's own).
    let runtime = [
        ("AWS_LAMBDA_RUNTIME_API", "127.0.0.1:9001"),
        ("AWS_LAMBDA_FUNCTION_NAME", "shop-projector"),
    ];
    for extra in [&[][..], &runtime[..]] {
        let config = with(extra).expect("a local key, off Lambda");
        assert_eq!(config.personal_data_key.as_deref(), Some(local));
    }
    // On Lambda (or Lambda Managed Instances): refused, naming the
    // variable, never showing the key.
    for lambda in [
        ("LAMBDA_TASK_ROOT", "/var/task"),
        ("AWS_LAMBDA_INITIALIZATION_TYPE", "on-demand"),
        ("AWS_LAMBDA_INITIALIZATION_TYPE", "lambda-managed-instances"),
    ] {
        let err = with(&[runtime[0], runtime[1], lambda]).expect_err("refused on Lambda");
        let text = err.to_string();
        assert!(
            matches!(
                err,
                ConfigError::Invalid {
                    name: "PERSONAL_DATA_KEY",
                    ..
                }
            ),
            "{text}"
        );
        assert!(
            text.contains("PERSONAL_DATA_KEY")
                && text.contains("KMS")
                && text.contains("local:")
                && !text.contains("c2VjcmV0"),
            "{text}"
        );
    }
    // A KMS key on Lambda is what the template gives.
    let kms = config(&[
        ("TABLE_NAME", "t-1"),
        (
            "PERSONAL_DATA_KEY",
            "arn:aws:kms:eu-west-1:123456789012:key/1",
        ),
        ("LAMBDA_TASK_ROOT", "/var/task"),
    ])
    .expect("a KMS key on Lambda");
    assert!(kms.personal_data_key.is_some());
}

#[test]
fn defaults_apply_and_variables_override_them() {
    let defaults = config(&[("TABLE_NAME", "t-1")]).expect("valid");
    assert_eq!(defaults.table_name, "t-1");
    assert_eq!(defaults.runner.dedup_ttl_seconds, 3_024_000);
    assert_eq!(defaults.runner.deadline_margin, Duration::from_millis(500));
    assert_eq!(defaults.metrics_namespace, "SequenceGuard");
    assert_eq!(defaults.metrics_service, "sequence-guard");
    let set = config(&[
        ("TABLE_NAME", "t-1"),
        ("DEDUP_TTL_SECONDS", "86400"),
        ("DEADLINE_MARGIN_MS", "250"),
    ])
    .expect("valid");
    assert_eq!(set.runner.dedup_ttl_seconds, 86_400);
    assert_eq!(set.runner.deadline_margin, Duration::from_millis(250));
}

#[test]
fn parking_defaults_and_bad_values() {
    let defaults = config(&[("TABLE_NAME", "t-1")]).expect("valid");
    assert_eq!(defaults.runner.gap_policy, GapPolicy::Park);
    assert_eq!(defaults.runner.park_after_receives, 3);
    assert_eq!(defaults.runner.max_parked_per_entity, 1000);
    let set = config(&[
        ("TABLE_NAME", "t-1"),
        ("GAP_POLICY", "Retry"),
        ("PARK_AFTER_RECEIVES", "2"),
        ("MAX_PARKED_PER_STREAM", "10"),
    ])
    .expect("valid");
    assert_eq!(set.runner.gap_policy, GapPolicy::Retry);
    assert_eq!(set.runner.park_after_receives, 2);
    assert_eq!(set.runner.max_parked_per_entity, 10);
    for (name, value) in [
        ("GAP_POLICY", "drop"),
        ("PARK_AFTER_RECEIVES", "0"),
        ("PARK_AFTER_RECEIVES", "three"),
        ("MAX_PARKED_PER_STREAM", "0"),
        ("MAX_PARKED_PER_STREAM", "10001"),
    ] {
        let err = config(&[("TABLE_NAME", "t-1"), (name, value)]).expect_err(value);
        assert!(
            err.to_string().contains(name) && err.to_string().contains(value),
            "{err}"
        );
    }
}

#[test]
fn a_malformed_number_is_named() {
    let err =
        config(&[("TABLE_NAME", "t-1"), ("DEDUP_TTL_SECONDS", "a week")]).expect_err("must fail");
    assert!(err.to_string().contains("DEDUP_TTL_SECONDS") && err.to_string().contains("a week"));
}

/// Values that would break the function in effect (every message
/// skipped, deduplication off, a namespace CloudWatch refuses) stop it
/// at start, naming the variable and the range.
#[test]
fn every_variable_is_refused_outside_its_range() {
    for (name, value, range) in [
        ("DEADLINE_MARGIN_MS", "3600000", "from 0 to 10000"),
        ("DEADLINE_MARGIN_MS", "-1", "from 0 to 10000"),
        ("DEDUP_TTL_SECONDS", "0", "from 86400 to 31536000"),
        ("DEDUP_TTL_SECONDS", "31536001", "from 86400 to 31536000"),
        ("CONDITION_RETRIES", "11", "from 0 to 10"),
        ("CONDITION_RETRIES", "4294967296", "from 0 to 10"),
        ("PARK_AFTER_RECEIVES", "1001", "from 1 to 1000"),
        ("MAX_PARKED_PER_STREAM", "10001", "from 1 to 10000"),
        ("TABLE_NAME", "a b", "a table name"),
        ("TABLE_NAME", "ab", "a table name"),
        ("METRICS_NAMESPACE", "AWS/Lambda", "not starting with AWS/"),
        ("METRICS_NAMESPACE", "bad\u{7}name", "1 to 255"),
    ] {
        let mut vars = vec![("TABLE_NAME", "t-1"), (name, value)];
        if name == "TABLE_NAME" {
            vars.remove(0);
        }
        let err = config(&vars).expect_err(value);
        let text = err.to_string();
        assert!(
            text.contains(name) && text.contains(range) && text.contains(value),
            "{name}={value}: {text}"
        );
    }
    let long = "s".repeat(1025);
    let err = config(&[("TABLE_NAME", "t-1"), ("METRICS_SERVICE", &long)]).expect_err("long");
    assert!(err.to_string().contains("METRICS_SERVICE"), "{err}");
    assert!(err.to_string().len() < 300, "the value is cut: {err}");
    // The edges are in range.
    let edges = config(&[
        (
            "TABLE_NAME",
            "arn:aws:dynamodb:eu-west-1:123456789012:table/projection",
        ),
        ("DEADLINE_MARGIN_MS", "0"),
        ("DEDUP_TTL_SECONDS", "31536000"),
        ("CONDITION_RETRIES", "10"),
        ("PARK_AFTER_RECEIVES", "1000"),
        ("METRICS_NAMESPACE", "Team/Orders #1: projections"),
    ])
    .expect("valid");
    assert_eq!(edges.runner.deadline_margin, Duration::ZERO);
    assert_eq!(edges.runner.park_after_receives, 1000);
}

/// `replay` reads the runner's variables with the same checks, without
/// a table name.
#[test]
fn the_runner_part_is_read_without_a_table() {
    let vars: HashMap<&str, &str> = [("GAP_POLICY", "retry"), ("PARK_AFTER_RECEIVES", "2")].into();
    let runner = runner_from_lookup(|name| vars.get(name).map(|v| v.to_string())).expect("valid");
    assert_eq!(runner.gap_policy, GapPolicy::Retry);
    assert_eq!(runner.park_after_receives, 2);
    let err = runner_from_lookup(|name| (name == "GAP_POLICY").then(|| "bogus".to_owned()))
        .expect_err("bogus");
    assert!(err.to_string().contains("GAP_POLICY"), "{err}");
}

/// Powertools for AWS Lambda's variables name the namespace and the
/// service when set; the defaults stay ours.
#[test]
fn powertools_names_win_when_set() {
    let set = config(&[
        ("TABLE_NAME", "t-1"),
        ("METRICS_NAMESPACE", "Ours"),
        ("POWERTOOLS_METRICS_NAMESPACE", "Orders"),
        ("POWERTOOLS_SERVICE_NAME", "order-projection"),
    ])
    .expect("valid");
    assert_eq!(
        (set.metrics_namespace.as_str(), set.metrics_service.as_str()),
        ("Orders", "order-projection")
    );
    let blank = config(&[("TABLE_NAME", "t-1"), ("POWERTOOLS_SERVICE_NAME", " ")]).expect("valid");
    assert_eq!(blank.metrics_service, "sequence-guard");
    let err = config(&[
        ("TABLE_NAME", "t-1"),
        ("POWERTOOLS_METRICS_NAMESPACE", "AWS/Lambda"),
    ])
    .expect_err("reserved");
    assert!(err.to_string().contains("METRICS_NAMESPACE"), "{err}");
}
