//! The first consumer: its function, environment, table, queue, alarms,
//! and the retention and deadline figures the code relies on.

use super::*;

#[test]
fn the_function_is_the_projector_binary_on_al2023_arm64() {
    let template = template();
    let function = resource(&template, "ProjectorFunction");
    assert_eq!(function["Type"], "AWS::Serverless::Function");
    assert_eq!(function["Metadata"]["BuildMethod"], "rust-cargolambda");
    assert_eq!(
        function["Metadata"]["BuildProperties"]["Binary"],
        "projector"
    );
    // The binary target exists: cargo built it for this test.
    assert!(std::path::Path::new(env!("CARGO_BIN_EXE_projector")).exists());
    let properties = &function["Properties"];
    assert_eq!(properties["Handler"], "bootstrap");
    assert_eq!(properties["Runtime"], "provided.al2023");
    assert_eq!(strings(&properties["Architectures"]), ["arm64"]);
    assert_eq!(properties["LoggingConfig"]["LogFormat"], "JSON");
    assert_eq!(
        function["Properties"]["Tracing"], "Active",
        "the trace shows each batch's DynamoDB calls"
    );
}

#[test]
fn the_environment_is_what_the_code_reads() {
    let template = template();
    let (variables, names) = environment(&template, "ProjectorFunction");
    for name in &names {
        assert!(
            VARIABLES.contains(name) || RUNTIME_VARIABLES.contains(name),
            "the template sets {name}, which the code does not read"
        );
    }
    assert_tunables(&variables["GLIBC_TUNABLES"]);
    assert_eq!(intrinsic(&variables["TABLE_NAME"]), "Ref ProjectionTable");
    assert_eq!(
        intrinsic(&variables["METRICS_NAMESPACE"]),
        "Ref MetricsNamespace"
    );
    assert_eq!(
        intrinsic(&variables["METRICS_SERVICE"]),
        "Ref AWS::StackName"
    );
    // Parking: wired to parameters whose defaults are the code's.
    let defaults = RunnerConfig::default();
    for (variable, parameter, default) in [
        ("GAP_POLICY", "GapPolicy", "park".to_owned()),
        (
            "PARK_AFTER_RECEIVES",
            "ParkAfterReceives",
            defaults.park_after_receives.to_string(),
        ),
        (
            "MAX_PARKED_PER_STREAM",
            "MaxParkedPerStream",
            defaults.max_parked_per_entity.to_string(),
        ),
    ] {
        assert_eq!(intrinsic(&variables[variable]), format!("Ref {parameter}"));
        let value = &template["Parameters"][parameter]["Default"];
        let value = value
            .as_str()
            .map(str::to_owned)
            .or_else(|| value.as_u64().map(|number| number.to_string()));
        assert_eq!(value, Some(default), "{parameter}");
    }
    assert_eq!(defaults.gap_policy, sequence_guard::runner::GapPolicy::Park);
    // Parking happens before the dead-letter queue, by default.
    assert!(
        template["Parameters"]["ParkAfterReceives"]["Default"].as_u64()
            < template["Parameters"]["MaxReceiveCount"]["Default"].as_u64()
    );
    // The sweep of parked events runs on a schedule.
    let sweep = &resource(&template, "ProjectorFunction")["Properties"]["Events"]["ParkedSweep"];
    assert_eq!(sweep["Type"], "Schedule");
    assert_eq!(sweep["Properties"]["Schedule"], "rate(5 minutes)");
}

#[test]
fn the_table_has_the_contract_key_schema_and_ttl() {
    let template = template();
    let table = resource(&template, "ProjectionTable");
    assert_eq!(table["DeletionPolicy"], "Retain");
    assert_eq!(table["UpdateReplacePolicy"], "Retain");
    let properties = &table["Properties"];
    assert_eq!(properties["BillingMode"], "PAY_PER_REQUEST");
    let keys: Vec<(String, String)> = properties["KeySchema"]
        .as_sequence()
        .expect("key schema")
        .iter()
        .map(|key| {
            (
                key["AttributeName"].as_str().unwrap_or("").into(),
                key["KeyType"].as_str().unwrap_or("").into(),
            )
        })
        .collect();
    assert_eq!(
        keys,
        [
            ("pk".to_owned(), "HASH".to_owned()),
            ("sk".to_owned(), "RANGE".to_owned())
        ]
    );
    for definition in properties["AttributeDefinitions"]
        .as_sequence()
        .expect("definitions")
    {
        assert_eq!(definition["AttributeType"], "S");
    }
    assert_eq!(
        properties["TimeToLiveSpecification"]["AttributeName"],
        TTL_ATTRIBUTE
    );
    assert_eq!(properties["TimeToLiveSpecification"]["Enabled"], true);
    assert_eq!(
        properties["PointInTimeRecoverySpecification"]["PointInTimeRecoveryEnabled"],
        true
    );
    assert_eq!(properties["SSESpecification"]["SSEEnabled"], true);
}

#[test]
fn the_queue_feeds_the_function_with_partial_batch_responses() {
    let template = template();
    let event = &resource(&template, "ProjectorFunction")["Properties"]["Events"]["Queue"];
    assert_eq!(event["Type"], "SQS");
    assert_eq!(
        intrinsic(&event["Properties"]["Queue"]),
        "GetAtt EventsQueue.Arn"
    );
    assert_eq!(event["Properties"]["BatchSize"], 10);
    assert_eq!(
        strings(&event["Properties"]["FunctionResponseTypes"]),
        ["ReportBatchItemFailures"]
    );
    assert_eq!(
        intrinsic(&event["Properties"]["ScalingConfig"]["MaximumConcurrency"]),
        "Ref MaximumConcurrency"
    );

    let queue = &resource(&template, "EventsQueue")["Properties"];
    assert_eq!(queue["FifoQueue"], true);
    assert_eq!(queue["SqsManagedSseEnabled"], true);
    assert_eq!(
        intrinsic(&queue["RedrivePolicy"]["deadLetterTargetArn"]),
        "GetAtt EventsDeadLetterQueue.Arn"
    );
    assert_eq!(
        intrinsic(&queue["RedrivePolicy"]["maxReceiveCount"]),
        "Ref MaxReceiveCount"
    );
    assert_eq!(template["Parameters"]["MaxReceiveCount"]["Default"], 5);
    let dead_letters = &resource(&template, "EventsDeadLetterQueue")["Properties"];
    assert_eq!(dead_letters["FifoQueue"], true);
    assert_eq!(dead_letters["MessageRetentionPeriod"], 1_209_600);

    // The visibility timeout is six times the function timeout, for every timeout allowed.
    let allowed = template["Parameters"]["FunctionTimeout"]["AllowedValues"]
        .as_sequence()
        .expect("allowed");
    for timeout in allowed {
        let timeout = timeout.as_u64().expect("a number");
        let visibility =
            &template["Mappings"]["VisibilityTimeout"][timeout.to_string().as_str()]["Seconds"];
        assert_eq!(visibility.as_u64(), Some(timeout * 6), "timeout {timeout}");
    }
}

#[test]
fn the_alarms_watch_metrics_the_code_emits() {
    let template = template();
    let emitted = sequence_guard::metrics::emitted();
    for alarm in [
        "GapsSustainedAlarm",
        "InvalidSustainedAlarm",
        "ParkedTooLongAlarm",
        "ParkingFullAlarm",
        "ConflictAlarm",
    ] {
        let properties = &resource(&template, alarm)["Properties"];
        let metric = properties["MetricName"].as_str().expect("metric name");
        assert!(
            emitted.contains(&metric),
            "{alarm} watches {metric}, which the code does not emit"
        );
        assert_eq!(intrinsic(&properties["Namespace"]), "Ref MetricsNamespace");
        assert_eq!(properties["Dimensions"][0]["Name"], "Service");
    }
    assert_eq!(
        template["Parameters"]["MetricsNamespace"]["Default"],
        "SequenceGuard"
    );
}

/// A deduplication record outlives every copy of its message: a message may
/// wait out the queue's retention, then (FIFO dead-letter queues restart the
/// clock) the dead-letter queue's, then a redrive. Applied again after its
/// record expired, an `InventoryAdjusted` would count twice.
#[test]
fn dedup_records_outlive_every_queue_plus_a_redrive() {
    let template = template();
    let resources = template["Resources"].as_mapping().expect("resources");
    let retention = |properties: &Value| match &properties["MessageRetentionPeriod"] {
        // SQS's default retention is 4 days.
        Value::Null => 345_600,
        value => value
            .as_u64()
            .unwrap_or_else(|| panic!("MessageRetentionPeriod is not a number here: {value:?}")),
    };
    let mut longest = 0;
    for (name, resource) in resources {
        if resource["Type"] != "AWS::SQS::Queue" {
            continue;
        }
        let properties = &resource["Properties"];
        let mut lifetime = retention(properties);
        let target = intrinsic(&properties["RedrivePolicy"]["deadLetterTargetArn"]);
        if let Some(dead_letters) = target
            .strip_prefix("GetAtt ")
            .and_then(|target| target.strip_suffix(".Arn"))
        {
            lifetime += retention(&resource_properties(&template, dead_letters));
        }
        eprintln!("{name:?}: messages live up to {lifetime} s");
        longest = longest.max(lifetime);
    }
    assert!(longest > 0, "no queue found");
    let variables =
        &resource(&template, "ProjectorFunction")["Properties"]["Environment"]["Variables"];
    let ttl = match &variables["DEDUP_TTL_SECONDS"] {
        Value::Null => RunnerConfig::default().dedup_ttl_seconds,
        value => value
            .as_u64()
            .unwrap_or_else(|| panic!("DEDUP_TTL_SECONDS is not a number here: {value:?}")),
    };
    assert!(
        ttl >= longest + REDRIVE_MARGIN_SECONDS,
        "DEDUP_TTL_SECONDS {ttl} is shorter than the queues' {longest} s plus a {REDRIVE_MARGIN_SECONDS} s redrive margin"
    );
}

/// The deadline margin leaves most of the shortest allowed timeout to work in.
#[test]
fn the_deadline_margin_fits_every_allowed_timeout() {
    let template = template();
    let shortest = template["Parameters"]["FunctionTimeout"]["AllowedValues"]
        .as_sequence()
        .expect("allowed")
        .iter()
        .filter_map(Value::as_u64)
        .min()
        .expect("a timeout");
    let variables =
        &resource(&template, "ProjectorFunction")["Properties"]["Environment"]["Variables"];
    let margin_ms = match &variables["DEADLINE_MARGIN_MS"] {
        Value::Null => {
            u64::try_from(RunnerConfig::default().deadline_margin.as_millis()).expect("ms")
        }
        value => value
            .as_u64()
            .unwrap_or_else(|| panic!("DEADLINE_MARGIN_MS is not a number here: {value:?}")),
    };
    assert!(
        margin_ms * 10 <= shortest * 1000,
        "DEADLINE_MARGIN_MS {margin_ms} takes more than a tenth of the {shortest} s timeout"
    );
}
