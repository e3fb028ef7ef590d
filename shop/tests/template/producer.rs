//! The producer's half: the dispatcher's function, environment, stream
//! mapping, role, alarms and dashboard.

use super::*;

#[test]
fn the_dispatcher_is_the_dispatcher_binary_on_al2023_arm64() {
    let template = template();
    let function = resource(&template, "DispatcherFunction");
    assert_eq!(function["Type"], "AWS::Serverless::Function");
    assert_eq!(function["Metadata"]["BuildMethod"], "rust-cargolambda");
    assert_eq!(
        function["Metadata"]["BuildProperties"]["Binary"],
        "dispatcher"
    );
    assert!(
        std::path::Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/src/bin/dispatcher.rs"
        ))
        .exists(),
        "the dispatcher binary target"
    );
    let properties = &function["Properties"];
    assert_eq!(properties["Handler"], "bootstrap");
    assert_eq!(properties["Runtime"], "provided.al2023");
    assert_eq!(strings(&properties["Architectures"]), ["arm64"]);
    assert_eq!(properties["Tracing"], "Active");
    assert_eq!(properties["LoggingConfig"]["LogFormat"], "JSON");
    assert_eq!(
        intrinsic(&properties["LoggingConfig"]["LogGroup"]),
        "Ref DispatcherLogGroup"
    );
    // Its own log group: the one the role may write to, named for the function.
    let log_group =
        intrinsic(&resource(&template, "DispatcherLogGroup")["Properties"]["LogGroupName"]);
    assert_eq!(log_group, "Sub /aws/lambda/${AWS::StackName}-dispatcher");
    assert_eq!(
        intrinsic(&properties["FunctionName"]),
        "Sub ${AWS::StackName}-dispatcher"
    );
}

#[test]
fn the_dispatcher_environment_is_what_the_code_reads() {
    let template = template();
    let (variables, names) = environment(&template, "DispatcherFunction");
    for name in &names {
        assert!(
            dispatcher::VARIABLES.contains(name),
            "the template sets {name}, which the dispatcher does not read"
        );
    }
    for name in dispatcher::REQUIRED {
        assert!(
            names.contains(&name),
            "the dispatcher needs {name}; the template does not set it"
        );
    }
    let targets: Vec<&str> = dispatcher::TARGETS
        .into_iter()
        .filter(|name| names.contains(name))
        .collect();
    assert_eq!(
        targets,
        ["TOPIC_ARN"],
        "exactly one of {:?}: the topic every consumer subscribes to",
        dispatcher::TARGETS
    );
    assert_eq!(intrinsic(&variables["TOPIC_ARN"]), "Ref EventsTopic");
    assert_eq!(
        intrinsic(&variables["FAILURE_QUEUE_URL"]),
        "Ref DispatchFailureQueue"
    );
    assert_eq!(
        intrinsic(&variables["METRICS_NAMESPACE"]),
        "Ref MetricsNamespace"
    );
    // Its own Service dimension, not the projector's.
    assert_eq!(
        intrinsic(&variables["METRICS_SERVICE"]),
        format!("Sub {DISPATCHER_SERVICE}")
    );

    // The failure queue keeps what it is given for as long as SQS allows.
    let failures = &resource(&template, "DispatchFailureQueue")["Properties"];
    assert!(
        failures["FifoQueue"].is_null(),
        "an on-failure destination is a standard queue"
    );
    assert_eq!(failures["MessageRetentionPeriod"], 1_209_600);
    assert_eq!(failures["SqsManagedSseEnabled"], true);
}

#[test]
fn the_event_store_streams_new_images_to_the_dispatcher() {
    let template = template();
    let table = resource(&template, "EventsTable");
    assert_eq!(table["DeletionPolicy"], "Retain");
    let table = &table["Properties"];
    assert_eq!(table["StreamSpecification"]["StreamViewType"], "NEW_IMAGE");
    assert_eq!(
        table["TimeToLiveSpecification"]["AttributeName"],
        "expiresAt"
    );
    assert_eq!(table["TimeToLiveSpecification"]["Enabled"], true);
    assert_eq!(
        table["PointInTimeRecoverySpecification"]["PointInTimeRecoveryEnabled"],
        true
    );
    assert_eq!(table["SSESpecification"]["SSEEnabled"], true);

    let events = resource(&template, "DispatcherFunction")["Properties"]["Events"]
        .as_mapping()
        .expect("events");
    assert_eq!(events.len(), 1, "the stream is the dispatcher's one event");
    let event = &events["Stream"];
    assert_eq!(event["Type"], "DynamoDB");
    let properties = &event["Properties"];
    let keys: BTreeSet<&str> = properties
        .as_mapping()
        .expect("properties")
        .keys()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(
        keys,
        BTreeSet::from([
            "BatchSize",
            "BisectBatchOnFunctionError",
            "DestinationConfig",
            "FunctionResponseTypes",
            "MaximumRecordAgeInSeconds",
            "MaximumRetryAttempts",
            "ParallelizationFactor",
            "StartingPosition",
            "Stream",
        ]),
        "no filter: the function must see corrupt items to report them"
    );
    assert_eq!(
        intrinsic(&properties["Stream"]),
        "GetAtt EventsTable.StreamArn"
    );
    assert_eq!(properties["StartingPosition"], "TRIM_HORIZON");
    // One batch per shard at a time: a stream's events go out in order.
    assert_eq!(properties["ParallelizationFactor"], 1);
    assert_eq!(
        strings(&properties["FunctionResponseTypes"]),
        ["ReportBatchItemFailures"]
    );
    assert_eq!(properties["BisectBatchOnFunctionError"], true);
    assert_eq!(
        intrinsic(&properties["DestinationConfig"]["OnFailure"]["Destination"]),
        "GetAtt DispatchFailureQueue.Arn"
    );
    assert_eq!(properties["DestinationConfig"]["OnFailure"]["Type"], "SQS");

    // The batch size: a parameter whose every allowed value the mapping takes.
    assert_eq!(
        intrinsic(&properties["BatchSize"]),
        "Ref DispatcherBatchSize"
    );
    let min = parameter_number(&template, "DispatcherBatchSize", "MinValue");
    let max = parameter_number(&template, "DispatcherBatchSize", "MaxValue");
    assert!(
        (1..=10_000).contains(&min) && (1..=10_000).contains(&max),
        "DispatcherBatchSize allows {min}..={max}"
    );
    assert_eq!(
        parameter_number(&template, "DispatcherBatchSize", "Default"),
        100
    );
}

/// A record the mapping gives up on is a hole: the consumer parks every later
/// event of its stream behind it until someone resends it. So, by default,
/// the mapping retries a failing batch for as long as the stream keeps it
/// (-1, -1: the stream's 24 hours bound it), and the iterator-age alarm
/// calls someone long before the stream trims it.
#[test]
fn the_dispatcher_mapping_retries_until_the_stream_trims_and_the_alarm_calls_first() {
    let template = template();
    let properties =
        &resource(&template, "DispatcherFunction")["Properties"]["Events"]["Stream"]["Properties"];
    // -1 is for ever; a bounded value is within what the API takes (it
    // refuses a record age of 0 to 59 s).
    for (property, bounded) in [
        ("MaximumRetryAttempts", 0..=10_000),
        ("MaximumRecordAgeInSeconds", 60..=604_800),
    ] {
        let value = &properties[property];
        assert_eq!(
            number_by_default(&template, value),
            -1,
            "{property}: by default the mapping never gives up on a record"
        );
        for allowed in allowed_numbers(&template, value) {
            assert!(
                allowed == -1 || bounded.contains(&allowed),
                "{property} may be {allowed}, which the mapping refuses"
            );
        }
    }
    // Still the on-failure destination: it receives nothing by default, but a
    // bounded value set for an incident sends what it skips there.
    assert_eq!(
        intrinsic(&properties["DestinationConfig"]["OnFailure"]["Destination"]),
        "GetAtt DispatchFailureQueue.Arn"
    );

    // The guard: the alarm on the oldest unsent record fires, and notifies,
    // while most of the stream's 24 hours are left to act in.
    let alarm = &resource(&template, "DispatcherIteratorAgeAlarm")["Properties"];
    assert_eq!(alarm["Namespace"], "AWS/Lambda");
    assert_eq!(alarm["MetricName"], "IteratorAge");
    assert_eq!(alarm["Statistic"], "Maximum");
    assert_eq!(alarm["ComparisonOperator"], "GreaterThanThreshold");
    assert_eq!(
        intrinsic(&alarm["Dimensions"][0]["Value"]),
        "Ref DispatcherFunction"
    );
    assert!(
        one_or_many(&alarm["AlarmActions"])
            .iter()
            .any(|action| intrinsic(action) == "Ref AlarmTopic"),
        "the alarm notifies"
    );
    let window = alarm["Period"].as_i64().expect("a period")
        * alarm["EvaluationPeriods"]
            .as_i64()
            .expect("evaluation periods");
    let threshold = &alarm["Threshold"];
    let default_ms = number_by_default(&template, threshold);
    assert!(
        default_ms / 1000 + window <= 60 * 60,
        "by default the alarm fires within the hour (threshold {default_ms} ms, window {window} s)"
    );
    let highest_ms = allowed_numbers(&template, threshold)
        .into_iter()
        .max()
        .expect("a threshold");
    assert!(
        highest_ms / 1000 + window <= STREAM_RETENTION_SECONDS / 2,
        "the alarm may wait {highest_ms} ms + {window} s: less than half the stream's retention left to act"
    );
}

#[test]
fn the_dispatcher_role_grants_only_what_it_calls() {
    let template = template();
    let properties = &resource(&template, "DispatcherFunction")["Properties"];
    // An explicit role, so SAM attaches none of its managed policies.
    assert_eq!(intrinsic(&properties["Role"]), "GetAtt DispatcherRole.Arn");
    assert!(
        properties["Policies"].is_null(),
        "SAM ignores Policies with a Role"
    );

    let grants = lambda_role_grants(&template, "DispatcherRole");
    let granted = |service: &str| granted(&grants, service);
    for (action, _) in &grants {
        assert!(
            ["sqs:", "sns:", "kms:", "dynamodb:", "logs:", "xray:"]
                .iter()
                .any(|service| action.starts_with(service)),
            "{action}: the dispatcher calls no such service"
        );
    }

    // SNS: exactly the actions the code calls, on the events topic only;
    // KMS: what SNS asks of a publisher to a topic under a customer key, on
    // that key only.
    assert_eq!(granted("sns:"), BTreeSet::from(dispatcher::SNS_ACTIONS));
    assert_eq!(
        granted_on(&grants, "sns:"),
        BTreeSet::from(["Ref EventsTopic".to_owned()])
    );
    assert_eq!(
        intrinsic(&resource(&template, "EventsTopic")["Properties"]["KmsMasterKeyId"]),
        "Ref EventsTopicKey"
    );
    assert_eq!(
        granted("kms:"),
        BTreeSet::from(["kms:Decrypt", "kms:GenerateDataKey"])
    );
    assert_eq!(
        granted_on(&grants, "kms:"),
        BTreeSet::from(["GetAtt EventsTopicKey.Arn".to_owned()])
    );

    // SQS: exactly the actions the code calls, on the failure queue only:
    // the events go through the topic, never straight to a queue.
    assert_eq!(granted("sqs:"), BTreeSet::from(dispatcher::SQS_ACTIONS));
    assert_eq!(
        granted_on(&grants, "sqs:"),
        BTreeSet::from(["GetAtt DispatchFailureQueue.Arn".to_owned()]),
        "sqs:SendMessage on the failure queue only"
    );

    // DynamoDB: what the event source mapping reads the stream with, on the
    // event store's stream only; nothing that writes.
    assert_eq!(
        granted("dynamodb:"),
        BTreeSet::from([
            "dynamodb:DescribeStream",
            "dynamodb:GetRecords",
            "dynamodb:GetShardIterator",
            "dynamodb:ListStreams",
        ])
    );
    for (action, resources) in &grants {
        if !action.starts_with("dynamodb:") {
            continue;
        }
        for resource in resources {
            assert!(
                resource == "GetAtt EventsTable.StreamArn"
                    || resource == "Sub ${EventsTable.Arn}/stream/*",
                "{action} on {resource}: only the event store's stream"
            );
        }
    }
    for write in [
        "dynamodb:PutItem",
        "dynamodb:UpdateItem",
        "dynamodb:DeleteItem",
        "dynamodb:BatchWriteItem",
        "dynamodb:TransactWriteItems",
    ] {
        assert!(!granted("dynamodb:").contains(write), "{write}");
    }

    // Logs: its own log group; X-Ray: the two write actions of active tracing.
    for (action, resources) in &grants {
        if action.starts_with("logs:") {
            assert_eq!(resources, &["GetAtt DispatcherLogGroup.Arn"], "{action}");
        }
    }
    assert_eq!(
        granted("logs:"),
        BTreeSet::from(["logs:CreateLogStream", "logs:PutLogEvents"])
    );
    assert_eq!(
        granted("xray:"),
        BTreeSet::from(["xray:PutTelemetryRecords", "xray:PutTraceSegments"])
    );
}

#[test]
fn the_dispatcher_alarms_and_dashboard_watch_metrics_it_emits() {
    let template = template();
    let resources = template["Resources"].as_mapping().expect("resources");

    // Alarms on the dispatcher's Service dimension watch its metrics.
    let mut watched = BTreeSet::new();
    for (name, alarm) in resources {
        if alarm["Type"] != "AWS::CloudWatch::Alarm" {
            continue;
        }
        let properties = &alarm["Properties"];
        let dispatcher_service = one_or_many(&properties["Dimensions"])
            .iter()
            .any(|dimension| {
                dimension["Name"] == "Service"
                    && intrinsic(&dimension["Value"]) == format!("Sub {DISPATCHER_SERVICE}")
            });
        if !dispatcher_service {
            continue;
        }
        let metric = properties["MetricName"].as_str().expect("metric name");
        assert!(
            dispatcher::METRICS.contains(&metric),
            "{name:?} watches {metric}, which the dispatcher does not emit"
        );
        assert_eq!(intrinsic(&properties["Namespace"]), "Ref MetricsNamespace");
        watched.insert(metric.to_owned());
    }
    assert!(
        watched.contains("Corrupt"),
        "an alarm on corrupt event items"
    );

    // The AWS metrics of the dispatcher: iterator age and errors.
    for (alarm, metric) in [
        ("DispatcherIteratorAgeAlarm", "IteratorAge"),
        ("DispatcherErrorsAlarm", "Errors"),
    ] {
        let properties = &resource(&template, alarm)["Properties"];
        assert_eq!(properties["Namespace"], "AWS/Lambda");
        assert_eq!(properties["MetricName"], metric);
        assert_eq!(
            intrinsic(&properties["Dimensions"][0]["Value"]),
            "Ref DispatcherFunction"
        );
    }
    assert_eq!(
        intrinsic(&resource(&template, "DispatcherIteratorAgeAlarm")["Properties"]["Threshold"]),
        "Ref IteratorAgeThresholdMs"
    );
    let failures = &resource(&template, "DispatchFailureQueueAlarm")["Properties"];
    assert_eq!(failures["MetricName"], "ApproximateNumberOfMessagesVisible");
    assert_eq!(
        intrinsic(&failures["Dimensions"][0]["Value"]),
        "GetAtt DispatchFailureQueue.QueueName"
    );

    // The dashboard: the dispatcher's custom metrics are its, the projector's
    // are the projector's; the producer's widgets go with the producer.
    let emitted = sequence_guard::metrics::emitted();
    let dispatcher_service = DISPATCHER_SERVICE.replace("${AWS::StackName}", "<AWS::StackName>");
    let mut shown = BTreeSet::new();
    for [namespace, metric, dimension, value] in dashboard_metrics(&template, true) {
        if namespace != "<MetricsNamespace>" {
            continue;
        }
        assert_eq!(dimension, "Service", "{metric}");
        if value == dispatcher_service {
            assert!(
                dispatcher::METRICS.contains(&metric.as_str()),
                "the dashboard shows {metric}, which the dispatcher does not emit"
            );
            shown.insert(metric);
        } else {
            assert_eq!(value, "<AWS::StackName>", "{metric}");
            assert!(
                emitted.contains(&metric.as_str()),
                "the dashboard shows {metric}, which the projector does not emit"
            );
        }
    }
    for metric in dispatcher::METRICS
        .iter()
        .filter(|metric| **metric != "ColdStart")
    {
        assert!(shown.contains(*metric), "the dashboard shows {metric}");
    }
    let aws: BTreeSet<(String, String)> = dashboard_metrics(&template, true)
        .into_iter()
        .filter(|[_, _, _, value]| {
            value == "<DispatcherFunction>" || value == "<DispatchFailureQueue.QueueName>"
        })
        .map(|[_, metric, _, value]| (metric, value))
        .collect();
    for (metric, value) in [
        ("IteratorAge", "<DispatcherFunction>"),
        ("Errors", "<DispatcherFunction>"),
        ("Throttles", "<DispatcherFunction>"),
        ("Duration", "<DispatcherFunction>"),
        (
            "ApproximateNumberOfMessagesVisible",
            "<DispatchFailureQueue.QueueName>",
        ),
    ] {
        assert!(
            aws.contains(&(metric.to_owned(), value.to_owned())),
            "the dashboard shows {metric} of {value}"
        );
    }
    // Without the producer: valid, and nothing of the dispatcher.
    for [_, metric, _, value] in dashboard_metrics(&template, false) {
        assert!(
            value != dispatcher_service && !value.contains("Dispatch"),
            "{metric} of {value} without the producer"
        );
    }
}
