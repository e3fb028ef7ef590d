//! The whole pipeline on real parts: the producer's append on DynamoDB
//! Local, the table's DynamoDB stream read by an event source mapping
//! written for the tests (`support::streams`, Lambda's batches, partial
//! failures, bisect and retries), the `dispatcher` binary through a local
//! Lambda Runtime API, LocalStack's SQS FIFO queue, the SQS poller
//! (`support::localstack`) and the `projector` binary. Every test ends with
//! the projection compared to the fold of the event store (`rebuild` into a
//! fresh table), item by item.

mod support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_sqs::types::MessageSystemAttributeName;
use sequence_guard::producer::{Append, AppendError, EventStore, NewEvent};
use sequence_guard::store::dynamodb::{connect, create_table, ensure_events_table};
use serde_json::{Value, json};
use support::fault_proxy::{Fault, FaultProxy};
use support::function::{Function, start_dispatcher, start_with};
use support::localstack::{Poller, Queues, bodies, fifo_queues, localstack, send, sqs};
use support::runtime_api::{Answer, RuntimeApi};
use support::streams::StreamSource;
use support::*;

/// Faults in front of the dispatcher's SQS and the projector's DynamoDB.
#[derive(Default)]
struct Faults {
    sqs: Option<Arc<FaultProxy>>,
    dynamodb: Option<Arc<FaultProxy>>,
}

struct Pipeline {
    name: String,
    events: EventStore,
    events_table: String,
    table: String,
    queues: Queues,
    failure_url: String,
    source: StreamSource,
    dispatcher: Function,
    sqs_endpoint: String,
    poller: Poller,
    projector: Function,
}

async fn pipeline(name: &str, faults: &Faults) -> Pipeline {
    let local = dynamodb_local();
    let client = connect(Some(&local.endpoint)).await;
    let name = format!("{name}-{}", std::process::id());
    let events_table = format!("{name}-events");
    let table = format!("{name}-projection");
    ensure_events_table(&client, &events_table)
        .await
        .expect("events table");
    create_table(&client, &table).await.expect("projection");
    let sqs = sqs().await;
    // Visibility 2 s: a gap comes back quickly; 50 receives: nothing reaches
    // the dead-letter queue while a gap waits.
    let queues = fifo_queues(&sqs, &name, 2, 50).await;
    let failure_url = sqs
        .create_queue()
        .queue_name(format!("{name}-dispatch-failures"))
        .send()
        .await
        .expect("failure queue")
        .queue_url
        .expect("failure queue url");
    let sqs_endpoint = faults.sqs.as_ref().map_or_else(
        || localstack().endpoint.clone(),
        |proxy| proxy.endpoint.clone(),
    );
    let dispatcher_api = RuntimeApi::start().await;
    let dispatcher = start_dispatcher(&dispatcher_api, &sqs_endpoint, &queues.url, &failure_url);
    let mut source = StreamSource::for_table(dispatcher_api, &events_table).await;
    source.on_failure = Some((sqs.clone(), failure_url.clone()));
    let projector_api = RuntimeApi::start().await;
    let dynamodb_endpoint = faults
        .dynamodb
        .as_ref()
        .map_or_else(|| local.endpoint.clone(), |proxy| proxy.endpoint.clone());
    let projector = start_with(
        &projector_api,
        Some(&table),
        &[("AWS_ENDPOINT_URL_DYNAMODB", &dynamodb_endpoint)],
    );
    let poller = Poller {
        sqs,
        queue_url: queues.url.clone(),
        queue_arn: queues.arn.clone(),
        api: projector_api,
    };
    Pipeline {
        events: EventStore::new(client, events_table.clone(), shop::domain()),
        name,
        events_table,
        table,
        queues,
        failure_url,
        source,
        dispatcher,
        sqs_endpoint,
        poller,
        projector,
    }
}

impl Pipeline {
    /// Runs both event source mappings until neither has anything left.
    async fn settle(&mut self) {
        let started = Instant::now();
        loop {
            let sent = self.source.drain(Duration::from_secs(30)).await;
            let polled = self.poller.drain(Duration::from_secs(90)).await;
            if sent.is_empty() && polled.is_empty() {
                return;
            }
            assert!(
                started.elapsed() < Duration::from_secs(240),
                "the pipeline did not settle; dispatcher:\n{}\nprojector:\n{}",
                self.dispatcher.output(),
                self.projector.output()
            );
        }
    }

    /// The projection equals the fold of the event store: `rebuild` into a
    /// fresh table, compared item by item. Returns the items.
    async fn assert_projection_is_the_fold(&self) -> BTreeMap<(String, String), String> {
        self.assert_projection_is_the_fold_but(&[]).await
    }

    /// As [`Self::assert_projection_is_the_fold`], with `corrupt` events
    /// (`<stream>:<sequence>`) that `rebuild` must name as not done.
    async fn assert_projection_is_the_fold_but(
        &self,
        corrupt: &[&str],
    ) -> BTreeMap<(String, String), String> {
        let endpoint = &dynamodb_local().endpoint;
        let folded = format!("{}-fold", self.name);
        let (code, stdout, stderr) = run_local(
            env!("CARGO_BIN_EXE_rebuild"),
            endpoint,
            &[
                "--events-table",
                &self.events_table,
                "--table",
                &folded,
                "--create-table",
            ],
        );
        let not_done = format!(" {} not done", corrupt.len());
        assert!(stdout.contains(&not_done), "{stdout}{stderr}");
        for event in corrupt {
            assert!(stderr.contains(&format!("{event} not done")), "{stderr}");
        }
        assert_eq!(code, i32::from(!corrupt.is_empty()), "{stdout}{stderr}");
        let live = projection(endpoint, &self.table).await;
        let fold = projection(endpoint, &folded).await;
        assert_eq!(
            live,
            fold,
            "the projection is the fold of the event store; projector:\n{}",
            self.projector.output()
        );
        assert_eq!(self.dead_letters().await, 0, "nothing reached the DLQ");
        live
    }

    async fn dead_letters(&self) -> usize {
        bodies(&self.poller.sqs, &self.queues.dlq_url).await.len()
    }

    /// The reports in the dispatch failure queue.
    async fn failures(&self) -> Vec<Value> {
        bodies(&self.poller.sqs, &self.failure_url)
            .await
            .iter()
            .map(|body| serde_json::from_str(body).expect("a JSON report"))
            .collect()
    }

    /// Sum of a projector metric over its EMF documents.
    fn projected(&self, metric: &str) -> f64 {
        metric_sum(&self.projector.output(), metric)
    }

    fn dispatched(&self, metric: &str) -> f64 {
        metric_sum(&self.dispatcher.output(), metric)
    }

    async fn stored_events(&self, streams: &[String]) -> usize {
        let mut count = 0;
        for stream in streams {
            count += self
                .events
                .read(stream, 0, 10_000)
                .await
                .expect("read")
                .len();
        }
        count
    }
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

/// Orders created (one event each), then `updates` updates each.
async fn orders(events: &EventStore, ids: &[String], updates: u64) {
    for id in ids {
        append(
            events,
            Append::one(id.clone(), NewEvent::new("OrderCreated", details(100))),
        )
        .await;
    }
    for n in 1..=updates {
        for id in ids {
            append(
                events,
                Append::one(id.clone(), NewEvent::new("OrderUpdated", details(100 + n))),
            )
            .await;
        }
    }
}

fn names(prefix: &str, count: usize) -> Vec<String> {
    (0..count).map(|n| format!("{prefix}-{n}")).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_producers_end_with_the_projection_equal_to_the_fold_of_the_store() {
    let mut p = pipeline("producers", &Faults::default()).await;
    let order_ids = names("order", 3);
    orders(&p.events, &order_ids, 0).await;
    append(
        &p.events,
        Append::one(
            "product-0",
            NewEvent::new(
                "ProductCreated",
                json!({ "name": "Lamp", "priceCents": 10 }),
            ),
        ),
    )
    .await;
    // Eight producers, each with its own commands (request ids), racing on
    // three orders, one product and two skus, while the pipeline runs.
    let mut producers = Vec::new();
    for producer in 0..8u64 {
        let events = p.events.clone();
        let order_ids = order_ids.clone();
        producers.push(tokio::spawn(async move {
            for n in 0..12u64 {
                let (stream, event) = match (producer + n) % 4 {
                    0 | 1 => (
                        order_ids[((producer + n) % 3) as usize].clone(),
                        NewEvent::new("OrderUpdated", details(1_000 * producer + n)),
                    ),
                    2 => (
                        "product-0".to_owned(),
                        NewEvent::new("ProductPriceChanged", json!({ "priceCents": n })),
                    ),
                    _ => {
                        let sku = if n % 2 == 0 { "SKU-A" } else { "SKU-B" };
                        (
                            sku.to_owned(),
                            NewEvent::new(
                                "InventoryAdjusted",
                                json!({ "sku": sku, "delta": (producer as i64) - 3 }),
                            ),
                        )
                    }
                };
                let request = Append {
                    request_id: Some(format!("producer-{producer}-{n}")),
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
        p.source.drain(Duration::from_secs(5)).await;
        p.poller.drain(Duration::from_secs(5)).await;
    }
    for producer in producers {
        producer.await.expect("producer");
    }
    p.settle().await;
    let items = p.assert_projection_is_the_fold().await;
    let mut streams = order_ids.clone();
    streams.extend([
        "product-0".to_owned(),
        "SKU-A".to_owned(),
        "SKU-B".to_owned(),
    ]);
    let stored = p.stored_events(&streams).await;
    assert_eq!(stored, 4 + 8 * 12, "one event per command");
    assert!(items.len() >= 6, "{items:#?}");
    // Each event reached the queue once: every message applied, none a
    // duplicate (SQS deduplication and the stream read once).
    assert_eq!(
        p.projected("Applied") as usize,
        stored,
        "{}",
        p.projector.output()
    );
    assert_eq!(p.dispatched("Dispatched") as usize, stored);
    assert_eq!(p.dispatched("Corrupt"), 0.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_dispatcher_crash_mid_batch_and_a_batch_delivered_twice_are_absorbed() {
    // The dispatcher's SQS behind a proxy that only counts: the test kills
    // the dispatcher after its first SendMessageBatch went through.
    let upstream = localstack()
        .endpoint
        .trim_start_matches("http://")
        .to_owned();
    // The dispatcher sends a batch's requests at once; the proxy answers
    // them 100 ms apart, so the kill lands after the first and before the
    // others.
    let counter = Arc::new(FaultProxy::start_staggered(upstream, Duration::from_millis(100)).await);
    let faults = Faults {
        sqs: Some(counter.clone()),
        dynamodb: None,
    };
    let mut p = pipeline("crash", &faults).await;
    let ids = names("order", 3);
    orders(&p.events, &ids, 9).await; // 30 events: three requests of ten

    let pid = p.dispatcher.child.id().expect("pid");
    let api = p.source.api.clone();
    let watcher = tokio::spawn(async move {
        while counter.counts.forwarded.load(Ordering::Relaxed) < 1 {
            tokio::time::sleep(Duration::from_micros(200)).await;
        }
        let killed = std::process::Command::new("kill")
            .args(["-9", &pid.to_string()])
            .status()
            .expect("kill");
        assert!(killed.success());
        api.crashed();
        counter.counts.forwarded.load(Ordering::Relaxed)
    });
    let first = p.source.poll().await.expect("a batch");
    let sent_before_crash = watcher.await.expect("watcher");
    assert!(
        (1..3).contains(&sent_before_crash),
        "killed after {sent_before_crash} of the batch's three requests"
    );
    assert!(
        matches!(first.answer, Answer::Error(_)),
        "the dispatcher died mid-batch: {first:?}"
    );
    assert!(first.bisected, "the mapping splits the batch and retries");
    // Lambda starts a new process; the batch comes again, in halves.
    p.dispatcher = start_dispatcher(
        &p.source.api,
        &p.sqs_endpoint,
        &p.queues.url,
        &p.failure_url,
    );
    p.settle().await;
    p.assert_projection_is_the_fold().await;
    // The messages sent before the crash were sent again: SQS dropped them.
    assert_eq!(p.projected("Applied"), 30.0);
    assert_eq!(p.projected("Duplicate"), 0.0);

    // A stream batch delivered twice (a retry after a lost answer).
    orders(&p.events, &names("again", 2), 4).await;
    let batch = p.source.read(100).await;
    assert_eq!(batch.len(), 10, "ten events, one record each (no head)");
    for _ in 0..2 {
        let answer = StreamSource::invoke(&p.source.api, &batch).await;
        assert_eq!(
            answer,
            Answer::Response(r#"{"batchItemFailures":[]}"#.to_owned())
        );
    }
    p.settle().await;
    assert_eq!(
        p.projected("Applied"),
        40.0,
        "the second delivery was dropped by SQS"
    );
    assert_eq!(p.projected("Duplicate"), 0.0);

    // Past SQS's five minutes, a redelivery is a new message: the guard
    // answers each one Duplicate and the projection does not move.
    let before = projection(&dynamodb_local().endpoint, &p.table).await;
    for id in names("again", 2) {
        for event in p.events.read(&id, 0, 100).await.expect("read") {
            let dedup = format!("late-{id}:{}", event.sequence);
            send(&p.poller.sqs, &p.queues.url, &id, &dedup, &event.body).await;
        }
    }
    p.settle().await;
    assert_eq!(p.projected("Duplicate"), 10.0);
    assert_eq!(
        projection(&dynamodb_local().endpoint, &p.table).await,
        before
    );
    p.assert_projection_is_the_fold().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn dispatchers_racing_and_a_transaction_out_of_order_are_absorbed_by_parking() {
    let mut p = pipeline("racing", &Faults::default()).await;
    // One append of ten events: one transaction, ten event items.
    let mut events = vec![NewEvent::new("OrderCreated", details(1))];
    events.extend((2..=10).map(|n| NewEvent::new("OrderUpdated", details(n))));
    append(
        &p.events,
        Append {
            events,
            ..Append::one("order-tx", NewEvent::new("x", json!({})))
        },
    )
    .await;
    orders(&p.events, &names("order", 2), 5).await;
    let records = p.source.read(100).await;
    assert_eq!(
        records.len(),
        10 + 2 * 6,
        "events, one record each (no head)"
    );

    // A second dispatcher, racing: it sends the second half first.
    let rival_api = RuntimeApi::start().await;
    let rival = start_dispatcher(&rival_api, &p.sqs_endpoint, &p.queues.url, &p.failure_url);
    let (first, second) = records.split_at(records.len() / 2);
    let ok = Answer::Response(r#"{"batchItemFailures":[]}"#.to_owned());
    assert_eq!(StreamSource::invoke(&rival_api, second).await, ok);
    // And the transaction's items reach the other one last first.
    let mut reversed = first.to_vec();
    reversed.reverse();
    assert_eq!(StreamSource::invoke(&p.source.api, &reversed).await, ok);
    p.settle().await;
    p.assert_projection_is_the_fold().await;
    // Held back as not created (an update before its creation), as a gap,
    // or parked: which, depends on when the consumer polls.
    assert!(
        p.projected("Gap") + p.projected("NotCreated") + p.projected("Parked") > 0.0,
        "the order was broken: the guard held events back"
    );
    // Each event applied once: on arrival, or drained from parking when
    // its gap closed.
    assert_eq!(p.projected("Applied") + p.projected("Drained"), 10.0 + 12.0);
    drop(rival);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_corrupt_event_item_is_reported_and_blocks_no_stream() {
    let mut p = pipeline("corrupt", &Faults::default()).await;
    orders(&p.events, &names("order", 2), 2).await;
    // An event item written by other means than append: its body is not a
    // message (a total that is not a number), and it holds personal data.
    let client = connect(Some(&dynamodb_local().endpoint)).await;
    client
        .put_item()
        .table_name(&p.events_table)
        .item("pk", AttributeValue::S("STREAM#order-bad".to_owned()))
        .item("sk", AttributeValue::S(format!("EVENT#{:020}", 1)))
        .item("eventId", AttributeValue::S("bad-1".to_owned()))
        .item("type", AttributeValue::S("OrderCreated".to_owned()))
        .item("sequence", AttributeValue::N("1".to_owned()))
        .item(
            "body",
            AttributeValue::S(
                json!({"eventId": "bad-1", "type": "OrderCreated", "aggregateId": "order-bad",
                       "sequence": 1, "data": {"customerName": "Marker Personname",
                       "email": "marker@example.com", "totalCents": "lots"}})
                .to_string(),
            ),
        )
        .send()
        .await
        .expect("put");
    orders(&p.events, &names("later", 2), 2).await;
    let polls = p.source.drain(Duration::from_secs(30)).await;
    assert!(
        polls
            .iter()
            .all(|poll| poll.failures.is_empty() && !poll.retried),
        "nothing failed, nothing retried: {polls:?}"
    );
    p.settle().await;
    // rebuild reads every stream's events: it names the corrupt one too.
    p.assert_projection_is_the_fold_but(&["order-bad:1"]).await;
    assert_eq!(p.projected("Applied"), 12.0);
    let reports = bodies(&p.poller.sqs, &p.failure_url).await;
    assert_eq!(reports.len(), 1, "{reports:?}");
    // The report names where and what the item is, and why; never its body
    // or data, which may hold personal data.
    for personal in ["Marker Personname", "marker@example.com", "lots"] {
        assert!(!reports[0].contains(personal), "{}", reports[0]);
    }
    let report: Value = serde_json::from_str(&reports[0]).expect("a JSON report");
    let reason = report["reason"].as_str().unwrap_or_default().to_owned();
    assert!(reason.contains("not a message of the domain"), "{report}");
    assert_eq!(
        report,
        json!({
            "source": "sequence-guard dispatcher",
            "condition": "CorruptEventItem",
            "reason": reason,
            "sequenceNumber": report["sequenceNumber"],
            "eventSourceARN": report["eventSourceARN"],
            "keys": {"pk": "STREAM#order-bad", "sk": format!("EVENT#{:020}", 1)},
            "type": "OrderCreated",
            "version": 1,
            "sequence": 1,
        })
    );
    assert!(report["sequenceNumber"].is_string(), "{report}");
    assert_eq!(p.dispatched("Corrupt"), 1.0);
    let logs = p.dispatcher.output();
    assert!(logs.contains("corrupt event item"), "{logs}");
    assert!(!logs.contains("Marker Personname"), "{logs}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn faults_on_sqs_and_dynamodb_together_lose_nothing_and_apply_nothing_twice() {
    let sqs_upstream = localstack()
        .endpoint
        .trim_start_matches("http://")
        .to_owned();
    let dynamodb_upstream = dynamodb_local()
        .endpoint
        .trim_start_matches("http://")
        .to_owned();
    let faults = Faults {
        sqs: Some(Arc::new(
            FaultProxy::start(
                sqs_upstream,
                17,
                20,
                vec![Fault::Throttle, Fault::ServerError, Fault::LostAnswer],
            )
            .await,
        )),
        dynamodb: Some(Arc::new(
            FaultProxy::start(
                dynamodb_upstream,
                29,
                20,
                vec![Fault::Throttle, Fault::ServerError, Fault::LostAnswer],
            )
            .await,
        )),
    };
    let mut p = pipeline("faults", &faults).await;
    orders(&p.events, &names("order", 3), 9).await;
    for sku in ["SKU-A", "SKU-B"] {
        for delta in [5, -2, 7, 1, -3] {
            append(
                &p.events,
                Append::one(
                    sku,
                    NewEvent::new("InventoryAdjusted", json!({ "sku": sku, "delta": delta })),
                ),
            )
            .await;
        }
    }
    p.settle().await;
    let items = p.assert_projection_is_the_fold().await;
    // Stock is an ADD: applied twice, it would be off.
    for sku in ["SKU-A", "SKU-B"] {
        let stock = items
            .iter()
            .find(|((pk, _), _)| pk == &format!("SKU#{sku}"))
            .map(|(_, attributes)| attributes.clone())
            .unwrap_or_default();
        assert!(stock.contains("onHand=N(\"8\")"), "{sku}: {stock}");
    }
    let injected =
        |faults: &Option<Arc<FaultProxy>>| faults.as_ref().map_or(0, |proxy| proxy.counts.faults());
    assert!(injected(&faults.sqs) > 0, "SQS faults were injected");
    assert!(
        injected(&faults.dynamodb) > 0,
        "DynamoDB faults were injected"
    );
    assert!(
        p.projected("Applied") + p.projected("Duplicate") >= 40.0,
        "{}",
        p.projector.output()
    );
    assert_eq!(p.failures().await.len(), 0, "nothing given up");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_producers_trace_rides_on_the_message() {
    let mut p = pipeline("trace", &Faults::default()).await;
    let trace = "Root=1-6a1b2c3d-0123456789abcdef01234567;Parent=53995c3f42cd8ad8;Sampled=1";
    // `append` run where the Lambda runtime set the caller's trace.
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_append"))
        .args(["--endpoint-url", &dynamodb_local().endpoint])
        .args(["--stream", "order-traced", "--type", "OrderCreated"])
        .args(["--data", &details(5).to_string()])
        .env("EVENTS_TABLE", &p.events_table)
        .env("AWS_ACCESS_KEY_ID", "local")
        .env("AWS_SECRET_ACCESS_KEY", "local")
        .env("AWS_REGION", "us-east-1")
        .env("_X_AMZN_TRACE_ID", trace)
        .output()
        .expect("append");
    assert!(output.status.success(), "{output:?}");
    p.source.drain(Duration::from_secs(30)).await;
    let received = p
        .poller
        .sqs
        .receive_message()
        .queue_url(&p.queues.url)
        .message_system_attribute_names(MessageSystemAttributeName::AwsTraceHeader)
        .wait_time_seconds(2)
        .send()
        .await
        .expect("receive");
    let message = received
        .messages
        .unwrap_or_default()
        .into_iter()
        .next()
        .expect("the event is on the queue");
    assert_eq!(
        message
            .attributes
            .unwrap_or_default()
            .get(&MessageSystemAttributeName::AwsTraceHeader)
            .map(String::as_str),
        Some(trace),
        "the producer's trace header, as the message's AWSTraceHeader"
    );
    // Left in flight: it comes back after its visibility timeout.
    p.settle().await;
    p.assert_projection_is_the_fold().await;
    assert_eq!(p.projected("Applied"), 1.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_sample_stream_batch_sends_its_one_event() {
    let p = pipeline("sample", &Faults::default()).await;
    // events/dispatcher/stream-batch.json: a 0.2 table's head, an event, a
    // request.
    let sample = include_str!("../../events/dispatcher/stream-batch.json");
    let answer = p.source.api.invoke(sample).await;
    assert_eq!(
        answer,
        Answer::Response(r#"{"batchItemFailures":[]}"#.to_owned())
    );
    p.poller.drain(Duration::from_secs(30)).await;
    let items = projection(&dynamodb_local().endpoint, &p.table).await;
    let order = items
        .get(&("ORDER#order-42".to_owned(), "STATE".to_owned()))
        .expect("order-42 projected");
    assert!(order.contains("totalCents=N(\"1250\")"), "{order}");
    assert_eq!(
        (
            p.dispatched("Records"),
            p.dispatched("Dispatched"),
            p.dispatched("SendRequests")
        ),
        (3.0, 1.0, 1.0),
        "{}",
        p.dispatcher.output()
    );
}
