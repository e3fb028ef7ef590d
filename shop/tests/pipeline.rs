//! End to end: a real local SQS (LocalStack, FIFO queue with a FIFO
//! dead-letter queue and a redrive policy) feeds the `projector` binary through
//! a poller that behaves as Lambda's event source mapping, against DynamoDB
//! Local.

mod support;

use std::time::Duration;

use sequence_guard::EntityKey;
use sequence_guard::store::Store;
use sequence_guard::store::dynamodb::DynamoStore;
use serde_json::json;
use support::function::{Function, start, start_with};
use support::localstack::{Poller, Queues, bodies, fifo_queues, redrive, send, sqs};
use support::runtime_api::RuntimeApi;
use support::*;

struct Pipeline {
    store: DynamoStore,
    queues: Queues,
    poller: Poller,
    _function: Function,
}

async fn pipeline(name: &str, visibility_seconds: u32, max_receive_count: u32) -> Pipeline {
    pipeline_with(name, visibility_seconds, max_receive_count, &[]).await
}

/// A pipeline whose function has these variables besides.
async fn pipeline_with(
    name: &str,
    visibility_seconds: u32,
    max_receive_count: u32,
    variables: &[(&str, &str)],
) -> Pipeline {
    let store = fresh_table().await;
    let sqs = sqs().await;
    let queues = fifo_queues(&sqs, name, visibility_seconds, max_receive_count).await;
    let api = RuntimeApi::start().await;
    let function = start_with(&api, Some(store.table()), variables);
    let poller = Poller {
        sqs,
        queue_url: queues.url.clone(),
        queue_arn: queues.arn.clone(),
        api,
    };
    Pipeline {
        store,
        queues,
        poller,
        _function: function,
    }
}

fn order_event(order: &str, sequence: u64) -> String {
    let event_type = if sequence == 1 {
        "OrderCreated"
    } else {
        "OrderUpdated"
    };
    body(
        event_type,
        order,
        sequence,
        json!({ "customerName": "Ada", "email": "ada@example.com", "totalCents": 100 * sequence }),
    )
}

/// Sends event `sequence` of order `id`, as its producer does.
async fn send_order(p: &Pipeline, id: &str, sequence: u64) {
    send(
        &p.poller.sqs,
        &p.queues.url,
        id,
        &format!("{id}:{sequence}"),
        &order_event(id, sequence),
    )
    .await;
}

async fn sequence_of(store: &DynamoStore, key: EntityKey) -> Option<u64> {
    entity(store, key).await.map(|entity| entity.sequence())
}

/// A product's creation and price changes up to `last`, sent in order.
async fn send_product(p: &Pipeline, id: &str, last: u64) {
    send(
        &p.poller.sqs,
        &p.queues.url,
        id,
        &format!("{id}:1"),
        &product_created(id),
    )
    .await;
    for sequence in 2..=last {
        send(
            &p.poller.sqs,
            &p.queues.url,
            id,
            &format!("{id}:{sequence}"),
            &price_changed(id, sequence),
        )
        .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_sent_in_order_end_in_the_in_order_state() {
    let p = pipeline("in-order", 5, 3).await;
    // GIVEN five orders, six events each, sent interleaved
    for sequence in 1..=6 {
        for order in 0..5 {
            let id = format!("order-{order}");
            send_order(&p, &id, sequence).await;
        }
    }
    // WHEN the event source mapping drains the queue
    let polls = p.poller.drain(Duration::from_secs(60)).await;
    // THEN every event is applied, nothing failed, nothing reached the DLQ
    assert!(polls.iter().all(|poll| poll.failed.is_empty()), "{polls:?}");
    assert_eq!(
        polls.iter().map(|poll| poll.received.len()).sum::<usize>(),
        30
    );
    for order in 0..5 {
        assert_eq!(
            sequence_of(
                &p.store,
                EntityKey::of::<shop::Order>(format!("order-{order}"))
            )
            .await,
            Some(6)
        );
    }
    assert!(bodies(&p.poller.sqs, &p.queues.dlq_url).await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn producer_resends_that_sqs_cannot_catch_are_applied_once() {
    let p = pipeline("resends", 5, 3).await;
    send(
        &p.poller.sqs,
        &p.queues.url,
        "product-r",
        "product-r:1",
        &product_created("product-r"),
    )
    .await;
    for sequence in 2..=5 {
        let event = price_changed("product-r", sequence);
        send(
            &p.poller.sqs,
            &p.queues.url,
            "product-r",
            &format!("product-r:{sequence}"),
            &event,
        )
        .await;
        // The same event again after SQS's 5-minute window: a new deduplication id.
        let resend = format!("product-r:{sequence}:resent");
        send(&p.poller.sqs, &p.queues.url, "product-r", &resend, &event).await;
    }
    let adjustment = inventory_adjusted("adjust-r", "SKU-R", 7);
    send(
        &p.poller.sqs,
        &p.queues.url,
        "SKU-R",
        "adjust-r",
        &adjustment,
    )
    .await;
    send(
        &p.poller.sqs,
        &p.queues.url,
        "SKU-R",
        "adjust-r:resent",
        &adjustment,
    )
    .await;

    let polls = p.poller.drain(Duration::from_secs(60)).await;
    assert_eq!(
        polls.iter().map(|poll| poll.received.len()).sum::<usize>(),
        11,
        "SQS delivered every resend"
    );
    // ProductPriceChanged increments: a double apply would show as a sequence too far.
    assert_eq!(product_state(&p.store, "product-r").await, (5, 1005));
    assert_eq!(
        p.store.counter(&shop::STOCK, "SKU-R").await.expect("read"),
        Some(7)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_whose_visibility_times_out_mid_run_races_a_second_invocation() {
    // Visibility of 2 s: the first invocation is slower than that.
    let p = pipeline("visibility", 2, 5).await;
    send_product(&p, "product-v", 8).await;
    // A second function instance, as Lambda would scale out.
    let second_api = RuntimeApi::start().await;
    let _second = start(&second_api, Some(p.store.table()));
    let second = Poller {
        sqs: p.poller.sqs.clone(),
        queue_url: p.queues.url.clone(),
        queue_arn: p.queues.arn.clone(),
        api: second_api,
    };

    // The first poller receives the batch and is held up past the visibility timeout.
    let first_batch = p.poller.receive().await.expect("a batch");
    assert!(!first_batch.is_empty());
    tokio::time::sleep(Duration::from_millis(2500)).await;
    // The same messages are visible again: the second poller gets them...
    let second_batch = second.receive().await.expect("the batch again");
    let first_ids: Vec<&String> = first_batch
        .iter()
        .filter_map(|m| m.message_id.as_ref())
        .collect();
    let receive_counts: Vec<String> = second_batch
        .iter()
        .filter(|m| {
            m.message_id
                .as_ref()
                .is_some_and(|id| first_ids.contains(&id))
        })
        .filter_map(|m| {
            m.attributes
                .as_ref()?
                .get(&aws_sdk_sqs::types::MessageSystemAttributeName::ApproximateReceiveCount)
                .cloned()
        })
        .collect();
    assert!(!receive_counts.is_empty(), "the first batch came back");
    assert!(
        receive_counts.iter().all(|count| count == "2"),
        "{receive_counts:?}"
    );
    // ...and both invocations run at once.
    let (a, b) = tokio::join!(p.poller.invoke(first_batch), second.invoke(second_batch));
    assert!(
        a.failed.is_empty() || b.failed.is_empty(),
        "at least one completes: {a:?} {b:?}"
    );
    // Whatever is left comes back and is found done.
    p.poller.drain(Duration::from_secs(30)).await;
    assert_eq!(
        product_state(&p.store, "product-v").await,
        (8, 1008),
        "each event applied exactly once"
    );
    assert!(bodies(&p.poller.sqs, &p.queues.dlq_url).await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_poison_message_reaches_the_dlq_while_the_rest_keeps_flowing() {
    let p = pipeline("poison", 1, 2).await;
    let poison =
        "{\"eventId\": \"p-1\", \"type\": \"OrderCreated\", \"aggregateId\": \"order-poison\"";
    send(
        &p.poller.sqs,
        &p.queues.url,
        "order-poison",
        "order-poison:1",
        poison,
    )
    .await;
    for sequence in 1..=4 {
        for id in ["order-a", "order-b"] {
            send_order(&p, id, sequence).await;
        }
    }
    let polls = p.poller.drain(Duration::from_secs(60)).await;
    assert_eq!(
        sequence_of(&p.store, EntityKey::of::<shop::Order>("order-a")).await,
        Some(4)
    );
    assert_eq!(
        sequence_of(&p.store, EntityKey::of::<shop::Order>("order-b")).await,
        Some(4)
    );
    assert_eq!(
        bodies(&p.poller.sqs, &p.queues.dlq_url).await,
        [poison.to_owned()]
    );
    let poison_failures = polls.iter().map(|poll| poll.failed.len()).sum::<usize>();
    assert_eq!(
        poison_failures, 2,
        "failed on each of its maxReceiveCount deliveries, nothing else failed"
    );
}

/// What `GAP_POLICY=retry` does (and parking below `maxReceiveCount`
/// prevents): a gap that never heals blocks its group until
/// `maxReceiveCount`, goes to the DLQ, and every later event of the stream
/// gaps and follows it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gap_that_never_heals_cascades_into_the_dlq() {
    let p = pipeline_with("cascade", 1, 2, &[("GAP_POLICY", "retry")]).await;
    for sequence in [1, 2, 4, 5, 6] {
        let id = "order-gap";
        send_order(&p, id, sequence).await;
    }
    send_order(&p, "order-ok", 1).await;
    p.poller.drain(Duration::from_secs(90)).await;
    assert_eq!(
        sequence_of(&p.store, EntityKey::of::<shop::Order>("order-gap")).await,
        Some(2)
    );
    assert_eq!(
        sequence_of(&p.store, EntityKey::of::<shop::Order>("order-ok")).await,
        Some(1)
    );
    let dead: Vec<u64> = bodies(&p.poller.sqs, &p.queues.dlq_url)
        .await
        .iter()
        .filter_map(|body| {
            serde_json::from_str::<serde_json::Value>(body).ok()?["sequence"].as_u64()
        })
        .collect();
    let mut sorted = dead.clone();
    sorted.sort_unstable();
    assert_eq!(
        sorted,
        [4, 5, 6],
        "the gap and everything behind it ended in the DLQ"
    );
}

/// Each producer sends its stream in this order (a retry that overtook the
/// original, a batch flushed out of order): FIFO keeps the order it was sent in.
const SHUFFLED: [u64; 8] = [1, 3, 2, 6, 4, 5, 8, 7];
const SHUFFLED_ORDERS: [&str; 3] = ["order-s0", "order-s1", "order-s2"];

async fn send_shuffled(p: &Pipeline) {
    for sequence in SHUFFLED {
        for id in SHUFFLED_ORDERS {
            send_order(p, id, sequence).await;
        }
    }
}

fn sequences(bodies: &[String]) -> Vec<u64> {
    let mut sequences: Vec<u64> = bodies
        .iter()
        .filter_map(|body| {
            serde_json::from_str::<serde_json::Value>(body).ok()?["sequence"].as_u64()
        })
        .collect();
    sequences.sort_unstable();
    sequences
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_producer_that_shuffles_its_events_ends_in_order_when_gaps_park() {
    // Parking from the third delivery (the default), below maxReceiveCount 4.
    let p = pipeline("shuffled-park", 1, 4).await;
    send_shuffled(&p).await;
    let polls = p.poller.drain(Duration::from_secs(120)).await;
    assert!(
        polls.iter().any(|poll| !poll.failed.is_empty()),
        "the gaps were retried before they were parked"
    );
    for id in SHUFFLED_ORDERS {
        let key = EntityKey::of::<shop::Order>(id);
        assert_eq!(sequence_of(&p.store, key.clone()).await, Some(8), "{id}");
        let inspection = p.store.inspect(&key).await.expect("inspect");
        assert!(inspection.parked.is_empty(), "{id}: {inspection:?}");
        assert!(inspection.stored.parking.sequences.is_empty());
        assert!(inspection.conflicts.is_empty());
    }
    assert!(bodies(&p.poller.sqs, &p.queues.dlq_url).await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_producer_with_gap_policy_retry_cascades_into_the_dlq() {
    let p = pipeline_with("shuffled-retry", 1, 4, &[("GAP_POLICY", "retry")]).await;
    send_shuffled(&p).await;
    p.poller.drain(Duration::from_secs(120)).await;
    let dead = bodies(&p.poller.sqs, &p.queues.dlq_url).await;
    for id in SHUFFLED_ORDERS {
        let key = EntityKey::of::<shop::Order>(id);
        let applied = sequence_of(&p.store, key.clone()).await.unwrap_or(0);
        assert!(
            p.store
                .inspect(&key)
                .await
                .expect("inspect")
                .parked
                .is_empty()
        );
        // Stuck behind the first gap (3 before 2): how far it got depends on
        // how SQS cut the batches, but 3 is dead and so is everything after it.
        let ours: Vec<String> = dead
            .iter()
            .filter(|body| body.contains(&format!("\"aggregateId\":\"{id}\"")))
            .cloned()
            .collect();
        let dead_sequences = sequences(&ours);
        assert!(dead_sequences.contains(&3), "{id}: {dead_sequences:?}");
        assert!(applied < 8, "{id} got through: {applied}");
        let mut accounted: Vec<u64> = (1..=applied).chain(dead_sequences).collect();
        accounted.sort_unstable();
        assert_eq!(
            accounted,
            (1..=8).collect::<Vec<_>>(),
            "{id}: every event is applied or dead, none lost"
        );
    }
}

/// A message that fails for a reason fixed later (here the entity's item was
/// damaged by hand, so every write fails) reaches the DLQ; the events behind
/// it gap and are parked; once the item is repaired, redriving the message
/// heals the stream.
///
/// The function keeps nothing warm (`WARM_ENTITIES=0`): a process that keeps
/// the item it wrote does not see a change made by hand at the same
/// sequence, and would write event 2 on the item as it left it, over the
/// damage (docs/behaviour.md).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_poison_message_redriven_after_a_fix_heals_its_stream() {
    use aws_sdk_dynamodb::types::AttributeValue;

    let p = pipeline_with("redrive", 1, 4, &[("WARM_ENTITIES", "0")]).await;
    let id = "order-h";
    let key = EntityKey::of::<shop::Order>(id);
    let set_status = |status: &'static str| {
        let store = p.store.clone();
        async move {
            store
                .client()
                .update_item()
                .table_name(store.table())
                .key("pk", AttributeValue::S(format!("ORDER#{id}")))
                .key("sk", AttributeValue::S("STATE".into()))
                .update_expression("SET #status = :status")
                .expression_attribute_names("#status", "status")
                .expression_attribute_values(":status", AttributeValue::S(status.into()))
                .send()
                .await
                .expect("UpdateItem")
        }
    };
    send_order(&p, id, 1).await;
    p.poller.drain(Duration::from_secs(30)).await;
    assert_eq!(sequence_of(&p.store, key.clone()).await, Some(1));

    // The item is damaged: event 2 fails on every delivery and is dead-lettered.
    set_status("ON_FIRE").await;
    send_order(&p, id, 2).await;
    p.poller.drain(Duration::from_secs(60)).await;

    // The fix; meanwhile the stream goes on and its next events park.
    set_status("OPEN").await;
    send_order(&p, id, 3).await;
    send_order(&p, id, 4).await;
    let polls = p.poller.drain(Duration::from_secs(60)).await;
    assert!(polls.iter().any(|poll| !poll.failed.is_empty()));
    let inspection = p.store.inspect(&key).await.expect("inspect");
    let parked: Vec<u64> = inspection
        .parked
        .iter()
        .map(|parked| parked.sequence)
        .collect();
    assert_eq!(parked, [3, 4], "{inspection:?}");
    assert_eq!(sequence_of(&p.store, key.clone()).await, Some(1));

    // Redrive: event 2 is applied, and 3 and 4 with it.
    let moved = redrive(&p.poller.sqs, &p.queues.dlq_url, &p.queues.url).await;
    assert_eq!(sequences(&moved), [2]);
    let polls = p.poller.drain(Duration::from_secs(30)).await;
    assert!(polls.iter().all(|poll| poll.failed.is_empty()), "{polls:?}");
    assert_eq!(sequence_of(&p.store, key.clone()).await, Some(4));
    let inspection = p.store.inspect(&key).await.expect("inspect");
    assert!(inspection.parked.is_empty(), "{inspection:?}");
    assert!(bodies(&p.poller.sqs, &p.queues.dlq_url).await.is_empty());
}
