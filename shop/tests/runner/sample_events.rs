//! The samples in `events/`, checked against the shape SQS delivers.

use super::*;

/// The samples in `events/` are shaped as SQS delivers a FIFO batch to
/// Lambda, and follow the contract's group and deduplication ids.
#[test]
fn the_sample_events_are_real_sqs_fifo_batches() {
    use md5::{Digest, Md5};
    for (file, json) in samples::ALL {
        let raw: serde_json::Value = serde_json::from_str(json).expect("JSON");
        let records = raw["Records"].as_array().expect("Records");
        assert!(
            !records.is_empty() && records.len() <= 10,
            "{file}: a batch holds 1 to 10 records"
        );
        for record in records {
            let id = record["messageId"].as_str().unwrap_or_default();
            let at = format!("{file} {id}");
            for field in [
                "messageId",
                "receiptHandle",
                "body",
                "md5OfBody",
                "eventSourceARN",
                "awsRegion",
            ] {
                assert!(
                    record[field].as_str().is_some_and(|v| !v.is_empty()),
                    "{at}: {field}"
                );
            }
            assert_eq!(record["eventSource"], "aws:sqs", "{at}");
            assert!(
                record["eventSourceARN"]
                    .as_str()
                    .is_some_and(|arn| arn.ends_with(".fifo")),
                "{at}"
            );
            let body = record["body"].as_str().unwrap_or_default();
            let md5: String = Md5::digest(body.as_bytes())
                .iter()
                .map(|byte| format!("{byte:02x}"))
                .collect();
            assert_eq!(record["md5OfBody"], md5.as_str(), "{at}: md5OfBody");
            let attributes = &record["attributes"];
            for attribute in [
                "ApproximateReceiveCount",
                "SentTimestamp",
                "SequenceNumber",
                "MessageGroupId",
            ] {
                assert!(attributes[attribute].is_string(), "{at}: {attribute}");
            }
            // Readable bodies follow the contract's group and deduplication ids; a
            // producer's resend after SQS's 5-minute window carries a new one.
            let Ok(event) = serde_json::from_str::<serde_json::Value>(body) else {
                continue;
            };
            let (group, dedup) = match event["sequence"].as_u64() {
                Some(sequence) => {
                    let aggregate = event["aggregateId"].as_str().unwrap_or_default();
                    (aggregate.to_owned(), format!("{aggregate}:{sequence}"))
                }
                None if event["type"] == "InventoryAdjusted" => (
                    event["data"]["sku"].as_str().unwrap_or_default().to_owned(),
                    event["eventId"].as_str().unwrap_or_default().to_owned(),
                ),
                None => continue, // an invalid sample
            };
            assert_eq!(
                attributes["MessageGroupId"],
                group.as_str(),
                "{at}: MessageGroupId"
            );
            let sent_dedup = attributes["MessageDeduplicationId"]
                .as_str()
                .unwrap_or_default();
            assert!(
                sent_dedup == dedup || sent_dedup == format!("{dedup}:resent"),
                "{at}: MessageDeduplicationId {sent_dedup}, expected {dedup}"
            );
        }
        // The Lambda event type reads every sample.
        assert_eq!(sample(json).records.len(), records.len(), "{file}");
    }
}
