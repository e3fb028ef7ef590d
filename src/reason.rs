//! Reasons without values: what serde says is wrong, told without the value
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
