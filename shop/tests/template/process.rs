//! The shop's process, `payments`: a consumer (everything the first one and
//! the status consumer have, on its own queue, table, role, alarms, query and
//! dashboard row), plus what a process adds: the table's index of due
//! deadlines, the event store's name and the rights to append to it, its
//! sweep's period, its window's parameter, its deadlines on the dashboard.

use super::*;

/// What the status consumer's resources and outputs are named, and what
/// the payments process's: one definition renders both.
fn as_payments(text: &str) -> String {
    text.replace("status consumer", "payments process")
        .replace("Status consumer", "Payments process")
        .replace("Status", "Payments")
        .replace("status", "payments")
}

/// A value of the template as the payments process would have it were it
/// the status consumer: the status consumer's, renamed.
fn renamed(value: &Value) -> Value {
    let text = serde_yaml::to_string(value).expect("YAML");
    serde_yaml::from_str(&as_payments(&text)).expect("YAML")
}

/// `value` without `key` (a mapping's), as a copy.
fn without(value: &Value, key: &str) -> Value {
    let mut copy = value.clone();
    if let Some(mapping) = copy.as_mapping_mut() {
        mapping.remove(key);
    }
    copy
}

/// The process is deployed on demand, only with the producer's topic, like
/// the status consumer.
#[test]
fn the_payments_process_is_optional_and_off_by_default() {
    let template = template();
    let parameter = &template["Parameters"]["DeployPaymentsConsumer"];
    assert_eq!(parameter["Default"], "false");
    assert_eq!(strings(&parameter["AllowedValues"]), ["true", "false"]);
    assert!(
        parameter["Description"]
            .as_str()
            .is_some_and(|text| text.contains("payments-process: Each order's payment")),
        "{parameter:?}"
    );
    let (and, parts) = function(&template["Conditions"]["WithPaymentsConsumer"]).expect("And");
    assert_eq!(and, "And");
    assert_eq!(
        intrinsic(&function(&parts[0]).expect("Equals").1[0]),
        "Ref DeployPaymentsConsumer"
    );
    assert_eq!(intrinsic(&parts[1]), "Condition WithProducer");
    let rule = &template["Rules"]["PaymentsConsumerNeedsTheProducer"];
    assert_eq!(
        intrinsic(
            &function(&rule["Assertions"][0]["Assert"])
                .expect("Equals")
                .1[0]
        ),
        "Ref DeployProducer"
    );

    // Its resources, and only they, carry its condition; nothing else names
    // one of them but in its branch of an `!If [WithPaymentsConsumer, ..]`.
    let resources = template["Resources"].as_mapping().expect("resources");
    let payments: BTreeSet<String> = resources
        .iter()
        .filter(|(_, item)| item["Condition"] == "WithPaymentsConsumer")
        .filter_map(|(name, _)| name.as_str().map(str::to_owned))
        .collect();
    assert!(payments.iter().all(|name| name.starts_with("Payments")));
    let outputs = template["Outputs"].as_mapping().expect("outputs");
    for (name, item) in resources.iter().chain(outputs) {
        if item["Condition"] == "WithPaymentsConsumer" {
            continue;
        }
        let mut named = BTreeSet::new();
        references_without(item, "WithPaymentsConsumer", &mut named);
        let from_payments: Vec<&String> = named.intersection(&payments).collect();
        assert!(
            from_payments.is_empty(),
            "{name:?} names {from_payments:?} without the WithPaymentsConsumer condition"
        );
    }
}

/// Every consumer is whole: each resource and output the first consumer
/// has, the process has under its own prefix and condition (as the
/// generator's own test checks for any crate); and each of the status
/// consumer's is the process's, renamed, but for what a process adds.
#[test]
fn the_payments_process_has_everything_a_consumer_has() {
    let template = template();
    let resources = template["Resources"].as_mapping().expect("resources");
    let ids: BTreeSet<&str> = resources.keys().filter_map(Value::as_str).collect();
    let shared = [
        "AlarmTopicKey",
        "AlarmTopicKeyAlias",
        "AlarmTopic",
        "AlarmTopicPolicy",
        "Dashboard",
    ];
    let first: Vec<&str> = ids
        .iter()
        .copied()
        .filter(|id| resources[*id]["Condition"].is_null() || *id == "EventsQueuePolicy")
        .filter(|id| !shared.contains(id))
        .collect();
    assert!(first.len() >= 20, "{first:?}");
    for id in &first {
        let theirs = match *id {
            "ProjectionTable" => "PaymentsTable".to_owned(),
            id if id.starts_with("Events") => id.replacen("Events", "Payments", 1),
            id => format!("Payments{id}"),
        };
        assert!(
            ids.contains(theirs.as_str()),
            "no {theirs} (the first has {id})"
        );
        assert_eq!(
            resource(&template, &theirs)["Condition"],
            "WithPaymentsConsumer",
            "{theirs}"
        );
    }

    // The status consumer's resources and outputs, renamed, are the
    // process's; what differs is what a process adds (checked below).
    let statuses: Vec<&str> = ids
        .iter()
        .copied()
        .filter(|id| resources[*id]["Condition"] == "WithStatusConsumer")
        .collect();
    assert_eq!(statuses.len(), 25, "{statuses:?}");
    let processes: BTreeSet<&str> = ids
        .iter()
        .copied()
        .filter(|id| resources[*id]["Condition"] == "WithPaymentsConsumer")
        .collect();
    let expected: BTreeSet<String> = statuses
        .iter()
        .map(|id| as_payments(id))
        .chain(
            [
                "PaymentsDeadlinesFailingAlarm",
                "PaymentsDeadlinesBehindAlarm",
            ]
            .map(str::to_owned),
        )
        .collect();
    assert_eq!(
        processes,
        expected.iter().map(String::as_str).collect(),
        "the status consumer's resources and the deadlines' alarms"
    );
    for status in statuses {
        let name = as_payments(status);
        let ours = comparable(normalised(resource(&template, &name), &name));
        let mut theirs = renamed(resource(&template, status));
        if status == "StatusProjectorRole" {
            // A gap's events: the process reads them by its append grants.
            if let Some(statements) =
                theirs["Properties"]["Policies"][0]["PolicyDocument"]["Statement"].as_sequence_mut()
            {
                statements.retain(|s| !format!("{s:?}").contains("\"ReadGapEvents\""));
            }
        }
        assert_eq!(ours, comparable(theirs), "{name} is not {status}, renamed");
    }
    let outputs = template["Outputs"].as_mapping().expect("outputs");
    let mut compared = 0;
    for (name, output) in outputs {
        let name = name.as_str().expect("a name");
        if output["Condition"] != "WithStatusConsumer" {
            continue;
        }
        let ours = as_payments(name);
        assert_eq!(
            template["Outputs"][ours.as_str()],
            renamed(output),
            "{ours}"
        );
        compared += 1;
    }
    assert!(compared >= 6, "{compared} outputs");
}

/// A resource of the process without what a process adds (and with the
/// values that name it as a process put back as a consumer's), to compare
/// with the status consumer's.
fn normalised(value: &Value, name: &str) -> Value {
    let mut value = value.clone();
    let properties = &mut value["Properties"];
    match name {
        "PaymentsTable" => {
            let attributes = properties["AttributeDefinitions"]
                .as_sequence_mut()
                .expect("attributes");
            attributes.retain(|a| a["AttributeName"] == "pk" || a["AttributeName"] == "sk");
            *properties = without(properties, "GlobalSecondaryIndexes");
        }
        "PaymentsProjectorRole" => {
            let statements = properties["Policies"][0]["PolicyDocument"]["Statement"]
                .as_sequence_mut()
                .expect("statements");
            // The index of due deadlines, and what a step's append calls.
            let added = [
                "FindDueDeadlines",
                "ReadItsStart",
                "AppendEvents",
                "ReadStreams",
                "ReadRequests",
            ];
            statements.retain(|s| !added.iter().any(|sid| s["Sid"] == *sid));
        }
        "PaymentsProjectorFunction" => {
            value["Metadata"]["BuildProperties"]["Binary"] = "payments-projector".into();
            let properties = &mut value["Properties"];
            let variables = &mut properties["Environment"]["Variables"];
            *variables = without(variables, "PAYMENT_WINDOW_SECONDS");
        }
        _ => {}
    }
    value
}

/// A resource without what each consumer words its own way: a function's
/// description and its sweep's schedule (a process's has its own period).
fn comparable(mut value: Value) -> Value {
    if value["Type"] == "AWS::Serverless::Function" {
        let properties = &mut value["Properties"];
        properties["Description"] = Value::Null;
        properties["Events"]["ParkedSweep"]["Properties"] = Value::Null;
    }
    value
}

/// The table: the contract's key schema and TTL, plus the sparse index of
/// due deadlines the sweep queries (keys only: it reads the state itself).
#[test]
fn the_payments_table_has_the_index_of_due_deadlines() {
    let template = template();
    let table = &resource(&template, "PaymentsTable")["Properties"];
    assert_eq!(
        table["TimeToLiveSpecification"]["AttributeName"],
        TTL_ATTRIBUTE
    );
    let attribute = |name: &str| {
        table["AttributeDefinitions"]
            .as_sequence()
            .expect("attributes")
            .iter()
            .find(|a| a["AttributeName"] == name)
            .map(|a| a["AttributeType"].as_str().unwrap_or("?").to_owned())
    };
    assert_eq!(attribute("dueShard").as_deref(), Some("S"));
    assert_eq!(attribute("dueAt").as_deref(), Some("N"));
    let indexes = table["GlobalSecondaryIndexes"]
        .as_sequence()
        .expect("indexes");
    assert_eq!(indexes.len(), 1, "one index: {indexes:?}");
    let due = &indexes[0];
    assert_eq!(due["IndexName"], "due");
    let keys: Vec<(&str, &str)> = due["KeySchema"]
        .as_sequence()
        .expect("keys")
        .iter()
        .map(|key| {
            (
                key["AttributeName"].as_str().unwrap_or("?"),
                key["KeyType"].as_str().unwrap_or("?"),
            )
        })
        .collect();
    assert_eq!(keys, [("dueShard", "HASH"), ("dueAt", "RANGE")]);
    assert_eq!(due["Projection"]["ProjectionType"], "KEYS_ONLY");
    assert!(
        due["ProvisionedThroughput"].is_null(),
        "on demand, as the table"
    );
    assert_eq!(table["BillingMode"], "PAY_PER_REQUEST");
    // No other table has it.
    for name in ["ProjectionTable", "StatusTable", "EventsTable"] {
        assert!(
            resource(&template, name)["Properties"]["GlobalSecondaryIndexes"].is_null(),
            "{name}"
        );
    }
}

/// The function: the process's binary, the event store it appends to, the
/// window, and its sweep on a period of its own (the deadlines' precision).
#[test]
fn the_payments_function_runs_the_process_with_the_event_store_and_its_window() {
    let template = template();
    let function = resource(&template, "PaymentsProjectorFunction");
    assert_eq!(
        function["Metadata"]["BuildProperties"]["Binary"],
        "payments-process"
    );
    assert!(
        std::path::Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/src/bin/payments-process.rs"
        ))
        .exists(),
        "the payments-process binary target"
    );
    // A consumer's names: turning a consumer into a process updates its
    // function and log group in place.
    let properties = &function["Properties"];
    assert_eq!(
        intrinsic(&properties["FunctionName"]),
        "Sub ${AWS::StackName}-payments-projector"
    );
    assert_eq!(
        properties["Description"],
        "Each order's payment: cancels an order not paid in time, requests refunds."
    );

    // Its variables: what the engine reads, and the shop's window.
    let (variables, names) = environment(&template, "PaymentsProjectorFunction");
    for name in &names {
        assert!(
            VARIABLES.contains(name)
                || RUNTIME_VARIABLES.contains(name)
                || *name == "PAYMENT_WINDOW_SECONDS",
            "{name}: the code does not read it"
        );
    }
    assert!(VARIABLES.contains(&"EVENT_STORE_TABLE"));
    assert_eq!(intrinsic(&variables["TABLE_NAME"]), "Ref PaymentsTable");
    assert!(
        format!("{:?}", variables["EVENT_STORE_TABLE"]).contains("EventsTable"),
        "{:?}",
        variables["EVENT_STORE_TABLE"]
    );
    assert_eq!(
        intrinsic(&variables["METRICS_SERVICE"]),
        "Sub ${AWS::StackName}-payments"
    );
    assert_eq!(
        intrinsic(&variables["PAYMENT_WINDOW_SECONDS"]),
        "Ref PaymentWindowSeconds"
    );
    let window = &template["Parameters"]["PaymentWindowSeconds"];
    assert_eq!(window["Type"], "Number");
    assert_eq!(
        window["Default"].as_u64(),
        Some(shop::payments::DEFAULT_WINDOW_SECONDS)
    );
    assert_eq!(
        window["MinValue"].as_u64(),
        Some(*shop::payments::WINDOW_RANGE.start())
    );
    assert_eq!(
        window["MaxValue"].as_u64(),
        Some(*shop::payments::WINDOW_RANGE.end())
    );
    // Every value the parameter allows, the process takes.
    for seconds in allowed_numbers(&template, &variables["PAYMENT_WINDOW_SECONDS"]) {
        assert!(
            shop::payments::window_of(Some(&seconds.to_string())).is_ok(),
            "{seconds}"
        );
    }
    let (others, _) = environment(&template, "StatusProjectorFunction");
    assert!(
        others["PAYMENT_WINDOW_SECONDS"].is_null(),
        "the status consumer: PAYMENT_WINDOW_SECONDS"
    );
    // The projector reads the key items from the event store (personal.rs),
    // and has no window.
    let (others, _) = environment(&template, "ProjectorFunction");
    assert!(others["PAYMENT_WINDOW_SECONDS"].is_null(), "the projector");

    // Its sweep: the schedule's event, on the period its parameter sets,
    // by default a minute: how late a deadline may fire.
    let sweep = &properties["Events"]["ParkedSweep"];
    assert_eq!(sweep["Type"], "Schedule");
    assert_eq!(
        intrinsic(&sweep["Properties"]["Schedule"]),
        "Ref PaymentsDeadlinePeriod"
    );
    let period = &template["Parameters"]["PaymentsDeadlinePeriod"];
    assert_eq!(period["Type"], "String");
    assert_eq!(period["Default"], "rate(1 minute)");
    for said in [
        period["Description"].as_str(),
        sweep["Properties"]["Description"].as_str(),
    ] {
        assert!(
            said.is_some_and(|text| text.contains("deadline") && text.contains("late")
                || text.contains("precision")),
            "the period is the deadlines' precision: say so ({said:?})"
        );
    }
    assert!(!period["AllowedPattern"].is_null());
}

/// The role: the consumer's grants on its own queue, table and logs; the
/// index of due deadlines; and on the event store exactly what a step's
/// append calls: nothing that deletes or updates, no key, no topic.
#[test]
fn the_payments_role_grants_exactly_what_the_process_calls() {
    let template = template();
    let grants = lambda_role_grants(&template, "PaymentsProjectorRole");
    let consumer = lambda_role_grants(&template, "StatusProjectorRole");
    for service in ["sqs:", "logs:", "xray:"] {
        assert_eq!(
            granted(&grants, service),
            granted(&consumer, service),
            "{service}"
        );
    }
    for (action, _) in &grants {
        assert!(
            ["sqs:", "dynamodb:", "logs:", "xray:"]
                .iter()
                .any(|service| action.starts_with(service)),
            "{action}: the process calls no such service (no KMS: the tables use DynamoDB's own key)"
        );
    }
    for (service, on) in [
        ("sqs:", "GetAtt PaymentsQueue.Arn"),
        ("logs:", "GetAtt PaymentsProjectorLogGroup.Arn"),
    ] {
        assert_eq!(
            granted_on(&grants, service),
            BTreeSet::from([on.to_owned()]),
            "{service}"
        );
    }

    // DynamoDB, by resource.
    let on = |resource: &str| -> BTreeSet<&str> {
        grants
            .iter()
            .filter(|(action, resources)| {
                action.starts_with("dynamodb:") && resources.iter().any(|r| r == resource)
            })
            .map(|(action, _)| action.as_str())
            .collect()
    };
    let mut consumer_on_its_table: BTreeSet<&str> = consumer
        .iter()
        .filter(|(action, _)| action.starts_with("dynamodb:"))
        .map(|(action, _)| action.as_str())
        .collect();
    // And its start, read once as it starts (its table's creation).
    consumer_on_its_table.insert("dynamodb:DescribeTable");
    assert_eq!(on("GetAtt PaymentsTable.Arn"), consumer_on_its_table);
    assert_eq!(
        on("Sub ${PaymentsTable.Arn}/index/due"),
        BTreeSet::from(["dynamodb:Query"])
    );
    // On which items of the event store: events_table.rs evaluates it.
    assert_eq!(
        on("GetAtt EventsTable.Arn"),
        BTreeSet::from([
            "dynamodb:ConditionCheckItem",
            "dynamodb:GetItem",
            "dynamodb:PutItem",
            "dynamodb:Query",
        ])
    );
    assert_eq!(
        granted_on(&grants, "dynamodb:"),
        BTreeSet::from([
            "GetAtt PaymentsTable.Arn".to_owned(),
            "Sub ${PaymentsTable.Arn}/index/due".to_owned(),
            "GetAtt EventsTable.Arn".to_owned(),
        ]),
        "its table, its index, the event store: nothing else (not the event store's stream)"
    );
    // Nobody else may append: the status consumer's role reads a gap's
    // events only, the projector's those and its key items
    // (events_table.rs, personal.rs).
    let theirs = lambda_role_grants(&template, "StatusProjectorRole");
    assert!(
        theirs
            .iter()
            .filter(|(_, resources)| resources.iter().any(|r| r.contains("EventsTable")))
            .all(|(action, _)| action == "dynamodb:Query"),
        "StatusProjectorRole"
    );
    let theirs = lambda_role_grants(&template, "ProjectorRole");
    for (action, resources) in &theirs {
        if resources.iter().any(|r| r.contains("EventsTable")) {
            assert!(
                ["dynamodb:BatchGetItem", "dynamodb:Query"].contains(&action.as_str())
                    && resources.as_slice() == ["GetAtt EventsTable.Arn".to_owned()],
                "ProjectorRole: {action} on {resources:?}"
            );
        }
    }
}

/// Alarmed for what signals trouble: every alarm a consumer has, and
/// deadlines failing (and moving for long: `deadlines.rs`).
/// Its deadlines on its dashboard row, only with it.
#[test]
fn the_payments_process_is_alarmed_and_on_the_dashboard() {
    let template = template();
    let resources = template["Resources"].as_mapping().expect("resources");
    let alarms: BTreeSet<&str> = resources
        .values()
        .filter(|item| {
            item["Type"] == "AWS::CloudWatch::Alarm" && item["Condition"] == "WithPaymentsConsumer"
        })
        .filter_map(|item| item["Properties"]["MetricName"].as_str())
        .collect();
    for metric in [
        "Gap",
        "NotCreated",
        "SweepIncomplete",
        "HandlerError",
        "Rejected",
        "Conflict",
        "ParkingFull",
        "OldestParkedAge",
        "DeadlinesFailed",
    ] {
        assert!(alarms.contains(metric), "no alarm on {metric}: {alarms:?}");
    }
    let failing = &resource(&template, "PaymentsDeadlinesFailingAlarm")["Properties"];
    assert_eq!(
        intrinsic(&failing["Dimensions"][0]["Value"]),
        "Sub ${AWS::StackName}-payments"
    );
    assert!(
        one_or_many(&failing["AlarmActions"])
            .iter()
            .any(|action| intrinsic(action) == "Ref AlarmTopic")
    );

    let emitted = sequence_guard::metrics::emitted();
    let every = dashboard_metrics_with(
        &template,
        &["WithProducer", "WithStatusConsumer", "WithPaymentsConsumer"],
    );
    let shown: BTreeSet<&str> = every
        .iter()
        .filter(|[_, _, _, value]| value == "<AWS::StackName>-payments")
        .map(|[_, metric, _, _]| metric.as_str())
        .collect();
    for metric in &shown {
        assert!(emitted.contains(metric), "{metric} is not emitted");
    }
    for metric in [
        "Applied",
        "DeadlinesFired",
        "DeadlinesMoved",
        "DeadlinesFailed",
    ] {
        assert!(shown.contains(metric), "the dashboard shows {metric}");
    }
    for conditions in [&["WithProducer", "WithStatusConsumer"][..], &[]] {
        for [_, metric, _, value] in dashboard_metrics_with(&template, conditions) {
            assert!(
                !value.contains("Payments") && !value.ends_with("-payments"),
                "{metric} of {value} without the payments process"
            );
        }
    }
}

/// No two widgets of the dashboard overlap, whatever is deployed: the
/// process's row is taller than a consumer's.
#[test]
fn the_dashboards_rows_do_not_overlap() {
    let template = template();
    for conditions in [
        &["WithProducer", "WithStatusConsumer", "WithPaymentsConsumer"][..],
        &["WithProducer", "WithPaymentsConsumer"],
        &["WithProducer"],
    ] {
        let body = render(
            &resource(&template, "Dashboard")["Properties"]["DashboardBody"],
            conditions,
        );
        let body: serde_json::Value = serde_json::from_str(&body).expect("JSON");
        let widgets: Vec<[u64; 4]> = body["widgets"]
            .as_array()
            .expect("widgets")
            .iter()
            .map(|w| ["x", "y", "width", "height"].map(|k| w[k].as_u64().expect(k)))
            .collect();
        for (i, a) in widgets.iter().enumerate() {
            assert!(a[0] + a[2] <= 24, "{a:?} is wider than the dashboard");
            for b in &widgets[i + 1..] {
                let apart = a[0] + a[2] <= b[0]
                    || b[0] + b[2] <= a[0]
                    || a[1] + a[3] <= b[1]
                    || b[1] + b[3] <= a[1];
                assert!(apart, "{a:?} and {b:?} overlap ({conditions:?})");
            }
        }
    }
}
