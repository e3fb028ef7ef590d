//! The fields an event type's `data` declares, as serde's derive names
//! them, found without an event: the events enum is asked for the type with
//! a `data` that answers a struct's field list as its error. And the
//! declaration's mistakes, for [`crate::Domain::check`].

use serde::Deserializer;
use serde::de::value::MapDeserializer;
use serde::de::{IntoDeserializer, Visitor};

use super::{ERASURE_TYPE, Personal, Subject};
use crate::entity::{FieldNames, Fields, Kind};

/// The `type` and `data` of the enum's map.
enum Part {
    Type(&'static str),
    Data,
}

impl<'de> Deserializer<'de> for Part {
    type Error = Fields;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Fields> {
        match self {
            Part::Type(name) => visitor.visit_borrowed_str(name),
            Part::Data => FieldNames.deserialize_any(visitor),
        }
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Fields> {
        match self {
            Part::Type(_) => self.deserialize_any(visitor),
            Part::Data => FieldNames.deserialize_struct(name, fields, visitor),
        }
    }

    /// The tag is read as an enum's variant.
    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Fields> {
        match self {
            Part::Type(tag) => {
                visitor.visit_enum(IntoDeserializer::<Fields>::into_deserializer(tag))
            }
            Part::Data => FieldNames.deserialize_enum(name, variants, visitor),
        }
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf option unit unit_struct newtype_struct seq tuple
        tuple_struct map identifier ignored_any
    }
}

impl<'de> IntoDeserializer<'de, Fields> for Part {
    type Deserializer = Part;

    fn into_deserializer(self) -> Part {
        self
    }
}

/// The fields `event_type`'s `data` declares (`None`: not a struct serde
/// derives, or a type `E` does not have).
pub(crate) fn data_fields<E: serde::de::DeserializeOwned>(
    event_type: &'static str,
) -> Option<&'static [&'static str]> {
    let map = MapDeserializer::<_, Fields>::new(
        [("type", Part::Type(event_type)), ("data", Part::Data)].into_iter(),
    );
    match E::deserialize(map) {
        Err(Fields(fields)) => fields,
        Ok(_) => None,
    }
}

/// The mistakes of a domain's personal declaration: an event type it does
/// not have, a field or subject its `data` does not declare.
pub(crate) fn problems<E: serde::de::DeserializeOwned>(
    types: &[&'static str],
    personal: &Personal,
) -> Vec<String> {
    let mut problems = Vec::new();
    for declared in personal.types() {
        let event_type = declared.event_type;
        if !types.contains(&event_type) {
            problems.push(format!(
                "personal data is declared for {event_type}, which the events enum does not have: name one of its types ({})",
                types.join(", ")
            ));
            continue;
        }
        let Some(fields) = data_fields::<E>(event_type) else {
            problems.push(format!(
                "personal data is declared for {event_type}, whose data is not a struct with named fields: declare its fields in a struct deriving Deserialize"
            ));
            continue;
        };
        let mut wanted: Vec<&str> = declared.fields.clone();
        if let Subject::Field(subject) = declared.subject {
            if declared.fields.contains(&subject) {
                problems.push(format!(
                    "{event_type}'s subject field `{subject}` is among its personal fields: the subject stays in clear (an opaque id), its values are sealed under its key"
                ));
            }
            wanted.push(subject);
        }
        for field in wanted {
            if !fields.contains(&field) {
                problems.push(format!(
                    "{event_type}'s data has no field `{field}` (it has {}): name the field as serde does",
                    fields.join(", ")
                ));
            }
        }
    }
    problems
}

/// The mistakes of an entity's personal fields: one its struct does not
/// have.
pub(crate) fn entity_problems(kind: &Kind) -> Vec<String> {
    let (Some(fields), personal) = (kind.fields(), kind.personal()) else {
        return Vec::new();
    };
    personal
        .iter()
        .filter(|field| !fields.contains(field))
        .map(|field| {
            format!(
                "the entity {} declares `{field}` personal, and has no field serialized so (it has {}): name the field as serde does",
                kind.type_name(),
                fields.join(", ")
            )
        })
        .collect()
}

/// What a domain that holds personal data must also register: the
/// erasure event, so that each consumer can forget.
pub(crate) fn erasure_problem(types: &[&'static str], holds: &str) -> Option<String> {
    (!types.contains(&ERASURE_TYPE)).then(|| {
        format!(
            "{holds}, and the events enum has no {ERASURE_TYPE}: add `{ERASURE_TYPE}(sequence_guard::personal::Erasure)`, handled by `Handling::erasure(data)`"
        )
    })
}
