//! Each function on either compute, chosen when the stack is deployed:
//! Lambda's own (the default), or Lambda Managed Instances on the capacity
//! provider that `CapacityProviderArn` names. Here the template as it is
//! written; every other file checks it on Lambda's compute.

use super::*;

/// The functions of the shop's stack.
const FUNCTIONS: [&str; 4] = [
    "DispatcherFunction",
    "PaymentsProjectorFunction",
    "ProjectorFunction",
    "StatusProjectorFunction",
];

/// `template` as CloudFormation has it on Lambda's own compute (an
/// empty `CapacityProviderArn`, the default): each function's Managed
/// Instances twin left out, the compute's part of each condition dropped,
/// and each `!If [OnManagedInstances, ..]` its second branch. The tests
/// below check the twins and those `!If`s on the template as it is.
pub(super) fn on_lambda(mut template: Value) -> Value {
    on_compute(&mut template, false);
    if let Some(resources) = template["Resources"].as_mapping_mut() {
        resources.retain(|_, resource| {
            !resource["Condition"]
                .as_str()
                .is_some_and(|condition| condition.ends_with("OnManagedInstances"))
        });
        for resource in resources.values_mut() {
            let Some(condition) = resource["Condition"].as_str() else {
                continue;
            };
            let own = condition.trim_end_matches("OnLambda").to_owned();
            let resource = resource.as_mapping_mut().expect("a resource");
            if own.is_empty() {
                resource.remove("Condition");
            } else {
                resource.insert("Condition".into(), own.into());
            }
        }
    }
    if let Some(conditions) = template["Conditions"].as_mapping_mut() {
        conditions.retain(|name, _| {
            !name.as_str().is_some_and(|name| {
                name.ends_with("OnLambda") || name.ends_with("OnManagedInstances")
            })
        });
    }
    template
}

/// `value` with each `!If [OnManagedInstances, managed, lambda]` replaced
/// by its branch for Managed Instances (`managed`) or for Lambda.
fn on_compute(value: &mut Value, managed: bool) {
    if let Value::Tagged(tagged) = value
        && let Value::Sequence(parts) = &mut tagged.value
        && tagged.tag == "If"
        && parts.len() == 3
        && parts[0] == "OnManagedInstances"
    {
        let branch = parts.remove(if managed { 1 } else { 2 });
        *value = branch;
        on_compute(value, managed);
        return;
    }
    match value {
        Value::Tagged(tagged) => on_compute(&mut tagged.value, managed),
        Value::Sequence(items) => items.iter_mut().for_each(|item| on_compute(item, managed)),
        Value::Mapping(mapping) => mapping
            .values_mut()
            .for_each(|item| on_compute(item, managed)),
        _ => {}
    }
}

/// The resources of the template as written.
fn resources(template: &Value) -> &serde_yaml::Mapping {
    template["Resources"].as_mapping().expect("resources")
}

#[test]
fn the_compute_is_lambdas_unless_a_capacity_provider_is_given() {
    let template = as_written();
    let parameters = &template["Parameters"];
    let arn = &parameters["CapacityProviderArn"];
    assert_eq!(arn["Default"], "", "Lambda's own compute by default");
    let pattern = arn["AllowedPattern"].as_str().expect("a pattern");
    assert!(
        pattern.starts_with("^(arn:aws")
            && pattern.ends_with(":capacity-provider:[a-zA-Z0-9_-]+)?$"),
        "empty, or a capacity provider's ARN: {pattern}"
    );
    assert_eq!(
        parameter_number(&template, "ManagedInstancesMemory", "MinValue"),
        2048
    );
    assert_eq!(
        parameter_number(&template, "ManagedInstancesMemory", "Default"),
        2048
    );
    assert_eq!(
        parameter_number(&template, "ManagedInstancesConcurrency", "Default"),
        8
    );
    assert_eq!(
        parameter_number(&template, "ManagedInstancesConcurrency", "MinValue"),
        1
    );

    let conditions = &template["Conditions"];
    let (equals, arguments) = function(&conditions["OnLambda"]).expect("an intrinsic");
    assert_eq!(equals, "Equals");
    assert_eq!(intrinsic(&arguments[0]), "Ref CapacityProviderArn");
    assert_eq!(arguments[1], "");
    let (not, argument) = function(&conditions["OnManagedInstances"]).expect("an intrinsic");
    assert_eq!(not, "Not");
    assert_eq!(argument[0], conditions["OnLambda"], "the one or the other");
}

#[test]
fn each_function_has_a_twin_on_managed_instances_that_differs_in_its_compute_alone() {
    let template = as_written();
    let mut functions: Vec<&str> = resources(&template)
        .iter()
        .filter(|(_, item)| item["Type"] == "AWS::Serverless::Function")
        .filter_map(|(name, _)| name.as_str())
        .collect();
    functions.sort_unstable();
    let managed: Vec<String> = FUNCTIONS
        .iter()
        .map(|name| format!("Managed{name}"))
        .collect();
    let mut expected: Vec<&str> = FUNCTIONS
        .iter()
        .copied()
        .chain(managed.iter().map(String::as_str))
        .collect();
    expected.sort_unstable();
    assert_eq!(functions, expected, "each function twice");

    for name in FUNCTIONS {
        let lambda = resource(&template, name);
        let twin = resource(&template, &format!("Managed{name}"));
        // Conditions: the function's own (none for the first consumer),
        // and the compute's.
        let condition = lambda["Condition"].as_str().expect("a condition");
        let own = condition.strip_suffix("OnLambda").expect("…OnLambda");
        let twins = format!("{own}OnManagedInstances");
        assert_eq!(twin["Condition"], twins.as_str(), "{name}");
        if !own.is_empty() {
            for (combined, compute) in [
                (condition, "OnLambda"),
                (twins.as_str(), "OnManagedInstances"),
            ] {
                let (and, parts) =
                    function(&template["Conditions"][combined]).expect("a declared condition");
                assert_eq!(and, "And", "{combined}");
                let parts: Vec<String> = one_or_many(parts).into_iter().map(intrinsic).collect();
                assert_eq!(
                    parts,
                    [format!("Condition {own}"), format!("Condition {compute}")]
                );
            }
        }

        let properties = &twin["Properties"];
        let capacity = &properties["CapacityProviderConfig"];
        assert_eq!(
            intrinsic(&capacity["Arn"]),
            "Ref CapacityProviderArn",
            "{name}"
        );
        assert_eq!(
            intrinsic(&capacity["PerExecutionEnvironmentMaxConcurrency"]),
            "Ref ManagedInstancesConcurrency"
        );
        // A function on Managed Instances runs as a published version.
        assert_eq!(properties["AutoPublishAlias"], "live", "{name}");
        assert_eq!(
            intrinsic(&properties["MemorySize"]),
            "Ref ManagedInstancesMemory"
        );
        // Not the function's name (a switch creates the twin before it
        // deletes the function), and no suffix on it (a longest stack's and
        // consumer's names would pass Lambda's 64 characters): CloudFormation's.
        assert!(properties["FunctionName"].is_null(), "{name}");
        assert!(!lambda["Properties"]["FunctionName"].is_null(), "{name}");
        for on_lambda in ["CapacityProviderConfig", "AutoPublishAlias"] {
            assert!(
                lambda["Properties"][on_lambda].is_null(),
                "{name}: {on_lambda}"
            );
        }

        // Everything else (its code, role, environment, events) is the same.
        let mut same = twin.clone();
        same["Condition"] = lambda["Condition"].clone();
        let same_properties = same["Properties"].as_mapping_mut().expect("properties");
        same_properties.remove("CapacityProviderConfig");
        same_properties.remove("AutoPublishAlias");
        for kept in ["MemorySize", "FunctionName"] {
            same_properties.insert(kept.into(), lambda["Properties"][kept].clone());
        }
        assert_eq!(&same, lambda, "{name}");
    }
}

#[test]
fn what_names_a_function_names_the_one_its_compute_deploys() {
    let template = as_written();
    let outputs = template["Outputs"].as_mapping().expect("outputs");
    let mut named = 0;
    for (id, item) in resources(&template).iter().chain(outputs) {
        if item["Type"] == "AWS::Serverless::Function" {
            continue;
        }
        let on = |managed: bool| {
            let mut item = item.clone();
            on_compute(&mut item, managed);
            let mut found = BTreeSet::new();
            references_without(&item, "", &mut found);
            found
        };
        let (on_lambda, on_managed) = (on(false), on(true));
        for name in FUNCTIONS {
            let twin = format!("Managed{name}");
            assert!(!on_lambda.contains(&twin), "{id:?} names {twin} on Lambda");
            assert!(
                !on_managed.contains(name),
                "{id:?} names {name} on Managed Instances"
            );
            assert_eq!(
                on_lambda.contains(name),
                on_managed.contains(&twin),
                "{id:?}: {name} on Lambda, {twin} on Managed Instances"
            );
            named += usize::from(on_lambda.contains(name));
        }
    }
    // Each function's two alarms and output, and the dashboard: 4 × 3 + 4.
    assert_eq!(named, 16);
}
