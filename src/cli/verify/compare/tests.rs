//! `verify`'s comparison, on the tools' test domain: what agrees, what
//! differs and how a line names it.

use super::*;
use crate::cli::test_domain::domain;
use crate::runner::{Invocation, Runner, RunnerConfig};
use aws_lambda_events::event::sqs::{SqsEvent, SqsMessage};
use serde_json::json;

/// The fold of two notes and a counter, in memory.
async fn folded() -> Runner<MemoryStore> {
    let runner = Runner::new(domain(), MemoryStore::new(), RunnerConfig::default());
    let bodies = [
        json!({"eventId": "a1", "type": "NoteWritten", "aggregateId": "n-1", "sequence": 1, "data": {"text": "secret one"}}),
        json!({"eventId": "a2", "type": "NoteEdited", "aggregateId": "n-1", "sequence": 2, "data": {"text": "secret two"}}),
        json!({"eventId": "b1", "type": "NoteWritten", "aggregateId": "n-2", "sequence": 1, "data": {"text": "secret three"}}),
        json!({"eventId": "w1", "type": "WordsCounted", "data": {"book": "b-1", "delta": 40}}),
    ];
    let mut batch = SqsEvent::default();
    for (index, body) in bodies.iter().enumerate() {
        let mut message = SqsMessage::default();
        message.message_id = Some(format!("m{index}"));
        message.body = Some(body.to_string());
        let group = body["aggregateId"].as_str().unwrap_or("b-1").to_owned();
        message.attributes.insert("MessageGroupId".into(), group);
        batch.records.push(message);
    }
    let invocation = Invocation {
        deadline: None,
        now: 1_700_000_000,
    };
    let report = runner.run(&batch, invocation).await.expect("run");
    assert!(report.response().batch_item_failures.is_empty());
    runner
}

/// The table as a projector would have written it: each expected item
/// with its keys.
fn table(expected: &BTreeMap<ItemKey, Side>) -> BTreeMap<ItemKey, Item> {
    expected
        .iter()
        .map(|((pk, sk), side)| {
            let mut item = side.attributes.clone();
            item.insert("pk".into(), AttributeValue::S(pk.clone()));
            item.insert("sk".into(), AttributeValue::S(sk.clone()));
            ((pk.clone(), sk.clone()), item)
        })
        .collect()
}

fn read_back(items: BTreeMap<ItemKey, Item>) -> BTreeMap<ItemKey, Side> {
    items
        .into_values()
        .filter_map(|item| found(&domain(), item))
        .collect()
}

fn key(pk: &str, sk: &str) -> ItemKey {
    (pk.to_owned(), sk.to_owned())
}

fn text(value: &str) -> AttributeValue {
    AttributeValue::S(value.to_owned())
}

#[tokio::test]
async fn the_table_the_fold_would_write_agrees_parking_aside() {
    let runner = folded().await;
    let expected = expected(runner.store()).expect("expected");
    assert_eq!(
        expected.keys().cloned().collect::<Vec<_>>(),
        [
            key("BOOK#b-1", "WORDS"),
            key("NOTE#n-1", "STATE"),
            key("NOTE#n-2", "STATE")
        ]
    );
    let mut items = table(&expected);
    // Events parked on n-2 while it waits: the engine's, not compared.
    let n2 = items.get_mut(&key("NOTE#n-2", "STATE")).expect("n-2");
    n2.insert("parked".into(), AttributeValue::Ns(vec!["3".into()]));
    n2.insert("parkedSince".into(), AttributeValue::N("1700000000".into()));
    // What else the table holds: a dedup record, a parked event, and an
    // item that only records parked events (not created yet).
    for (pk, sk) in [
        ("MESSAGE#w1", "HANDLER#words"),
        ("NOTE#n-2", "PENDING#00000000000000000003"),
        ("PARKED", "NOTE#n-2"),
    ] {
        items.insert(
            key(pk, sk),
            Item::from([("pk".into(), text(pk)), ("sk".into(), text(sk))]),
        );
    }
    items.insert(
        key("NOTE#n-3", "STATE"),
        Item::from([
            ("pk".into(), text("NOTE#n-3")),
            ("sk".into(), text("STATE")),
            ("parked".into(), AttributeValue::Ns(vec!["2".into()])),
            ("parkedSince".into(), AttributeValue::N("1".into())),
        ]),
    );
    let (checked, differences) = compare(&expected, &read_back(items));
    assert_eq!((checked, differences), (3, Vec::new()));
}

#[tokio::test]
async fn a_missing_an_altered_and_a_stray_item_are_named_never_shown() {
    let runner = folded().await;
    let expected = expected(runner.store()).expect("expected");
    let mut items = table(&expected);
    items.remove(&key("NOTE#n-2", "STATE"));
    let n1 = items.get_mut(&key("NOTE#n-1", "STATE")).expect("n-1");
    n1.insert("text".into(), text("tampered"));
    n1.insert("tag".into(), text("extra"));
    n1.insert("expiresAt".into(), AttributeValue::N("1".into()));
    items.insert(
        key("BOOK#b-1", "WORDS"),
        Item::from([
            ("pk".into(), text("BOOK#b-1")),
            ("sk".into(), text("WORDS")),
            ("count".into(), AttributeValue::N("41".into())),
        ]),
    );
    items.insert(
        key("NOTE#ghost", "STATE"),
        Item::from([
            ("pk".into(), text("NOTE#ghost")),
            ("sk".into(), text("STATE")),
            ("sequence".into(), AttributeValue::N("7".into())),
            ("text".into(), text("secret ghost")),
        ]),
    );
    let (checked, differences) = compare(&expected, &read_back(items));
    let lines: Vec<String> = differences
        .iter()
        .map(|difference| serde_json::to_string(difference).expect("json"))
        .collect();
    assert_eq!(checked, 4);
    assert_eq!(
        lines,
        [
            r#"{"pk":"BOOK#b-1","sk":"WORDS","expected":40,"found":41,"attributes":["count"]}"#,
            r#"{"pk":"NOTE#ghost","sk":"STATE","expectedSequence":null,"foundSequence":7,"attributes":["sequence","text"],"ahead":true}"#,
            r#"{"pk":"NOTE#n-1","sk":"STATE","expectedSequence":2,"foundSequence":2,"attributes":["expiresAt","tag","text"]}"#,
            r#"{"pk":"NOTE#n-2","sk":"STATE","expectedSequence":1,"foundSequence":null,"attributes":["lastEventId","sequence","text"]}"#,
        ]
    );
    for line in &lines {
        for value in ["secret", "tampered", "extra"] {
            assert!(!line.contains(value), "{line} shows {value}");
        }
    }
}

#[tokio::test]
async fn an_entity_behind_the_fold_differs_in_its_sequence() {
    let runner = folded().await;
    let expected = expected(runner.store()).expect("expected");
    let mut items = table(&expected);
    let n1 = items.get_mut(&key("NOTE#n-1", "STATE")).expect("n-1");
    n1.insert("sequence".into(), AttributeValue::N("1".into()));
    n1.insert("lastEventId".into(), text("a1"));
    let (_, differences) = compare(&expected, &read_back(items));
    assert_eq!(
        differences,
        [Difference {
            pk: "NOTE#n-1".into(),
            sk: "STATE".into(),
            numbers: Numbers::Sequences {
                expected_sequence: Some(2),
                found_sequence: Some(1),
            },
            attributes: vec!["lastEventId".into(), "sequence".into()],
            ahead: false,
            diverged: false,
            found_event_id: Some("a1".into()),
        }]
    );
}

/// A counter's item as one side holds it: `counters` its counters'
/// attributes, `attributes` what it holds.
fn counters(counters: &[&str], attributes: &[(&str, AttributeValue)]) -> Side {
    Side {
        number: Number::Counters(counters.iter().map(|name| (*name).to_owned()).collect()),
        attributes: attributes
            .iter()
            .map(|(name, value)| ((*name).to_owned(), value.clone()))
            .collect(),
        deadline: false,
    }
}

fn n(value: i64) -> AttributeValue {
    AttributeValue::N(value.to_string())
}

#[test]
fn each_counter_of_an_item_is_compared_and_each_that_differs_is_a_line() {
    let member = |id: &str| key(&format!("MEMBER#{id}"), "ACTIVITY");
    let registered = ["loans", "onLoan"];
    let expected = BTreeMap::from([
        (
            member("ada"),
            counters(&registered, &[("onLoan", n(2)), ("loans", n(3))]),
        ),
        (
            member("bob"),
            counters(&registered, &[("onLoan", n(1)), ("loans", n(1))]),
        ),
        (member("cy"), counters(&["onLoan"], &[("onLoan", n(0))])),
        (member("dee"), counters(&["onLoan"], &[("onLoan", n(1))])),
    ]);
    let found = BTreeMap::from([
        // Agrees.
        (
            member("ada"),
            counters(&registered, &[("onLoan", n(2)), ("loans", n(3))]),
        ),
        // One counter off, one missing, and an attribute no counter declares.
        (
            member("bob"),
            counters(&registered, &[("onLoan", n(4)), ("note", text("secret"))]),
        ),
        // A counter no stored event explains.
        (
            member("cy"),
            counters(&registered, &[("onLoan", n(0)), ("loans", n(5))]),
        ),
        // One counter only, on both sides: it agrees.
        (member("dee"), counters(&registered, &[("onLoan", n(1))])),
    ]);
    let (checked, differences) = compare(&expected, &found);
    let lines: Vec<String> = differences
        .iter()
        .map(|difference| serde_json::to_string(difference).expect("json"))
        .collect();
    assert_eq!(
        lines,
        [
            r#"{"pk":"MEMBER#bob","sk":"ACTIVITY","expected":1,"found":null,"attributes":["loans"]}"#,
            r#"{"pk":"MEMBER#bob","sk":"ACTIVITY","expected":1,"found":4,"attributes":["onLoan"]}"#,
            r#"{"pk":"MEMBER#bob","sk":"ACTIVITY","expected":null,"found":null,"attributes":["note"]}"#,
            r#"{"pk":"MEMBER#cy","sk":"ACTIVITY","expected":null,"found":5,"attributes":["loans"],"ahead":true}"#,
        ]
    );
    // The counters each item holds (two on ada's, bob's and cy's, one on
    // dee's), and bob's attribute no counter declares.
    assert_eq!(checked, 8);
}

#[test]
fn numbers_compare_by_value_and_sets_in_any_order() {
    for (a, b) in [
        ("1250", "1250.0"),
        ("1250", "1.25e3"),
        ("-0", "0"),
        ("0.10", ".1"),
        ("007", "7"),
    ] {
        assert!(same_number(a, b), "{a} {b}");
    }
    for (a, b) in [("1", "2"), ("-1", "1"), ("10", "1"), ("x", "y")] {
        assert!(!same_number(a, b), "{a} {b}");
    }
    let set = |items: &[&str]| AttributeValue::Ss(items.iter().map(|s| (*s).into()).collect());
    assert!(same(&set(&["a", "b"]), &set(&["b", "a"])));
    assert!(!same(&set(&["a", "b"]), &set(&["a", "c"])));
    let numbers = |items: &[&str]| AttributeValue::Ns(items.iter().map(|s| (*s).into()).collect());
    assert!(same(&numbers(&["1", "2.0"]), &numbers(&["2", "1"])));
    let map =
        |value: &str| AttributeValue::M([("n".to_owned(), AttributeValue::N(value.into()))].into());
    assert!(same(&map("3"), &map("3.0")));
    assert!(!same(&map("3"), &map("4")));
    assert!(!same(&AttributeValue::N("1".into()), &text("1")));
}

#[test]
fn a_streams_candidates_are_each_kind_and_counter_under_its_id() {
    assert_eq!(
        candidates(&domain(), &["x-1".to_owned()]),
        [key("NOTE#x-1", "STATE"), key("BOOK#x-1", "WORDS")]
    );
}
