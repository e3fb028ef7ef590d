//! `template.yaml` and the code agree: the binary, the environment, the key
//! schema, the TTL attribute, the queue wiring, the metrics the alarms watch,
//! and the DynamoDB actions in the policy against those the code calls; one
//! file a part of the stack. Here: what the parts share.

#[path = "../support/mod.rs"]
mod support;

mod compute;
mod consumers;
mod deadlines;
mod events_table;
mod iam;
mod personal;
mod process;
mod producer;
mod projector;
mod requests;
mod roles;
mod status;

use std::collections::BTreeSet;

use personal::statements;
use sequence_guard::config::VARIABLES;
use sequence_guard::dispatcher;
use sequence_guard::runner::{Invocation, Runner, RunnerConfig};
use sequence_guard::store::dynamodb::{TTL_ATTRIBUTE, iam_actions};
use serde_yaml::Value;
use support::*;

const TEMPLATE: &str = include_str!("../../../template.yaml");

/// template.yaml as CloudFormation has it on Lambda's own compute, which
/// every file but `compute.rs` checks (see [`compute::on_lambda`]).
fn template() -> Value {
    compute::on_lambda(as_written())
}

/// template.yaml as it is written.
fn as_written() -> Value {
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

/// The alarms' names, as the key and topic policies match them: every alarm
/// of the stack is named `<stack>-...`.
const ALARM_ARNS: &str =
    "arn:${AWS::Partition}:cloudwatch:${AWS::Region}:${AWS::AccountId}:alarm:${AWS::StackName}-*";

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

/// The actions AWS authorises on `*` only: X-Ray has no resource-level
/// permissions. (The code calls no `cloudwatch:PutMetricData`: its metrics
/// go out as embedded metric format in the logs.)
const ONLY_ON_EVERY_RESOURCE: [&str; 2] = ["xray:PutTelemetryRecords", "xray:PutTraceSegments"];

/// Each Allow of a policy document names its actions and, but for
/// [`ONLY_ON_EVERY_RESOURCE`] on `*`, only resources of the stack.
fn check_statements(policy: &str, document: &Value, resources: &BTreeSet<&str>) {
    for statement in statements(document) {
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

fn resource_properties(template: &Value, name: &str) -> Value {
    resource(template, name)["Properties"].clone()
}

// The producer's half: the event store, the dispatcher on its stream, and
// their alarms, all under the `WithProducer` condition.

/// Every resource of the producer's half; each carries `WithProducer`.
const PRODUCER: [&str; 21] = [
    "EventsTable",
    "DispatchFailureQueue",
    "EventsTopicKey",
    "EventsTopicKeyAlias",
    "PersonalDataKey",
    "PersonalDataKeyAlias",
    "EraseToolPolicy",
    "AppendPersonalDataPolicy",
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
const PRODUCER_OUTPUTS: [&str; 8] = [
    "EventsTableName",
    "DispatcherFunctionName",
    "DispatchFailureQueueUrl",
    "EventsTopicArn",
    "EventsUndeliveredQueueUrl",
    "PersonalDataKeyArn",
    "EraseToolPolicyArn",
    "AppendPersonalDataPolicyArn",
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
/// that hold (`WithProducer`, `WithStatusConsumer`, `WithPaymentsConsumer`)
/// and `<name>` for each
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
                    ["WithProducer", "WithStatusConsumer", "WithPaymentsConsumer"]
                        .contains(&condition),
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

/// What a role's inline policies allow (a statement under `!If`, as
/// deployed by default: with the producer): one (action, resources) per
/// action, each resource as written (`*`, or an intrinsic as `GetAtt X.Arn`).
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
        for statement in statements(&policy["PolicyDocument"]) {
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

/// The actions of `grants` on `resource` (`GetAtt ProjectionTable.Arn`).
fn granted_to<'a>(grants: &'a [(String, Vec<String>)], resource: &str) -> BTreeSet<&'a str> {
    grants
        .iter()
        .filter(|(_, resources)| resources.iter().any(|named| named == resource))
        .map(|(action, _)| action.as_str())
        .collect()
}

fn parameter_number(template: &Value, parameter: &str, field: &str) -> i64 {
    template["Parameters"][parameter][field]
        .as_i64()
        .unwrap_or_else(|| panic!("{parameter} has no {field}"))
}

/// How long a DynamoDB stream keeps a record.
const STREAM_RETENTION_SECONDS: i64 = 24 * 60 * 60;

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
