//! The events enum's shape, checked as the domain is built: serde's derive
//! reads an enum tagged `#[serde(tag = "type", content = "data")]` as a
//! struct of the fields `type` and `data`. Any other shape (tagged `type`
//! alone, untagged, externally tagged) would read the envelope wrongly, and
//! only at the first message.

use std::fmt;

use serde::Deserializer;
use serde::de::Visitor;

/// How the enum asked to be read.
#[derive(Debug)]
enum Shape {
    /// As a struct of these fields (an adjacently tagged enum).
    Struct(&'static [&'static str]),
    /// As an enum (externally tagged).
    Enum,
    /// As anything (internally tagged, untagged, or by hand).
    Other,
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a shape")
    }
}

impl std::error::Error for Shape {}

impl serde::de::Error for Shape {
    fn custom<T: fmt::Display>(_: T) -> Self {
        Shape::Other
    }
}

struct Probe;

impl<'de> Deserializer<'de> for Probe {
    type Error = Shape;

    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Shape> {
        Err(Shape::Other)
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        fields: &'static [&'static str],
        _: V,
    ) -> Result<V::Value, Shape> {
        Err(Shape::Struct(fields))
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _: &'static str,
        _: &'static [&'static str],
        _: V,
    ) -> Result<V::Value, Shape> {
        Err(Shape::Enum)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf option unit unit_struct newtype_struct seq tuple
        tuple_struct map identifier ignored_any
    }
}

/// What is wrong with the shape of the events enum `E`, if anything.
pub(super) fn problem<E: serde::de::DeserializeOwned>(enum_name: &str) -> Option<String> {
    const FIX: &str = "declare it #[serde(tag = \"type\", content = \"data\")]";
    match E::deserialize(Probe) {
        Err(Shape::Struct(["type", "data"])) | Ok(_) => None,
        Err(Shape::Struct(fields)) => Some(format!(
            "the events enum {enum_name} is read from the fields {fields:?}, and the envelope has `type` and `data`: {FIX}"
        )),
        Err(Shape::Enum) => Some(format!(
            "the events enum {enum_name} is externally tagged (a map of one variant), and the envelope names its type in `type`: {FIX}"
        )),
        Err(Shape::Other) => Some(format!(
            "the events enum {enum_name} is not tagged with `content = \"data\"` (tagged `type` alone reads the data's fields from the envelope itself): {FIX}"
        )),
    }
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    use super::problem;

    #[derive(Debug, Deserialize)]
    struct Text {
        #[allow(dead_code)]
        text: String,
    }

    #[derive(Debug, Deserialize)]
    #[serde(tag = "type", content = "data")]
    enum Adjacent {
        #[allow(dead_code)]
        Written(Text),
    }

    #[derive(Debug, Deserialize)]
    #[serde(tag = "type")]
    enum Internal {
        #[allow(dead_code)]
        Written(Text),
    }

    #[derive(Debug, Deserialize)]
    enum External {
        #[allow(dead_code)]
        Written(Text),
    }

    #[derive(Debug, Deserialize)]
    #[serde(tag = "kind", content = "payload")]
    enum Renamed {
        #[allow(dead_code)]
        Written(Text),
    }

    #[test]
    fn only_an_enum_tagged_type_with_content_data_is_taken() {
        assert_eq!(problem::<Adjacent>("Adjacent"), None);
        let internal = problem::<Internal>("Internal").expect("refused");
        assert!(
            internal.contains("not tagged with `content = \"data\"`"),
            "{internal}"
        );
        let external = problem::<External>("External").expect("refused");
        assert!(external.contains("externally tagged"), "{external}");
        let renamed = problem::<Renamed>("Renamed").expect("refused");
        assert!(renamed.contains("[\"kind\", \"payload\"]"), "{renamed}");
    }
}
