//! Limits declared on the types of event data, for serde's
//! `deserialize_with`: a field says what it holds, and a message that breaks
//! it is refused with a reason that names the field.
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
    // Characters are 1 to 4 bytes: at most MAX bytes are at most MAX
    // characters, and a non-empty string is at least one.
    let obviously_fits = text.len() <= MAX && (MIN == 0 || (MIN == 1 && !text.is_empty()));
    if obviously_fits {
        return Ok(text);
    }
    // Counted only as far as needed: a long string costs no more.
    let count = text.chars().take(MAX + 1).count();
    if count > MAX {
        return Err(de::Error::custom(format_args!(
            "must be {MIN} to {MAX} characters, got more than {MAX}"
        )));
    }
    if count < MIN {
        return Err(de::Error::custom(format_args!(
            "must be {MIN} to {MAX} characters, got {count}"
        )));
    }
    Ok(text)
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
