//! Many consumers of one event store, on real parts (docs/event-store.md, Many consumers):
//! the producer's append on DynamoDB Local, the table's stream read as
//! Lambda's mapping does (`support::streams`), the `dispatcher` binary with
//! `TOPIC_ARN`, LocalStack's SNS FIFO topic feeding two SQS FIFO queues
//! (raw delivery, no filter), and two consumers: the `projector` binary
//! (the shop) and the `status-projector` binary (the status of each order).
//! Every test ends with each consumer's table equal to the fold of the
//! event store through its own domain, both dead-letter queues empty, and
//! every event delivered to both queues once.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use sequence_guard::Domain;
use sequence_guard::producer::{Append, AppendError, EventStore, NewEvent};
use sequence_guard::runner::{Invocation, Runner, RunnerConfig};
use sequence_guard::store::dynamodb::{DynamoStore, connect, create_table, ensure_events_table};
use serde_json::{Value, json};
use support::fault_proxy::{Fault, FaultProxy};
use support::function::{Function, start_binary, start_with};
use support::localstack::{
    Poll, Poller, Queues, bodies, fifo_queues, fifo_topic, localstack, sns, sqs, subscribe_raw,
};
use support::runtime_api::{Answer, RuntimeApi};
use support::streams::StreamSource;
use support::*;

/// One consumer: its queue, its function, its table, its domain.
struct Consumer {
    name: &'static str,
    queues: Queues,
    poller: Poller,
    function: Function,
    table: String,
    domain: Domain,
    /// The key prefixes of its items (entities and counters).
    kinds: &'static [&'static str],
    /// Every message id its queue delivered.
    delivered: BTreeSet<String>,
}

struct Fanout {
    name: String,
    events: EventStore,
    topic_arn: String,
    failure_url: String,
    source: StreamSource,
    dispatcher: Function,
    sns_endpoint: String,
    consumers: Vec<Consumer>,
}

/// Starts the dispatcher binary publishing to the topic through
/// `sns_endpoint` (LocalStack, or a proxy in front of it).
fn start_dispatcher(
    api: &RuntimeApi,
    sns_endpoint: &str,
    topic_arn: &str,
    failure_url: &str,
) -> Function {
    start_binary(
        env!("CARGO_BIN_EXE_dispatcher"),
        api,
        &[
            ("AWS_ENDPOINT_URL_SNS", sns_endpoint),
            ("AWS_ENDPOINT_URL_SQS", &localstack().endpoint),
            ("TOPIC_ARN", topic_arn),
            ("FAILURE_QUEUE_URL", failure_url),
            ("AWS_LAMBDA_FUNCTION_NAME", "sequence-guard-dispatcher"),
            ("METRICS_SERVICE", "dispatcher-test"),
        ],
    )
}

async fn fanout(name: &str, sns_proxy: Option<&FaultProxy>) -> Fanout {
    let local = dynamodb_local();
    let client = connect(Some(&local.endpoint)).await;
    let name = format!("fan-{name}-{}", std::process::id());
    let events_table = format!("{name}-events");
    ensure_events_table(&client, &events_table)
        .await
        .expect("events table");
    let sqs = sqs().await;
    let sns = sns().await;
    let topic_arn = fifo_topic(&sns, &format!("{name}-events")).await;
    let failure_url = sqs
        .create_queue()
        .queue_name(format!("{name}-dispatch-failures"))
        .send()
        .await
        .expect("failure queue")
        .queue_url
        .expect("failure queue url");

    // The shop opens its orders' personal data with the subjects' keys, in
    // the events table; the status consumer reads none.
    let key = personal_data::personal_data_key();
    let mut consumers = Vec::new();
    for (consumer, exe, domain, kinds) in [
        (
            "orders",
            env!("CARGO_BIN_EXE_projector"),
            personal_data::keyed_domain(&client, &events_table),
            &["ORDER#", "PRODUCT#", "SKU#"][..],
        ),
        (
            "status",
            env!("CARGO_BIN_EXE_status-projector"),
            shop::status::domain(),
            &["STATUS#"][..],
        ),
    ] {
        let table = format!("{name}-{consumer}");
        create_table(&client, &table).await.expect("table");
        // Visibility 2 s: a gap comes back quickly; 50 receives: nothing
        // reaches the dead-letter queue while a gap waits.
        let queues = fifo_queues(&sqs, &format!("{name}-{consumer}"), 2, 50).await;
        subscribe_raw(&sns, &topic_arn, &queues.arn).await;
        let api = RuntimeApi::start().await;
        let function = if consumer == "orders" {
            start_with(
                &api,
                Some(&table),
                &[
                    ("EVENT_STORE_TABLE", &events_table),
                    ("PERSONAL_DATA_KEY", &key),
                ],
            )
        } else {
            start_binary(
                exe,
                &api,
                &[("TABLE_NAME", &table), ("METRICS_SERVICE", "status-test")],
            )
        };
        let poller = Poller {
            sqs: sqs.clone(),
            queue_url: queues.url.clone(),
            queue_arn: queues.arn.clone(),
            api,
        };
        consumers.push(Consumer {
            name: consumer,
            queues,
            poller,
            function,
            table,
            domain,
            kinds,
            delivered: BTreeSet::new(),
        });
    }

    let sns_endpoint = sns_proxy.map_or_else(
        || localstack().endpoint.clone(),
        |proxy| proxy.endpoint.clone(),
    );
    let dispatcher_api = RuntimeApi::start().await;
    let dispatcher = start_dispatcher(&dispatcher_api, &sns_endpoint, &topic_arn, &failure_url);
    let mut source = StreamSource::for_table(dispatcher_api, &events_table).await;
    source.on_failure = Some((sqs, failure_url.clone()));
    Fanout {
        events: EventStore::new(
            client.clone(),
            events_table.clone(),
            personal_data::keyed_domain(&client, &events_table),
        ),
        name,
        topic_arn,
        failure_url,
        source,
        dispatcher,
        sns_endpoint,
        consumers,
    }
}

impl Fanout {
    /// One round of every mapping: the stream, then each queue.
    async fn round(&mut self, limit: Duration) -> bool {
        let sent = self.source.drain(limit).await;
        let mut polled = false;
        for consumer in &mut self.consumers {
            let polls: Vec<Poll> = consumer.poller.drain(limit).await;
            polled |= !polls.is_empty();
            for poll in polls {
                consumer.delivered.extend(poll.received);
            }
        }
        !sent.is_empty() || polled
    }

    /// Runs every mapping until none has anything left.
    async fn settle(&mut self) {
        let started = Instant::now();
        while self.round(Duration::from_secs(30)).await {
            assert!(
                started.elapsed() < Duration::from_secs(300),
                "the pipeline did not settle; dispatcher:\n{}",
                self.dispatcher.output()
            );
        }
    }

    /// Each consumer's table equals the fold of the event store through its
    /// domain; both dead-letter queues are empty; each queue delivered every
    /// stored event once.
    async fn assert_every_consumer_is_the_fold(&self, streams: &[String]) {
        let stored = self.stored(streams).await;
        for consumer in &self.consumers {
            let folded = self.fold(&consumer.domain, &stored).await;
            let live = items(&consumer.table, consumer.kinds).await;
            let fold = items(&folded, consumer.kinds).await;
            assert!(!live.is_empty(), "{}: projected something", consumer.name);
            assert_eq!(
                live,
                fold,
                "{}: the table is the fold of the event store; its function:\n{}",
                consumer.name,
                consumer.function.output()
            );
            let dead = bodies(&consumer.poller.sqs, &consumer.queues.dlq_url).await;
            assert!(dead.is_empty(), "{}: dead letters {dead:?}", consumer.name);
            assert_eq!(
                consumer.delivered.len(),
                stored.len(),
                "{}: every event reached its queue once (the topic's and the queue's \
                 deduplication absorbed every republish)",
                consumer.name
            );
        }
        let failures = bodies(&self.consumers[0].poller.sqs, &self.failure_url).await;
        assert!(failures.is_empty(), "nothing given up: {failures:?}");
    }

    /// The stored bodies of `streams`, each stream in order.
    async fn stored(&self, streams: &[String]) -> Vec<(String, String)> {
        let mut stored = Vec::new();
        for stream in streams {
            for event in self.events.read(stream, 0, 10_000).await.expect("read") {
                stored.push((stream.clone(), event.body));
            }
        }
        stored
    }

    /// Folds `stored` (each stream in order) through `domain` into a fresh
    /// table, as `rebuild` does; the table's name.
    async fn fold(&self, domain: &Domain, stored: &[(String, String)]) -> String {
        let client = connect(Some(&dynamodb_local().endpoint)).await;
        let table = format!(
            "{}-fold-{}",
            self.name,
            FOLDS.fetch_add(1, Ordering::Relaxed)
        );
        create_table(&client, &table).await.expect("fold table");
        let runner = Runner::new(
            domain.clone(),
            DynamoStore::new(client, table.clone()),
            RunnerConfig::default(),
        );
        for (index, (stream, body)) in stored.iter().enumerate() {
            let event = batch(vec![message(&format!("fold-{index}"), stream, body)]);
            let invocation = Invocation {
                deadline: None,
                now: epoch_seconds(),
            };
            let report = runner.run(&event, invocation).await.expect("a batch");
            for outcome in outcomes(&report) {
                assert!(!outcome.is_failure(), "the fold of {body}: {outcome:?}");
            }
        }
        table
    }

    fn dispatched(&self, metric: &str) -> f64 {
        metric_sum(&self.dispatcher.output(), metric)
    }
}

static FOLDS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

fn epoch_seconds() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_secs())
}

/// A table's items whose pk starts with one of `kinds`, attribute by
/// attribute.
async fn items(table: &str, kinds: &[&str]) -> BTreeMap<(String, String), String> {
    items_of(&dynamodb_local().endpoint, table, kinds).await
}

fn details(total: u64) -> Value {
    json!({ "customerName": "Ada", "email": "ada@example.com", "totalCents": total })
}

/// Appends until stored: another writer moving the head, or a storage
/// error, is tried again (the request id keeps it once).
async fn append(events: &EventStore, append: Append) {
    loop {
        match events.append(append.clone()).await {
            Ok(_) => return,
            Err(AppendError::Contention { .. } | AppendError::Store(_)) => continue,
            Err(err) => panic!("append: {err}"),
        }
    }
}

/// Eight producers racing on three orders, one product and two skus; then
/// the first order cancelled. The streams written.
async fn produce(events: &EventStore, prefix: &str, mut between: impl AsyncFnMut()) -> Vec<String> {
    let orders: Vec<String> = (0..3).map(|n| format!("{prefix}-order-{n}")).collect();
    let product = format!("{prefix}-product");
    for id in &orders {
        append(
            events,
            Append::one(id.clone(), NewEvent::new("OrderCreated", details(100))),
        )
        .await;
    }
    append(
        events,
        Append::one(
            product.clone(),
            NewEvent::new(
                "ProductCreated",
                json!({ "name": "Lamp", "priceCents": 10 }),
            ),
        ),
    )
    .await;
    let mut producers = Vec::new();
    for producer in 0..8u64 {
        let events = events.clone();
        let (orders, product) = (orders.clone(), product.clone());
        let skus = [format!("{prefix}-SKU-A"), format!("{prefix}-SKU-B")];
        let prefix = prefix.to_owned();
        producers.push(tokio::spawn(async move {
            for n in 0..8u64 {
                let (stream, event) = match (producer + n) % 4 {
                    0 | 1 => (
                        orders[((producer + n) % 3) as usize].clone(),
                        NewEvent::new("OrderUpdated", details(1_000 * producer + n)),
                    ),
                    2 => (
                        product.clone(),
                        NewEvent::new("ProductPriceChanged", json!({ "priceCents": n })),
                    ),
                    _ => {
                        let sku = skus[(n % 2) as usize].clone();
                        (
                            sku.clone(),
                            NewEvent::new(
                                "InventoryAdjusted",
                                json!({ "sku": sku, "delta": (producer as i64) - 3 }),
                            ),
                        )
                    }
                };
                let request = Append {
                    request_id: Some(format!("{prefix}-producer-{producer}-{n}")),
                    ..Append::one(stream, event)
                };
                append(&events, request.clone()).await;
                // A retried command: appends nothing more.
                if n % 5 == 0 {
                    append(&events, request).await;
                }
            }
        }));
    }
    while !producers.iter().all(|producer| producer.is_finished()) {
        between().await;
    }
    for producer in producers {
        producer.await.expect("producer");
    }
    append(
        events,
        Append::one(
            orders[0].clone(),
            NewEvent::new("OrderCancelled", json!({ "reason": "changed mind" })),
        ),
    )
    .await;
    let mut streams = orders;
    streams.push(product);
    streams.extend([format!("{prefix}-SKU-A"), format!("{prefix}-SKU-B")]);
    streams
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_producers_through_a_faulty_topic_reach_both_consumers_once() {
    let upstream = localstack()
        .endpoint
        .trim_start_matches("http://")
        .to_owned();
    let proxy = FaultProxy::start(
        upstream,
        23,
        15,
        vec![Fault::Throttle, Fault::ServerError, Fault::LostAnswer],
    )
    .await;
    let mut f = fanout("faults", Some(&proxy)).await;
    let events = f.events.clone();
    let streams = {
        let f = &mut f;
        produce(&events, "p", async || {
            f.round(Duration::from_secs(5)).await;
        })
        .await
    };
    f.settle().await;
    f.assert_every_consumer_is_the_fold(&streams).await;
    assert!(
        proxy.counts.faults() > 0,
        "faults were injected: {}",
        proxy.counts.summary()
    );
    let stored = f.stored(&streams).await.len();
    assert_eq!(stored, 4 + 8 * 8 + 1, "one event per command");
    assert!(f.dispatched("Dispatched") as usize >= stored);
    assert_eq!(f.dispatched("Corrupt"), 0.0);
    // The status table holds no personal data.
    let status = items(&f.consumers[1].table, &["STATUS#"]).await;
    for (key, attributes) in &status {
        assert!(
            !attributes.contains("Ada") && !attributes.contains("ada@example.com"),
            "{key:?}: {attributes}"
        );
    }
    assert!(
        status
            .values()
            .any(|attributes| attributes.contains("CANCELLED")),
        "{status:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_dispatcher_killed_mid_batch_republishes_and_both_consumers_absorb_it() {
    // The dispatcher's SNS behind a proxy that only counts and slows each
    // request: the test kills the dispatcher after its first PublishBatch.
    let upstream = localstack()
        .endpoint
        .trim_start_matches("http://")
        .to_owned();
    // The dispatcher sends a batch's requests at once; the proxy answers
    // them 100 ms apart, so the kill lands after the first and before the
    // others.
    let counter = Arc::new(FaultProxy::start_staggered(upstream, Duration::from_millis(100)).await);
    let mut f = fanout("crash", Some(&counter)).await;
    let orders: Vec<String> = (0..3).map(|n| format!("c-order-{n}")).collect();
    for id in &orders {
        append(
            &f.events,
            Append::one(id.clone(), NewEvent::new("OrderCreated", details(1))),
        )
        .await;
    }
    for n in 0..9 {
        for id in &orders {
            append(
                &f.events,
                Append::one(id.clone(), NewEvent::new("OrderUpdated", details(n))),
            )
            .await;
        }
    }
    // 30 events: three requests of ten.
    let pid = f.dispatcher.child.id().expect("pid");
    let api = f.source.api.clone();
    let watched = counter.clone();
    let watcher = tokio::spawn(async move {
        while watched.counts.forwarded.load(Ordering::Relaxed) < 1 {
            tokio::time::sleep(Duration::from_micros(200)).await;
        }
        let killed = std::process::Command::new("kill")
            .args(["-9", &pid.to_string()])
            .status()
            .expect("kill");
        assert!(killed.success());
        api.crashed();
        watched.counts.forwarded.load(Ordering::Relaxed)
    });
    let first = f.source.poll().await.expect("a batch");
    let published_before_crash = watcher.await.expect("watcher");
    assert!(
        (1..3).contains(&published_before_crash),
        "killed after {published_before_crash} of the batch's three requests"
    );
    assert!(
        matches!(first.answer, Answer::Error(_)),
        "the dispatcher died mid-batch: {first:?}"
    );
    // Lambda starts a new process; the batch comes again, in halves.
    f.dispatcher = start_dispatcher(&f.source.api, &f.sns_endpoint, &f.topic_arn, &f.failure_url);
    f.settle().await;
    f.assert_every_consumer_is_the_fold(&orders).await;
    // What went out before the crash went again: the topic dropped it.
    let applied = metric_sum(&f.consumers[0].function.output(), "Applied");
    assert_eq!(applied, 30.0, "{}", f.consumers[0].function.output());
    assert_eq!(
        metric_sum(&f.consumers[0].function.output(), "Duplicate"),
        0.0
    );
    assert_eq!(
        metric_sum(&f.consumers[1].function.output(), "Duplicate"),
        0.0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn resend_publishes_to_the_topic_as_the_dispatcher_does() {
    let mut f = fanout("resend", None).await;
    let order = "r-order-1".to_owned();
    append(
        &f.events,
        Append::one(order.clone(), NewEvent::new("OrderCreated", details(1))),
    )
    .await;
    for n in 2..=12 {
        append(
            &f.events,
            Append::one(order.clone(), NewEvent::new("OrderUpdated", details(n))),
        )
        .await;
    }
    // Before the dispatcher reads the stream: resend alone reaches both
    // queues, twelve events in two PublishBatch requests.
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_resend"))
        .args(["--endpoint-url", &dynamodb_local().endpoint])
        .args(["--stream", &order])
        .env_remove("QUEUE_URL")
        .env("EVENTS_TABLE", f.events.table())
        .env("TOPIC_ARN", &f.topic_arn)
        .env("AWS_ENDPOINT_URL_SNS", &localstack().endpoint)
        .env("AWS_ACCESS_KEY_ID", "local")
        .env("AWS_SECRET_ACCESS_KEY", "local")
        .env("AWS_REGION", "us-east-1")
        .output()
        .expect("resend");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let summary: Value = serde_json::from_str(stdout.trim()).expect("one JSON line");
    assert_eq!(
        (summary["sent"].as_u64(), summary["requests"].as_u64()),
        (Some(12), Some(2))
    );
    for consumer in &mut f.consumers {
        for poll in consumer.poller.drain(Duration::from_secs(30)).await {
            consumer.delivered.extend(poll.received);
        }
        assert_eq!(consumer.delivered.len(), 12, "{}", consumer.name);
        // What the dispatcher sends next is counted from here.
        consumer.delivered.clear();
    }
    // The dispatcher then sends the same events, under its own
    // deduplication ids (a resend's are its own, so that the topic never
    // drops a resend as a repeat): each queue gets them again, and the
    // consumers' guards absorb them.
    f.settle().await;
    f.assert_every_consumer_is_the_fold(&[order]).await;
    assert_eq!(f.dispatched("Dispatched"), 12.0);
}
