//! `resend` on real parts, where its rules matter: an event resent right
//! after the dispatcher published it reaches every consumer (SNS and SQS
//! drop a deduplication id they took in the last five minutes: a proxy in
//! front of LocalStack does so, since LocalStack's FIFO topics do not), in
//! topic mode and in queue mode; and a counter's event whose dedup record
//! may have expired is not resent (DynamoDB Local, the event aged in the
//! store), nothing of the range is.

mod support;

#[path = "support/dedup_proxy.rs"]
mod dedup_proxy;

use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_sqs::types::MessageSystemAttributeName;
use dedup_proxy::DedupProxy;
use sequence_guard::dispatcher::{Message, Queue, SnsTopic, SqsQueue, deduplication_id, group_id};
use sequence_guard::producer::{Append, EventStore, NewEvent, StoredEvent};
use sequence_guard::store::dynamodb::{connect, ensure_events_table};
use serde_json::json;
use support::localstack::{fifo_queues, fifo_topic, localstack, sns, sqs, subscribe_raw};
use support::*;

/// The variables the tool reads, cleared so that the caller's environment
/// cannot leak into a test.
const VARIABLES: [&str; 6] = [
    "EVENTS_TABLE",
    "QUEUE_URL",
    "TOPIC_ARN",
    "AWS_ENDPOINT_URL_SQS",
    "AWS_ENDPOINT_URL_SNS",
    "DEDUP_TTL_SECONDS",
];

/// Runs `resend` with local credentials, DynamoDB Local, and only the
/// variables `env` sets: its exit code, stdout, stderr.
fn resend(args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_resend"));
    command
        .args(["--endpoint-url", &dynamodb_local().endpoint])
        .args(args)
        .env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test")
        .env("AWS_REGION", "us-east-1");
    for name in VARIABLES {
        command.env_remove(name);
    }
    command.envs(env.iter().copied());
    let output = command.output().expect("resend runs");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

async fn events_store(name: &str) -> (EventStore, String) {
    let client = connect(Some(&dynamodb_local().endpoint)).await;
    let table = format!("resend-{name}-{}", std::process::id());
    ensure_events_table(&client, &table)
        .await
        .expect("events table");
    let domain = personal_data::keyed_domain(&client, &table);
    (EventStore::new(client, table.clone(), domain), table)
}

/// An order of three events, appended; they as stored.
async fn order(store: &EventStore, id: &str) -> Vec<StoredEvent> {
    let details =
        |total: u64| json!({"customerName": "Ada", "email": "a@example.com", "totalCents": total});
    store
        .append(Append {
            events: vec![
                NewEvent::new("OrderCreated", details(100)),
                NewEvent::new("OrderUpdated", details(200)),
                NewEvent::new("OrderUpdated", details(300)),
            ],
            ..Append::one(id, NewEvent::new("x", json!({})))
        })
        .await
        .expect("append");
    store.read(id, 0, 100).await.expect("read")
}

/// The messages the dispatcher sends for these events.
fn dispatched(stream: &str, events: &[StoredEvent]) -> Vec<Message> {
    events
        .iter()
        .map(|event| Message {
            sequence_number: event.sequence.to_string(),
            stream: stream.to_owned(),
            sequence: event.sequence,
            group_id: group_id(stream),
            deduplication_id: deduplication_id(stream, Some(event.sequence), &event.event_id),
            body: event.body.clone(),
            trace_header: None,
        })
        .collect()
}

/// Every message waiting in a queue, received and deleted: (group, body).
async fn take_all(sqs: &aws_sdk_sqs::Client, url: &str) -> Vec<(String, String)> {
    let mut taken = Vec::new();
    loop {
        let messages = sqs
            .receive_message()
            .queue_url(url)
            .max_number_of_messages(10)
            .wait_time_seconds(1)
            .message_system_attribute_names(MessageSystemAttributeName::MessageGroupId)
            .send()
            .await
            .expect("receive")
            .messages
            .unwrap_or_default();
        if messages.is_empty() {
            return taken;
        }
        for message in messages {
            let group = message
                .attributes
                .as_ref()
                .and_then(|attributes| attributes.get(&MessageSystemAttributeName::MessageGroupId))
                .cloned()
                .unwrap_or_default();
            taken.push((group, message.body.clone().unwrap_or_default()));
            sqs.delete_message()
                .queue_url(url)
                .receipt_handle(message.receipt_handle.unwrap_or_default())
                .send()
                .await
                .expect("delete");
        }
    }
}

fn proxy_upstream() -> String {
    localstack()
        .endpoint
        .trim_start_matches("http://")
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resend_right_after_the_dispatcher_reaches_every_consumer_of_the_topic() {
    // GIVEN an order of three events, which the dispatcher published a
    // moment ago to the topic (SNS's five-minute deduplication in front),
    // and which both consumers' queues received and then lost.
    let (store, events_table) = events_store("topic").await;
    let events = order(&store, "order-9").await;
    let (sqs, sns) = (sqs().await, sns().await);
    let name = format!("resend-topic-{}", std::process::id());
    let topic_arn = fifo_topic(&sns, &name).await;
    let mut consumers = Vec::new();
    for consumer in ["orders", "status"] {
        let queues = fifo_queues(&sqs, &format!("{name}-{consumer}"), 30, 5).await;
        subscribe_raw(&sns, &topic_arn, &queues.arn).await;
        consumers.push(queues.url);
    }
    let proxy = DedupProxy::start(proxy_upstream()).await;
    let through_proxy = aws_sdk_sns::Client::from_conf(
        sns.config()
            .to_builder()
            .endpoint_url(&proxy.endpoint)
            .build(),
    );
    let dispatcher = SnsTopic::new(through_proxy, &topic_arn, sqs.clone(), "unused");
    let refused = dispatcher
        .send(&dispatched("order-9", &events))
        .await
        .expect("published");
    assert!(refused.is_empty(), "{refused:?}");
    let bodies: Vec<(String, String)> = events
        .iter()
        .map(|event| (group_id("order-9"), event.body.clone()))
        .collect();
    for url in &consumers {
        assert_eq!(take_all(&sqs, url).await, bodies, "delivered, then lost");
    }

    // WHEN resend sends the stream again through the same topic, at once.
    let (code, stdout, stderr) = resend(
        &["--stream", "order-9"],
        &[
            ("EVENTS_TABLE", &events_table),
            ("TOPIC_ARN", &topic_arn),
            ("AWS_ENDPOINT_URL_SNS", &proxy.endpoint),
        ],
    );
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert_eq!(
        stdout,
        "{\"streamId\":\"order-9\",\"from\":1,\"to\":null,\"sent\":3,\"requests\":1}\n"
    );

    // THEN every consumer receives them again: the dispatcher's group and
    // body, in order; SNS dropped nothing.
    for url in &consumers {
        assert_eq!(take_all(&sqs, url).await, bodies, "{url}");
    }
    assert_eq!(proxy.dropped(), Vec::<String>::new(), "dropped as repeats");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resend_right_after_the_dispatcher_reaches_the_queue() {
    // GIVEN an order of three events, which the dispatcher sent a moment
    // ago to the queue (the five-minute deduplication in front), and which
    // the queue then lost (a purge).
    let (store, events_table) = events_store("queue").await;
    let events = order(&store, "order-8").await;
    let sqs = sqs().await;
    let name = format!("resend-queue-{}", std::process::id());
    let queues = fifo_queues(&sqs, &name, 30, 5).await;
    let proxy = DedupProxy::start(proxy_upstream()).await;
    let through_proxy = aws_sdk_sqs::Client::from_conf(
        sqs.config()
            .to_builder()
            .endpoint_url(&proxy.endpoint)
            .build(),
    );
    let dispatcher = SqsQueue::new(through_proxy, &queues.url, "unused");
    let refused = dispatcher
        .send(&dispatched("order-8", &events))
        .await
        .expect("sent");
    assert!(refused.is_empty(), "{refused:?}");
    let bodies: Vec<(String, String)> = events
        .iter()
        .map(|event| (group_id("order-8"), event.body.clone()))
        .collect();
    assert_eq!(take_all(&sqs, &queues.url).await, bodies, "sent, then lost");

    // WHEN resend sends two of them again, at once.
    let (code, stdout, stderr) = resend(
        &["--stream", "order-8", "--from", "2"],
        &[
            ("EVENTS_TABLE", &events_table),
            ("QUEUE_URL", &queues.url),
            ("AWS_ENDPOINT_URL_SQS", &proxy.endpoint),
        ],
    );
    assert_eq!(code, 0, "{stdout}{stderr}");

    // THEN the queue holds them again, as the dispatcher sent them.
    assert_eq!(take_all(&sqs, &queues.url).await, bodies[1..].to_vec());
    assert_eq!(proxy.dropped(), Vec::<String>::new(), "dropped as repeats");
}

/// Sets an event item's `appendedAt`, as if it was appended `days` ago.
async fn age(events_table: &str, stream: &str, sequence: u64, days: u64) {
    let client = connect(Some(&dynamodb_local().endpoint)).await;
    let at = sequence_guard::lambda::epoch_seconds() - days * 86_400;
    client
        .update_item()
        .table_name(events_table)
        .key("pk", AttributeValue::S(format!("STREAM#{stream}")))
        .key("sk", AttributeValue::S(format!("EVENT#{sequence:020}")))
        .update_expression("SET appendedAt = :at")
        .expression_attribute_values(":at", AttributeValue::N(at.to_string()))
        .send()
        .await
        .expect("aged");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_counters_event_older_than_its_dedup_record_is_not_resent() {
    // GIVEN a sku's stream of three adjustments, the first two appended 40
    // and 36 days ago, and an order appended a year ago; consumers that keep
    // dedup records 60 days, and a resent copy that may wait 35 days.
    let (store, events_table) = events_store("window").await;
    for delta in [5, -2, 7] {
        store
            .append(Append::one(
                "SKU-OLD",
                NewEvent::new(
                    "InventoryAdjusted",
                    json!({"sku": "SKU-OLD", "delta": delta}),
                ),
            ))
            .await
            .expect("append");
    }
    age(&events_table, "SKU-OLD", 1, 40).await;
    age(&events_table, "SKU-OLD", 2, 36).await;
    let old_order = order(&store, "order-old").await;
    for event in &old_order {
        age(&events_table, "order-old", event.sequence, 365).await;
    }
    let sqs = sqs().await;
    let queues = fifo_queues(
        &sqs,
        &format!("resend-window-{}", std::process::id()),
        30,
        5,
    )
    .await;
    let env = [
        ("EVENTS_TABLE", events_table.as_str()),
        ("QUEUE_URL", queues.url.as_str()),
        ("AWS_ENDPOINT_URL_SQS", localstack().endpoint.as_str()),
        ("DEDUP_TTL_SECONDS", "5184000"),
    ];

    // WHEN the whole stream is resent: refused, naming the stream, the
    // sequence and why, and nothing is sent.
    let (code, stdout, stderr) = resend(&["--stream", "SKU-OLD"], &env);
    assert_eq!(code, 2, "{stdout}{stderr}");
    assert_eq!(stdout, "", "no summary: nothing was sent");
    for part in [
        "stream SKU-OLD sequence 1",
        "its type, InventoryAdjusted, is deduplicated only by its dedup record",
        "appended 40 days ago",
        "a resent copy may wait up to 35 days before it is handled",
        "its dedup record may have expired: resending it would add it again",
        "Nothing was sent",
        "2 such events, up to sequence 2",
        "--from 3",
        "\"expected\" and \"found\"",
    ] {
        assert!(stderr.contains(part), "`{part}` not in {stderr}");
    }
    assert_eq!(take_all(&sqs, &queues.url).await, vec![], "nothing sent");
    // From the second event on: still refused, whole.
    let (code, _, stderr) = resend(&["--stream", "SKU-OLD", "--from", "2"], &env);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("stream SKU-OLD sequence 2"), "{stderr}");
    assert_eq!(take_all(&sqs, &queues.url).await, vec![], "nothing sent");

    // THEN what is young enough goes, and a sequenced stream goes at any
    // age (the guard knows its sequence).
    let (code, stdout, stderr) = resend(&["--stream", "SKU-OLD", "--from", "3"], &env);
    assert_eq!(
        (code, stdout.contains("\"sent\":1")),
        (0, true),
        "{stdout}{stderr}"
    );
    let (code, stdout, stderr) = resend(&["--stream", "order-old"], &env);
    assert_eq!(
        (code, stdout.contains("\"sent\":3")),
        (0, true),
        "{stdout}{stderr}"
    );
    assert_eq!(take_all(&sqs, &queues.url).await.len(), 4);

    // AND the window is the consumers' DEDUP_TTL_SECONDS: kept a year, the
    // whole stream may go; kept the default 35 days, the wait itself, not
    // even the event appended today (a copy of it redriven late would find
    // its record gone); a value out of the projector's range is refused.
    let default = &env[..env.len() - 1];
    let (code, _, stderr) = resend(&["--stream", "SKU-OLD", "--from", "3"], default);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("stream SKU-OLD sequence 3"), "{stderr}");
    assert_eq!(take_all(&sqs, &queues.url).await, vec![], "nothing sent");
    let mut year = env.to_vec();
    year.push(("DEDUP_TTL_SECONDS", "31536000"));
    let (code, stdout, stderr) = resend(&["--stream", "SKU-OLD"], &year);
    assert_eq!(
        (code, stdout.contains("\"sent\":3")),
        (0, true),
        "{stdout}{stderr}"
    );
    let mut bad = env.to_vec();
    bad.push(("DEDUP_TTL_SECONDS", "60"));
    let (code, _, stderr) = resend(&["--stream", "SKU-OLD"], &bad);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("dedup-ttl-seconds"), "{stderr}");
}
