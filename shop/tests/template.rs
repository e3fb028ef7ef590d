//! `template.yaml` and the code agree: the binary, the environment, the key
//! schema, the TTL attribute, the queue wiring, the metrics the alarms watch,
//! and the DynamoDB actions in the policy against those the code calls.

mod support;

use std::collections::BTreeSet;

use sequence_guard::config::VARIABLES;
use sequence_guard::dispatcher;
use sequence_guard::runner::{Invocation, Runner, RunnerConfig};
use sequence_guard::store::dynamodb::{TTL_ATTRIBUTE, iam_actions};
use serde_yaml::Value;
use support::*;

const TEMPLATE: &str = include_str!("../../template.yaml");

fn template() -> Value {
    serde_yaml::from_str(TEMPLATE).expect("template.yaml is YAML")
}

/// A CloudFormation intrinsic (`!Ref X`, `!GetAtt X.Y`) as "Ref X" / "GetAtt X.Y".
fn intrinsic(value: &Value) -> String {
    match value {
        Value::Tagged(tagged) => format!(
            "{} {}",
            tagged.tag.to_string().trim_start_matches('!'),
            tagged.value.as_str().unwrap_or("?")
        ),
        other => format!("{other:?}"),
    }
}

/// A function's environment variables, and their names.
fn environment<'a>(template: &'a Value, function: &str) -> (&'a Value, Vec<&'a str>) {
    let variables = &resource(template, function)["Properties"]["Environment"]["Variables"];
    let names = variables
        .as_mapping()
        .expect("variables")
        .keys()
        .filter_map(Value::as_str)
        .collect();
    (variables, names)
}

fn resource<'a>(template: &'a Value, name: &str) -> &'a Value {
    let resource = &template["Resources"][name];
    assert!(!resource.is_null(), "no resource {name}");
    resource
}

fn strings(value: &Value) -> Vec<String> {
    value
        .as_sequence()
        .map(|items| {
            items
                .iter()
                .filter_map(|item| item.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

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

/// Variables a consumer's function is given that the process's runtime reads,
/// not the code.
const RUNTIME_VARIABLES: [&str; 1] = ["GLIBC_TUNABLES"];

/// glibc ignores a tunable it does not know, silently: each name must be
/// spelled right, and each value within what glibc takes.
fn assert_tunables(value: &Value) {
    let value = value.as_str().unwrap_or_default();
    let mut names = Vec::new();
    for tunable in value.split(':') {
        let (name, setting) = tunable.split_once('=').unwrap_or((tunable, ""));
        let setting = setting.parse::<u32>().ok();
        let within = match name {
            "glibc.malloc.tcache_count" => {
                setting.is_some_and(|count| (8..=65_535).contains(&count))
            }
            // Up to 80 * sizeof(size_t) / 4 bytes; 0 turns fast bins off.
            "glibc.malloc.mxfast" => setting.is_some_and(|bytes| bytes <= 160),
            _ => false,
        };
        assert!(within, "GLIBC_TUNABLES: {tunable} in {value}");
        names.push(name);
    }
    assert_eq!(
        names,
        ["glibc.malloc.tcache_count", "glibc.malloc.mxfast"],
        "GLIBC_TUNABLES: {value}"
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

/// The alarms' names, as the key and topic policies match them: every alarm
/// of the stack is named `<stack>-...`.
const ALARM_ARNS: &str =
    "arn:${AWS::Partition}:cloudwatch:${AWS::Region}:${AWS::AccountId}:alarm:${AWS::StackName}-*";

/// CloudWatch publishes an alarm's notification itself, as the service
/// `cloudwatch.amazonaws.com`: to an encrypted topic only if the topic's key
/// lets it make and read data keys. The AWS-managed `alias/aws/sns` cannot
/// (its key policy is AWS's), and every notification fails silently, seen
/// only in the alarm's history.
#[test]
fn cloudwatch_may_publish_to_the_alarm_topic_and_use_its_key() {
    let template = template();
    let topic = &resource(&template, "AlarmTopic")["Properties"];
    let key = &topic["KmsMasterKeyId"];
    let key = match function(key) {
        Some((function, Value::String(target))) if function == "Ref" || function == "GetAtt" => {
            target.split('.').next().unwrap_or(target).to_owned()
        }
        _ => panic!("the alarm topic's key is not a key of the template: {key:?}"),
    };
    let key = resource(&template, &key);
    assert_eq!(key["Type"], "AWS::KMS::Key");
    let key = &key["Properties"];
    assert_eq!(key["EnableKeyRotation"], true);
    assert!(
        key["KeySpec"].is_null() || key["KeySpec"] == "SYMMETRIC_DEFAULT",
        "SNS takes symmetric keys only"
    );

    // The key policy: the account administers the key (without it no one
    // could change or delete it); CloudWatch makes and reads data keys, for
    // this stack's alarms only; nobody else.
    let account = "Sub arn:${AWS::Partition}:iam::${AWS::AccountId}:root".to_owned();
    let statements = one_or_many(&key["KeyPolicy"]["Statement"]);
    let mut administered = false;
    let mut cloudwatch = false;
    for statement in &statements {
        assert_eq!(statement["Effect"], "Allow");
        let actions: BTreeSet<&str> = one_or_many(&statement["Action"])
            .into_iter()
            .filter_map(Value::as_str)
            .collect();
        let principal = &statement["Principal"];
        if intrinsic(&principal["AWS"]) == account {
            assert_eq!(actions, BTreeSet::from(["kms:*"]));
            administered = true;
        } else if principal["Service"] == "cloudwatch.amazonaws.com" {
            assert_eq!(
                actions,
                BTreeSet::from(["kms:Decrypt", "kms:GenerateDataKey*"]),
                "what SNS asks of a publisher to an encrypted topic, and no more"
            );
            assert_eq!(statement["Resource"], "*", "in a key policy: this key");
            assert_from_this_stacks_alarms(&statement["Condition"]);
            cloudwatch = true;
        } else {
            panic!("the key policy grants {principal:?}");
        }
    }
    assert!(administered, "the account administers the key");
    assert!(cloudwatch, "CloudWatch may use the key");

    // The topic policy: CloudWatch publishes, for this stack's alarms only.
    let resources = template["Resources"].as_mapping().expect("resources");
    let policies: Vec<&Value> = resources
        .values()
        .filter(|item| {
            item["Type"] == "AWS::SNS::TopicPolicy"
                && one_or_many(&item["Properties"]["Topics"])
                    .iter()
                    .any(|topic| intrinsic(topic) == "Ref AlarmTopic")
        })
        .collect();
    assert_eq!(policies.len(), 1, "one policy of the alarm topic");
    let statements = one_or_many(&policies[0]["Properties"]["PolicyDocument"]["Statement"]);
    let publish = statements
        .iter()
        .find(|statement| statement["Principal"]["Service"] == "cloudwatch.amazonaws.com")
        .expect("CloudWatch may publish to the alarm topic");
    assert_eq!(publish["Effect"], "Allow");
    let actions: Vec<&str> = one_or_many(&publish["Action"])
        .into_iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(actions, ["sns:Publish"]);
    assert_eq!(intrinsic(&publish["Resource"]), "Ref AlarmTopic");
    assert_from_this_stacks_alarms(&publish["Condition"]);
    for statement in &statements {
        assert_eq!(statement["Effect"], "Allow");
        assert!(
            statement["Principal"]["AWS"] != "*" && statement["Principal"] != "*",
            "nobody else publishes"
        );
    }

    // Every alarm that notifies the topic is one of the names the policies allow.
    let prefix = ALARM_ARNS.rsplit_once(":alarm:").expect("alarm").1;
    let prefix = prefix.trim_end_matches('*');
    let mut notifying = 0;
    for (name, alarm) in resources {
        if alarm["Type"] != "AWS::CloudWatch::Alarm" {
            continue;
        }
        let properties = &alarm["Properties"];
        let notifies = ["AlarmActions", "OKActions", "InsufficientDataActions"]
            .iter()
            .flat_map(|actions| one_or_many(&properties[*actions]))
            .any(|action| intrinsic(action) == "Ref AlarmTopic");
        if !notifies {
            continue;
        }
        notifying += 1;
        let alarm_name = intrinsic(&properties["AlarmName"]);
        assert!(
            alarm_name
                .strip_prefix("Sub ")
                .is_some_and(|alarm_name| alarm_name.starts_with(prefix)),
            "{name:?} is named {alarm_name}, outside {ALARM_ARNS}: its notifications would be refused"
        );
    }
    assert!(notifying > 0, "no alarm notifies the topic");
}

/// The conditions that keep a grant to CloudWatch to this account's (and
/// this stack's) alarms: no other account's alarm can use the key or the
/// topic through CloudWatch (the confused deputy).
fn assert_from_this_stacks_alarms(condition: &Value) {
    assert_eq!(
        intrinsic(&condition["StringEquals"]["aws:SourceAccount"]),
        "Ref AWS::AccountId",
        "{condition:?}"
    );
    assert_eq!(
        intrinsic(&condition["ArnLike"]["aws:SourceArn"]),
        format!("Sub {ALARM_ARNS}"),
        "{condition:?}"
    );
}

/// Runs every sample through the runner on DynamoDB Local and compares the
/// IAM actions of the operations it called with the policy's.
#[tokio::test]
async fn the_policy_names_exactly_the_dynamodb_actions_the_code_calls() {
    let store = fresh_table().await;
    let runner = Runner::new(shop::domain(), store.clone(), RunnerConfig::default());
    for (_, json) in samples::ALL {
        let invocation = Invocation {
            deadline: None,
            now: sequence_guard::lambda::epoch_seconds(),
        };
        runner.run(&sample(json), invocation).await.expect("run");
    }
    // The schedule's sweep of parked entities.
    let invocation = Invocation {
        deadline: None,
        now: sequence_guard::lambda::epoch_seconds(),
    };
    sequence_guard::sweep::sweep(&runner, invocation)
        .await
        .expect("sweep");
    let called: BTreeSet<String> = store
        .operations()
        .into_iter()
        .flat_map(|operation| {
            iam_actions(operation)
                .iter()
                .map(|action| (*action).to_owned())
        })
        .collect();

    let template = template();
    let grants = lambda_role_grants(&template, "ProjectorRole");
    assert_eq!(
        granted_on(&grants, "dynamodb:"),
        BTreeSet::from(["GetAtt ProjectionTable.Arn".to_owned()]),
        "only the table"
    );
    let allowed: BTreeSet<String> = granted(&grants, "dynamodb:")
        .into_iter()
        .map(str::to_owned)
        .collect();
    assert_eq!(allowed, called);
}

/// The projector's own role: without one SAM attaches, for the queue event,
/// `AWSLambdaSQSQueueExecutionRole` (receive and delete on every queue of the
/// account, every log group) and, for active tracing, X-Ray's write policy.
#[test]
fn the_projector_role_grants_only_what_it_uses() {
    let template = template();
    let properties = &resource(&template, "ProjectorFunction")["Properties"];
    assert_eq!(intrinsic(&properties["Role"]), "GetAtt ProjectorRole.Arn");
    assert!(
        properties["Policies"].is_null(),
        "SAM ignores Policies with a Role"
    );
    let grants = lambda_role_grants(&template, "ProjectorRole");
    for (action, _) in &grants {
        assert!(
            ["sqs:", "dynamodb:", "logs:", "xray:"]
                .iter()
                .any(|service| action.starts_with(service)),
            "{action}: the projector calls no such service"
        );
    }

    // SQS: what the event source mapping polls the queue with, on the
    // projector's queue only. The code changes no visibility timeout (a
    // failed message is retried after the queue's own), so no
    // sqs:ChangeMessageVisibility.
    assert_eq!(
        granted(&grants, "sqs:"),
        BTreeSet::from([
            "sqs:DeleteMessage",
            "sqs:GetQueueAttributes",
            "sqs:ReceiveMessage",
        ])
    );
    assert_eq!(
        granted_on(&grants, "sqs:"),
        BTreeSet::from(["GetAtt EventsQueue.Arn".to_owned()]),
        "its own queue only, not its dead-letter queue nor any other"
    );

    // DynamoDB: the table (the actions are compared with the code's calls above).
    assert_eq!(
        granted_on(&grants, "dynamodb:"),
        BTreeSet::from(["GetAtt ProjectionTable.Arn".to_owned()])
    );

    // Logs: its own log group; X-Ray: the two write actions of active tracing.
    assert_eq!(
        granted(&grants, "logs:"),
        BTreeSet::from(["logs:CreateLogStream", "logs:PutLogEvents"])
    );
    assert_eq!(
        granted_on(&grants, "logs:"),
        BTreeSet::from(["GetAtt ProjectorLogGroup.Arn".to_owned()])
    );
    assert_eq!(
        intrinsic(&properties["LoggingConfig"]["LogGroup"]),
        "Ref ProjectorLogGroup"
    );
    assert_eq!(properties["Tracing"], "Active");
    assert_eq!(
        granted(&grants, "xray:"),
        BTreeSet::from(["xray:PutTelemetryRecords", "xray:PutTraceSegments"])
    );
}

/// The actions AWS authorises on `*` only: X-Ray has no resource-level
/// permissions. (The code calls no `cloudwatch:PutMetricData`: its metrics
/// go out as embedded metric format in the logs.)
const ONLY_ON_EVERY_RESOURCE: [&str; 2] = ["xray:PutTelemetryRecords", "xray:PutTraceSegments"];

/// Every function runs under a role of the template, its own; no role, nor
/// any other policy of the template, grants on `*` (or on a hand-written
/// ARN) what AWS would let it grant on a resource of the stack; and none
/// takes a managed policy.
#[test]
fn every_function_has_its_own_role_and_no_policy_grants_on_every_resource() {
    let template = template();
    let resources = template["Resources"].as_mapping().expect("resources");
    let names: BTreeSet<&str> = resources.keys().filter_map(Value::as_str).collect();
    assert!(
        template["Globals"]["Function"]["Policies"].is_null()
            && template["Globals"]["Function"]["Role"].is_null(),
        "no role or policies for every function at once"
    );

    let mut roles_used = BTreeSet::new();
    let mut roles = BTreeSet::new();
    for (name, item) in resources {
        let name = name.as_str().expect("a name");
        match item["Type"].as_str().unwrap_or("") {
            "AWS::Serverless::Function" | "AWS::Lambda::Function" => {
                let properties = &item["Properties"];
                assert!(
                    properties["Policies"].is_null(),
                    "{name}: Policies (SAM adds its managed policies with them); grant in its role"
                );
                let role = intrinsic(&properties["Role"]);
                let role = role
                    .strip_prefix("GetAtt ")
                    .and_then(|role| role.strip_suffix(".Arn"))
                    .unwrap_or_else(|| {
                        panic!("{name} has no Role of the template (SAM would make one with managed policies): {role}")
                    });
                assert_eq!(
                    resource(&template, role)["Type"],
                    "AWS::IAM::Role",
                    "{name}"
                );
                assert!(
                    roles_used.insert(role.to_owned()),
                    "{name} shares the role {role}"
                );
            }
            "AWS::IAM::Role" => {
                roles.insert(name.to_owned());
                assert!(
                    item["Properties"]["ManagedPolicyArns"].is_null(),
                    "{name}: no managed policies (AWS's Lambda policies grant on every resource)"
                );
                for policy in one_or_many(&item["Properties"]["Policies"]) {
                    check_statements(name, &policy["PolicyDocument"], &names);
                }
            }
            "AWS::IAM::Policy" | "AWS::IAM::ManagedPolicy" | "AWS::IAM::RolePolicy" => {
                check_statements(name, &item["Properties"]["PolicyDocument"], &names);
            }
            "AWS::Serverless::Connector" => panic!("{name}: grant in the role instead"),
            _ => {}
        }
    }
    assert!(!roles_used.is_empty(), "no function found");
    assert_eq!(
        roles_used, roles,
        "every role is a function's, and every function's role is its own"
    );
}

/// Each Allow of a policy document names its actions and, but for
/// [`ONLY_ON_EVERY_RESOURCE`] on `*`, only resources of the stack.
fn check_statements(policy: &str, document: &Value, resources: &BTreeSet<&str>) {
    for statement in one_or_many(&document["Statement"]) {
        assert!(
            statement["NotAction"].is_null() && statement["NotResource"].is_null(),
            "{policy}: NotAction or NotResource grants everything but what it names"
        );
        if statement["Effect"] != "Allow" {
            continue;
        }
        let actions: Vec<&str> = one_or_many(&statement["Action"])
            .into_iter()
            .map(|action| action.as_str().expect("an action"))
            .collect();
        for action in &actions {
            assert!(!action.contains('*'), "{policy}: no wildcards: {action}");
        }
        for target in one_or_many(&statement["Resource"]) {
            match target {
                Value::String(target) if target == "*" => {
                    for action in &actions {
                        assert!(
                            ONLY_ON_EVERY_RESOURCE.contains(action),
                            "{policy}: {action} on *; AWS lets it be granted on a resource of the stack"
                        );
                    }
                }
                other => assert!(
                    names_a_resource(other, resources),
                    "{policy}: {actions:?} on {other:?}, not a resource of the stack"
                ),
            }
        }
    }
}

/// Whether `target` is a `Ref`, `GetAtt` or `Sub` of a resource of the
/// template, any `*` in it coming after that resource's name.
fn names_a_resource(target: &Value, resources: &BTreeSet<&str>) -> bool {
    let named = |name: &str| resources.contains(name.split('.').next().unwrap_or(name));
    match function(target) {
        Some((function, Value::String(argument))) => match function.as_str() {
            "Ref" | "GetAtt" => named(argument),
            "Sub" => {
                let first = argument.find("${").unwrap_or(argument.len());
                let star = argument.find('*').unwrap_or(argument.len());
                sub_names(argument).first().is_some_and(|name| named(name)) && first < star
            }
            _ => false,
        },
        Some((function, Value::Sequence(parts))) if function == "GetAtt" => {
            parts.first().and_then(Value::as_str).is_some_and(named)
        }
        _ => false,
    }
}

/// How long a redrive from the dead-letter queue may wait after a message
/// got there, on top of the queues' retention.
const REDRIVE_MARGIN_SECONDS: u64 = 7 * 24 * 60 * 60;

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

fn resource_properties(template: &Value, name: &str) -> Value {
    resource(template, name)["Properties"].clone()
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

// The producer's half: the event store, the dispatcher on its stream, and
// their alarms, all under the `WithProducer` condition.

/// Every resource of the producer's half; each carries `WithProducer`.
const PRODUCER: [&str; 17] = [
    "EventsTable",
    "DispatchFailureQueue",
    "EventsTopicKey",
    "EventsTopicKeyAlias",
    "EventsTopic",
    "EventsQueuePolicy",
    "EventsSubscriptionDeadLetterQueue",
    "EventsSubscriptionDeadLetterQueuePolicy",
    "EventsQueueSubscription",
    "DispatcherLogGroup",
    "DispatcherRole",
    "DispatcherFunction",
    "DispatcherIteratorAgeAlarm",
    "DispatcherErrorsAlarm",
    "DispatchFailureQueueAlarm",
    "DispatcherCorruptAlarm",
    "EventsUndeliveredAlarm",
];

/// The outputs that name producer resources.
const PRODUCER_OUTPUTS: [&str; 5] = [
    "EventsTableName",
    "DispatcherFunctionName",
    "DispatchFailureQueueUrl",
    "EventsTopicArn",
    "EventsUndeliveredQueueUrl",
];

/// The dispatcher's `Service` dimension, as the template writes it.
const DISPATCHER_SERVICE: &str = "${AWS::StackName}-dispatcher";

/// A value or a list of values, as IAM's `Action` and `Resource` take them.
fn one_or_many(value: &Value) -> Vec<&Value> {
    match value {
        Value::Sequence(items) => items.iter().collect(),
        Value::Null => Vec::new(),
        other => vec![other],
    }
}

/// An intrinsic function's name (`Ref`, `GetAtt`, `Sub`, `If`, ...) and its
/// argument, in the short (`!Sub`) or the long (`Fn::Sub:`) form.
fn function(value: &Value) -> Option<(String, &Value)> {
    match value {
        Value::Tagged(tagged) => Some((
            tagged.tag.to_string().trim_start_matches('!').to_owned(),
            &tagged.value,
        )),
        Value::Mapping(mapping) if mapping.len() == 1 => {
            let (key, argument) = mapping.iter().next()?;
            let key = key.as_str()?;
            (key == "Ref" || key.starts_with("Fn::"))
                .then(|| (key.trim_start_matches("Fn::").to_owned(), argument))
        }
        _ => None,
    }
}

/// The names `${...}` in a `Sub` string, without `${!literal}`s.
fn sub_names(text: &str) -> Vec<&str> {
    text.split("${")
        .skip(1)
        .filter_map(|rest| rest.split_once('}').map(|(name, _)| name))
        .filter(|name| !name.starts_with('!'))
        .collect()
}

/// The resources `value` names (Ref, GetAtt, Sub), leaving out the branch
/// taken when the producer is deployed of every `!If [WithProducer, ..]`.
fn references(value: &Value, found: &mut BTreeSet<String>) {
    references_without(value, "WithProducer", found);
}

/// The resources `value` names (Ref, GetAtt, Sub), leaving out the branch
/// taken when `condition` holds of every `!If [condition, ..]`.
fn references_without(value: &Value, condition: &str, found: &mut BTreeSet<String>) {
    let references = |value: &Value, found: &mut BTreeSet<String>| {
        references_without(value, condition, found);
    };
    fn name(target: &str, found: &mut BTreeSet<String>) {
        let target = target.split('.').next().unwrap_or(target);
        if !target.contains("::") {
            found.insert(target.to_owned());
        }
    }
    if let Some((function, argument)) = function(value) {
        match (function.as_str(), argument) {
            ("Ref" | "GetAtt", Value::String(target)) => name(target, found),
            ("GetAtt", Value::Sequence(parts)) => name(parts[0].as_str().unwrap_or(""), found),
            ("Sub", Value::String(text)) => {
                for target in sub_names(text) {
                    name(target, found);
                }
            }
            ("Sub", Value::Sequence(parts)) => {
                let variables = parts.get(1).and_then(Value::as_mapping);
                for target in sub_names(parts[0].as_str().unwrap_or("")) {
                    if !variables.is_some_and(|variables| variables.contains_key(target)) {
                        name(target, found);
                    }
                }
                for value in variables
                    .into_iter()
                    .flat_map(|variables| variables.values())
                {
                    references(value, found);
                }
            }
            ("If", Value::Sequence(parts)) if parts[0] == condition => {
                references(&parts[2], found);
            }
            (_, argument) => references(argument, found),
        }
        return;
    }
    match value {
        Value::Sequence(items) => items.iter().for_each(|item| references(item, found)),
        Value::Mapping(mapping) => mapping.values().for_each(|item| references(item, found)),
        _ => {}
    }
}

/// A `Sub` or `Join` string as CloudFormation makes it, with the conditions
/// that hold (`WithProducer`, `WithStatusConsumer`) and `<name>` for each
/// name it does not define.
fn render(value: &Value, conditions: &[&str]) -> String {
    let substitute = |text: &str, variables: Option<&serde_yaml::Mapping>| {
        let mut rendered = String::new();
        let mut rest = text;
        while let Some(start) = rest.find("${") {
            rendered.push_str(&rest[..start]);
            let (name, after) = rest[start + 2..].split_once('}').expect("a closed ${");
            match variables.and_then(|variables| variables.get(name)) {
                Some(value) => rendered.push_str(&render(value, conditions)),
                None => rendered.push_str(&format!("<{name}>")),
            }
            rest = after;
        }
        rendered.push_str(rest);
        rendered
    };
    match function(value) {
        None => value
            .as_str()
            .unwrap_or_else(|| panic!("not a string: {value:?}"))
            .to_owned(),
        Some((function, argument)) => match (function.as_str(), argument) {
            ("Sub", Value::String(text)) => substitute(text, None),
            ("Sub", Value::Sequence(parts)) => substitute(
                parts[0].as_str().expect("a Sub string"),
                parts.get(1).and_then(Value::as_mapping),
            ),
            ("If", Value::Sequence(parts)) => {
                let condition = parts[0].as_str().expect("a condition's name");
                assert!(
                    ["WithProducer", "WithStatusConsumer"].contains(&condition),
                    "{condition} is not rendered"
                );
                let holds = conditions.contains(&condition);
                render(&parts[if holds { 1 } else { 2 }], conditions)
            }
            ("Join", Value::Sequence(parts)) => one_or_many(&parts[1])
                .into_iter()
                .map(|part| render(part, conditions))
                .collect::<Vec<_>>()
                .join(parts[0].as_str().expect("a Join separator")),
            ("Ref" | "GetAtt", Value::String(target)) => format!("<{target}>"),
            other => panic!("cannot render {other:?}"),
        },
    }
}

/// Every metric of the dashboard (with the producer or without) as
/// (namespace, metric, dimension name, dimension value), its `.` and `...`
/// shorthands spelled out.
fn dashboard_metrics(template: &Value, producer: bool) -> Vec<[String; 4]> {
    let conditions: &[&str] = if producer { &["WithProducer"] } else { &[] };
    dashboard_metrics_with(template, conditions)
}

/// [`dashboard_metrics`] with these conditions holding.
fn dashboard_metrics_with(template: &Value, conditions: &[&str]) -> Vec<[String; 4]> {
    let body = render(
        &resource(template, "Dashboard")["Properties"]["DashboardBody"],
        conditions,
    );
    let body: serde_json::Value = serde_json::from_str(&body).unwrap_or_else(|error| {
        panic!("the dashboard (conditions {conditions:?}) is not JSON: {error}")
    });
    let mut found = Vec::new();
    for widget in body["widgets"].as_array().expect("widgets") {
        let mut previous: Vec<String> = Vec::new();
        for row in widget["properties"]["metrics"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let items: Vec<&str> = row
                .as_array()
                .expect("a metric row")
                .iter()
                .filter_map(serde_json::Value::as_str)
                .collect();
            let resolved: Vec<String> = if items.first() == Some(&"...") {
                previous.clone()
            } else {
                items
                    .iter()
                    .enumerate()
                    .map(|(index, item)| match *item {
                        "." => previous[index].clone(),
                        item => item.to_owned(),
                    })
                    .collect()
            };
            assert!(
                resolved.len() >= 4,
                "a metric with a dimension: {resolved:?}"
            );
            found.push([0, 1, 2, 3].map(|index| resolved[index].clone()));
            previous = resolved;
        }
    }
    found
}

/// What a role's inline policies allow: one (action, resources) per action,
/// each resource as written (`*`, or an intrinsic as `GetAtt X.Arn`).
/// Checks on the way that the role is a Lambda function's, has no managed
/// policies, and that every statement is a plain Allow of named actions.
fn lambda_role_grants(template: &Value, role: &str) -> Vec<(String, Vec<String>)> {
    let role = resource(template, role);
    assert_eq!(role["Type"], "AWS::IAM::Role");
    let role = &role["Properties"];
    assert!(
        role["ManagedPolicyArns"].is_null(),
        "no managed policies: AWS's Lambda policies grant on every resource"
    );
    let trust = &role["AssumeRolePolicyDocument"]["Statement"];
    assert_eq!(trust.as_sequence().map(Vec::len), Some(1));
    assert_eq!(trust[0]["Principal"]["Service"], "lambda.amazonaws.com");
    assert_eq!(trust[0]["Action"], "sts:AssumeRole");

    let mut grants = Vec::new();
    for policy in role["Policies"].as_sequence().expect("policies") {
        for statement in policy["PolicyDocument"]["Statement"]
            .as_sequence()
            .expect("statements")
        {
            assert_eq!(statement["Effect"], "Allow");
            assert!(statement["NotAction"].is_null() && statement["NotResource"].is_null());
            let resources: Vec<String> = one_or_many(&statement["Resource"])
                .into_iter()
                .map(|resource| match resource {
                    Value::String(resource) => resource.clone(),
                    other => intrinsic(other),
                })
                .collect();
            assert!(!resources.is_empty(), "a statement names its resources");
            for action in one_or_many(&statement["Action"]) {
                let action = action.as_str().expect("an action").to_owned();
                assert!(!action.contains('*'), "no wildcards: {action}");
                grants.push((action, resources.clone()));
            }
        }
    }
    grants
}

/// The actions of `grants` of one service (`"sqs:"`).
fn granted<'a>(grants: &'a [(String, Vec<String>)], service: &str) -> BTreeSet<&'a str> {
    grants
        .iter()
        .filter(|(action, _)| action.starts_with(service))
        .map(|(action, _)| action.as_str())
        .collect()
}

/// The resources `grants` of one service (`"sqs:"`) are on.
fn granted_on(grants: &[(String, Vec<String>)], service: &str) -> BTreeSet<String> {
    grants
        .iter()
        .filter(|(action, _)| action.starts_with(service))
        .flat_map(|(_, resources)| resources.iter().cloned())
        .collect()
}

fn parameter_number(template: &Value, parameter: &str, field: &str) -> i64 {
    template["Parameters"][parameter][field]
        .as_i64()
        .unwrap_or_else(|| panic!("{parameter} has no {field}"))
}

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

/// How long a DynamoDB stream keeps a record.
const STREAM_RETENTION_SECONDS: i64 = 24 * 60 * 60;

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

/// A number of the template as deployed by default: the number itself, or
/// the default of the parameter it refers to.
fn number_by_default(template: &Value, value: &Value) -> i64 {
    match function(value) {
        Some((function, Value::String(parameter))) if function == "Ref" => {
            parameter_number(template, parameter, "Default")
        }
        _ => value
            .as_i64()
            .unwrap_or_else(|| panic!("not a number nor a parameter: {value:?}")),
    }
}

/// Every value a number of the template may take: the number, or its
/// parameter's allowed values, or the ends of the parameter's range (which
/// it must have).
fn allowed_numbers(template: &Value, value: &Value) -> Vec<i64> {
    let Some((_, Value::String(parameter))) = function(value).filter(|(f, _)| f == "Ref") else {
        return vec![value.as_i64().expect("a number")];
    };
    let declared = &template["Parameters"][parameter.as_str()];
    match declared["AllowedValues"].as_sequence() {
        Some(values) => values
            .iter()
            .map(|value| value.as_i64().expect("a number"))
            .collect(),
        None => vec![
            parameter_number(template, parameter, "MinValue"),
            parameter_number(template, parameter, "MaxValue"),
        ],
    }
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
        // The status consumer deploys only with the producer (its
        // condition is checked in its own test).
        let conditional =
            item["Condition"] == "WithProducer" || item["Condition"] == "WithStatusConsumer";
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

/// The resource a `Ref X` / `GetAtt X.Arn` names: `X`.
fn named_resource(value: &Value) -> String {
    let text = intrinsic(value);
    let target = text
        .strip_prefix("Ref ")
        .or_else(|| text.strip_prefix("GetAtt "))
        .unwrap_or_else(|| panic!("not a resource of the template: {text}"));
    target.split('.').next().unwrap_or(target).to_owned()
}

/// The queues subscribed to the events topic, by the subscription's name.
fn subscribed_queues(template: &Value) -> Vec<(String, String)> {
    let resources = template["Resources"].as_mapping().expect("resources");
    resources
        .iter()
        .filter(|(_, item)| {
            item["Type"] == "AWS::SNS::Subscription"
                && intrinsic(&item["Properties"]["TopicArn"]) == "Ref EventsTopic"
        })
        .map(|(name, item)| {
            (
                name.as_str().expect("a name").to_owned(),
                named_resource(&item["Properties"]["Endpoint"]),
            )
        })
        .collect()
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
    }
}

/// The queue policies of the template that name `queue` (`Ref queue`).
fn queue_policies<'a>(template: &'a Value, queue: &str) -> Vec<(&'a str, &'a Value)> {
    let resources = template["Resources"].as_mapping().expect("resources");
    resources
        .iter()
        .filter(|(_, item)| {
            item["Type"] == "AWS::SQS::QueuePolicy"
                && one_or_many(&item["Properties"]["Queues"])
                    .iter()
                    .any(|named| intrinsic(named) == format!("Ref {queue}"))
        })
        .map(|(name, item)| (name.as_str().expect("a name"), item))
        .collect()
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
    let every_condition =
        dashboard_metrics_with(&template, &["WithProducer", "WithStatusConsumer"]);
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
        subscriptions >= 2,
        "the projector's and the status consumer's subscriptions"
    );
}

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
        ("sqs:", "GetAtt StatusQueue.Arn"),
        ("dynamodb:", "GetAtt StatusTable.Arn"),
        ("logs:", "GetAtt StatusProjectorLogGroup.Arn"),
    ] {
        assert_eq!(
            granted_on(&grants, service),
            BTreeSet::from([on.to_owned()]),
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

/// No deploy deletes a queue that holds messages: every queue, like every
/// table, is kept when it leaves the template or is replaced.
#[test]
fn every_queue_and_table_is_retained() {
    let template = template();
    let resources = template["Resources"].as_mapping().expect("resources");
    let mut kept = 0;
    for (name, item) in resources {
        if ["AWS::SQS::Queue", "AWS::DynamoDB::Table"]
            .contains(&item["Type"].as_str().unwrap_or(""))
        {
            assert_eq!(item["DeletionPolicy"], "Retain", "{name:?}");
            assert_eq!(item["UpdateReplacePolicy"], "Retain", "{name:?}");
            kept += 1;
        }
    }
    assert!(kept >= 10, "{kept}");
}
