//! A subject's key item as DynamoDB holds it (the event store's table):
//! its key, and its attributes read back, a corrupt one named.
//!
//! | item | pk | sk | attributes |
//! | --- | --- | --- | --- |
//! | a subject's key | `SUBJECT#<subject>` | `KEY` | `wrappedKey` B (the data key wrapped by KMS, the subject its encryption context), `streams` SS, `createdAt` N |
//! | once erased | the same | `KEY` | `streams` SS (kept), `erasedAt` N, `told` BOOL; no `wrappedKey` |

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;

use super::keys::{KeyError, KeyItem};
use crate::entity::Item;

/// The key of a subject's key item.
pub(super) fn key(subject: &str) -> Item {
    HashMap::from([
        (
            "pk".to_owned(),
            AttributeValue::S(format!("SUBJECT#{subject}")),
        ),
        ("sk".to_owned(), AttributeValue::S("KEY".to_owned())),
    ])
}

/// A key item read back, with its subject (from its `pk`).
pub(super) fn subject_item(item: &Item) -> Result<(String, KeyItem), KeyError> {
    let subject = match item.get("pk") {
        Some(AttributeValue::S(pk)) => pk.strip_prefix("SUBJECT#"),
        _ => None,
    }
    .ok_or_else(|| KeyError::Store("BatchGetItem answered an item that is no key item".to_owned()))?
    .to_owned();
    let stored = stored(&subject, item)?;
    Ok((subject, stored))
}

/// The attributes of `subject`'s key item.
pub(super) fn stored(subject: &str, item: &Item) -> Result<KeyItem, KeyError> {
    let corrupt = |problem: &str| KeyError::Corrupt {
        subject: subject.to_owned(),
        problem: problem.to_owned(),
    };
    let wrapped = match item.get("wrappedKey") {
        None => None,
        Some(AttributeValue::B(blob)) if !blob.as_ref().is_empty() => Some(blob.as_ref().to_vec()),
        Some(_) => return Err(corrupt("has a `wrappedKey` that is not binary data")),
    };
    let streams = match item.get("streams") {
        None => Vec::new(),
        Some(AttributeValue::Ss(streams)) => {
            let mut streams = streams.clone();
            streams.sort();
            streams
        }
        Some(_) => return Err(corrupt("has `streams` that are not a string set")),
    };
    let told = match item.get("told") {
        None => false,
        Some(AttributeValue::Bool(told)) => *told,
        Some(_) => return Err(corrupt("has a `told` that is not a boolean")),
    };
    if wrapped.is_none() && !item.contains_key("erasedAt") {
        return Err(corrupt("has neither a `wrappedKey` nor an `erasedAt`"));
    }
    Ok(KeyItem {
        wrapped,
        streams,
        told,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_dynamodb::primitives::Blob;

    fn item(pairs: &[(&str, AttributeValue)]) -> Item {
        let mut item = key("ada");
        item.extend(
            pairs
                .iter()
                .map(|(name, value)| ((*name).to_owned(), value.clone())),
        );
        item
    }

    #[test]
    fn a_key_item_reads_back_as_stored() {
        let live = item(&[
            ("wrappedKey", AttributeValue::B(Blob::new(vec![1, 2, 3]))),
            (
                "streams",
                AttributeValue::Ss(vec!["b".to_owned(), "a".to_owned()]),
            ),
            ("createdAt", AttributeValue::N("1".to_owned())),
        ]);
        assert_eq!(
            subject_item(&live),
            Ok((
                "ada".to_owned(),
                KeyItem {
                    wrapped: Some(vec![1, 2, 3]),
                    streams: vec!["a".to_owned(), "b".to_owned()],
                    told: false,
                }
            ))
        );
        let erased = item(&[
            ("erasedAt", AttributeValue::N("2".to_owned())),
            ("told", AttributeValue::Bool(true)),
        ]);
        assert_eq!(
            stored("ada", &erased),
            Ok(KeyItem {
                wrapped: None,
                streams: Vec::new(),
                told: true,
            })
        );
    }

    #[test]
    fn an_item_that_cannot_be_read_is_corrupt_and_names_the_subject() {
        for (bad, says) in [
            (
                item(&[("wrappedKey", AttributeValue::S("key".to_owned()))]),
                "not binary",
            ),
            (
                item(&[
                    ("erasedAt", AttributeValue::N("2".to_owned())),
                    ("streams", AttributeValue::S("a".to_owned())),
                ]),
                "string set",
            ),
            (item(&[]), "neither"),
        ] {
            let err = stored("ada", &bad).expect_err("corrupt");
            let text = err.to_string();
            assert!(text.contains("`ada`") && text.contains(says), "{text}");
        }
    }
}
