//! The shop's samples in `events/` (the README's story, `replay`'s input):
//! shaped as SQS delivers a FIFO batch, and telling their story through the
//! runner on the in-memory store and on DynamoDB Local. The engine's own
//! behaviours are tested in the library's `tests/`, on its test domain.

#[path = "support/mod.rs"]
mod support;

use std::sync::Arc;

use Outcome::*;
use sequence_guard::EntityKey;
use sequence_guard::runner::{Invocation, Outcome, Runner, RunnerConfig};
use sequence_guard::store::Store;
use sequence_guard::store::memory::MemoryStore;
use shop::OrderStatus;
use support::*;

fn invocation() -> Invocation {
    Invocation {
        deadline: None,
        now: sequence_guard::lambda::epoch_seconds(),
    }
}

mod memory {
    use super::*;

    #[tokio::test]
    async fn the_sample_events_tell_their_story() {
        super::the_sample_events_tell_their_story(Arc::new(MemoryStore::new())).await
    }
}

mod dynamodb {
    use super::*;

    #[tokio::test]
    async fn the_sample_events_tell_their_story() {
        super::the_sample_events_tell_their_story(fresh_table().await).await
    }
}

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

/// The sample events, replayed in order, tell the story the README tells.
async fn the_sample_events_tell_their_story<S: Store>(store: S) {
    let runner = Runner::new(shop::domain(), store, RunnerConfig::default());
    let expected: [&[Outcome]; 14] = [
        &[Applied, Applied, Applied],
        &[Duplicate, Duplicate, Duplicate],
        &[Gap, Skipped],
        &[Applied, Applied, Applied],
        &[NotCreated, Skipped],
        &[Applied, Applied, Applied, Gap, Applied, Skipped],
        &[
            Invalid, Skipped, Invalid, Invalid, Invalid, Invalid, Invalid, Applied,
        ],
        &[Applied, Applied, Applied, Duplicate],
        &[Applied, Applied, Applied, Duplicate],
        &[Parked, Parked],
        &[Applied, Conflict],
        &[Applied; 5],
        &[Applied, Duplicate],
        &[Applied],
    ];
    for ((file, json), expected) in samples::ALL.iter().zip(expected) {
        let event = sample(json);
        let report = runner
            .run(&event, invocation())
            .await
            .expect("every sample has message ids");
        assert_eq!(outcomes(&report), expected, "{file}");
        let failed: Vec<String> = event
            .records
            .iter()
            .zip(expected)
            .filter(|(_, outcome)| outcome.is_failure())
            .filter_map(|(record, _)| record.message_id.clone())
            .collect();
        let listed: Vec<String> = report
            .response()
            .batch_item_failures
            .into_iter()
            .map(|failure| failure.item_identifier)
            .collect();
        assert_eq!(listed, failed, "{file}: batchItemFailures");
    }
    let store = runner.store();
    match typed::<shop::Order, _>(store, "order-42").await {
        Some(order) => {
            assert_eq!(
                (order.sequence, order.total_cents, order.status),
                (6, 2000, OrderStatus::Cancelled)
            );
            assert_eq!(order.cancel_reason.as_deref(), Some("customer request"));
        }
        other => panic!("order-42: {other:?}"),
    }
    // Its events 5 and 6 were parked, and drained when 4 arrived.
    match typed::<shop::Order, _>(store, "order-100").await {
        Some(order) => {
            assert_eq!(
                (order.sequence, order.total_cents, order.status),
                (6, 500, OrderStatus::Cancelled)
            );
            assert_eq!(order.cancel_reason.as_deref(), Some("out of stock"));
        }
        other => panic!("order-100: {other:?}"),
    }
    let inspection = store
        .inspect(&EntityKey::of::<shop::Order>("order-100"))
        .await
        .expect("inspect");
    assert!(inspection.parked.is_empty());
    assert_eq!(inspection.conflicts.len(), 1);
    assert_eq!(inspection.conflicts[0].sequence, 6);
    assert_eq!(
        entity(store, EntityKey::of::<shop::Order>("order-200"))
            .await
            .map(|e| e.sequence()),
        Some(1)
    );
    assert_eq!(
        entity(store, EntityKey::of::<shop::Order>("order-505"))
            .await
            .map(|e| e.sequence()),
        Some(1)
    );
    assert_eq!(
        entity(store, EntityKey::of::<shop::Order>("order-77")).await,
        None
    );
    assert_eq!(
        entity(store, EntityKey::of::<shop::Order>("order-500")).await,
        None
    );
    // Its customer forgotten: the name and email read as the placeholder,
    // everything else as it was, the sequence moved past the erasure.
    match typed::<shop::Order, _>(store, "order-300").await {
        Some(order) => {
            assert_eq!(
                (order.customer_name.as_str(), order.email.as_str()),
                ("(erased)", "(erased)")
            );
            assert_eq!(
                (order.sequence, order.total_cents, order.paid_cents),
                (3, 2500, 2500)
            );
            assert_eq!(order.status, OrderStatus::Open);
        }
        other => panic!("order-300: {other:?}"),
    }
    match typed::<shop::Product, _>(store, "product-7").await {
        Some(product) => {
            assert_eq!((product.sequence, product.price_cents), (3, 2999))
        }
        other => panic!("product-7: {other:?}"),
    }
    assert_eq!(
        store.counter(&shop::STOCK, "SKU-LAMP").await.expect("read"),
        Some(7)
    );
    assert_eq!(
        store.counter(&shop::STOCK, "SKU-DESK").await.expect("read"),
        Some(5)
    );
}

/// An erasure forgets every personal value the samples carry, in each
/// consumer of the shop's events: no entity keeps a customer's name or
/// email in clear once the customer is erased (an attribute that copies
/// one must be declared personal).
#[test]
fn an_erasure_leaves_no_personal_value_in_clear() {
    let samples = samples::ALL.map(|(_, sample)| sample);
    let check = |domain: &sequence_guard::Domain| {
        sequence_guard::testkit::check_erasures(domain, &samples)
            .unwrap_or_else(|leak| panic!("{leak}"))
    };
    // Each order's name and email, in its creation and its updates.
    assert!(
        check(&shop::domain()) >= 10,
        "the samples carry personal values"
    );
    check(&shop::status::domain());
    check(&shop::payments::domain());
}
