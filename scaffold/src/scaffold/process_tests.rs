//! What a process adds to a consumer, as the generator renders it for any
//! crate; and the variables a consumer declares.

use std::path::Path;

use serde_yaml::Value;

use super::declaration::DeclaredDefault;
use super::template::{builds_only, template};
use super::{ConsumerDeclaration, DeclaredVariable, Error, Names, deployment};

fn variable(
    name: &str,
    default: DeclaredDefault,
    bounds: (Option<i64>, Option<i64>),
) -> DeclaredVariable {
    DeclaredVariable {
        name: name.to_owned(),
        description: "What it sets.".to_owned(),
        default,
        min: bounds.0,
        max: bounds.1,
    }
}

/// `returns`, a process with a numeric and a text variable, between two
/// consumers that are not.
fn further() -> [ConsumerDeclaration; 3] {
    let returns = ConsumerDeclaration::new("returns", "Returns a parcel not collected.", false)
        .and_then(|declared| {
            declared.with(
                true,
                vec![
                    variable(
                        "COLLECT_WITHIN_SECONDS",
                        DeclaredDefault::Number(86_400),
                        (Some(60), None),
                    ),
                    variable(
                        "RETURN_DEPOT",
                        DeclaredDefault::Text("north".into()),
                        (None, None),
                    ),
                ],
            )
        })
        .expect("returns");
    [
        ConsumerDeclaration::new("audit", "Each parcel's audit trail.", true).expect("audit"),
        returns,
        ConsumerDeclaration::new("late-mail", "Parcels that are late.", false).expect("late"),
    ]
}

fn rendered() -> (String, Value) {
    let names = Names::new("parcels").expect("a good name");
    let text = template(&names, &further()).expect("the template");
    let yaml = serde_yaml::from_str(&text).expect("YAML");
    (text, yaml)
}

/// A `!Ref X` / `!GetAtt X` / `!Sub X` as `Ref X`.
fn tagged(value: &Value) -> String {
    match value {
        Value::Tagged(tagged) => format!(
            "{} {}",
            tagged.tag.to_string().trim_start_matches('!'),
            tagged.value.as_str().unwrap_or("?")
        ),
        other => format!("{other:?}"),
    }
}

#[test]
fn a_process_gets_its_index_of_deadlines_the_event_store_and_its_sweeps_period() {
    let (text, yaml) = rendered();
    let resources = &yaml["Resources"];

    // Its table: the sparse index `due`, keys only.
    let table = &resources["ReturnsTable"]["Properties"];
    let attributes: Vec<(String, String)> = table["AttributeDefinitions"]
        .as_sequence()
        .expect("attributes")
        .iter()
        .map(|a| {
            let field = |name: &str| a[name].as_str().unwrap_or_default().to_owned();
            (field("AttributeName"), field("AttributeType"))
        })
        .collect();
    let pair = |a: &str, b: &str| (a.to_owned(), b.to_owned());
    assert_eq!(
        attributes,
        [
            pair("pk", "S"),
            pair("sk", "S"),
            pair("dueShard", "S"),
            pair("dueAt", "N")
        ]
    );
    let indexes = table["GlobalSecondaryIndexes"]
        .as_sequence()
        .expect("indexes");
    assert_eq!(indexes.len(), 1);
    assert_eq!(indexes[0]["IndexName"], "due");
    assert_eq!(indexes[0]["KeySchema"][0]["AttributeName"], "dueShard");
    assert_eq!(indexes[0]["KeySchema"][0]["KeyType"], "HASH");
    assert_eq!(indexes[0]["KeySchema"][1]["AttributeName"], "dueAt");
    assert_eq!(indexes[0]["KeySchema"][1]["KeyType"], "RANGE");
    assert_eq!(indexes[0]["Projection"]["ProjectionType"], "KEYS_ONLY");
    for other in ["AuditTable", "LateMailTable", "ProjectionTable"] {
        let properties = &resources[other]["Properties"];
        assert!(properties["GlobalSecondaryIndexes"].is_null(), "{other}");
        assert_eq!(
            properties["AttributeDefinitions"]
                .as_sequence()
                .map(Vec::len),
            Some(2)
        );
    }

    // Its function: the binary `-process` under a consumer's names, the
    // event store's name, its variables.
    let function = &resources["ReturnsProjectorFunction"];
    assert_eq!(
        function["Metadata"]["BuildProperties"]["Binary"],
        "parcels-returns-process"
    );
    let properties = &function["Properties"];
    assert_eq!(
        tagged(&properties["FunctionName"]),
        "Sub ${AWS::StackName}-returns-projector"
    );
    assert_eq!(
        tagged(&resources["ReturnsProjectorLogGroup"]["Properties"]["LogGroupName"]),
        "Sub /aws/lambda/${AWS::StackName}-returns-projector"
    );
    let variables = &properties["Environment"]["Variables"];
    assert_eq!(tagged(&variables["EVENT_STORE_TABLE"]), "Ref EventsTable");
    assert_eq!(
        tagged(&variables["COLLECT_WITHIN_SECONDS"]),
        "Ref CollectWithinSeconds"
    );
    assert_eq!(tagged(&variables["RETURN_DEPOT"]), "Ref ReturnDepot");
    // Every consumer reads a gap's events from the event store: its name,
    // and a Query on its streams' items alone.
    // (a further consumer is deployed with the producer only; the first,
    // without it too, names it with it)
    for other in ["AuditProjectorFunction", "LateMailProjectorFunction"] {
        let variables = &resources[other]["Properties"]["Environment"]["Variables"];
        assert_eq!(
            tagged(&variables["EVENT_STORE_TABLE"]),
            "Ref EventsTable",
            "{other}"
        );
    }
    let first = format!(
        "{:?}",
        resources["ProjectorFunction"]["Properties"]["Environment"]["Variables"]["EVENT_STORE_TABLE"]
    );
    assert!(
        first.contains("WithProducer") && first.contains("EventsTable"),
        "{first}"
    );
    // (a process's append grants hold the same read: no second grant)
    let process_policy = format!(
        "{:?}",
        resources["ReturnsProjectorRole"]["Properties"]["Policies"][0]["PolicyDocument"]
    );
    assert!(
        !process_policy.contains("ReadGapEvents"),
        "{process_policy}"
    );
    assert!(process_policy.contains("ReadStreams"), "{process_policy}");
    // Its start, its table's creation, read as it starts.
    assert!(
        process_policy.contains("ReadItsStart")
            && process_policy.contains("dynamodb:DescribeTable"),
        "{process_policy}"
    );
    for role in ["AuditProjectorRole", "ProjectorRole"] {
        let policy = format!(
            "{:?}",
            resources[role]["Properties"]["Policies"][0]["PolicyDocument"]["Statement"]
        );
        let at = policy
            .find("ReadGapEvents")
            .unwrap_or_else(|| panic!("{role}: {policy}"));
        let grant = &policy[at..at + 600.min(policy.len() - at)];
        assert!(
            grant.contains("dynamodb:Query")
                && grant.contains("STREAM#*")
                && !grant.contains("SUBJECT#"),
            "{role}: {grant}"
        );
    }

    // Its variables' parameters: a Number within its bounds, a String.
    let parameters = &yaml["Parameters"];
    let number = &parameters["CollectWithinSeconds"];
    assert_eq!(number["Type"], "Number");
    assert_eq!(number["Default"], 86_400);
    assert_eq!(number["MinValue"], 60);
    assert!(number["MaxValue"].is_null());
    let text_parameter = &parameters["ReturnDepot"];
    assert_eq!(text_parameter["Type"], "String");
    assert_eq!(text_parameter["Default"], "north");
    assert!(
        text_parameter["Description"]
            .as_str()
            .is_some_and(|d| d.contains("RETURN_DEPOT of the returns process")),
        "{text_parameter:?}"
    );

    // Its sweep: on its own period, the deadlines' precision.
    let sweep = &properties["Events"]["ParkedSweep"]["Properties"];
    assert_eq!(tagged(&sweep["Schedule"]), "Ref ReturnsDeadlinePeriod");
    assert!(
        sweep["Description"]
            .as_str()
            .is_some_and(|d| d.contains("precision")),
        "{sweep:?}"
    );
    let period = &parameters["ReturnsDeadlinePeriod"];
    assert_eq!(period["Default"], "rate(1 minute)");
    assert!(
        period["Description"]
            .as_str()
            .is_some_and(|d| d.contains("late"))
    );
    let audit_sweep = &resources["AuditProjectorFunction"]["Properties"]["Events"]["ParkedSweep"];
    assert_eq!(audit_sweep["Properties"]["Schedule"], "rate(5 minutes)");

    // Its role: the consumer's, plus the index and the event store.
    let statements = resources["ReturnsProjectorRole"]["Properties"]["Policies"][0]
        ["PolicyDocument"]["Statement"]
        .as_sequence()
        .expect("statements");
    let on = |sid: &str| {
        let statement = statements
            .iter()
            .find(|s| s["Sid"] == sid)
            .unwrap_or_else(|| panic!("no {sid}"));
        let actions: Vec<&str> = statement["Action"]
            .as_sequence()
            .expect("actions")
            .iter()
            .filter_map(Value::as_str)
            .collect();
        (actions, tagged(&statement["Resource"]))
    };
    assert_eq!(
        on("FindDueDeadlines"),
        (
            vec!["dynamodb:Query"],
            "Sub ${ReturnsTable.Arn}/index/due".to_owned()
        )
    );
    // What an append calls, each on its items of the event store (the
    // shop's template tests evaluate them).
    for (sid, actions, keys) in [
        (
            "AppendEvents",
            vec!["dynamodb:PutItem"],
            vec!["STREAM#*", "REQUEST#*"],
        ),
        (
            "ReadStreams",
            vec!["dynamodb:ConditionCheckItem", "dynamodb:Query"],
            vec!["STREAM#*"],
        ),
        ("ReadRequests", vec!["dynamodb:GetItem"], vec!["REQUEST#*"]),
    ] {
        assert_eq!(
            on(sid),
            (actions, "GetAtt EventsTable.Arn".to_owned()),
            "{sid}"
        );
        let statement = statements.iter().find(|s| s["Sid"] == sid).expect(sid);
        let condition = &statement["Condition"];
        let leading: Vec<&str> = condition["ForAllValues:StringLike"]["dynamodb:LeadingKeys"]
            .as_sequence()
            .expect("leading keys")
            .iter()
            .filter_map(Value::as_str)
            .collect();
        assert_eq!(leading, keys, "{sid}");
        assert_eq!(condition["Null"]["dynamodb:LeadingKeys"], "false", "{sid}");
    }
    let audit_role = &resources["AuditProjectorRole"]["Properties"]["Policies"][0];
    assert_eq!(
        audit_role["PolicyDocument"]["Statement"]
            .as_sequence()
            .map(Vec::len),
        Some(statements.len() - 4),
        "the others' roles: as before, with the read of a gap's events the process's append grants hold"
    );

    // Its dashboard row: the deadlines' line under the consumer's; the next
    // consumer's row below it.
    assert!(text.contains("\"title\": \"Returns process: deadlines\""));
    assert!(
        text.contains("[\"${MetricsNamespace}\", \"DeadlinesFired\", \"Service\", \"${Service}\"]")
    );
    let row = |title: &str| -> usize {
        let at = text.find(title).unwrap_or_else(|| panic!("no {title}"));
        let line = text[..at].rsplit_once("\"y\": ").expect("a y").1;
        line.split(',')
            .next()
            .and_then(|y| y.trim().parse().ok())
            .expect("a number")
    };
    assert_eq!(row("Audit consumer: outcomes per minute"), 36);
    assert_eq!(row("Returns process: outcomes per minute"), 60);
    assert_eq!(row("Returns process: deadlines\""), 84);
    assert_eq!(row("Late mail consumer: outcomes per minute"), 90);
}

/// Turning an existing consumer into a process (`process = true`, then
/// `sync`) updates its function and log group in place: a new function
/// name would have CloudFormation replace the function, and a new log
/// group name delete the old group with its logs. Every log group is kept
/// whatever a deploy does.
#[test]
fn a_consumer_turned_into_a_process_keeps_its_functions_names_and_logs() {
    let names = Names::new("parcels").expect("a good name");
    let consumer = ConsumerDeclaration::new("returns", "Returns a parcel not collected.", false)
        .expect("a consumer");
    let process = consumer
        .clone()
        .with(true, Vec::new())
        .expect("the same, a process");
    let yaml = |declared: ConsumerDeclaration| -> Value {
        let text = template(&names, &[declared]).expect("the template");
        serde_yaml::from_str(&text).expect("YAML")
    };
    let (before, after) = (yaml(consumer), yaml(process));
    let ids = |yaml: &Value| -> Vec<String> {
        let resources = yaml["Resources"].as_mapping().expect("resources");
        resources
            .keys()
            .filter_map(|id| id.as_str().map(str::to_owned))
            .collect()
    };
    let (was, is) = (ids(&before), ids(&after));
    for id in &was {
        assert!(
            is.contains(id),
            "{id} left the template: CloudFormation deletes it"
        );
    }
    let property = |yaml: &Value, id: &str, path: &[&str]| {
        let mut value = &yaml["Resources"][id];
        for step in path {
            value = &value[*step];
        }
        tagged(value)
    };
    for (id, path, expected) in [
        (
            "ReturnsProjectorFunction",
            &["Properties", "FunctionName"][..],
            "Sub ${AWS::StackName}-returns-projector",
        ),
        (
            "ReturnsProjectorLogGroup",
            &["Properties", "LogGroupName"],
            "Sub /aws/lambda/${AWS::StackName}-returns-projector",
        ),
        (
            "ReturnsProjectorFunction",
            &["Properties", "LoggingConfig", "LogGroup"],
            "Ref ReturnsProjectorLogGroup",
        ),
        // The twin on Managed Instances: named by CloudFormation, logging
        // to the same group.
        (
            "ManagedReturnsProjectorFunction",
            &["Properties", "FunctionName"],
            "Null",
        ),
        (
            "ManagedReturnsProjectorFunction",
            &["Properties", "LoggingConfig", "LogGroup"],
            "Ref ReturnsProjectorLogGroup",
        ),
    ] {
        assert_eq!(property(&before, id, path), expected, "{id} {path:?}");
        assert_eq!(
            property(&after, id, path),
            expected,
            "{id} {path:?}, a process"
        );
    }
    // What it runs changes: the process's binary.
    let binary = &["Metadata", "BuildProperties", "Binary"][..];
    let built = |yaml: &Value| property(yaml, "ReturnsProjectorFunction", binary);
    assert_eq!(built(&before), "String(\"parcels-returns-projector\")");
    assert_eq!(built(&after), "String(\"parcels-returns-process\")");

    // Every log group of either is kept when it leaves the template or is
    // replaced.
    let mut groups = 0;
    for yaml in [&before, &after] {
        let resources = yaml["Resources"].as_mapping().expect("resources");
        for (id, item) in resources {
            if item["Type"] == "AWS::Logs::LogGroup" {
                assert_eq!(item["DeletionPolicy"], "Retain", "{id:?}");
                assert_eq!(item["UpdateReplacePolicy"], "Retain", "{id:?}");
                groups += 1;
            }
        }
    }
    assert_eq!(
        groups, 6,
        "the dispatcher's, the first consumer's and returns', twice"
    );
}

#[test]
fn a_process_has_its_binaries_and_no_projector() {
    let names = Names::new("parcels").expect("a good name");
    let further = further();
    let files = deployment(&names, &further).expect("the files");
    let bin = |name: &str| {
        files
            .iter()
            .find(|file| file.path == Path::new(&format!("src/bin/{name}.rs")))
    };
    let process = bin("parcels-returns-process").expect("the process's function");
    assert!(
        process
            .contents
            .contains("sequence_guard::cli::projector(parcels::returns::domain())"),
        "{}",
        process.contents
    );
    assert!(bin("parcels-returns-projector").is_none());
    for tool in ["replay", "rebuild", "verify", "inspect"] {
        let file = bin(&format!("parcels-returns-{tool}")).expect(tool);
        assert!(file.contents.contains(&format!(
            "sequence_guard::cli::{tool}(parcels::returns::domain())"
        )));
    }
    // The template builds it, and only the crate's binaries.
    let built = "        Binary: parcels-returns-process\n";
    assert!(builds_only(&names, &further, built).is_ok());
    assert!(matches!(
        builds_only(
            &names,
            &further,
            "        Binary: parcels-returns-projector\n"
        ),
        Err(Error::UnknownBinary(_))
    ));
}

#[test]
fn a_variable_the_engine_reads_is_refused() {
    // GIVEN the variables src/config/mod.rs lists, read from there
    let engine = super::declaration::read_by_the_engine().expect("src/config/mod.rs's VARIABLES");
    for name in ["TABLE_NAME", "DEDUP_TTL_SECONDS", "POWERTOOLS_SERVICE_NAME"] {
        assert!(engine.contains(&name), "{name}: {engine:?}");
    }
    // (a list that no longer reads as one is an error, not an empty list)
    for drifted in [
        "",
        "pub const VARIABLES: [&str; 2] = [\"A\"];",
        "pub const VARIABLES: [&str; 1] = [\"A\"]; pub const VARIABLES: [&str; 1] = [\"B\"];",
    ] {
        let listed = super::declaration::listed(drifted);
        assert!(
            matches!(listed, Err(Error::Drifted { .. })),
            "{drifted}: {listed:?}"
        );
    }
    assert_eq!(
        super::declaration::listed(
            "pub const VARIABLES: [&str; 2] = [\n    \"A\",\n    \"B\",\n];"
        )
        .expect("a list"),
        ["A", "B"]
    );
    // THEN a consumer cannot declare one of them
    for name in engine {
        let text = DeclaredDefault::Text("x".to_owned());
        let declared = ConsumerDeclaration::new("audit", "d", true)
            .and_then(|d| d.with(false, vec![variable(name, text, (None, None))]));
        assert!(
            matches!(&declared, Err(Error::BadVariable { reason, .. }) if reason.contains("reads it itself")),
            "{name}: {declared:?}"
        );
    }
}

#[test]
fn a_variable_must_do_for_a_parameter() {
    let declare = |variables: Vec<DeclaredVariable>| {
        ConsumerDeclaration::new("audit", "d", true).and_then(|d| d.with(false, variables))
    };
    let text = |value: &str| DeclaredDefault::Text(value.to_owned());
    for bad in [
        variable("lower", text("x"), (None, None)),
        variable("A__B", text("x"), (None, None)),
        variable("TRAILING_", text("x"), (None, None)),
        variable("9LIVES", text("x"), (None, None)),
        variable("AWS_REGION", text("x"), (None, None)),
        variable("TABLE_NAME", text("x"), (None, None)),
        variable("EVENT_STORE_TABLE", text("x"), (None, None)),
        variable("QUOTED", text("a \"b\""), (None, None)),
        variable("WINDOW", text("soon"), (Some(1), None)),
        variable("WINDOW", DeclaredDefault::Number(0), (Some(1), Some(10))),
        variable("WINDOW", DeclaredDefault::Number(11), (None, Some(10))),
    ] {
        let name = bad.name.clone();
        assert!(
            matches!(declare(vec![bad]), Err(Error::BadVariable { ref variable, .. }) if *variable == name),
            "{name}"
        );
    }
    let twice = declare(vec![
        variable("WINDOW", text("a"), (None, None)),
        variable("WINDOW", text("b"), (None, None)),
    ]);
    assert!(matches!(twice, Err(Error::BadVariable { .. })));
    let good = declare(vec![variable("WINDOW", text(" 5 "), (Some(1), Some(10)))])
        .expect("a good variable");
    assert_eq!(good.environment[0].default, "5");
    assert_eq!(good.environment[0].parameter(), "Window");

    // Two consumers whose variables make one parameter: refused.
    let names = Names::new("parcels").expect("a good name");
    let with_window = |name: &str| {
        ConsumerDeclaration::new(name, "d", true)
            .and_then(|d| d.with(false, vec![variable("WINDOW", text("a"), (None, None))]))
            .expect("well formed")
    };
    assert!(matches!(
        template(&names, &[with_window("audit"), with_window("late")]),
        Err(Error::NameTaken(name)) if name == "Window"
    ));
    // Nor one the stack has.
    let shadowing = ConsumerDeclaration::new("audit", "d", true)
        .and_then(|d| {
            d.with(
                false,
                vec![variable("GAP_POLICY_X", text("a"), (None, None))],
            )
        })
        .expect("well formed");
    assert!(template(&names, &[shadowing]).is_ok());
    let taken = ConsumerDeclaration::new("audit", "d", true)
        .and_then(|d| {
            d.with(
                false,
                vec![variable("FUNCTION_MEMORY", text("a"), (None, None))],
            )
        })
        .expect("well formed");
    assert!(matches!(
        template(&names, &[taken]),
        Err(Error::NameTaken(name)) if name == "FunctionMemory"
    ));
}

#[test]
fn sync_reads_a_process_and_its_variables_from_the_metadata() {
    // GIVEN a crate's metadata, as `cargo metadata` gives it
    let package = serde_json::json!({ "metadata": { "sequence-guard": { "consumers": [
        { "name": "audit", "description": "Each parcel's audit trail." },
        { "name": "returns", "description": "Returns a parcel.", "deployed": false,
          "process": true, "environment": [
            { "name": "COLLECT_WITHIN_SECONDS", "description": "Seconds to collect.",
              "default": 86400, "min": 60 },
            { "name": "RETURN_DEPOT", "description": "Where.", "default": "north" }
        ] }
    ] } } });
    // THEN the consumer that says so is a process, with its variables
    let consumers = crate::declared_consumers(&package).expect("declared");
    assert!(!consumers[0].process && consumers[0].environment.is_empty());
    let returns = &consumers[1];
    assert!(returns.process && !returns.deployed);
    assert_eq!(returns.lambda_binary(), "process");
    let names: Vec<(&str, &str)> = returns
        .environment
        .iter()
        .map(|variable| (variable.name.as_str(), variable.default.as_str()))
        .collect();
    assert_eq!(
        names,
        [
            ("COLLECT_WITHIN_SECONDS", "86400"),
            ("RETURN_DEPOT", "north")
        ]
    );
    assert_eq!(returns.environment[0].min, Some(60));

    // A field sync does not know, or a bad variable, is refused by name.
    let unknown = serde_json::json!({ "metadata": { "sequence-guard": { "consumers": [
        { "name": "returns", "description": "d", "process": true,
          "environment": [{ "name": "X", "description": "d", "default": "a", "colour": 1 }] }
    ] } } });
    let err = crate::declared_consumers(&unknown).expect_err("unknown field");
    assert!(err.contains("unknown field `colour`"), "{err}");
    let bad = serde_json::json!({ "metadata": { "sequence-guard": { "consumers": [
        { "name": "returns", "description": "d",
          "environment": [{ "name": "lower", "description": "d", "default": "a" }] }
    ] } } });
    let err = crate::declared_consumers(&bad).expect_err("a bad name");
    assert!(
        err.contains("consumer `returns`, variable `lower`"),
        "{err}"
    );
}
