//! Who may do what: the alarm topic's key, and every function's role
//! against the actions its code calls.

use super::*;

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
        BTreeSet::from([
            "GetAtt ProjectionTable.Arn".to_owned(),
            "GetAtt EventsTable.Arn".to_owned()
        ]),
        "only the table, and the event store's key items (personal.rs)"
    );
    let allowed: BTreeSet<String> = granted_to(&grants, "GetAtt ProjectionTable.Arn")
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
            ["sqs:", "dynamodb:", "logs:", "xray:", "kms:"]
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

    // DynamoDB: the table (the actions are compared with the code's calls
    // above), and of the event store a gap's events and the key items,
    // read only (which items: events_table.rs).
    assert_eq!(
        granted_on(&grants, "dynamodb:"),
        BTreeSet::from([
            "GetAtt ProjectionTable.Arn".to_owned(),
            "GetAtt EventsTable.Arn".to_owned()
        ])
    );
    assert_eq!(
        granted_to(&grants, "GetAtt EventsTable.Arn"),
        BTreeSet::from(["dynamodb:BatchGetItem", "dynamodb:Query"])
    );

    // KMS: the subjects' data keys unwrapped, nothing else (personal.rs).
    assert_eq!(granted(&grants, "kms:"), BTreeSet::from(["kms:Decrypt"]));
    assert_eq!(
        granted_on(&grants, "kms:"),
        BTreeSet::from(["GetAtt PersonalDataKey.Arn".to_owned()])
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
