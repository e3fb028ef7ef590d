//! The subjects an event store records as erased: its key items that hold
//! no key (`erasedAt`), each with the streams its values were appended to.
//! What re-applies every erasure to a table restored from a backup
//! (`rebuild --erasures`).

use aws_sdk_dynamodb::types::AttributeValue;

use super::key_item::stored;
use super::keys::KeyError;

/// An erased subject and its streams.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErasedSubject {
    /// The subject's id.
    pub subject: String,
    /// The streams its values were appended to (each told of the erasure).
    pub streams: Vec<String>,
}

/// Every erased subject of the event store `table` (one `Scan` a page of
/// its key items: a tool's read, never the function's).
pub async fn erased_subjects(
    client: &aws_sdk_dynamodb::Client,
    table: &str,
) -> Result<Vec<ErasedSubject>, KeyError> {
    let mut erased = Vec::new();
    let mut start = None;
    loop {
        let output = client
            .scan()
            .table_name(table)
            .filter_expression("begins_with(pk, :subject) AND attribute_exists(erasedAt)")
            .expression_attribute_values(":subject", AttributeValue::S("SUBJECT#".to_owned()))
            .set_exclusive_start_key(start.take())
            .consistent_read(true)
            .send()
            .await
            .map_err(|err| {
                KeyError::Store(format!(
                    "Scan of {table}: {}",
                    crate::table::request_error("Scan", &err)
                ))
            })?;
        for item in output.items.unwrap_or_default() {
            let Some(AttributeValue::S(pk)) = item.get("pk") else {
                continue;
            };
            let Some(subject) = pk.strip_prefix("SUBJECT#") else {
                continue;
            };
            let found = stored(subject, &item)?;
            if found.wrapped.is_none() {
                erased.push(ErasedSubject {
                    subject: subject.to_owned(),
                    streams: found.streams,
                });
            }
        }
        match output.last_evaluated_key.filter(|key| !key.is_empty()) {
            Some(key) => start = Some(key),
            None => break,
        }
    }
    erased.sort_by(|a, b| a.subject.cmp(&b.subject));
    Ok(erased)
}
