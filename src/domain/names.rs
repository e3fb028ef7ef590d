//! The events enum's type names, as serde's derive lists them, and what is
//! wrong with them.

use std::fmt;

use serde::de::value::MapDeserializer;

use super::Events;

/// What is wrong with the events enum's type names: none (not tagged as
/// the envelope is), or one name on two variants.
pub(super) fn type_problems(enum_name: &str, types: &[&str]) -> Vec<String> {
    if types.is_empty() {
        return vec![format!(
            "the events enum {enum_name} has no event types serde can read from the envelope: declare it #[serde(tag = \"type\", content = \"data\")]"
        )];
    }
    let mut problems = Vec::new();
    for (index, name) in types.iter().enumerate() {
        // Said once, at its second variant.
        if types[..index].iter().filter(|seen| *seen == name).count() == 1 {
            problems.push(format!(
                "two variants of the events enum {enum_name} are both named `{name}` (a serde rename?): the second is never read; give each its own name"
            ));
        }
    }
    problems
}

/// The last segment of a type's path (`Shipment` for `parcels::Shipment`).
pub(crate) fn short_name(type_name: &str) -> &str {
    type_name.rsplit("::").next().unwrap_or(type_name)
}

/// The names of `E`'s variants, as serde's derive lists them: asked for a
/// type no variant has, it answers with the list of those it has.
pub(super) fn type_names<E: Events>() -> &'static [&'static str] {
    let fields = [("type", "\u{0}"), ("data", "")].into_iter();
    match E::deserialize(MapDeserializer::<_, Names>::new(fields)) {
        Err(Names(Some(names))) => names,
        _ => &[],
    }
}

/// A serde error that keeps the variant names an `unknown_variant` gives.
#[derive(Debug)]
struct Names(Option<&'static [&'static str]>);

impl fmt::Display for Names {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("not a type")
    }
}

impl std::error::Error for Names {}

impl serde::de::Error for Names {
    fn custom<T: fmt::Display>(_: T) -> Self {
        Names(None)
    }

    fn unknown_variant(_: &str, expected: &'static [&'static str]) -> Self {
        Names(Some(expected))
    }
}
