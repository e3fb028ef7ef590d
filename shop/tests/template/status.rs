//! The second consumer: the first one again, on its own queue, table,
//! role, alarms, query and dashboard row.

use super::*;

/// The status consumer's resources; each carries `WithStatusConsumer`:
/// the first consumer's, every one (one definition renders both).
const STATUS: [&str; 25] = [
    "StatusDeadLetterQueue",
    "StatusQueue",
    "StatusQueuePolicy",
    "StatusSubscriptionDeadLetterQueue",
    "StatusSubscriptionDeadLetterQueuePolicy",
    "StatusQueueSubscription",
    "StatusTable",
    "StatusProjectorLogGroup",
    "StatusProjectorRole",
    "StatusProjectorFunction",
    "StatusDeadLetterQueueAlarm",
    "StatusUndeliveredAlarm",
    "StatusOldestMessageAlarm",
    "StatusFunctionErrorsAlarm",
    "StatusFunctionThrottlesAlarm",
    "StatusGapsSustainedAlarm",
    "StatusNotCreatedSustainedAlarm",
    "StatusInvalidSustainedAlarm",
    "StatusParkedTooLongAlarm",
    "StatusParkingFullAlarm",
    "StatusConflictAlarm",
    "StatusRejectedAlarm",
    "StatusHandlerErrorAlarm",
    "StatusSweepIncompleteAlarm",
    "StatusStuckStreamsQuery",
];

/// The second consumer (docs/event-store.md, Many consumers): deployed on demand, only with
/// the producer's topic, and the projector again on its own queue, table
/// and role, none of them shared.
#[test]
fn the_status_consumer_is_the_projector_again_on_its_own_queue_table_and_role() {
    let template = template();
    let parameter = &template["Parameters"]["DeployStatusConsumer"];
    assert_eq!(parameter["Default"], "false");
    assert_eq!(strings(&parameter["AllowedValues"]), ["true", "false"]);
    let (and, parts) = function(&template["Conditions"]["WithStatusConsumer"]).expect("And");
    assert_eq!(and, "And");
    let (equals, arguments) = function(&parts[0]).expect("Equals");
    assert_eq!(equals, "Equals");
    assert_eq!(intrinsic(&arguments[0]), "Ref DeployStatusConsumer");
    assert_eq!(arguments[1], "true");
    assert_eq!(
        intrinsic(&parts[1]),
        "Condition WithProducer",
        "the status consumer subscribes to the producer's topic: never without it"
    );
    let rule = &template["Rules"]["StatusConsumerNeedsTheProducer"];
    assert_eq!(
        intrinsic(
            &function(&rule["Assertions"][0]["Assert"])
                .expect("Equals")
                .1[0]
        ),
        "Ref DeployProducer",
        "asked for without the producer, the stack is refused"
    );

    // Its resources, and only they, carry its condition; nothing else names
    // one of them but in its branch of an `!If [WithStatusConsumer, ..]`.
    let resources = template["Resources"].as_mapping().expect("resources");
    let status: BTreeSet<String> = resources
        .iter()
        .filter(|(_, item)| item["Condition"] == "WithStatusConsumer")
        .filter_map(|(name, _)| name.as_str().map(str::to_owned))
        .collect();
    assert_eq!(
        status,
        STATUS.iter().map(|name| (*name).to_owned()).collect()
    );
    let outputs = template["Outputs"].as_mapping().expect("outputs");
    for (name, item) in resources.iter().chain(outputs) {
        let name = name.as_str().expect("a name");
        if item["Condition"] == "WithStatusConsumer" {
            continue;
        }
        let mut named = BTreeSet::new();
        references_without(item, "WithStatusConsumer", &mut named);
        let from_status: Vec<&String> = named.intersection(&status).collect();
        assert!(
            from_status.is_empty(),
            "{name} names {from_status:?} without the WithStatusConsumer condition"
        );
    }

    // The function: the status-projector binary, configured as the projector.
    let function = resource(&template, "StatusProjectorFunction");
    assert_eq!(
        function["Metadata"]["BuildProperties"]["Binary"],
        "status-projector"
    );
    assert!(
        std::path::Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/src/bin/status-projector.rs"
        ))
        .exists(),
        "the status-projector binary target"
    );
    let properties = &function["Properties"];
    let projector = &resource(&template, "ProjectorFunction")["Properties"];
    for property in [
        "Handler",
        "Runtime",
        "Architectures",
        "Tracing",
        "MemorySize",
        "Timeout",
    ] {
        assert_eq!(properties[property], projector[property], "{property}");
    }
    assert_eq!(
        intrinsic(&properties["Role"]),
        "GetAtt StatusProjectorRole.Arn"
    );
    assert_eq!(
        intrinsic(&properties["LoggingConfig"]["LogGroup"]),
        "Ref StatusProjectorLogGroup"
    );
    let (variables, names) = environment(&template, "StatusProjectorFunction");
    for name in &names {
        assert!(
            VARIABLES.contains(name) || RUNTIME_VARIABLES.contains(name),
            "{name}: the code does not read it"
        );
    }
    assert_eq!(intrinsic(&variables["TABLE_NAME"]), "Ref StatusTable");
    assert_eq!(
        intrinsic(&variables["METRICS_SERVICE"]),
        "Sub ${AWS::StackName}-status",
        "its own Service dimension"
    );
    let (projector_variables, _) = environment(&template, "ProjectorFunction");
    for variable in [
        "METRICS_NAMESPACE",
        "GAP_POLICY",
        "PARK_AFTER_RECEIVES",
        "MAX_PARKED_PER_STREAM",
        "GLIBC_TUNABLES",
    ] {
        assert_eq!(
            variables[variable], projector_variables[variable],
            "{variable}"
        );
    }
    let events = &properties["Events"];
    assert_eq!(events["Queue"]["Type"], "SQS");
    assert_eq!(
        intrinsic(&events["Queue"]["Properties"]["Queue"]),
        "GetAtt StatusQueue.Arn"
    );
    assert_eq!(
        events["Queue"]["Properties"],
        {
            let mut expected = projector["Events"]["Queue"]["Properties"].clone();
            expected["Queue"] = events["Queue"]["Properties"]["Queue"].clone();
            expected
        },
        "the projector's batch size, partial batch responses and concurrency"
    );
    assert_eq!(
        events["ParkedSweep"]["Properties"]["Schedule"],
        "rate(5 minutes)"
    );

    // Its queue subscribes to the topic (raw, unfiltered, its own policy:
    // see the fan-out test) and redrives to its own dead-letter queue.
    assert!(subscribed_queues(&template).contains(&(
        "StatusQueueSubscription".to_owned(),
        "StatusQueue".to_owned()
    )));
    let queue = &resource(&template, "StatusQueue")["Properties"];
    let events_queue = &resource(&template, "EventsQueue")["Properties"];
    for property in [
        "VisibilityTimeout",
        "MessageRetentionPeriod",
        "DeduplicationScope",
        "FifoThroughputLimit",
        "SqsManagedSseEnabled",
    ] {
        assert_eq!(queue[property], events_queue[property], "{property}");
    }
    assert_eq!(
        intrinsic(&queue["RedrivePolicy"]["deadLetterTargetArn"]),
        "GetAtt StatusDeadLetterQueue.Arn"
    );

    // Its role: the projector's grants, on its own queue, table and logs.
    let grants = lambda_role_grants(&template, "StatusProjectorRole");
    let projector_grants = lambda_role_grants(&template, "ProjectorRole");
    for service in ["sqs:", "dynamodb:", "logs:", "xray:"] {
        assert_eq!(
            granted(&grants, service),
            granted(&projector_grants, service),
            "{service}"
        );
    }
    for (action, _) in &grants {
        assert!(
            ["sqs:", "dynamodb:", "logs:", "xray:"]
                .iter()
                .any(|service| action.starts_with(service)),
            "{action}"
        );
    }
    for (service, on) in [
        ("sqs:", &["GetAtt StatusQueue.Arn"][..]),
        // Its table, and a gap's events in the event store (a Query on
        // STREAM# items: events_table.rs).
        (
            "dynamodb:",
            &["GetAtt StatusTable.Arn", "GetAtt EventsTable.Arn"][..],
        ),
        ("logs:", &["GetAtt StatusProjectorLogGroup.Arn"][..]),
    ] {
        assert_eq!(
            granted_on(&grants, service),
            on.iter()
                .map(|on| (*on).to_owned())
                .collect::<BTreeSet<_>>(),
            "{service}"
        );
    }

    // Its table: the contract's key schema and TTL, kept like the projection.
    let table = resource(&template, "StatusTable");
    let projection = resource(&template, "ProjectionTable");
    assert_eq!(table["DeletionPolicy"], "Retain");
    assert_eq!(table["Properties"], projection["Properties"]);
    assert_eq!(
        table["Properties"]["TimeToLiveSpecification"]["AttributeName"],
        TTL_ATTRIBUTE
    );

    // Its alarms: every alarm the first consumer has, on the same metric,
    // watching its own queue, function or Service dimension, notifying.
    let own = |value: &str| {
        value
            .replace("Events", "Status")
            .replace("ProjectorFunction", "StatusProjectorFunction")
            .replace("Ref AWS::StackName", "Sub ${AWS::StackName}-status")
    };
    let alarms: Vec<&str> = resources
        .iter()
        .filter(|(_, item)| item["Type"] == "AWS::CloudWatch::Alarm")
        .filter(|(_, item)| item["Condition"].is_null() || item["Condition"] == "WithProducer")
        .filter_map(|(name, _)| name.as_str())
        .filter(|name| !name.starts_with("Dispatch"))
        .collect();
    assert!(alarms.len() >= 14, "{alarms:?}");
    for alarm in alarms {
        let twin = if alarm.starts_with("Events") {
            alarm.replacen("Events", "Status", 1)
        } else {
            format!("Status{alarm}")
        };
        let first = &resource(&template, alarm)["Properties"];
        let properties = &resource(&template, &twin)["Properties"];
        assert_eq!(properties["MetricName"], first["MetricName"], "{twin}");
        assert_eq!(properties["Threshold"], first["Threshold"], "{twin}");
        assert_eq!(
            intrinsic(&properties["Dimensions"][0]["Value"]),
            own(&intrinsic(&first["Dimensions"][0]["Value"])),
            "{twin} watches its own"
        );
        assert!(
            one_or_many(&properties["AlarmActions"])
                .iter()
                .any(|action| intrinsic(action) == "Ref AlarmTopic"),
            "{twin} notifies"
        );
    }
    for metric in ["Gap", "NotCreated", "SweepIncomplete"] {
        assert!(
            resources
                .iter()
                .any(|(_, item)| item["Condition"] == "WithStatusConsumer"
                    && item["Properties"]["MetricName"] == metric),
            "the status consumer is alarmed for {metric}"
        );
    }
    // Its log query reads its own log group.
    assert_eq!(
        intrinsic(
            &resource(&template, "StatusStuckStreamsQuery")["Properties"]["LogGroupNames"][0]
        ),
        "Ref StatusProjectorLogGroup"
    );

    // The dashboard: its lines with it, none without it.
    let emitted = sequence_guard::metrics::emitted();
    let all = dashboard_metrics_with(&template, &["WithProducer", "WithStatusConsumer"]);
    let mut shown = BTreeSet::new();
    for [namespace, metric, _, value] in &all {
        if value == "<AWS::StackName>-status" {
            assert_eq!(namespace, "<MetricsNamespace>");
            assert!(emitted.contains(&metric.as_str()), "{metric}");
        }
        if value.contains("Status") || value.ends_with("-status") {
            shown.insert((metric.clone(), value.clone()));
        }
    }
    for (metric, value) in [
        ("Applied", "<AWS::StackName>-status"),
        (
            "ApproximateNumberOfMessagesVisible",
            "<StatusQueue.QueueName>",
        ),
        (
            "ApproximateNumberOfMessagesVisible",
            "<StatusDeadLetterQueue.QueueName>",
        ),
        ("Errors", "<StatusProjectorFunction>"),
    ] {
        assert!(
            shown.contains(&(metric.to_owned(), value.to_owned())),
            "the dashboard shows {metric} of {value}: {shown:?}"
        );
    }
    for conditions in [&["WithProducer"][..], &[]] {
        for [_, metric, _, value] in dashboard_metrics_with(&template, conditions) {
            assert!(
                !value.contains("Status") && !value.ends_with("-status"),
                "{metric} of {value} without the status consumer"
            );
        }
    }
}
