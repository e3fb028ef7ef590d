//! `verify`'s comparison: the fold's entities and counters against the
//! projection table's items, attribute by attribute. A difference names
//! attributes, never their values (an entity may hold personal data).

use std::collections::{BTreeMap, BTreeSet};

use aws_sdk_dynamodb::types::AttributeValue;
use serde::Serialize;

use crate::domain::Domain;
use crate::entity::{EntityKey, Item};
use crate::store::StoreError;
use crate::store::memory::MemoryStore;

/// The attributes of an item that are the engine's and not compared: the
/// keys, what parking leaves on an entity's item while events wait, and a
/// process's deadline (set from the clock when an event was handled: a
/// fold cannot know it).
/// (`expiresAt` is compared: the engine writes it on deduplication records
/// only, and on an entity or a counter its TTL would delete the item.)
pub(super) const IGNORED: [&str; 6] = ["pk", "sk", "parked", "parkedSince", "dueAt", "dueShard"];

/// The sort key of an entity's item.
pub(super) const STATE: &str = "STATE";

/// An item's key: `(pk, sk)`.
pub(super) type ItemKey = (String, String);

/// What one side holds for an item: its number, and its attributes, the
/// ignored ones aside.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Side {
    /// The entity's `sequence`, or the counter's value.
    pub(super) number: Number,
    /// The attributes compared.
    pub(super) attributes: Item,
}

/// An item's number: what a line of `verify` shows of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Number {
    /// An entity's `sequence` (`None` when it is not a number).
    Sequence(Option<u64>),
    /// A counter's value (`None` when it is not an integer).
    Value(Option<i64>),
}

impl Side {
    fn sequence(&self) -> Option<u64> {
        match self.number {
            Number::Sequence(sequence) => sequence,
            Number::Value(_) => None,
        }
    }

    fn value(&self) -> Option<i64> {
        match self.number {
            Number::Value(value) => value,
            Number::Sequence(_) => None,
        }
    }

    fn is_counter(&self) -> bool {
        matches!(self.number, Number::Value(_))
    }

    /// The entity's `lastEventId`, when it has one.
    fn last_event_id(&self) -> Option<&str> {
        match self.attributes.get("lastEventId") {
            Some(AttributeValue::S(id)) if !self.is_counter() => Some(id),
            _ => None,
        }
    }
}

/// One item on which the fold and the table disagree: the line `verify`
/// prints.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Difference {
    pub(super) pk: String,
    pub(super) sk: String,
    /// The sequences of an entity, or the values of a counter.
    #[serde(flatten)]
    pub(super) numbers: Numbers,
    /// The attributes that differ, or that one side only has, by name, sorted.
    pub(super) attributes: Vec<String>,
    /// The table holds events the store has not: an entity whose sequence is
    /// beyond the fold's, or an item that no stored event explains.
    #[serde(skip_serializing_if = "is_false")]
    pub(super) ahead: bool,
    /// The table's entity does not hold the store's history: its
    /// `lastEventId` is not the stored event's at its sequence.
    #[serde(skip_serializing_if = "is_false")]
    pub(super) diverged: bool,
    /// The table's `lastEventId` (never printed): for the check against the
    /// store's event at the found sequence.
    #[serde(skip)]
    pub(super) found_event_id: Option<String>,
}

/// What a line shows of the item's number.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub(super) enum Numbers {
    /// An entity: the fold's sequence and the table's; `null` where that
    /// side has no item.
    #[serde(rename_all = "camelCase")]
    Sequences {
        expected_sequence: Option<u64>,
        found_sequence: Option<u64>,
    },
    /// A counter: the fold's value and the table's (the counter's
    /// attribute only: a number, never personal data); `null` where that
    /// side has no item.
    Values {
        expected: Option<i64>,
        found: Option<i64>,
    },
}

fn is_false(flag: &bool) -> bool {
    !*flag
}

impl Difference {
    /// An entity's sequences: the fold's and the table's.
    pub(super) fn sequences(&self) -> Option<(Option<u64>, Option<u64>)> {
        match self.numbers {
            Numbers::Sequences {
                expected_sequence,
                found_sequence,
            } => Some((expected_sequence, found_sequence)),
            Numbers::Values { .. } => None,
        }
    }
}

/// What the fold in `store` says the projection holds: every entity and
/// every counter, as their items' attributes.
pub(super) fn expected(store: &MemoryStore) -> Result<BTreeMap<ItemKey, Side>, StoreError> {
    let mut items = BTreeMap::new();
    for (key, entity) in store.entities() {
        let mut attributes = entity.to_item().map_err(|err| StoreError::Corrupt {
            key: key.pk(),
            message: format!("the folded entity cannot be written as an item: {err}"),
        })?;
        attributes.retain(|name, _| !IGNORED.contains(&name.as_str()));
        let side = Side {
            number: Number::Sequence(Some(entity.sequence())),
            attributes,
        };
        items.insert((key.pk(), STATE.to_owned()), side);
    }
    for (counter, id, value) in store.counters() {
        let attributes = Item::from([(
            counter.attribute.to_owned(),
            AttributeValue::N(value.to_string()),
        )]);
        let side = Side {
            number: Number::Value(Some(value)),
            attributes,
        };
        items.insert((counter.pk(&id), counter.sort_key.to_owned()), side);
    }
    Ok(items)
}

/// The keys of the items the streams can project: for each stream, an
/// entity of each kind and each counter under its id.
pub(super) fn candidates(domain: &Domain, streams: &[String]) -> Vec<ItemKey> {
    let mut keys = Vec::new();
    for stream in streams {
        for kind in domain.kinds() {
            keys.push((EntityKey::new(kind, stream.as_str()).pk(), STATE.to_owned()));
        }
        for counter in domain.counters() {
            keys.push((counter.pk(stream), counter.sort_key.to_owned()));
        }
    }
    keys
}

/// A table item, read as the projection's: `None` for an item that is not
/// an entity of a registered kind nor a counter (deduplication records,
/// parked events, conflicts, the parked index), and for an entity's item
/// that only records events parked on it (not created yet).
pub(super) fn found(domain: &Domain, mut item: Item) -> Option<(ItemKey, Side)> {
    let text = |name: &str| match item.get(name) {
        Some(AttributeValue::S(text)) => Some(text.clone()),
        _ => None,
    };
    let (pk, sk) = (text("pk")?, text("sk")?);
    let entity = sk == STATE && domain.key_of_pk(&pk).is_some();
    let counter = domain.counters().iter().find(|counter| {
        counter.sort_key == sk
            && pk
                .strip_prefix(counter.kind)
                .is_some_and(|id| id.starts_with('#'))
    });
    if !entity && counter.is_none() {
        return None;
    }
    item.retain(|name, _| !IGNORED.contains(&name.as_str()));
    if item.is_empty() {
        return None;
    }
    let number = match counter {
        Some(counter) if !entity => Number::Value(integer(&item, counter.attribute)),
        _ => Number::Sequence(integer(&item, "sequence")),
    };
    Some((
        (pk, sk),
        Side {
            number,
            attributes: item,
        },
    ))
}

/// An item's number attribute, when it holds an integer of that type.
fn integer<T: std::str::FromStr>(item: &Item, name: &str) -> Option<T> {
    match item.get(name) {
        Some(AttributeValue::N(number)) => number.parse().ok(),
        _ => None,
    }
}

/// Every key of either side, in key order: how many were checked, and the
/// differences.
pub(super) fn compare(
    expected: &BTreeMap<ItemKey, Side>,
    found: &BTreeMap<ItemKey, Side>,
) -> (u64, Vec<Difference>) {
    let keys: BTreeSet<&ItemKey> = expected.keys().chain(found.keys()).collect();
    let checked = keys.len() as u64;
    let differences = keys
        .into_iter()
        .filter_map(|key| difference(key, expected.get(key), found.get(key)))
        .collect();
    (checked, differences)
}

/// How one item differs, if it does.
pub(super) fn difference(
    key: &ItemKey,
    expected: Option<&Side>,
    found: Option<&Side>,
) -> Option<Difference> {
    let empty = Item::new();
    let (want, have) = (
        expected.map_or(&empty, |side| &side.attributes),
        found.map_or(&empty, |side| &side.attributes),
    );
    let names: BTreeSet<&String> = want.keys().chain(have.keys()).collect();
    let attributes: Vec<String> = names
        .into_iter()
        .filter(|name| match (want.get(*name), have.get(*name)) {
            (Some(a), Some(b)) => !same(a, b),
            _ => true,
        })
        .cloned()
        .collect();
    if attributes.is_empty() && expected.is_some() == found.is_some() {
        return None;
    }
    let counter = [expected, found]
        .into_iter()
        .flatten()
        .any(Side::is_counter);
    let numbers = if counter {
        Numbers::Values {
            expected: expected.and_then(Side::value),
            found: found.and_then(Side::value),
        }
    } else {
        Numbers::Sequences {
            expected_sequence: expected.and_then(Side::sequence),
            found_sequence: found.and_then(Side::sequence),
        }
    };
    // Ahead: the table holds what no stored event explains. Diverged: at
    // the same sequence, the table's last event is not the store's.
    let (ahead, diverged) = match (expected, found) {
        (None, Some(_)) => (true, false),
        (Some(want), Some(have)) if !counter => match (want.sequence(), have.sequence()) {
            (Some(want_sequence), Some(have_sequence)) if have_sequence > want_sequence => {
                (true, false)
            }
            (Some(want_sequence), Some(have_sequence)) if have_sequence == want_sequence => {
                let (a, b) = (want.last_event_id(), have.last_event_id());
                (false, a.is_some() && b.is_some() && a != b)
            }
            _ => (false, false),
        },
        _ => (false, false),
    };
    Some(Difference {
        pk: key.0.clone(),
        sk: key.1.clone(),
        numbers,
        attributes,
        ahead,
        diverged,
        found_event_id: found.and_then(Side::last_event_id).map(str::to_owned),
    })
}

/// Whether two attribute values hold the same value as DynamoDB sees it:
/// numbers by value (`1250` and `1250.0`), sets in any order, lists and
/// maps member by member.
fn same(a: &AttributeValue, b: &AttributeValue) -> bool {
    use AttributeValue::{Bs, L, M, N, Ns, Ss};
    match (a, b) {
        (N(a), N(b)) => same_number(a, b),
        (Ns(a), Ns(b)) => {
            a.len() == b.len()
                && a.iter()
                    .all(|number| b.iter().any(|other| same_number(number, other)))
        }
        (Ss(a), Ss(b)) => a.iter().collect::<BTreeSet<_>>() == b.iter().collect::<BTreeSet<_>>(),
        (Bs(a), Bs(b)) => {
            let bytes = |set: &[aws_sdk_dynamodb::primitives::Blob]| {
                set.iter()
                    .map(|blob| blob.as_ref().to_vec())
                    .collect::<BTreeSet<_>>()
            };
            bytes(a) == bytes(b)
        }
        (L(a), L(b)) => a.len() == b.len() && a.iter().zip(b).all(|(a, b)| same(a, b)),
        (M(a), M(b)) => {
            a.len() == b.len()
                && a.iter()
                    .all(|(name, value)| b.get(name).is_some_and(|other| same(value, other)))
        }
        _ => a == b,
    }
}

fn same_number(a: &str, b: &str) -> bool {
    a == b || matches!((number(a), number(b)), (Some(a), Some(b)) if a == b)
}

/// A DynamoDB number as (negative, significant digits, exponent): the
/// value is the digits times ten to the exponent; zero is `(false, "", 0)`.
fn number(text: &str) -> Option<(bool, String, i64)> {
    let text = text.trim();
    let (negative, text) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text.strip_prefix('+').unwrap_or(text)),
    };
    let (mantissa, exponent) = match text.split_once(['e', 'E']) {
        Some((mantissa, exponent)) => (mantissa, exponent.parse::<i64>().ok()?),
        None => (text, 0),
    };
    let (whole, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let digits = format!("{whole}{fraction}");
    if digits.is_empty() || !digits.bytes().all(|byte| byte.is_ascii_digit()) {
        return None;
    }
    let significant = digits.trim_start_matches('0');
    if significant.is_empty() {
        return Some((false, String::new(), 0));
    }
    let trimmed = significant.trim_end_matches('0');
    let exponent = exponent - fraction.len() as i64 + (significant.len() - trimmed.len()) as i64;
    Some((negative, trimmed.to_owned(), exponent))
}

#[cfg(test)]
mod tests {
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
        let numbers =
            |items: &[&str]| AttributeValue::Ns(items.iter().map(|s| (*s).into()).collect());
        assert!(same(&numbers(&["1", "2.0"]), &numbers(&["2", "1"])));
        let map = |value: &str| {
            AttributeValue::M([("n".to_owned(), AttributeValue::N(value.into()))].into())
        };
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
}
