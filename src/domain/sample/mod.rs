//! What each event type's handling names, found as the domain is built:
//! the events enum is read for the type with a `data` made up as serde
//! asks for it (numbers 1, strings `"1"`, sequences empty, options `None`,
//! an enum's first variant, a struct's fields; then again with 0 and `""`),
//! and the [`crate::Handling`] it answers is asked which entity kind or
//! counter it writes. `data` read without a list of fields (a struct
//! variant's) is a map of the fields serde says are missing, found one
//! refusal at a time.
//!
//! A type whose data cannot be made up (a `Deserialize` of its own that
//! refuses both), or whose registration panics on it, names nothing here:
//! its entity is registered with `.entity::<T>()`, or named at its first
//! message. A registration that chooses its entity by the data names only
//! the one its made-up data chooses.

use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};

use serde::Deserializer;
use serde::de::value::BorrowedStrDeserializer;
use serde::de::{DeserializeSeed, EnumAccess, MapAccess, SeqAccess, VariantAccess, Visitor};

use super::Events;
use crate::entity::Kind;
use crate::handling::{Counter, How, Raw};

/// What one event type's handling writes, and whether it is a pass.
#[derive(Clone)]
pub(super) enum Named {
    /// An entity (sequenced, a snapshot, a process's, an erasure).
    Entity(&'static Kind),
    /// A pass ([`crate::Handling::pass`]): an entity, its `data` not read.
    Pass(&'static Kind),
    /// A counter ([`crate::Handling::add`]).
    Counter(&'static Counter),
    /// Nothing ([`crate::Handling::ignore`]).
    Nothing,
    /// An erasure on whichever kind its stream projects onto
    /// ([`crate::Handling::erasure`]).
    Erasure,
}

/// What `event_type`'s handling names; `None` when its data cannot be made
/// up, or its registration panics on it.
pub(super) fn named<E: Events>(event_type: &'static str) -> Option<Named> {
    FILLS.iter().find_map(|fill| {
        let handling = catch_unwind(AssertUnwindSafe(|| {
            made_up::<E>(event_type, *fill).map(Events::handling)
        }))
        .ok()??;
        Some(match handling.0 {
            Raw::How(How::Sequenced(apply)) if !apply.reads_data() => Named::Pass(apply.kind()),
            Raw::How(How::Sequenced(apply) | How::Snapshot(apply)) => Named::Entity(apply.kind()),
            Raw::How(How::Addition(addition)) => Named::Counter(addition.counter),
            Raw::How(How::Ignored(_)) => Named::Nothing,
            Raw::Erasure(_) => Named::Erasure,
        })
    })
}

/// The events enum read as `event_type` with made-up data: read again
/// with each field serde says is missing, until it is taken or refused.
fn made_up<E: Events>(event_type: &'static str, fill: Fill) -> Option<E> {
    let mut keys: Vec<&'static str> = Vec::new();
    while keys.len() <= MAX_KEYS {
        let data = Sample {
            fill,
            keys: &keys,
            depth: 0,
        };
        let envelope = Envelope {
            tag: Some(event_type),
            data: Some(data),
        };
        match E::deserialize(envelope) {
            Ok(events) => return Some(events),
            Err(Refused(Some(field))) if !keys.contains(&field) => keys.push(field),
            Err(_) => return None,
        }
    }
    None
}

/// The most fields found missing, one refusal at a time.
const MAX_KEYS: usize = 64;

/// The values made up: tried in order, until one is taken.
#[derive(Debug, Clone, Copy)]
struct Fill {
    number: u8,
    text: &'static str,
}

/// `1` and `"1"` pass most limits (a text of at least one character, a
/// positive number); `0` and `""` the others.
const FILLS: [Fill; 2] = [
    Fill {
        number: 1,
        text: "1",
    },
    Fill {
        number: 0,
        text: "",
    },
];

/// How deep a made-up value goes: a recursive type stops here, refused.
const MAX_DEPTH: u8 = 16;

/// A refusal: the data cannot be made up, or lacks this field.
#[derive(Debug)]
struct Refused(Option<&'static str>);

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("cannot be made up")
    }
}

impl std::error::Error for Refused {}

impl serde::de::Error for Refused {
    fn custom<T: fmt::Display>(_: T) -> Self {
        Refused(None)
    }

    fn missing_field(field: &'static str) -> Self {
        Refused(Some(field))
    }
}

/// The envelope's `type` and `data`, as a map: the tag, then the sample.
struct Envelope<'k> {
    tag: Option<&'static str>,
    data: Option<Sample<'k>>,
}

impl<'de> Deserializer<'de> for Envelope<'_> {
    type Error = Refused;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Refused> {
        visitor.visit_map(self)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf option unit unit_struct newtype_struct seq tuple
        tuple_struct map struct enum identifier ignored_any
    }
}

impl<'de> MapAccess<'de> for Envelope<'_> {
    type Error = Refused;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Refused> {
        let key = if self.tag.is_some() {
            "type"
        } else if self.data.is_some() {
            "data"
        } else {
            return Ok(None);
        };
        seed.deserialize(BorrowedStrDeserializer::new(key))
            .map(Some)
    }

    /// The tag as a string, or as an enum's variant (serde's
    /// `BorrowedStrDeserializer` is both); then the data.
    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, Refused> {
        if let Some(tag) = self.tag.take() {
            return seed.deserialize(BorrowedStrDeserializer::new(tag));
        }
        let data = self.data.take().ok_or(Refused(None))?;
        seed.deserialize(data)
    }
}

/// A made-up value of whatever type serde asks for.
#[derive(Debug, Clone, Copy)]
struct Sample<'k> {
    fill: Fill,
    /// The fields of a map read without their list (found missing).
    keys: &'k [&'static str],
    depth: u8,
}

impl<'k> Sample<'k> {
    /// The sample of a value inside this one.
    fn inner(self) -> Result<Sample<'k>, Refused> {
        if self.depth >= MAX_DEPTH {
            return Err(Refused(None));
        }
        Ok(Sample {
            depth: self.depth + 1,
            ..self
        })
    }
}

impl<'de> Deserializer<'de> for Sample<'_> {
    type Error = Refused;

    /// A type that reads anything: `data` itself, always an object, is a
    /// map (a struct variant reads it so); inside it, a number (a JSON
    /// value, an untagged enum, a number read by hand).
    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Refused> {
        if self.depth == 0 {
            return self.deserialize_map(visitor);
        }
        visitor.visit_u64(u64::from(self.fill.number))
    }

    fn deserialize_bool<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Refused> {
        visitor.visit_bool(false)
    }

    fn deserialize_i64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Refused> {
        visitor.visit_i64(i64::from(self.fill.number))
    }

    fn deserialize_f64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Refused> {
        visitor.visit_f64(f64::from(self.fill.number))
    }

    fn deserialize_char<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Refused> {
        visitor.visit_char(char::from(b'0' + self.fill.number))
    }

    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Refused> {
        visitor.visit_borrowed_str(self.fill.text)
    }

    fn deserialize_bytes<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Refused> {
        visitor.visit_borrowed_bytes(self.fill.text.as_bytes())
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Refused> {
        visitor.visit_none()
    }

    fn deserialize_unit<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Refused> {
        visitor.visit_unit()
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        visitor: V,
    ) -> Result<V::Value, Refused> {
        visitor.visit_unit()
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        visitor: V,
    ) -> Result<V::Value, Refused> {
        visitor.visit_newtype_struct(self.inner()?)
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Refused> {
        visitor.visit_seq(Items {
            left: 0,
            sample: self,
        })
    }

    fn deserialize_tuple<V: Visitor<'de>>(
        self,
        len: usize,
        visitor: V,
    ) -> Result<V::Value, Refused> {
        visitor.visit_seq(Items {
            left: len,
            sample: self.inner()?,
        })
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        len: usize,
        visitor: V,
    ) -> Result<V::Value, Refused> {
        self.deserialize_tuple(len, visitor)
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Refused> {
        visitor.visit_map(Fields {
            names: self.keys,
            sample: self.inner()?,
        })
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Refused> {
        visitor.visit_map(Fields {
            names: fields,
            sample: self.inner()?,
        })
    }

    /// The enum's first variant.
    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Refused> {
        let name = variants.first().ok_or(Refused(None))?;
        visitor.visit_enum(Variant {
            name,
            sample: self.inner()?,
        })
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Refused> {
        visitor.visit_unit()
    }

    serde::forward_to_deserialize_any! {
        i128 u8 u16 u32 u64 u128
    }

    // The other integers and floats as the widest of their kind.
    fn deserialize_i8<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Refused> {
        self.deserialize_i64(visitor)
    }

    fn deserialize_i16<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Refused> {
        self.deserialize_i64(visitor)
    }

    fn deserialize_i32<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Refused> {
        self.deserialize_i64(visitor)
    }

    fn deserialize_f32<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Refused> {
        self.deserialize_f64(visitor)
    }

    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Refused> {
        self.deserialize_str(visitor)
    }

    fn deserialize_byte_buf<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Refused> {
        self.deserialize_bytes(visitor)
    }

    fn deserialize_identifier<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Refused> {
        self.deserialize_str(visitor)
    }
}

/// A sequence of `left` samples (a tuple's), or none.
struct Items<'k> {
    left: usize,
    sample: Sample<'k>,
}

impl<'de> SeqAccess<'de> for Items<'_> {
    type Error = Refused;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, Refused> {
        if self.left == 0 {
            return Ok(None);
        }
        self.left -= 1;
        seed.deserialize(self.sample).map(Some)
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.left)
    }
}

/// A struct's fields (a map's: those found missing), each a sample.
struct Fields<'k> {
    names: &'k [&'static str],
    sample: Sample<'k>,
}

impl<'de> MapAccess<'de> for Fields<'_> {
    type Error = Refused;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Refused> {
        let Some((name, rest)) = self.names.split_first() else {
            return Ok(None);
        };
        self.names = rest;
        seed.deserialize(BorrowedStrDeserializer::new(name))
            .map(Some)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, Refused> {
        seed.deserialize(self.sample)
    }
}

/// An enum's variant, its content a sample.
struct Variant<'k> {
    name: &'static str,
    sample: Sample<'k>,
}

impl<'de, 'k> EnumAccess<'de> for Variant<'k> {
    type Error = Refused;
    type Variant = Sample<'k>;

    fn variant_seed<V: DeserializeSeed<'de>>(
        self,
        seed: V,
    ) -> Result<(V::Value, Sample<'k>), Refused> {
        let variant = seed.deserialize(BorrowedStrDeserializer::<Refused>::new(self.name))?;
        Ok((variant, self.sample))
    }
}

impl<'de> VariantAccess<'de> for Sample<'_> {
    type Error = Refused;

    fn unit_variant(self) -> Result<(), Refused> {
        Ok(())
    }

    fn newtype_variant_seed<T: DeserializeSeed<'de>>(self, seed: T) -> Result<T::Value, Refused> {
        seed.deserialize(self)
    }

    fn tuple_variant<V: Visitor<'de>>(self, len: usize, visitor: V) -> Result<V::Value, Refused> {
        visitor.visit_seq(Items {
            left: len,
            sample: self,
        })
    }

    fn struct_variant<V: Visitor<'de>>(
        self,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Refused> {
        visitor.visit_map(Fields {
            names: fields,
            sample: self,
        })
    }
}

#[cfg(test)]
mod tests;
