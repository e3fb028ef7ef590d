//! A corrupt event item reported to the failure queue: where it is and
//! what it is (keys, type, version, sequence) and why it was not sent,
//! never its `data` or `body`, which may hold personal data. The operator
//! reads the item from the event store.

use serde_json::{Value, json};

use super::{Dispatch, Queue};
use crate::dispatcher::record::{Corrupt, keys_of};

/// A JSON document with the characters SQS refuses (U+FFFE, U+FFFF: JSON
/// leaves them raw, and only strings hold them) written as `\u` escapes:
/// the same document, as SQS carries it.
pub(super) fn sendable(json: &str) -> String {
    json.chars()
        .fold(String::with_capacity(json.len()), |mut out, c| {
            if crate::sqs::sqs_body_char(c) {
                out.push(c);
            } else {
                out.push_str(&format!("\\u{:04x}", u32::from(c)));
            }
            out
        })
}

/// What a report says of the item, read from the record's new image:
/// `(type, version, sequence)`, each `null` where the item does not say.
/// The version is the body's envelope's (1 when the body is an object
/// without one); nothing else of the body is read.
fn described(record: &Value) -> (Value, Value, Value) {
    let image = record.pointer("/dynamodb/NewImage");
    let attribute = |name: &str, of: &str| {
        image
            .and_then(|image| image.get(name))
            .and_then(|value| value.get(of))
            .and_then(Value::as_str)
    };
    let event_type = attribute("type", "S").map_or(Value::Null, |name| json!(name));
    let sequence = attribute("sequence", "N")
        .and_then(|digits| digits.parse::<u64>().ok())
        .map_or(Value::Null, |sequence| json!(sequence));
    let version = attribute("body", "S")
        .and_then(|body| serde_json::from_str::<Value>(body).ok())
        .and_then(|body| match body.get("version") {
            None if body.is_object() => Some(json!(1)),
            Some(version) if version.is_u64() => Some(version.clone()),
            _ => None,
        })
        .unwrap_or(Value::Null);
    (event_type, version, sequence)
}

/// The report of a corrupt event item: its keys, type, version, sequence
/// and the reason, never its `data` or `body`.
pub(super) fn document(corrupt: &Corrupt) -> Value {
    let (pk, sk) = keys_of(&corrupt.record);
    let (event_type, version, sequence) = described(&corrupt.record);
    json!({
        "source": "sequence-guard dispatcher",
        "condition": "CorruptEventItem",
        "reason": corrupt.reason,
        "sequenceNumber": corrupt.sequence_number,
        "eventSourceARN": corrupt.record.get("eventSourceARN"),
        "keys": { "pk": pk, "sk": sk },
        "type": event_type,
        "version": version,
        "sequence": sequence,
    })
}

/// Reports a corrupt event item to the failure queue (and the log); `Err`
/// with the reason when the report could not be sent.
pub(super) async fn report<Q: Queue>(
    queue: &Q,
    corrupt: &Corrupt,
    dispatch: &mut Dispatch,
) -> Result<(), String> {
    let (pk, sk) = keys_of(&corrupt.record);
    tracing::error!(
        sequence_number = corrupt.sequence_number.as_deref(),
        pk = pk.as_deref(),
        sk = sk.as_deref(),
        reason = %corrupt.reason,
        "corrupt event item: not sent, reported to the failure queue"
    );
    let text = sendable(&document(corrupt).to_string());
    match queue.report(&text).await {
        Ok(()) => {
            dispatch
                .corrupt
                .push((corrupt.sequence_number.clone(), corrupt.reason.clone()));
            Ok(())
        }
        Err(err) => {
            tracing::error!(error = %err, "cannot report a corrupt event item: it will come again");
            if corrupt.sequence_number.is_none() {
                // Nothing names it for redelivery; the batch fails as a whole.
                return Err(format!(
                    "the report failed ({err}) for a record without SequenceNumber"
                ));
            }
            Err(format!("its report to the failure queue failed: {err}"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn corrupt(body: &str) -> Corrupt {
        let keys =
            json!({ "pk": { "S": "STREAM#order-7" }, "sk": { "S": "EVENT#00000000000000000003" } });
        let mut image = keys.clone();
        image["eventId"] = json!({ "S": "e-3" });
        image["type"] = json!({ "S": "OrderUpdated" });
        image["sequence"] = json!({ "N": "3" });
        image["body"] = json!({ "S": body });
        Corrupt {
            sequence_number: Some("000000000000000000042".to_owned()),
            reason: "the body is not a message of the domain: data.totalCents: invalid type"
                .to_owned(),
            record: json!({
                "eventName": "INSERT",
                "eventSourceARN": "arn:aws:dynamodb:us-east-1:1:table/events/stream/x",
                "dynamodb": { "Keys": keys, "NewImage": image, "SequenceNumber": "000000000000000000042" },
            }),
        }
    }

    #[test]
    fn a_report_names_keys_type_version_sequence_and_reason_never_the_body() {
        let body = r#"{"eventId":"e-3","type":"OrderUpdated","version":2,"aggregateId":"order-7","sequence":3,"data":{"customerName":"Ada Lovelace","email":"ada@example.com","totalCents":"lots"}}"#;
        let report = document(&corrupt(body));
        assert_eq!(
            report,
            json!({
                "source": "sequence-guard dispatcher",
                "condition": "CorruptEventItem",
                "reason": "the body is not a message of the domain: data.totalCents: invalid type",
                "sequenceNumber": "000000000000000000042",
                "eventSourceARN": "arn:aws:dynamodb:us-east-1:1:table/events/stream/x",
                "keys": { "pk": "STREAM#order-7", "sk": "EVENT#00000000000000000003" },
                "type": "OrderUpdated",
                "version": 2,
                "sequence": 3,
            })
        );
        let text = report.to_string();
        for personal in ["Ada Lovelace", "ada@example.com", "lots", "customerName"] {
            assert!(!text.contains(personal), "`{personal}` in {text}");
        }
    }

    #[test]
    fn a_version_is_1_when_absent_and_null_when_the_body_cannot_say() {
        let version = |body: &str| document(&corrupt(body))["version"].clone();
        assert_eq!(version(r#"{"type":"OrderUpdated"}"#), json!(1));
        assert_eq!(version(r#"{"half": "#), Value::Null);
        assert_eq!(version(r#"{"version":"two"}"#), Value::Null);
        assert_eq!(version("[1]"), Value::Null);
    }
}
