//! Who may do what to the event store's items, judged by evaluating each
//! role's and each policy's statements ([`iam`](super::iam)) for every
//! item action on every kind of item: a stream's events (`STREAM#`), a
//! request's record (`REQUEST#`), a subject's key (`SUBJECT#`), and an
//! item no code writes. Each may do exactly what its code calls, on
//! exactly the items it calls it on (`requests.rs` checks the code's own
//! requests against the same policies).
//!
//! IAM cannot hold a `PutItem` to "only where no item is": whoever may
//! append may, by IAM, put an event over another. The code's condition
//! (`attribute_not_exists(pk)`) keeps every put it makes to an empty
//! slot; the tests below keep the rights to put to the roles that append.

use std::collections::BTreeMap;

use super::iam::{Policy, Request, key_arn, on_table, stream_arn, table_arn};
use super::*;

/// Every DynamoDB action that reads or writes items.
const ITEM_ACTIONS: [&str; 12] = [
    "BatchGetItem",
    "BatchWriteItem",
    "ConditionCheckItem",
    "DeleteItem",
    "GetItem",
    "PartiQLDelete",
    "PartiQLInsert",
    "PartiQLSelect",
    "PartiQLUpdate",
    "PutItem",
    "Query",
    "UpdateItem",
];

/// The actions that change an item.
const WRITES: [&str; 7] = [
    "BatchWriteItem",
    "DeleteItem",
    "PartiQLDelete",
    "PartiQLInsert",
    "PartiQLUpdate",
    "PutItem",
    "UpdateItem",
];

/// The actions that return an item as stored.
const READS: [&str; 5] = ["BatchGetItem", "GetItem", "PartiQLSelect", "Query", "Scan"];

/// One item of each kind the event store holds, and one no code writes.
const ITEMS: [(&str, &str); 4] = [
    ("STREAM#", "STREAM#order-1"),
    ("REQUEST#", "REQUEST#r-1"),
    ("SUBJECT#", "SUBJECT#ada@example.com"),
    ("other", "HEAD#order-1"),
];

/// A request with no partition key: a `Scan` of the whole table.
const WHOLE_TABLE: &str = "(whole table)";

/// What a step of a process, `append` and `erase` call to append
/// (src/producer): the stream's last event (`Query`); the events and the
/// request record put (`PutItem`); the expected event checked
/// (`ConditionCheckItem`: an exact expected sequence, or a race lost
/// without the event found); a request answered before read (`GetItem`).
const APPEND: [(&str, &str); 5] = [
    ("ConditionCheckItem", "STREAM#"),
    ("GetItem", "REQUEST#"),
    ("PutItem", "REQUEST#"),
    ("PutItem", "STREAM#"),
    ("Query", "STREAM#"),
];

/// What a producer of personal data calls on its subjects' key items
/// (src/personal/dynamodb.rs): read (`BatchGetItem`), created (`PutItem`,
/// and `GetItem` when a racing writer's item is not returned), given a
/// stream (`UpdateItem`).
const KEEP_KEYS: [(&str, &str); 5] = [
    ("BatchGetItem", "SUBJECT#"),
    ("ConditionCheckItem", "SUBJECT#"),
    ("GetItem", "SUBJECT#"),
    ("PutItem", "SUBJECT#"),
    ("UpdateItem", "SUBJECT#"),
];

/// (action, kind of item) pairs `policy` allows on the event store.
fn rights(policy: &Policy) -> BTreeSet<(String, String)> {
    let mut allowed = BTreeSet::new();
    for action in ITEM_ACTIONS {
        for (kind, key) in ITEMS {
            if policy.allows(&on_table(action, "EventsTable", &[key])) {
                allowed.insert((action.to_owned(), kind.to_owned()));
            }
        }
    }
    if policy.allows(&on_table("Scan", "EventsTable", &[])) {
        allowed.insert(("Scan".to_owned(), WHOLE_TABLE.to_owned()));
    }
    allowed
}

fn pairs(lists: &[&[(&str, &str)]]) -> BTreeSet<(String, String)> {
    lists
        .iter()
        .flat_map(|list| list.iter())
        .map(|(action, kind)| ((*action).to_owned(), (*kind).to_owned()))
        .collect()
}

/// Every role and every policy of `template`, by name.
fn principals(template: &Value) -> Vec<(String, Policy<'_>)> {
    let resources = template["Resources"].as_mapping().expect("resources");
    let mut found = Vec::new();
    for (name, item) in resources {
        let name = name.as_str().expect("a name");
        match item["Type"].as_str().unwrap_or("") {
            "AWS::IAM::Role" => found.push((name.to_owned(), Policy::of_role(template, name))),
            "AWS::IAM::ManagedPolicy" | "AWS::IAM::Policy" => {
                found.push((name.to_owned(), Policy::of_policy(template, name)));
            }
            _ => {}
        }
    }
    found
}

/// The rights on the event store of every principal of `template`, the
/// ones with none left out.
fn every_right(template: &Value) -> BTreeMap<String, BTreeSet<(String, String)>> {
    principals(template)
        .into_iter()
        .map(|(name, policy)| (name, rights(&policy)))
        .filter(|(_, rights)| !rights.is_empty())
        .collect()
}

/// Each principal's rights on the event store are exactly its code's.
fn assert_exact_rights(template: &Value, expected: &[(&str, BTreeSet<(String, String)>)]) {
    let expected: BTreeMap<String, BTreeSet<(String, String)>> = expected
        .iter()
        .map(|(name, rights)| ((*name).to_owned(), rights.clone()))
        .collect();
    let found = every_right(template);
    for (name, rights) in &found {
        assert_eq!(
            Some(rights),
            expected.get(name),
            "{name}: its rights on the event store's items"
        );
    }
    for name in expected.keys() {
        assert!(
            found.contains_key(name),
            "{name}: no right on the event store"
        );
    }
}

#[test]
fn each_role_has_on_the_event_store_exactly_what_its_code_calls() {
    let template = template();
    assert_exact_rights(
        &template,
        &[
            // Every consumer reads a gap's events; the first opens
            // personal data: it reads key items too.
            (
                "ProjectorRole",
                pairs(&[&[("BatchGetItem", "SUBJECT#"), ("Query", "STREAM#")]]),
            ),
            ("StatusProjectorRole", pairs(&[&[("Query", "STREAM#")]])),
            // The payments process appends; it holds nothing personal.
            ("PaymentsProjectorRole", pairs(&[&APPEND])),
            // `erase`: the key removed and the item marked told, then an
            // event appended to each stream.
            (
                "EraseToolPolicy",
                pairs(&[&APPEND, &[("UpdateItem", "SUBJECT#")]]),
            ),
            ("AppendPersonalDataPolicy", pairs(&[&APPEND, &KEEP_KEYS])),
        ],
    );
}

#[test]
fn the_banks_roles_have_the_same_rights_on_its_event_store() {
    let bank: Value = serde_yaml::from_str(include_str!("../../../examples/bank/template.yaml"))
        .expect("the bank's template is YAML");
    let bank = compute::on_lambda(bank);
    assert_exact_rights(
        &bank,
        &[
            (
                "ProjectorRole",
                pairs(&[&[("BatchGetItem", "SUBJECT#"), ("Query", "STREAM#")]]),
            ),
            (
                "EraseToolPolicy",
                pairs(&[&APPEND, &[("UpdateItem", "SUBJECT#")]]),
            ),
            ("AppendPersonalDataPolicy", pairs(&[&APPEND, &KEEP_KEYS])),
        ],
    );
}

/// The names of the principals with a right of `actions` on `kind`.
fn who(template: &Value, actions: &[&str], kind: &str) -> BTreeSet<String> {
    every_right(template)
        .into_iter()
        .filter(|(_, rights)| {
            rights
                .iter()
                .any(|(action, on)| on == kind && actions.contains(&action.as_str()))
        })
        .map(|(name, _)| name)
        .collect()
}

fn names(items: &[&str]) -> BTreeSet<String> {
    items.iter().map(|item| (*item).to_owned()).collect()
}

/// The promises, each as who may: only the producer's policy and
/// `erase`'s write a key item (a saved item put back over an erased one
/// would undo an erasure); only a consumer that opens personal data and
/// the producer read one; only the roles that append may put an event,
/// none may change or delete one, and nobody scans the store (a `Scan`
/// carries no partition key for a condition to hold it to).
#[test]
fn only_the_producer_and_erase_write_key_items_and_nobody_changes_an_event() {
    let template = template();
    assert_eq!(
        who(&template, &WRITES, "SUBJECT#"),
        names(&["AppendPersonalDataPolicy", "EraseToolPolicy"])
    );
    assert_eq!(
        who(&template, &READS, "SUBJECT#"),
        names(&["AppendPersonalDataPolicy", "ProjectorRole"])
    );
    assert_eq!(
        who(&template, &WRITES, "STREAM#"),
        names(&[
            "AppendPersonalDataPolicy",
            "EraseToolPolicy",
            "PaymentsProjectorRole"
        ])
    );
    let changing: Vec<&str> = WRITES
        .iter()
        .copied()
        .filter(|action| *action != "PutItem")
        .collect();
    assert_eq!(who(&template, &changing, "STREAM#"), BTreeSet::new());
    assert_eq!(
        who(&template, &WRITES, "other"),
        BTreeSet::new(),
        "an item no code writes"
    );
    assert_eq!(who(&template, &["Scan"], WHOLE_TABLE), BTreeSet::new());
}

/// The event store's stream carries every item's new image, key items
/// included (wrapped keys, useless without the stack's key): only the
/// dispatcher reads it, and no role but the appenders and the key
/// items' readers touches the table at all.
#[test]
fn only_the_dispatcher_reads_the_event_stores_stream() {
    let template = template();
    for (name, policy) in principals(&template) {
        for action in ["GetRecords", "GetShardIterator", "DescribeStream"] {
            let request = Request::new(&format!("dynamodb:{action}"), &stream_arn("EventsTable"));
            assert_eq!(
                policy.allows(&request),
                name == "DispatcherRole",
                "{name}: {action} on the event store's stream"
            );
        }
        // No principal reads another table's stream, nor the table's
        // description (the tools that need it are the operator's).
        for table in ["ProjectionTable", "StatusTable", "PaymentsTable"] {
            let request = Request::new("dynamodb:GetRecords", &stream_arn(table));
            assert!(!policy.allows(&request), "{name}: {table}'s stream");
        }
        let describe = Request::new("dynamodb:DescribeTable", &table_arn("EventsTable"));
        assert!(!policy.allows(&describe), "{name}: DescribeTable");
    }
}

/// Whoever may unwrap or make a subject's data key may do it only under
/// the stack's key and with the subject, and nothing else, as the
/// encryption context: `ForAllValues` alone would hold of a request with
/// no context at all.
#[test]
fn a_data_key_is_used_only_under_the_subjects_context() {
    let template = template();
    let key = key_arn("PersonalDataKey");
    let with = |action: &str, on: &str, context: &[&str]| {
        let request = Request::new(action, on);
        if context.is_empty() {
            request
        } else {
            request.with("kms:EncryptionContextKeys", context)
        }
    };
    for (name, policy) in principals(&template) {
        let (decrypt, generate) = match name.as_str() {
            "ProjectorRole" => (true, false),
            "AppendPersonalDataPolicy" => (true, true),
            _ => (false, false),
        };
        for (action, may) in [("kms:Decrypt", decrypt), ("kms:GenerateDataKey", generate)] {
            assert_eq!(
                policy.allows(&with(action, &key, &["subject"])),
                may,
                "{name}: {action}"
            );
            assert!(
                !policy.allows(&with(action, &key, &[])),
                "{name}: {action} without a context"
            );
            assert!(
                !policy.allows(&with(action, &key, &["subject", "purpose"])),
                "{name}: {action} with more than the subject"
            );
            assert!(
                !policy.allows(&with(action, &key_arn("EventsTopicKey"), &["subject"]))
                    || name == "DispatcherRole",
                "{name}: {action} under another key"
            );
        }
    }
}
