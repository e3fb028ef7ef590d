//! Personal data: the stack's key, kept and rotated; who may use it (the
//! projector to open, a producer to seal), who may not (the status
//! consumer, the dispatcher, the erase tool); and what the erase and append
//! policies grant on the event store's items.

use super::*;

/// The statements of a policy document, each `!If [condition, statement,
/// !Ref AWS::NoValue]` as its statement: the stack deployed with the
/// condition (`WithProducer`, the default).
pub(super) fn statements(document: &Value) -> Vec<&Value> {
    one_or_many(&document["Statement"])
        .into_iter()
        .flat_map(|statement| match function(statement) {
            Some((name, Value::Sequence(parts))) if name == "If" => parts[1..]
                .iter()
                .filter(|branch| intrinsic(branch) != "Ref AWS::NoValue")
                .collect(),
            _ => vec![statement],
        })
        .collect()
}

/// A statement's actions.
fn actions(statement: &Value) -> BTreeSet<&str> {
    one_or_many(&statement["Action"])
        .into_iter()
        .map(|action| action.as_str().expect("an action"))
        .collect()
}

/// The partition keys a DynamoDB statement is held to
/// (`ForAllValues:StringLike` on `dynamodb:LeadingKeys`).
fn leading_keys(statement: &Value) -> BTreeSet<&str> {
    one_or_many(&statement["Condition"]["ForAllValues:StringLike"]["dynamodb:LeadingKeys"])
        .into_iter()
        .map(|key| key.as_str().expect("a key pattern"))
        .collect()
}

/// The statement names only the stack's personal data key, and only with
/// the subject (and nothing else) as the encryption context: a data key
/// cannot be made or unwrapped for another purpose, nor without a subject.
fn assert_under_the_subjects_context(name: &str, statement: &Value) {
    assert_eq!(
        intrinsic(&statement["Resource"]),
        "GetAtt PersonalDataKey.Arn",
        "{name}"
    );
    let condition = &statement["Condition"];
    let keys: Vec<&Value> =
        one_or_many(&condition["ForAllValues:StringEquals"]["kms:EncryptionContextKeys"]);
    assert_eq!(keys, [&Value::from("subject")], "{name}: {condition:?}");
    // ForAllValues holds of an empty context too: the context must be there.
    assert_eq!(
        condition["Null"]["kms:EncryptionContextKeys"], "false",
        "{name}: {condition:?}"
    );
}

/// (actions, leading keys) of each statement of `document` on the event
/// store.
fn on_the_event_store(name: &str, document: &Value) -> Vec<(BTreeSet<String>, BTreeSet<String>)> {
    statements(document)
        .into_iter()
        .filter(|statement| {
            one_or_many(&statement["Resource"])
                .iter()
                .any(|on| intrinsic(on).contains("EventsTable"))
        })
        .map(|statement| {
            assert_eq!(statement["Effect"], "Allow", "{name}");
            assert_eq!(
                intrinsic(&statement["Resource"]),
                "GetAtt EventsTable.Arn",
                "{name}: the table, not its stream"
            );
            let owned = |set: BTreeSet<&str>| set.into_iter().map(str::to_owned).collect();
            (owned(actions(statement)), owned(leading_keys(statement)))
        })
        .collect()
}

/// What a process's step may call on the event store, statement by
/// statement: the append's grants, which the producer's and `erase`'s
/// policies hold too.
fn appends(template: &Value) -> Vec<(BTreeSet<String>, BTreeSet<String>)> {
    let role = &resource(template, "PaymentsProjectorRole")["Properties"];
    let appends = on_the_event_store(
        "PaymentsProjectorRole",
        &role["Policies"][0]["PolicyDocument"],
    );
    assert_eq!(
        appends,
        [
            (set(&["dynamodb:PutItem"]), set(&["STREAM#*", "REQUEST#*"])),
            (
                set(&["dynamodb:ConditionCheckItem", "dynamodb:Query"]),
                set(&["STREAM#*"])
            ),
            (set(&["dynamodb:GetItem"]), set(&["REQUEST#*"])),
        ]
    );
    appends
}

fn set(items: &[&str]) -> BTreeSet<String> {
    items.iter().map(|item| (*item).to_owned()).collect()
}

#[test]
fn the_personal_data_key_is_the_stacks_own_kept_and_rotated() {
    let template = template();
    let key = resource(&template, "PersonalDataKey");
    assert_eq!(key["Type"], "AWS::KMS::Key");
    assert_eq!(
        key["Condition"], "WithProducer",
        "its items are the event store's"
    );
    // Deleting it would leave every subject's stored values unreadable.
    assert_eq!(key["DeletionPolicy"], "Retain");
    assert_eq!(key["UpdateReplacePolicy"], "Retain");
    let properties = &key["Properties"];
    assert_eq!(properties["EnableKeyRotation"], true);
    assert_eq!(
        properties["KeySpec"], "SYMMETRIC_DEFAULT",
        "GenerateDataKey"
    );
    assert_eq!(properties["KeyUsage"], "ENCRYPT_DECRYPT");
    // KMS's deletion window (7 to 30 days), stated: the docs name it.
    assert_eq!(properties["PendingWindowInDays"].as_u64(), Some(30));

    // The account administers it; nobody else is named in its policy.
    let statements = one_or_many(&properties["KeyPolicy"]["Statement"]);
    assert_eq!(statements.len(), 1, "{statements:?}");
    assert_eq!(statements[0]["Effect"], "Allow");
    assert_eq!(
        intrinsic(&statements[0]["Principal"]["AWS"]),
        "Sub arn:${AWS::Partition}:iam::${AWS::AccountId}:root"
    );
    assert_eq!(statements[0]["Action"], "kms:*");

    let alias = resource(&template, "PersonalDataKeyAlias");
    assert_eq!(alias["Type"], "AWS::KMS::Alias");
    assert_eq!(
        intrinsic(&alias["Properties"]["AliasName"]),
        "Sub alias/${AWS::StackName}-personal-data"
    );
    assert_eq!(
        intrinsic(&alias["Properties"]["TargetKeyId"]),
        "Ref PersonalDataKey"
    );
    assert_eq!(
        intrinsic(&template["Outputs"]["PersonalDataKeyArn"]["Value"]),
        "GetAtt PersonalDataKey.Arn"
    );
}

#[test]
fn the_projector_opens_personal_data_with_the_key_and_its_items_only() {
    let template = template();
    // GIVEN the projector, whose domain projects `customerName` and `email`
    let (variables, names) = environment(&template, "ProjectorFunction");
    for name in ["PERSONAL_DATA_KEY", "EVENT_STORE_TABLE"] {
        assert!(VARIABLES.contains(&name), "the code reads {name}");
        assert!(names.contains(&name), "the projector is given {name}");
    }
    // THEN it is given the key and the table of the key items, with the
    // producer (without it there is no event store, nor sealed values)
    let with_producer = |value: &Value| {
        let (name, parts) = function(value).expect("an !If");
        assert_eq!(name, "If");
        assert_eq!(parts[0], "WithProducer");
        assert_eq!(intrinsic(&parts[2]), "Ref AWS::NoValue");
        intrinsic(&parts[1])
    };
    assert_eq!(
        with_producer(&variables["PERSONAL_DATA_KEY"]),
        "GetAtt PersonalDataKey.Arn"
    );
    assert_eq!(
        with_producer(&variables["EVENT_STORE_TABLE"]),
        "Ref EventsTable"
    );

    // AND its role may unwrap a subject's data key, and read the key items
    let role = &resource(&template, "ProjectorRole")["Properties"];
    let document = &role["Policies"][0]["PolicyDocument"];
    let kms: Vec<&Value> = statements(document)
        .into_iter()
        .filter(|statement| actions(statement).iter().any(|a| a.starts_with("kms:")))
        .collect();
    assert_eq!(kms.len(), 1, "{kms:?}");
    assert_eq!(actions(kms[0]), BTreeSet::from(["kms:Decrypt"]));
    assert_under_the_subjects_context("ProjectorRole", kms[0]);
    assert_eq!(
        on_the_event_store("ProjectorRole", document),
        [
            (set(&["dynamodb:Query"]), set(&["STREAM#*"])),
            (set(&["dynamodb:BatchGetItem"]), set(&["SUBJECT#*"]))
        ],
        "a gap's events and the key items, read: no other item of the store"
    );
}

#[test]
fn the_status_consumer_and_the_dispatcher_never_read_a_key() {
    let template = template();
    let resources = template["Resources"].as_mapping().expect("resources");
    // Nothing grants the status consumer more than its inline policy.
    for (name, item) in resources {
        let attached = one_or_many(&item["Properties"]["Roles"]);
        assert!(
            !attached
                .iter()
                .any(|role| intrinsic(role) == "Ref StatusProjectorRole"),
            "{name:?} is attached to the status consumer's role"
        );
    }
    for role in [
        "StatusProjectorRole",
        "DispatcherRole",
        "PaymentsProjectorRole",
    ] {
        let grants = lambda_role_grants(&template, role);
        let on: BTreeSet<String> = grants
            .iter()
            .flat_map(|(_, resources)| resources.iter().cloned())
            .collect();
        assert!(
            !on.contains("GetAtt PersonalDataKey.Arn"),
            "{role} may use the personal data key"
        );
        let mut named = BTreeSet::new();
        references_without(resource(&template, role), "", &mut named);
        assert!(!named.contains("PersonalDataKey"), "{role}: {named:?}");
    }
    // The status consumer: no KMS right at all, and of the event store a
    // gap's events only (a Query on STREAM# items: events_table.rs), never
    // a key item.
    let grants = lambda_role_grants(&template, "StatusProjectorRole");
    assert_eq!(granted(&grants, "kms:"), BTreeSet::new());
    for (action, resources) in &grants {
        assert!(
            !resources.contains(&"GetAtt EventsTable.Arn".to_owned()) || action == "dynamodb:Query",
            "{action} on the event store: the key items are there"
        );
    }
    let role = &resource(&template, "StatusProjectorRole")["Properties"];
    assert_eq!(
        on_the_event_store(
            "StatusProjectorRole",
            &role["Policies"][0]["PolicyDocument"]
        ),
        [(set(&["dynamodb:Query"]), set(&["STREAM#*"]))],
        "the status consumer: a gap's events, no key item"
    );
    let (_, names) = environment(&template, "StatusProjectorFunction");
    assert!(
        !names.contains(&"PERSONAL_DATA_KEY"),
        "the status consumer: PERSONAL_DATA_KEY"
    );

    // Only these name the key: its alias, the projector, the producer's
    // policy and the outputs.
    let mut naming = BTreeSet::new();
    for (name, item) in resources {
        let mut named = BTreeSet::new();
        references_without(item, "", &mut named);
        if named.contains("PersonalDataKey") {
            naming.insert(name.as_str().expect("a name"));
        }
    }
    assert_eq!(
        naming,
        BTreeSet::from([
            "PersonalDataKeyAlias",
            "ProjectorRole",
            "ProjectorFunction",
            "AppendPersonalDataPolicy"
        ])
    );
}

#[test]
fn the_erase_tool_policy_replaces_key_items_tells_streams_and_has_no_kms_right() {
    let template = template();
    let policy = resource(&template, "EraseToolPolicy");
    assert_eq!(policy["Type"], "AWS::IAM::ManagedPolicy");
    let document = &policy["Properties"]["PolicyDocument"];
    assert_eq!(statements(document).len(), 4, "the four below, no more");
    for statement in statements(document) {
        for action in actions(statement) {
            assert!(
                action.starts_with("dynamodb:"),
                "{action}: erasure deletes the wrapped key, it never unwraps it"
            );
        }
    }
    // The wrapped key removed from the key item, which answers its streams
    // (one UpdateItem, src/personal/dynamodb.rs), then marked told (another);
    // an erasure event appended to each stream with a request id, as a
    // process's step appends (what each may do, item by item:
    // events_table.rs).
    let mut expected = vec![(set(&["dynamodb:UpdateItem"]), set(&["SUBJECT#*"]))];
    expected.extend(appends(&template));
    assert_eq!(on_the_event_store("EraseToolPolicy", document), expected);
    assert_eq!(
        intrinsic(&template["Outputs"]["EraseToolPolicyArn"]["Value"]),
        "Ref EraseToolPolicy"
    );
}

#[test]
fn the_append_policy_seals_under_the_subjects_context_and_appends() {
    let template = template();
    let policy = resource(&template, "AppendPersonalDataPolicy");
    assert_eq!(policy["Type"], "AWS::IAM::ManagedPolicy");
    let document = &policy["Properties"]["PolicyDocument"];
    assert_eq!(statements(document).len(), 5, "the five below, no more");
    let kms: Vec<&Value> = statements(document)
        .into_iter()
        .filter(|statement| actions(statement).iter().any(|a| a.starts_with("kms:")))
        .collect();
    assert_eq!(kms.len(), 1, "{kms:?}");
    assert_eq!(
        actions(kms[0]),
        BTreeSet::from(["kms:Decrypt", "kms:GenerateDataKey"]),
        "a new subject's data key made, a known one's unwrapped"
    );
    assert_under_the_subjects_context("AppendPersonalDataPolicy", kms[0]);

    // The key item (src/personal/dynamodb.rs): read (BatchGetItem), created
    // (PutItem; GetItem when a racing writer's item is not returned), given
    // the stream (UpdateItem), checked in an append that opens a stream
    // (ConditionCheckItem). The append: what the payments process's
    // appends are granted, on the streams and requests only.
    let mut expected = vec![(
        set(&[
            "dynamodb:BatchGetItem",
            "dynamodb:ConditionCheckItem",
            "dynamodb:GetItem",
            "dynamodb:PutItem",
            "dynamodb:UpdateItem",
        ]),
        set(&["SUBJECT#*"]),
    )];
    expected.extend(appends(&template));
    assert_eq!(
        on_the_event_store("AppendPersonalDataPolicy", document),
        expected
    );
    assert_eq!(
        intrinsic(&template["Outputs"]["AppendPersonalDataPolicyArn"]["Value"]),
        "Ref AppendPersonalDataPolicy"
    );
}
