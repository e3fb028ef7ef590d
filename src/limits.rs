//! Limits declared on the types of event data: a field says what it holds,
//! and a message that breaks it is refused with a reason that names the
//! field. [`Text`] is a field's type (`name: Text<1, 64>`); the functions
//! are for serde's `deserialize_with` on plain types.
//!
//! ```
//! use serde::Deserialize;
//! use sequence_guard::limits::{non_negative, text};
//!
//! #[derive(Deserialize)]
//! #[serde(rename_all = "camelCase")]
//! struct PriceChange {
//!     #[serde(deserialize_with = "text::<_, 1, 64>")]
//!     currency: String,
//!     #[serde(deserialize_with = "non_negative")]
//!     price_cents: u64,
//! }
//!
//! let ok: PriceChange = serde_json::from_str(r#"{"currency":"EUR","priceCents":1250}"#).unwrap();
//! assert_eq!((ok.currency.as_str(), ok.price_cents), ("EUR", 1250));
//! let err = serde_json::from_str::<PriceChange>(r#"{"currency":"","priceCents":1}"#).err().unwrap();
//! assert!(err.to_string().starts_with("must be 1 to 64 characters, got 0"));
//! let err = serde_json::from_str::<PriceChange>(r#"{"currency":"EUR","priceCents":-5}"#).err().unwrap();
//! assert!(err.to_string().starts_with("must be >= 0, got -5"));
//! ```

use std::fmt;

use serde::Deserializer;
use serde::de::{self, Deserialize, Visitor};

/// A string of `MIN` to `MAX` characters (counted as characters, not bytes).
pub fn text<'de, D, const MIN: usize, const MAX: usize>(deserializer: D) -> Result<String, D::Error>
where
    D: Deserializer<'de>,
{
    let text = String::deserialize(deserializer)?;
    match length_problem::<MIN, MAX>(&text) {
        None => Ok(text),
        Some(problem) => Err(de::Error::custom(problem)),
    }
}

/// [`text`] for an optional field (`Option<String>`, with
/// `#[serde(default)]`): absent or `null` is `None`.
pub fn optional_text<'de, D, const MIN: usize, const MAX: usize>(
    deserializer: D,
) -> Result<Option<String>, D::Error>
where
    D: Deserializer<'de>,
{
    let Some(text) = Option::<String>::deserialize(deserializer)? else {
        return Ok(None);
    };
    match length_problem::<MIN, MAX>(&text) {
        None => Ok(Some(text)),
        Some(problem) => Err(de::Error::custom(problem)),
    }
}

/// Why `text` is not `MIN` to `MAX` characters long (`None`: it is).
fn length_problem<const MIN: usize, const MAX: usize>(text: &str) -> Option<String> {
    // Characters are 1 to 4 bytes: at most MAX bytes are at most MAX
    // characters, and a non-empty string is at least one.
    let obviously_fits = text.len() <= MAX && (MIN == 0 || (MIN == 1 && !text.is_empty()));
    if obviously_fits {
        return None;
    }
    // Counted only as far as needed: a long string costs no more.
    let count = text.chars().take(MAX + 1).count();
    if count > MAX {
        return Some(format!(
            "must be {MIN} to {MAX} characters, got more than {MAX}"
        ));
    }
    (count < MIN).then(|| format!("must be {MIN} to {MAX} characters, got {count}"))
}

/// A string of `MIN` to `MAX` characters, as a field's type: what
/// [`text`] checks, without `deserialize_with`. It reads as a `&str`
/// (`Deref`), serializes as the string, and converts into a `String`.
///
/// ```
/// use serde::Deserialize;
/// use sequence_guard::limits::Text;
///
/// #[derive(Deserialize)]
/// struct Rename {
///     name: Text<1, 64>,
/// }
///
/// let ok: Rename = serde_json::from_str(r#"{"name":"Reading lamp"}"#).unwrap();
/// assert_eq!(&*ok.name, "Reading lamp");
/// let err = serde_json::from_str::<Rename>(r#"{"name":""}"#).err().unwrap();
/// assert!(err.to_string().starts_with("must be 1 to 64 characters, got 0"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Text<const MIN: usize, const MAX: usize>(String);

impl<const MIN: usize, const MAX: usize> Text<MIN, MAX> {
    /// The text, if it is `MIN` to `MAX` characters long; else why not.
    pub fn new(text: impl Into<String>) -> Result<Self, String> {
        let text = text.into();
        match length_problem::<MIN, MAX>(&text) {
            None => Ok(Text(text)),
            Some(problem) => Err(problem),
        }
    }

    /// The text as a `&str`.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The text as a `String`.
    pub fn into_string(self) -> String {
        self.0
    }
}

impl<const MIN: usize, const MAX: usize> std::str::FromStr for Text<MIN, MAX> {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        Text::new(text)
    }
}

impl<const MIN: usize, const MAX: usize> std::ops::Deref for Text<MIN, MAX> {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

impl<const MIN: usize, const MAX: usize> AsRef<str> for Text<MIN, MAX> {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl<const MIN: usize, const MAX: usize> fmt::Display for Text<MIN, MAX> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl<const MIN: usize, const MAX: usize> From<Text<MIN, MAX>> for String {
    fn from(text: Text<MIN, MAX>) -> String {
        text.0
    }
}

impl<const MIN: usize, const MAX: usize> PartialEq<str> for Text<MIN, MAX> {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl<const MIN: usize, const MAX: usize> PartialEq<&str> for Text<MIN, MAX> {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

impl<'de, const MIN: usize, const MAX: usize> Deserialize<'de> for Text<MIN, MAX> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        text::<D, MIN, MAX>(deserializer).map(Text)
    }
}

impl<const MIN: usize, const MAX: usize> serde::Serialize for Text<MIN, MAX> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

/// A 64-bit signed integer, from -2^63 to 2^63-1 (not a float, not a string).
pub fn integer<'de, D>(deserializer: D) -> Result<i64, D::Error>
where
    D: Deserializer<'de>,
{
    struct Integer;

    impl Visitor<'_> for Integer {
        type Value = i64;

        fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
            formatter.write_str("an integer")
        }

        fn visit_i64<E: de::Error>(self, value: i64) -> Result<i64, E> {
            Ok(value)
        }

        fn visit_u64<E: de::Error>(self, value: u64) -> Result<i64, E> {
            i64::try_from(value).map_err(|_| {
                E::custom(format_args!(
                    "must be an integer from -2^63 to 2^63-1, got {value}"
                ))
            })
        }

        fn visit_f64<E: de::Error>(self, value: f64) -> Result<i64, E> {
            Err(E::custom(format_args!(
                "must be an integer from -2^63 to 2^63-1, got {value}"
            )))
        }
    }

    deserializer.deserialize_any(Integer)
}

/// An integer from 0 to 2^63-1: an amount of money in cents, a count.
pub fn non_negative<'de, D>(deserializer: D) -> Result<u64, D::Error>
where
    D: Deserializer<'de>,
{
    let value = integer(deserializer)?;
    u64::try_from(value).map_err(|_| de::Error::custom(format_args!("must be >= 0, got {value}")))
}
