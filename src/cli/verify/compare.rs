//! `verify`'s comparison: the fold's entities and counters against the
//! projection table's items, attribute by attribute. A difference names
//! attributes, never their values (an entity may hold personal data); a
//! counter's shows its numbers. Several counters may share an item (a
//! member's `onLoan` and `loans`): each is compared, and each that differs
//! is a line of its own.

use std::collections::{BTreeMap, BTreeSet};

use aws_sdk_dynamodb::types::AttributeValue;
use serde::Serialize;

use crate::domain::Domain;
use crate::entity::{EntityKey, Item};
use crate::store::StoreError;
use crate::store::memory::MemoryStore;

/// The attributes of an item that are the engine's and not compared as
/// values: the keys, what parking leaves on an entity's item while events
/// wait, and a process's deadline (set from the clock when an event was
/// handled: a fold cannot know its time, only whether there is one, which
/// is compared as [`DEADLINE`]).
/// (`expiresAt` is compared: the engine writes it on deduplication records
/// only, and on an entity or a counter its TTL would delete the item.)
pub(super) const IGNORED: [&str; 6] = ["pk", "sk", "parked", "parkedSince", "dueAt", "dueShard"];

/// A process's state's deadline: a line names it when one side has a
/// deadline and the other has none.
pub(super) const DEADLINE: &str = "dueAt";

pub(super) const STATE: &str = crate::store::ENTITY_SK;

/// An item's key: `(pk, sk)`.
pub(super) type ItemKey = (String, String);

/// What one side holds for an item: what kind of item it is, and its
/// attributes, the ignored ones aside.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Side {
    /// The entity's `sequence`, or the item's counters.
    pub(super) number: Number,
    /// The attributes compared.
    pub(super) attributes: Item,
    /// Whether it holds a deadline (a process's state).
    pub(super) deadline: bool,
}

/// An item's numbers: what a line of `verify` shows of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Number {
    /// An entity's `sequence` (`None` when it is not a number).
    Sequence(Option<u64>),
    /// A counter's item: the attributes of its counters (the fold's side:
    /// those it added to; the table's: those the domain registers on the
    /// item's key). Each is a line's number.
    Counters(BTreeSet<String>),
}

impl Side {
    fn sequence(&self) -> Option<u64> {
        match self.number {
            Number::Sequence(sequence) => sequence,
            Number::Counters(_) => None,
        }
    }

    /// The value of the counter in `attribute` (`None` when the item holds
    /// none, or not an integer).
    fn value(&self, attribute: &str) -> Option<i64> {
        match self.number {
            Number::Counters(_) => integer(&self.attributes, attribute),
            Number::Sequence(_) => None,
        }
    }

    fn is_counter(&self) -> bool {
        matches!(self.number, Number::Counters(_))
    }

    /// The attributes of the item's counters.
    fn counters(&self) -> impl Iterator<Item = &String> {
        match &self.number {
            Number::Counters(counters) => Some(counters.iter()),
            Number::Sequence(_) => None,
        }
        .into_iter()
        .flatten()
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
    /// side holds none (no item, not that counter on it, or not as an
    /// integer). Both `null` on
    /// the line of a counter's item's attributes that no counter declares.
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
/// every counter, as their items' attributes (the counters of one item
/// together).
pub(super) fn expected(store: &MemoryStore) -> Result<BTreeMap<ItemKey, Side>, StoreError> {
    let mut items = BTreeMap::new();
    let deadlines: BTreeSet<EntityKey> =
        store.deadlines().into_iter().map(|(key, _)| key).collect();
    for (key, entity) in store.entities() {
        let mut attributes = entity.to_item().map_err(|err| StoreError::Corrupt {
            key: key.pk(),
            message: format!("the folded entity cannot be written as an item: {err}"),
        })?;
        attributes.retain(|name, _| !IGNORED.contains(&name.as_str()));
        let side = Side {
            number: Number::Sequence(Some(entity.sequence())),
            attributes,
            deadline: deadlines.contains(&key),
        };
        items.insert((key.pk(), STATE.to_owned()), side);
    }
    for (counter, id, value) in store.counters() {
        let side = items
            .entry((counter.pk(&id), counter.sort_key.to_owned()))
            .or_insert_with(|| Side {
                number: Number::Counters(BTreeSet::new()),
                attributes: Item::new(),
                deadline: false,
            });
        if let Number::Counters(counters) = &mut side.number {
            counters.insert(counter.attribute.to_owned());
        }
        side.attributes.insert(
            counter.attribute.to_owned(),
            AttributeValue::N(value.to_string()),
        );
    }
    Ok(items)
}

/// The keys of the items the streams can project: for each stream, an
/// entity of each kind and each counter's item under its id (once for the
/// counters that share one).
pub(super) fn candidates(domain: &Domain, streams: &[String]) -> Vec<ItemKey> {
    let mut keys = Vec::new();
    for stream in streams {
        for kind in domain.kinds() {
            keys.push((EntityKey::new(kind, stream.as_str()).pk(), STATE.to_owned()));
        }
        for counter in domain.counters() {
            let key = (counter.pk(stream), counter.sort_key.to_owned());
            if !keys.contains(&key) {
                keys.push(key);
            }
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
    // Every counter the domain keeps on this item.
    let counters: BTreeSet<String> = domain
        .counters()
        .iter()
        .filter(|counter| counter.id_of(&pk, &sk).is_some())
        .map(|counter| counter.attribute.to_owned())
        .collect();
    if !entity && counters.is_empty() {
        return None;
    }
    let deadline = item.contains_key(DEADLINE);
    item.retain(|name, _| !IGNORED.contains(&name.as_str()));
    if item.is_empty() {
        return None;
    }
    let number = if entity {
        Number::Sequence(integer(&item, "sequence"))
    } else {
        Number::Counters(counters)
    };
    Some((
        (pk, sk),
        Side {
            number,
            attributes: item,
            deadline,
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

/// Every key of either side, in key order: how many entities and counters
/// were checked (a counter's item counts each counter either side holds,
/// and one more for attributes no counter declares), and the differences.
pub(super) fn compare(
    expected: &BTreeMap<ItemKey, Side>,
    found: &BTreeMap<ItemKey, Side>,
) -> (u64, Vec<Difference>) {
    let keys: BTreeSet<&ItemKey> = expected.keys().chain(found.keys()).collect();
    let mut checked = 0;
    let mut differences = Vec::new();
    for key in keys {
        let (want, have) = (expected.get(key), found.get(key));
        let counters = [want, have].into_iter().flatten().any(Side::is_counter);
        if counters {
            let (count, lines) = counter_differences(key, want, have);
            checked += count;
            differences.extend(lines);
        } else {
            checked += 1;
            differences.extend(difference(key, want, have));
        }
    }
    (checked, differences)
}

/// The attributes of an item on which two sides differ (values that
/// differ, or attributes one side only has), sorted.
fn differing(expected: Option<&Side>, found: Option<&Side>) -> Vec<String> {
    let empty = Item::new();
    let (want, have) = (
        expected.map_or(&empty, |side| &side.attributes),
        found.map_or(&empty, |side| &side.attributes),
    );
    let names: BTreeSet<&String> = want.keys().chain(have.keys()).collect();
    names
        .into_iter()
        .filter(|name| match (want.get(*name), have.get(*name)) {
            (Some(a), Some(b)) => !same(a, b),
            _ => true,
        })
        .cloned()
        .collect()
}

/// How a counter's item differs: a line for each of its counters that
/// differs (its values, its attribute named), then one naming the
/// attributes no counter declares that differ, if any; and how many
/// things were checked. A counter the fold has no value of and the table
/// has is ahead: no stored event explains it.
fn counter_differences(
    key: &ItemKey,
    expected: Option<&Side>,
    found: Option<&Side>,
) -> (u64, Vec<Difference>) {
    let counters: BTreeSet<&String> = [expected, found]
        .into_iter()
        .flatten()
        .flat_map(Side::counters)
        .collect();
    let (named, others): (Vec<String>, Vec<String>) = differing(expected, found)
        .into_iter()
        .partition(|name| counters.contains(name));
    let line = |numbers, attributes, ahead| Difference {
        pk: key.0.clone(),
        sk: key.1.clone(),
        numbers,
        attributes,
        ahead,
        diverged: false,
        found_event_id: None,
    };
    let mut lines: Vec<Difference> = named
        .into_iter()
        .map(|name| {
            let want = expected.and_then(|side| side.value(&name));
            let have = found.and_then(|side| side.value(&name));
            let held =
                |side: Option<&Side>| side.is_some_and(|side| side.attributes.contains_key(&name));
            let ahead = !held(expected) && held(found);
            let numbers = Numbers::Values {
                expected: want,
                found: have,
            };
            line(numbers, vec![name], ahead)
        })
        .collect();
    if !others.is_empty() {
        let numbers = Numbers::Values {
            expected: None,
            found: None,
        };
        lines.push(line(numbers, others, expected.is_none()));
    }
    // Checked: each counter either side holds, and the attributes no
    // counter declares as one.
    let held: BTreeSet<&String> = [expected, found]
        .into_iter()
        .flatten()
        .flat_map(|side| side.attributes.keys())
        .collect();
    let strays = held.iter().any(|name| !counters.contains(name));
    let compared = held.iter().filter(|name| counters.contains(*name)).count();
    (compared as u64 + u64::from(strays), lines)
}

/// How one entity's item differs, if it does.
fn difference(key: &ItemKey, expected: Option<&Side>, found: Option<&Side>) -> Option<Difference> {
    let mut attributes = differing(expected, found);
    // A deadline on one side only: its time is the clock's, its presence
    // the fold's.
    if expected.is_some_and(|side| side.deadline) != found.is_some_and(|side| side.deadline) {
        attributes.push(DEADLINE.to_owned());
        attributes.sort();
    }
    if attributes.is_empty() && expected.is_some() == found.is_some() {
        return None;
    }
    let numbers = Numbers::Sequences {
        expected_sequence: expected.and_then(Side::sequence),
        found_sequence: found.and_then(Side::sequence),
    };
    // Ahead: the table holds what no stored event explains. Diverged: at
    // the same sequence, the table's last event is not the store's.
    let (ahead, diverged) = match (expected, found) {
        (None, Some(_)) => (true, false),
        (Some(want), Some(have)) => match (want.sequence(), have.sequence()) {
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
mod tests;
