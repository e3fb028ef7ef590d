//! The producer's condition, the topic's fan-out to every consumer's queue,
//! the subscriptions' dead-letter queues, and queues and log groups kept like tables.

use super::*;

#[test]
fn the_producer_half_deploys_only_with_the_producer() {
    let template = template();
    let parameter = &template["Parameters"]["DeployProducer"];
    assert_eq!(
        parameter["Default"], "true",
        "one stack deploys both halves"
    );
    assert_eq!(strings(&parameter["AllowedValues"]), ["true", "false"]);
    let condition = &template["Conditions"]["WithProducer"];
    let (function_name, arguments) = function(condition).expect("an intrinsic");
    assert_eq!(function_name, "Equals");
    assert_eq!(intrinsic(&arguments[0]), "Ref DeployProducer");
    assert_eq!(arguments[1], "true");

    let resources = template["Resources"].as_mapping().expect("resources");
    let mut producer = BTreeSet::new();
    for (name, resource) in resources {
        let name = name.as_str().expect("a name");
        let conditional = resource["Condition"] == "WithProducer";
        assert_eq!(
            conditional,
            PRODUCER.contains(&name),
            "{name}: WithProducer on the producer's resources, and only on them"
        );
        if conditional {
            producer.insert(name.to_owned());
        }
    }
    assert_eq!(
        producer.len(),
        PRODUCER.len(),
        "every producer resource exists"
    );

    // Nothing unconditional names a producer resource, but in the producer's
    // branch of an `!If [WithProducer, ..]`.
    let outputs = template["Outputs"].as_mapping().expect("outputs");
    for (name, item) in resources.iter().chain(outputs) {
        let name = name.as_str().expect("a name");
        let mut named = BTreeSet::new();
        references(item, &mut named);
        for dependency in one_or_many(&item["DependsOn"]) {
            named.insert(dependency.as_str().unwrap_or("").to_owned());
        }
        // The status consumer and the payments process deploy only with
        // the producer (their conditions are checked in their own tests).
        let conditional = item["Condition"] == "WithProducer"
            || item["Condition"] == "WithStatusConsumer"
            || item["Condition"] == "WithPaymentsConsumer";
        let from_producer: Vec<&String> = named.intersection(&producer).collect();
        assert!(
            conditional || from_producer.is_empty(),
            "{name} names {from_producer:?} without the WithProducer condition"
        );
    }
    for output in PRODUCER_OUTPUTS {
        assert_eq!(
            template["Outputs"][output]["Condition"], "WithProducer",
            "{output}"
        );
    }
    for output in ["QueueUrl", "TableName", "FunctionName", "DashboardUrl"] {
        assert!(
            template["Outputs"][output]["Condition"].is_null(),
            "{output} is the consumer's"
        );
    }
}

/// docs/event-store.md, Many consumers: one SNS FIFO topic; each consumer's FIFO queue
/// subscribed raw (the body is the event's, byte for byte) and unfiltered
/// (a filtered event is a gap no consumer can tell from a lost one), with
/// its own dead-letter queue, taking messages from this topic only.
#[test]
fn the_events_topic_fans_out_to_each_consumers_queue_raw_and_unfiltered() {
    let template = template();
    let topic = &resource(&template, "EventsTopic")["Properties"];
    assert_eq!(topic["FifoTopic"], true);
    assert_eq!(topic["ContentBasedDeduplication"], false);
    assert!(
        intrinsic(&topic["TopicName"]).ends_with(".fifo"),
        "a FIFO topic's name ends in .fifo"
    );
    let key = resource(&template, &named_resource(&topic["KmsMasterKeyId"]));
    assert_eq!(key["Type"], "AWS::KMS::Key");
    assert_eq!(key["Properties"]["EnableKeyRotation"], true);

    let subscribed = subscribed_queues(&template);
    assert!(
        subscribed
            .iter()
            .any(|(name, queue)| name == "EventsQueueSubscription" && queue == "EventsQueue"),
        "the projector's queue subscribes: {subscribed:?}"
    );
    let resources = template["Resources"].as_mapping().expect("resources");
    for (name, queue) in &subscribed {
        let subscription = &resource(&template, name)["Properties"];
        assert_eq!(subscription["Protocol"], "sqs", "{name}");
        assert_eq!(subscription["RawMessageDelivery"], true, "{name}: raw");
        for filter in ["FilterPolicy", "FilterPolicyScope"] {
            assert!(
                subscription[filter].is_null(),
                "{name}: no {filter}: every consumer receives every event"
            );
        }
        assert_eq!(
            intrinsic(&subscription["Endpoint"]),
            format!("GetAtt {queue}.Arn")
        );
        let properties = &resource(&template, queue)["Properties"];
        assert_eq!(properties["FifoQueue"], true, "{queue}");
        assert_eq!(properties["ContentBasedDeduplication"], false, "{queue}");
        let dead_letters = named_resource(&properties["RedrivePolicy"]["deadLetterTargetArn"]);
        assert_eq!(
            resource(&template, &dead_letters)["Properties"]["FifoQueue"],
            true,
            "{queue}: its own FIFO dead-letter queue"
        );

        // Its queue policy: the topic's deliveries, and nothing else.
        let policies: Vec<&Value> = resources
            .values()
            .filter(|item| {
                item["Type"] == "AWS::SQS::QueuePolicy"
                    && one_or_many(&item["Properties"]["Queues"])
                        .iter()
                        .any(|named| intrinsic(named) == format!("Ref {queue}"))
            })
            .collect();
        assert_eq!(policies.len(), 1, "{queue}: one queue policy");
        let statements = one_or_many(&policies[0]["Properties"]["PolicyDocument"]["Statement"]);
        assert_eq!(statements.len(), 1, "{queue}: {statements:?}");
        let statement = statements[0];
        assert_eq!(statement["Effect"], "Allow");
        assert_eq!(statement["Principal"]["Service"], "sns.amazonaws.com");
        assert_eq!(statement["Action"], "sqs:SendMessage");
        assert_eq!(
            intrinsic(&statement["Resource"]),
            format!("GetAtt {queue}.Arn")
        );
        assert_eq!(
            intrinsic(&statement["Condition"]["ArnEquals"]["aws:SourceArn"]),
            "Ref EventsTopic",
            "{queue}: only this topic may send"
        );
        // Subscribed once the queue takes the topic's deliveries.
        let depends: Vec<String> = one_or_many(&resource(&template, name)["DependsOn"])
            .into_iter()
            .filter_map(|item| item.as_str().map(str::to_owned))
            .collect();
        let policy_name = resources
            .iter()
            .find(|(_, item)| std::ptr::eq(*item, policies[0]))
            .and_then(|(name, _)| name.as_str())
            .expect("the policy's name");
        assert!(
            depends.iter().any(|dependency| dependency == policy_name),
            "{name} depends on {policy_name}"
        );
        // And once the table its function writes exists: a process starts
        // when its table is created, so the queue receives only events
        // appended after (docs/processes.md, adding a process live).
        let table = table_of_queue(&template, queue);
        assert!(
            depends.contains(&table),
            "{name} depends on {table}: {depends:?}"
        );
    }
}

/// The table (`TABLE_NAME`) of the function whose mapping reads `queue`.
fn table_of_queue(template: &Value, queue: &str) -> String {
    let resources = template["Resources"].as_mapping().expect("resources");
    resources
        .values()
        .find(|item| {
            item["Type"] == "AWS::Serverless::Function"
                && item["Properties"]["Events"]
                    .as_mapping()
                    .is_some_and(|events| {
                        events.values().any(|event| {
                            intrinsic(&event["Properties"]["Queue"])
                                == format!("GetAtt {queue}.Arn")
                        })
                    })
        })
        .map(|function| {
            intrinsic(&function["Properties"]["Environment"]["Variables"]["TABLE_NAME"])
                .trim_start_matches("Ref ")
                .to_owned()
        })
        .unwrap_or_else(|| panic!("no function reads {queue}"))
}

/// What SNS could not deliver to a consumer's queue (a broken queue policy,
/// a deleted queue) it retries and then drops, unless the subscription
/// redrives it: an event lost silently, a gap its consumer cannot tell from
/// a lost one. So every subscription redrives to a FIFO queue of its own
/// (a FIFO topic's subscription takes no other), encrypted as the others,
/// that only the topic may send to, watched by an alarm to the alarm topic
/// and shown on the dashboard, deployed with the subscription.
#[test]
fn every_subscription_redrives_what_sns_cannot_deliver_to_a_watched_fifo_queue() {
    let template = template();
    let resources = template["Resources"].as_mapping().expect("resources");
    let every_condition = dashboard_metrics_with(
        &template,
        &["WithProducer", "WithStatusConsumer", "WithPaymentsConsumer"],
    );
    let mut dead_letter_queues = BTreeSet::new();
    let mut subscriptions = 0;
    for (name, subscription) in resources {
        if subscription["Type"] != "AWS::SNS::Subscription"
            || subscription["Properties"]["Protocol"] != "sqs"
        {
            continue;
        }
        subscriptions += 1;
        let name = name.as_str().expect("a name");
        let properties = &subscription["Properties"];
        let condition = &subscription["Condition"];
        let target = &properties["RedrivePolicy"]["deadLetterTargetArn"];
        assert!(!target.is_null(), "{name}: a RedrivePolicy");
        assert!(
            intrinsic(target).ends_with(".Arn"),
            "{name}: a queue of the template, by its ARN: {target:?}"
        );
        let queue = named_resource(target);
        assert!(
            dead_letter_queues.insert(queue.clone()),
            "{name}: {queue} is another subscription's"
        );
        let endpoint = named_resource(&properties["Endpoint"]);
        assert_ne!(queue, endpoint, "{name}: not the queue it delivers to");
        let endpoint_dead_letters = named_resource(
            &resource(&template, &endpoint)["Properties"]["RedrivePolicy"]["deadLetterTargetArn"],
        );
        assert_ne!(
            queue, endpoint_dead_letters,
            "{name}: not the consumer's own dead-letter queue (what SNS could not deliver is not what the consumer failed)"
        );

        // A FIFO queue, kept and encrypted as the others, with the subscription.
        let dead_letters = resource(&template, &queue);
        assert_eq!(dead_letters["Type"], "AWS::SQS::Queue", "{queue}");
        assert_eq!(&dead_letters["Condition"], condition, "{queue}");
        let queue_properties = &dead_letters["Properties"];
        let endpoint_properties = &resource(&template, &endpoint)["Properties"];
        assert_eq!(
            queue_properties["FifoQueue"], true,
            "{queue}: FIFO, as the topic"
        );
        assert!(
            intrinsic(&queue_properties["QueueName"]).ends_with(".fifo"),
            "{queue}: a FIFO queue's name ends in .fifo"
        );
        for property in ["SqsManagedSseEnabled", "MessageRetentionPeriod"] {
            assert_eq!(
                queue_properties[property], endpoint_properties[property],
                "{queue}: {property}"
            );
        }
        assert!(
            queue_properties["RedrivePolicy"].is_null(),
            "{queue}: the end of the line"
        );

        // Its policy: the topic's redrives, and nothing else.
        let policies = queue_policies(&template, &queue);
        assert_eq!(policies.len(), 1, "{queue}: one queue policy");
        let (policy_name, policy) = policies[0];
        assert_eq!(&policy["Condition"], condition, "{policy_name}");
        let statements = one_or_many(&policy["Properties"]["PolicyDocument"]["Statement"]);
        assert_eq!(statements.len(), 1, "{policy_name}: {statements:?}");
        let statement = statements[0];
        assert_eq!(statement["Effect"], "Allow");
        assert_eq!(statement["Principal"]["Service"], "sns.amazonaws.com");
        assert_eq!(statement["Action"], "sqs:SendMessage");
        assert_eq!(
            intrinsic(&statement["Resource"]),
            format!("GetAtt {queue}.Arn")
        );
        assert_eq!(
            intrinsic(&statement["Condition"]["ArnEquals"]["aws:SourceArn"]),
            intrinsic(&properties["TopicArn"]),
            "{policy_name}: only the subscription's topic may send"
        );
        let depends: Vec<&str> = one_or_many(&subscription["DependsOn"])
            .into_iter()
            .filter_map(Value::as_str)
            .collect();
        assert!(
            depends.contains(&policy_name),
            "{name} depends on {policy_name}: the topic may redrive from the first delivery"
        );

        // An alarm on its depth, to the alarm topic, with the subscription.
        let alarms: Vec<&Value> = resources
            .values()
            .filter(|alarm| {
                alarm["Type"] == "AWS::CloudWatch::Alarm"
                    && alarm["Properties"]["MetricName"] == "ApproximateNumberOfMessagesVisible"
                    && intrinsic(&alarm["Properties"]["Dimensions"][0]["Value"])
                        == format!("GetAtt {queue}.QueueName")
            })
            .collect();
        assert_eq!(alarms.len(), 1, "{queue}: one depth alarm");
        let alarm = alarms[0];
        assert_eq!(&alarm["Condition"], condition, "{queue}'s alarm");
        let alarm = &alarm["Properties"];
        assert_eq!(alarm["Namespace"], "AWS/SQS");
        assert_eq!(alarm["Dimensions"][0]["Name"], "QueueName");
        assert_eq!(alarm["Threshold"], 0, "{queue}: one message is too many");
        assert_eq!(alarm["ComparisonOperator"], "GreaterThanThreshold");
        assert!(
            one_or_many(&alarm["AlarmActions"])
                .iter()
                .any(|action| intrinsic(action) == "Ref AlarmTopic"),
            "{queue}'s alarm notifies"
        );
        assert!(
            intrinsic(&alarm["AlarmName"]).starts_with("Sub ${AWS::StackName}-"),
            "{queue}'s alarm is named as the alarm topic's key policy allows"
        );

        // A line of the dashboard.
        assert!(
            every_condition.iter().any(|[_, metric, _, value]| {
                metric == "ApproximateNumberOfMessagesVisible"
                    && *value == format!("<{queue}.QueueName>")
            }),
            "the dashboard shows the depth of {queue}"
        );
    }
    assert!(
        subscriptions >= 3,
        "the projector's, the status consumer's and the payments process's subscriptions"
    );
}

/// No deploy deletes a queue that holds messages: every queue, like every
/// table and every log group, is kept when it leaves the template or is
/// replaced.
#[test]
fn every_queue_table_and_log_group_is_retained() {
    let template = template();
    let resources = template["Resources"].as_mapping().expect("resources");
    let mut kept = 0;
    for (name, item) in resources {
        if [
            "AWS::SQS::Queue",
            "AWS::DynamoDB::Table",
            "AWS::Logs::LogGroup",
        ]
        .contains(&item["Type"].as_str().unwrap_or(""))
        {
            assert_eq!(item["DeletionPolicy"], "Retain", "{name:?}");
            assert_eq!(item["UpdateReplacePolicy"], "Retain", "{name:?}");
            kept += 1;
        }
    }
    assert!(kept >= 14, "{kept}");
}
