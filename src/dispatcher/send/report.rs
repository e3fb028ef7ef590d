//! A corrupt event item reported to the failure queue, as a document SQS
//! takes.

use serde_json::{Value, json};

use super::{Dispatch, MAX_REQUEST_BYTES, Queue};
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
    let mut document = json!({
        "source": "sequence-guard dispatcher",
        "condition": "CorruptEventItem",
        "reason": corrupt.reason,
        "sequenceNumber": corrupt.sequence_number,
        "eventSourceARN": corrupt.record.get("eventSourceARN"),
        "keys": { "pk": pk, "sk": sk },
        "record": corrupt.record,
    });
    let mut text = sendable(&document.to_string());
    if text.len() > MAX_REQUEST_BYTES {
        // The item itself is too big for a message: its keys say where it is.
        document["record"] = Value::Null;
        document["recordOmitted"] = json!("larger than an SQS message");
        text = sendable(&document.to_string());
    }
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
