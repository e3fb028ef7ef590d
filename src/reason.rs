//! Why a body is refused ([`InvalidMessage`], which every layer that reads
//! one answers), and reasons without values: what serde says is wrong, told without the value
//! it quotes, and paths whose map keys may be data told without them. A
//! reason is logged, and a logged string or key may be personal data.

use serde_path_to_error::{Path, Segment};

/// A map key as a path names it: a key that reads as a field name
/// (`customerName`, `line_2`) as it is; any other (an email, a name with
/// spaces: data used as a key) as `<key>`.
pub(crate) fn key_segment(key: &str) -> String {
    let mut chars = key.chars();
    let identifier = key.len() <= 64
        && chars
            .next()
            .is_some_and(|first| first.is_ascii_alphabetic() || first == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    if identifier {
        format!(".{key}")
    } else {
        ".<key>".to_owned()
    }
}

/// serde_path_to_error's path, from `root` (`data`), map keys told by
/// [`key_segment`].
pub(crate) fn path_from(root: &str, path: &Path) -> String {
    let mut text = root.to_owned();
    for segment in path.iter() {
        match segment {
            Segment::Seq { index } => text.push_str(&format!("[{index}]")),
            Segment::Map { key } => text.push_str(&key_segment(key)),
            Segment::Enum { variant } => text.push_str(&key_segment(variant)),
            Segment::Unknown => text.push_str(".?"),
        }
    }
    text.trim_start_matches('.').to_owned()
}

/// What serde's `message` says is wrong, without the value it may quote:
/// `invalid type: string "ada@example.com", expected u64` is
/// `must be u64, got a string`.
pub(crate) fn without_value(message: &str) -> Refusal {
    if let Some(name) = message
        .strip_prefix("missing field `")
        .and_then(|rest| rest.split('`').next())
    {
        return Refusal::MissingField(name.to_owned());
    }
    if let Some(rest) = message.strip_prefix("invalid type: ") {
        // serde's own "expected ..." ends the message; a quoted value may
        // hold the same words, so split at the last one.
        let (unexpected, expected) = rest.rsplit_once(", expected ").unwrap_or((rest, "?"));
        let got = match unexpected.split([' ', '`']).next().unwrap_or_default() {
            "null" | "unit" => return Refusal::Missing,
            "string" | "char" => "a string",
            "integer" | "floating" => "a number",
            "boolean" => "a boolean",
            "map" => "an object",
            "sequence" => "an array",
            "byte" | "bytes" => "bytes",
            _ => "another type",
        };
        return Refusal::Problem(format!("must be {expected}, got {got}"));
    }
    if let Some(what) = message.strip_prefix("Expected ") {
        // serde_dynamo's own: the attribute is of another DynamoDB type.
        return Refusal::Problem(format!("must be {what}"));
    }
    if message.starts_with("must be") {
        // The limits' own messages (crate::limits) quote no value.
        return Refusal::Problem(message.to_owned());
    }
    // Any other refusal of serde's (an invalid value, an unknown variant or
    // field), without the value or name it may quote.
    let expected = message
        .rsplit_once(", expected ")
        .map_or(String::new(), |(_, expected)| {
            format!(": expected {expected}")
        });
    Refusal::Problem(format!("is not valid{expected}"))
}

/// What is wrong with a value, as [`without_value`] tells it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// It is absent or null.
    Missing,
    /// The field of this name, inside it, is absent.
    MissingField(String),
    /// The rest of the sentence after its name (`must be u64, got a string`).
    Problem(String),
}

impl Refusal {
    /// One line naming `what` (`attribute email`).
    pub(crate) fn naming(&self, what: &str) -> String {
        match self {
            Refusal::Missing => format!("{what} is missing"),
            Refusal::MissingField(field) => format!("{what} has no field `{field}`"),
            Refusal::Problem(problem) => format!("{what} {problem}"),
        }
    }
}

/// Why a message body was not accepted. These never heal by retrying.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InvalidMessage {
    /// The SQS record has no body.
    #[error("the record has no body")]
    NoBody,
    /// The body is not valid JSON (with serde_json's error).
    #[error("the body is not JSON: {0}")]
    NotJson(String),
    /// The body is JSON but not an object.
    #[error("the body is not a JSON object")]
    NotAnObject,
    /// A required field is absent or null (named by its path: `type`,
    /// `data.sku`).
    #[error("missing field `{0}`")]
    Missing(String),
    /// A field is present but not as the contract or the event type declares
    /// it.
    #[error("field `{field}` {problem}")]
    Invalid {
        /// The field, by its path (`sequence`, `data.quantity`).
        field: String,
        /// What is wrong with it, the rest of the message after the field's
        /// name (`must be a string, got a number`).
        problem: String,
    },
    /// The event's handling writes an entity kind or a counter the domain
    /// does not register (what to add to the domain): the domain is to be
    /// fixed, and the message retried.
    #[error("{0}")]
    Undeclared(String),
    /// The body holds personal data of this subject, whose key the reader
    /// has not fetched ([`crate::Domain::fetch_keys`]): the one refusal
    /// that heals, once the key is read (or the subject found erased).
    // The subject is not repeated: reasons are logged, and a subject may
    // be a value of `data`.
    #[error("the body holds personal data whose key is not read yet")]
    KeyNeeded(String),
    /// The `type` names none of the domain's event types (its first 64
    /// characters).
    #[error("unknown event type `{0}`")]
    UnknownType(String),
    /// A string anywhere in `data` (a field the type does not declare
    /// included: it is kept in the body, parked or recorded) over the limit.
    #[error("field `{field}` must be 0 to {max} characters, got more than {max}")]
    TooLong {
        /// The string, by its path (`data.lines[2].label`).
        field: String,
        /// The limit, in characters.
        max: usize,
    },
}

/// serde's error at `path` as a reason. Values are not repeated: a string
/// may be personal data, and the reason is logged.
pub(crate) fn refusal(event_type: &str, path: &str, message: &str) -> InvalidMessage {
    if path == "type" {
        return InvalidMessage::UnknownType(event_type.chars().take(64).collect());
    }
    match without_value(message) {
        Refusal::Missing => missing(path),
        Refusal::MissingField(name) => missing(&format!("{path}.{name}")),
        Refusal::Problem(problem) => invalid(path, problem),
    }
}

pub(crate) fn missing(field: &str) -> InvalidMessage {
    InvalidMessage::Missing(field.to_owned())
}

pub(crate) fn invalid(field: &str, problem: impl Into<String>) -> InvalidMessage {
    InvalidMessage::Invalid {
        field: field.to_owned(),
        problem: problem.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serde_messages_lose_the_values_they_quote() {
        let reason = without_value(r#"invalid type: string "ada@example.com", expected u64"#);
        assert_eq!(reason, Refusal::Problem("must be u64, got a string".into()));
        let reason = without_value("invalid value: string \"ada\", expected one of `A`, `B`");
        assert_eq!(
            reason,
            Refusal::Problem("is not valid: expected one of `A`, `B`".into())
        );
        let reason = without_value("unknown variant `ada@example.com`, expected `OPEN`");
        assert_eq!(
            reason,
            Refusal::Problem("is not valid: expected `OPEN`".into())
        );
        assert_eq!(
            without_value("Expected string"),
            Refusal::Problem("must be string".into())
        );
        assert_eq!(
            without_value("missing field `email`"),
            Refusal::MissingField("email".into())
        );
    }

    #[test]
    fn keys_that_are_data_are_not_named() {
        assert_eq!(key_segment("customerName"), ".customerName");
        assert_eq!(key_segment("ada@example.com"), ".<key>");
        assert_eq!(key_segment("Ada Lovelace"), ".<key>");
        assert_eq!(key_segment(&"a".repeat(65)), ".<key>");
    }
}
