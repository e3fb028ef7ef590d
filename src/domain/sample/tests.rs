//! The made-up data of each shape serde asks for, and what a handling
//! given it names.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::{FILLS, Named, Sample};

#[derive(Debug, Deserialize, PartialEq)]
enum Colour {
    Red,
    Blue(u8),
}

#[derive(Debug, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
struct Everything {
    name: String,
    count: u32,
    delta: i16,
    ratio: f32,
    done: bool,
    initial: char,
    tags: Vec<String>,
    pair: (u8, String),
    extra: BTreeMap<String, u64>,
    colour: Colour,
    note: Option<String>,
    raw: serde_json::Value,
    #[serde(default)]
    defaulted: u8,
}

/// A type that holds itself: made up only to a depth, then refused.
#[derive(Debug, Deserialize)]
#[allow(dead_code)]
struct Chain {
    next: Box<Chain>,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Shelf {
    sequence: u64,
    last_event_id: String,
}

impl crate::Entity for Shelf {
    const KIND: &'static str = "SHELF";
    fn sequence(&self) -> u64 {
        self.sequence
    }
    fn last_event_id(&self) -> &str {
        &self.last_event_id
    }
}

static BOOKS: crate::Counter = crate::Counter {
    kind: "SHELF",
    sort_key: "BOOKS",
    attribute: "count",
};

/// Every shape of variant an envelope's `data` object can be read as
/// (a unit variant cannot: serde reads it from no data, not `{}`).
#[derive(Debug, Deserialize)]
#[serde(tag = "type", content = "data")]
#[allow(dead_code)]
enum ShelfEvent {
    Moved(u8, String),
    Labelled {
        label: String,
    },
    Stocked(Everything),
    Dusted(serde::de::IgnoredAny),
    /// Refuses any data: named nowhere.
    Broken(Refusing),
}

#[derive(Debug)]
struct Refusing;

impl<'de> Deserialize<'de> for Refusing {
    fn deserialize<D: serde::Deserializer<'de>>(_: D) -> Result<Self, D::Error> {
        Err(serde::de::Error::custom("never"))
    }
}

fn pass(shelf: &mut Option<Shelf>, _: &crate::Sequenced<()>) -> crate::Decision {
    if shelf.is_some() {
        crate::Decision::Duplicate
    } else {
        crate::Decision::NotCreated
    }
}

impl crate::Events for ShelfEvent {
    fn handling(self) -> crate::Handling {
        match self {
            ShelfEvent::Broken(_) => crate::Handling::sequenced((), pass),
            ShelfEvent::Moved(..) => crate::Handling::ignore(),
            ShelfEvent::Labelled { label } => crate::Handling::add("books", &BOOKS, label, 1),
            ShelfEvent::Stocked(_) => crate::Handling::sequenced((), pass),
            ShelfEvent::Dusted(_) => crate::Handling::pass::<Shelf>(),
        }
    }
}

#[test]
fn each_shape_of_variant_is_asked_what_it_names() {
    let kind = |event_type| match super::named::<ShelfEvent>(event_type) {
        Some(Named::Entity(kind)) => format!("entity {}", kind.name),
        Some(Named::Pass(kind)) => format!("pass {}", kind.name),
        Some(Named::Counter(counter)) => format!("counter {}", counter.label()),
        Some(Named::Nothing) => "nothing".to_owned(),
        Some(Named::Erasure) => "erasure".to_owned(),
        None => "unknown".to_owned(),
    };
    assert_eq!(kind("Moved"), "nothing");
    assert_eq!(kind("Labelled"), "counter books");
    assert_eq!(kind("Stocked"), "entity SHELF");
    assert_eq!(kind("Dusted"), "pass SHELF");
    assert_eq!(kind("Broken"), "unknown");
}

#[test]
fn each_type_serde_asks_for_is_made_up() {
    let sample = Sample {
        fill: FILLS[0],
        keys: &[],
        depth: 0,
    };
    let made = Everything::deserialize(sample).expect("made up");
    assert_eq!(
        made,
        Everything {
            name: "1".to_owned(),
            count: 1,
            delta: 1,
            ratio: 1.0,
            done: false,
            initial: '1',
            tags: Vec::new(),
            pair: (1, "1".to_owned()),
            extra: BTreeMap::new(),
            colour: Colour::Red,
            note: None,
            raw: serde_json::json!(1),
            defaulted: 1,
        }
    );
    let sample = Sample {
        fill: FILLS[1],
        keys: &[],
        depth: 0,
    };
    assert_eq!(String::deserialize(sample).ok().as_deref(), Some(""));
    assert!(Chain::deserialize(sample).is_err());
}
