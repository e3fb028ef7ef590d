//! The pipeline benchmark: from append to projected state, on DynamoDB Local
//! (the event store, its stream, the projections) and LocalStack's SQS FIFO
//! and SNS FIFO.
//!
//! ```text
//! scripts/bench        # starts DynamoDB Local and LocalStack, runs this after bench.rs
//! pipeline --endpoint-url http://127.0.0.1:8000 --sqs-endpoint http://127.0.0.1:4566 \
//!     --pipelines ours,fanout   # some of the pipelines only, given the endpoints
//! ```
//!
//! Prints, never asserts, for one hot aggregate and for 100 aggregates, for
//! each consumer: events per second from the first append to its last event
//! projected, the latency of each event from its append to its projection
//! (median, 99th percentile), the messages its queue received per event
//! appended, and the dispatcher's requests per event. Three pipelines: ours
//! (the dispatcher's code sending to one SQS FIFO queue), a naive one (one
//! `SendMessage` per event, one conditional write per message), and the
//! fan-out (the dispatcher's code publishing to an SNS FIFO topic that feeds
//! two SQS FIFO queues by raw delivery: the shop's consumer and the status
//! consumer, `shop::status::domain()`, each with its own table). Then the
//! dispatcher alone on a backlog (full batches of 100 stream records), to a
//! queue and to the topic: requests per event.
//!
//! The stream is read as tightly as DynamoDB Local answers; on AWS, Lambda
//! polls a shard about four times a second, which adds up to 250 ms to each
//! event's latency, the same for both pipelines.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use aws_lambda_events::event::sqs::{SqsEvent, SqsMessage};
use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_dynamodbstreams::types::ShardIteratorType;
use aws_sdk_sqs::types::{
    DeleteMessageBatchRequestEntry, MessageSystemAttributeName, QueueAttributeName,
};
use sequence_guard::Domain;
use sequence_guard::dispatcher::{Queue, Read, Settings, SnsTopic, SqsQueue, dispatch, read};
use sequence_guard::producer::{Append, EventStore, ExpectedSequence, NewEvent};
use sequence_guard::runner::{Invocation, Runner, RunnerConfig};
use sequence_guard::store::dynamodb::{DynamoStore, connect, create_table, ensure_events_table};
use serde_json::{Value, json};

#[derive(Debug, clap::Parser)]
#[command(name = "pipeline")]
struct Args {
    /// DynamoDB Local's endpoint.
    #[arg(long, value_name = "URL")]
    endpoint_url: String,
    /// LocalStack's endpoint (SQS, and SNS for the fan-out).
    #[arg(long, value_name = "URL")]
    sqs_endpoint: String,
    /// The pipelines to run, in this order.
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = [Pipeline::Ours, Pipeline::Naive, Pipeline::Fanout])]
    pipelines: Vec<Pipeline>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Pipeline {
    /// The dispatcher's code to one SQS FIFO queue, the runner behind it.
    Ours,
    /// One `SendMessage` per event, one conditional write per message.
    Naive,
    /// The dispatcher's code to an SNS FIFO topic, two queues subscribed.
    Fanout,
}

impl Pipeline {
    fn tag(self) -> &'static str {
        match self {
            Pipeline::Ours => "ours",
            Pipeline::Naive => "naive",
            Pipeline::Fanout => "fan-out",
        }
    }
}

/// What one run measured.
struct Figures {
    appended: usize,
    /// `SendMessageBatch`, `SendMessage` or `PublishBatch` requests.
    requests: u64,
    consumers: Vec<Consumed>,
}

/// What one consumer of a run measured.
struct Consumed {
    name: &'static str,
    projected: usize,
    seconds: f64,
    latencies: Vec<Duration>,
    /// Messages its queue received: distinct ids handed out, and any left.
    deliveries: u64,
}

/// Everything one run shares between its tasks.
struct Shared {
    appended: Mutex<HashMap<(String, u64), Instant>>,
    dispatched: AtomicUsize,
    requests: AtomicU64,
}

/// What one consumer's tasks share: its counts.
#[derive(Default)]
struct Tally {
    latencies: Mutex<Vec<Duration>>,
    projected: AtomicUsize,
    received: Mutex<HashSet<String>>,
    last_projected: Mutex<Option<Instant>>,
}

/// One consumer: its queue and its runner (on its own table).
#[derive(Clone)]
struct Lane {
    name: &'static str,
    queue_url: String,
    runner: Arc<Runner<DynamoStore>>,
    /// The naive projector's client and table.
    naive: (aws_sdk_dynamodb::Client, String),
    tally: Arc<Tally>,
}

fn sqs_client(endpoint: &str) -> aws_sdk_sqs::Client {
    let config = aws_sdk_sqs::config::Builder::new()
        .behavior_version(aws_sdk_sqs::config::BehaviorVersion::latest())
        .endpoint_url(endpoint)
        .region(aws_sdk_sqs::config::Region::new("us-east-1"))
        .credentials_provider(aws_sdk_sqs::config::Credentials::new(
            "test", "test", None, None, "bench",
        ))
        .build();
    aws_sdk_sqs::Client::from_conf(config)
}

fn sns_client(endpoint: &str) -> aws_sdk_sns::Client {
    let config = aws_sdk_sns::config::Builder::new()
        .behavior_version(aws_sdk_sns::config::BehaviorVersion::latest())
        .endpoint_url(endpoint)
        .region(aws_sdk_sns::config::Region::new("us-east-1"))
        .credentials_provider(aws_sdk_sns::config::Credentials::new(
            "test", "test", None, None, "bench",
        ))
        .build();
    aws_sdk_sns::Client::from_conf(config)
}

/// A FIFO queue named `<name>.fifo`; its URL.
async fn fifo_queue(sqs: &aws_sdk_sqs::Client, name: &str) -> String {
    let created = sqs
        .create_queue()
        .queue_name(format!("{name}.fifo"))
        .attributes(QueueAttributeName::FifoQueue, "true")
        .attributes(QueueAttributeName::VisibilityTimeout, "5")
        .send()
        .await;
    match created.ok().and_then(|created| created.queue_url) {
        Some(url) => url,
        None => {
            eprintln!("cannot create the queue {name}.fifo");
            std::process::exit(1);
        }
    }
}

/// An SNS FIFO topic `<name>.fifo` (no content-based deduplication, as the
/// template's) with each queue subscribed raw and unfiltered; its ARN.
async fn fifo_topic(
    sns: &aws_sdk_sns::Client,
    sqs: &aws_sdk_sqs::Client,
    name: &str,
    queue_urls: &[&str],
) -> String {
    let topic_arn = sns
        .create_topic()
        .name(format!("{name}.fifo"))
        .attributes("FifoTopic", "true")
        .attributes("ContentBasedDeduplication", "false")
        .send()
        .await
        .ok()
        .and_then(|created| created.topic_arn);
    let Some(topic_arn) = topic_arn else {
        eprintln!("cannot create the topic {name}.fifo");
        std::process::exit(1);
    };
    for url in queue_urls {
        let arn = sqs
            .get_queue_attributes()
            .queue_url(*url)
            .attribute_names(QueueAttributeName::QueueArn)
            .send()
            .await
            .ok()
            .and_then(|answer| answer.attributes?.remove(&QueueAttributeName::QueueArn));
        let subscribed = match arn {
            Some(arn) => sns
                .subscribe()
                .topic_arn(&topic_arn)
                .protocol("sqs")
                .endpoint(arn)
                .attributes("RawMessageDelivery", "true")
                .send()
                .await
                .is_ok(),
            None => false,
        };
        if !subscribed {
            eprintln!("cannot subscribe {url} to {topic_arn}");
            std::process::exit(1);
        }
    }
    topic_arn
}

/// Messages in a queue, visible or in flight.
async fn in_queue(sqs: &aws_sdk_sqs::Client, url: &str) -> u64 {
    let attributes = sqs
        .get_queue_attributes()
        .queue_url(url)
        .attribute_names(QueueAttributeName::ApproximateNumberOfMessages)
        .attribute_names(QueueAttributeName::ApproximateNumberOfMessagesNotVisible)
        .send()
        .await
        .ok()
        .and_then(|answer| answer.attributes)
        .unwrap_or_default();
    [
        QueueAttributeName::ApproximateNumberOfMessages,
        QueueAttributeName::ApproximateNumberOfMessagesNotVisible,
    ]
    .iter()
    .filter_map(|name| attributes.get(name)?.parse::<u64>().ok())
    .sum()
}

/// Messages in a queue once SNS has stopped delivering to it (no change for
/// a second), or after 30 s.
async fn settled(sqs: &aws_sdk_sqs::Client, url: &str) -> u64 {
    let started = Instant::now();
    let mut last = in_queue(sqs, url).await;
    while started.elapsed() < Duration::from_secs(30) {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let now = in_queue(sqs, url).await;
        if now == last {
            break;
        }
        last = now;
    }
    last
}

fn streams_client(endpoint: &str) -> aws_sdk_dynamodbstreams::Client {
    let config = aws_sdk_dynamodbstreams::config::Builder::new()
        .behavior_version(aws_sdk_dynamodbstreams::config::BehaviorVersion::latest())
        .endpoint_url(endpoint)
        .region(aws_sdk_dynamodbstreams::config::Region::new("us-east-1"))
        .credentials_provider(aws_sdk_dynamodbstreams::config::Credentials::new(
            "local", "local", None, None, "bench",
        ))
        .build();
    aws_sdk_dynamodbstreams::Client::from_conf(config)
}

fn event(sequence: u64) -> NewEvent {
    let data = json!({ "customerName": "Ada", "email": "ada@example.com", "totalCents": sequence });
    NewEvent::new(
        if sequence == 1 {
            "OrderCreated"
        } else {
            "OrderUpdated"
        },
        data,
    )
}

/// A stream record as Lambda delivers it.
fn lambda_record(record: &aws_sdk_dynamodbstreams::types::Record) -> Value {
    let change = record.dynamodb.as_ref();
    let image = |item: Option<&HashMap<String, aws_sdk_dynamodbstreams::types::AttributeValue>>| {
        item.map(|item| {
            serde_json::to_value(serde_dynamo::Item::from(item.clone())).unwrap_or(Value::Null)
        })
    };
    let mut dynamodb = json!({
        "ApproximateCreationDateTime": 0,
        "Keys": image(change.and_then(|c| c.keys.as_ref())),
        "SequenceNumber": change.and_then(|c| c.sequence_number.clone()),
        "SizeBytes": change.and_then(|c| c.size_bytes).unwrap_or(0),
        "StreamViewType": "NEW_IMAGE",
    });
    if let Some(new_image) = image(change.and_then(|c| c.new_image.as_ref())) {
        dynamodb["NewImage"] = new_image;
    }
    json!({
        "eventID": record.event_id,
        "eventName": record.event_name.as_ref().map(|name| name.as_str()),
        "eventVersion": "1.1",
        "eventSource": "aws:dynamodb",
        "awsRegion": "us-east-1",
        "dynamodb": dynamodb,
    })
}

/// Reads the table's stream from its start, `limit` records a batch, and
/// hands each batch to `send` until `done`.
async fn read_stream<F, Fut>(
    endpoint: &str,
    table: &str,
    limit: i32,
    done: impl Fn() -> bool,
    mut send: F,
) where
    F: FnMut(Vec<Value>) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let dynamodb = connect(Some(endpoint)).await;
    let streams = streams_client(endpoint);
    let Ok(described) = dynamodb.describe_table().table_name(table).send().await else {
        return;
    };
    let Some(arn) = described.table.and_then(|t| t.latest_stream_arn) else {
        return;
    };
    let Ok(stream) = streams.describe_stream().stream_arn(&arn).send().await else {
        return;
    };
    let shards = stream
        .stream_description
        .and_then(|d| d.shards)
        .unwrap_or_default();
    let Some(shard) = shards.first().and_then(|s| s.shard_id.clone()) else {
        return;
    };
    let mut iterator = streams
        .get_shard_iterator()
        .stream_arn(&arn)
        .shard_id(shard)
        .shard_iterator_type(ShardIteratorType::TrimHorizon)
        .send()
        .await
        .ok()
        .and_then(|answer| answer.shard_iterator);
    while let Some(current) = iterator.take() {
        if done() {
            return;
        }
        let Ok(answer) = streams
            .get_records()
            .shard_iterator(&current)
            .limit(limit)
            .send()
            .await
        else {
            iterator = Some(current);
            continue;
        };
        iterator = answer.next_shard_iterator;
        let records: Vec<Value> = answer
            .records
            .unwrap_or_default()
            .iter()
            .map(lambda_record)
            .collect();
        if records.is_empty() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        } else {
            send(records).await;
        }
    }
}

/// What the dispatcher of a run works with: `queue` is the queue (ours,
/// naive) or the topic (fan-out).
struct Wiring<Q> {
    endpoint: String,
    table: String,
    queue: Q,
    sqs: aws_sdk_sqs::Client,
    queue_url: String,
    domain: Domain,
    shared: Arc<Shared>,
    total: usize,
}

impl Wiring<()> {
    /// The same wiring, sending to `queue`.
    fn to<Q>(self, queue: Q) -> Wiring<Q> {
        Wiring {
            endpoint: self.endpoint,
            table: self.table,
            queue,
            sqs: self.sqs,
            queue_url: self.queue_url,
            domain: self.domain,
            shared: self.shared,
            total: self.total,
        }
    }
}

/// The dispatcher of a pipeline, until every event is sent.
async fn dispatcher<Q: Queue>(mode: Pipeline, wiring: Wiring<Q>) {
    let Wiring {
        endpoint,
        table,
        queue,
        sqs,
        queue_url,
        domain,
        shared,
        total,
    } = wiring;
    let (endpoint, table) = (endpoint.as_str(), table.as_str());
    let done = || shared.dispatched.load(Ordering::Relaxed) >= total;
    read_stream(endpoint, table, 100, done, |records| {
        let (queue, sqs, queue_url, domain, shared) = (&queue, &sqs, &queue_url, &domain, &shared);
        async move {
            match mode {
                Pipeline::Ours | Pipeline::Fanout => {
                    let sent = dispatch(&records, domain, queue, Settings::default(), None).await;
                    shared.requests.fetch_add(sent.requests, Ordering::Relaxed);
                    shared
                        .dispatched
                        .fetch_add(sent.dispatched, Ordering::Relaxed);
                }
                Pipeline::Naive => {
                    for record in &records {
                        let Read::Send(message) = read(record, domain) else {
                            continue;
                        };
                        shared.requests.fetch_add(1, Ordering::Relaxed);
                        let sent = sqs
                            .send_message()
                            .queue_url(queue_url)
                            .message_group_id(&message.group_id)
                            .message_deduplication_id(&message.deduplication_id)
                            .message_body(&message.body)
                            .send()
                            .await;
                        if sent.is_ok() {
                            shared.dispatched.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
            }
        }
    })
    .await;
}

/// The naive projector's one conditional write: the order at the event's
/// sequence, if it is at the one before.
async fn naive_write(
    client: &aws_sdk_dynamodb::Client,
    table: &str,
    body: &Value,
) -> Result<(), String> {
    let id = body["aggregateId"].as_str().unwrap_or_default();
    let sequence = body["sequence"].as_u64().unwrap_or(0);
    let written = client
        .update_item()
        .table_name(table)
        .key("pk", AttributeValue::S(format!("ORDER#{id}")))
        .key("sk", AttributeValue::S("STATE".to_owned()))
        .update_expression("SET #s = :s, totalCents = :t, lastEventId = :e")
        .condition_expression("attribute_not_exists(#s) OR #s = :p")
        .expression_attribute_names("#s", "sequence")
        .expression_attribute_values(":s", AttributeValue::N(sequence.to_string()))
        .expression_attribute_values(":p", AttributeValue::N((sequence - 1).to_string()))
        .expression_attribute_values(
            ":t",
            AttributeValue::N(body["data"]["totalCents"].to_string()),
        )
        .expression_attribute_values(
            ":e",
            AttributeValue::S(body["eventId"].as_str().unwrap_or_default().to_owned()),
        )
        .send()
        .await;
    match written {
        Ok(_) => Ok(()),
        // Applied before (a redelivery): done.
        Err(err)
            if aws_sdk_dynamodb::error::ProvideErrorMetadata::code(&err)
                == Some("ConditionalCheckFailedException") =>
        {
            Ok(())
        }
        Err(err) => Err(err.to_string()),
    }
}

/// One consumer task (an SQS poller and the projector behind it), until
/// every event is projected by its lane.
async fn consumer(
    mode: Pipeline,
    sqs: aws_sdk_sqs::Client,
    lane: Lane,
    shared: Arc<Shared>,
    total: usize,
) {
    let Lane {
        queue_url,
        runner,
        naive,
        tally,
        ..
    } = lane;
    while tally.projected.load(Ordering::Relaxed) < total {
        let Ok(received) = sqs
            .receive_message()
            .queue_url(&queue_url)
            .max_number_of_messages(10)
            .wait_time_seconds(1)
            .message_system_attribute_names(MessageSystemAttributeName::All)
            .send()
            .await
        else {
            continue;
        };
        let messages = received.messages.unwrap_or_default();
        if messages.is_empty() {
            continue;
        }
        if let Ok(mut received) = tally.received.lock() {
            received.extend(messages.iter().filter_map(|m| m.message_id.clone()));
        }
        let mut done: Vec<&aws_sdk_sqs::types::Message> = Vec::new();
        match mode {
            Pipeline::Ours | Pipeline::Fanout => {
                let mut batch = SqsEvent::default();
                for message in &messages {
                    let mut record = SqsMessage::default();
                    record.message_id.clone_from(&message.message_id);
                    record.body.clone_from(&message.body);
                    for (name, value) in message.attributes.clone().unwrap_or_default() {
                        record.attributes.insert(name.as_str().to_owned(), value);
                    }
                    batch.records.push(record);
                }
                let invocation = Invocation {
                    deadline: None,
                    now: sequence_guard::lambda::epoch_seconds(),
                };
                let Ok(report) = runner.run(&batch, invocation).await else {
                    continue;
                };
                let failed: Vec<String> = report
                    .response()
                    .batch_item_failures
                    .iter()
                    .map(|failure| failure.item_identifier.clone())
                    .collect();
                done.extend(messages.iter().filter(|message| {
                    !failed.contains(message.message_id.as_ref().unwrap_or(&String::new()))
                }));
            }
            Pipeline::Naive => {
                for message in &messages {
                    let body: Value = serde_json::from_str(message.body.as_deref().unwrap_or("{}"))
                        .unwrap_or_default();
                    if naive_write(&naive.0, &naive.1, &body).await.is_ok() {
                        done.push(message);
                    } else {
                        break; // the rest of the group after it, in order
                    }
                }
            }
        }
        let now = Instant::now();
        let entries: Vec<DeleteMessageBatchRequestEntry> = done
            .iter()
            .enumerate()
            .filter_map(|(index, message)| {
                DeleteMessageBatchRequestEntry::builder()
                    .id(index.to_string())
                    .receipt_handle(message.receipt_handle.clone()?)
                    .build()
                    .ok()
            })
            .collect();
        if !entries.is_empty() {
            let _ = sqs
                .delete_message_batch()
                .queue_url(&queue_url)
                .set_entries(Some(entries))
                .send()
                .await;
        }
        let keys: Vec<(String, u64)> = done
            .iter()
            .map(|message| {
                let body: Value = serde_json::from_str(message.body.as_deref().unwrap_or("{}"))
                    .unwrap_or_default();
                (
                    body["aggregateId"].as_str().unwrap_or_default().to_owned(),
                    body["sequence"].as_u64().unwrap_or(0),
                )
            })
            .collect();
        let latencies: Vec<Duration> = match shared.appended.lock() {
            Ok(appended) => keys
                .iter()
                .filter_map(|key| appended.get(key).map(|at| now.duration_since(*at)))
                .collect(),
            Err(_) => Vec::new(),
        };
        if let Ok(mut all) = tally.latencies.lock() {
            all.extend(latencies);
        }
        if !done.is_empty()
            && let Ok(mut last) = tally.last_projected.lock()
        {
            *last = Some(now);
        }
        tally.projected.fetch_add(done.len(), Ordering::Relaxed);
    }
}

/// A consumer on its own table: `<name>-<consumer>`, projected by `domain`.
async fn lane(
    dynamodb: &aws_sdk_dynamodb::Client,
    name: &'static str,
    table: String,
    queue_url: String,
    domain: Domain,
) -> Lane {
    if let Err(err) = create_table(dynamodb, &table).await {
        eprintln!("{table}: {err}");
        std::process::exit(1);
    }
    let runner = Arc::new(Runner::new(
        domain,
        DynamoStore::new(dynamodb.clone(), table.clone()),
        RunnerConfig::default(),
    ));
    Lane {
        name,
        queue_url,
        runner,
        naive: (dynamodb.clone(), table),
        tally: Arc::new(Tally::default()),
    }
}

/// One run: `streams` orders of `per_stream` events each, appended by
/// `producers` producers while the dispatcher and `consumers` tasks per
/// consumer run.
async fn run(
    args: &Args,
    mode: Pipeline,
    name: &str,
    streams: usize,
    per_stream: u64,
    producers: usize,
    consumers: usize,
) -> Figures {
    let dynamodb = connect(Some(&args.endpoint_url)).await;
    let events_table = format!("{name}-events");
    if let Err(err) = ensure_events_table(&dynamodb, &events_table).await {
        eprintln!("{events_table}: {err}");
        std::process::exit(1);
    }
    let sqs = sqs_client(&args.sqs_endpoint);
    let queue_url = fifo_queue(&sqs, name).await;
    let mut lanes = vec![
        lane(
            &dynamodb,
            "shop",
            format!("{name}-projection"),
            queue_url.clone(),
            shop::domain(),
        )
        .await,
    ];
    if mode == Pipeline::Fanout {
        let status_url = fifo_queue(&sqs, &format!("{name}-status")).await;
        lanes.push(
            lane(
                &dynamodb,
                "status",
                format!("{name}-status"),
                status_url,
                shop::status::domain(),
            )
            .await,
        );
    }
    let total = streams * per_stream as usize;
    let shared = Arc::new(Shared {
        appended: Mutex::new(HashMap::new()),
        dispatched: AtomicUsize::new(0),
        requests: AtomicU64::new(0),
    });
    let domain = shop::domain();
    let store = EventStore::new(dynamodb.clone(), events_table.clone(), domain.clone());
    let started = Instant::now();
    let mut tasks = Vec::new();
    for producer in 0..producers {
        let (store, shared) = (store.clone(), shared.clone());
        let mine: Vec<String> = (0..streams)
            .filter(|stream| stream % producers == producer)
            .map(|stream| format!("order-{stream}"))
            .collect();
        tasks.push(tokio::spawn(async move {
            for sequence in 1..=per_stream {
                for stream in &mine {
                    let append = Append {
                        expected: ExpectedSequence::Exact(sequence - 1),
                        ..Append::one(stream.clone(), event(sequence))
                    };
                    if store.append(append).await.is_ok()
                        && let Ok(mut appended) = shared.appended.lock()
                    {
                        appended.insert((stream.clone(), sequence), Instant::now());
                    }
                }
            }
        }));
    }
    let wiring = Wiring {
        endpoint: args.endpoint_url.clone(),
        table: events_table.clone(),
        queue: (),
        sqs: sqs.clone(),
        queue_url: queue_url.clone(),
        domain: domain.clone(),
        shared: shared.clone(),
        total,
    };
    if mode == Pipeline::Fanout {
        let urls: Vec<&str> = lanes.iter().map(|lane| lane.queue_url.as_str()).collect();
        let sns = sns_client(&args.sqs_endpoint);
        let topic_arn = fifo_topic(&sns, &sqs, &format!("{name}-events"), &urls).await;
        let topic = SnsTopic::new(sns, topic_arn, sqs.clone(), queue_url.clone());
        tasks.push(tokio::spawn(dispatcher(mode, wiring.to(topic))));
    } else {
        let queue = SqsQueue::new(sqs.clone(), queue_url.clone(), queue_url.clone());
        tasks.push(tokio::spawn(dispatcher(mode, wiring.to(queue))));
    }
    for lane in &lanes {
        for _ in 0..consumers {
            tasks.push(tokio::spawn(consumer(
                mode,
                sqs.clone(),
                lane.clone(),
                shared.clone(),
                total,
            )));
        }
    }
    for task in tasks {
        let _ = tokio::time::timeout(Duration::from_secs(300), task).await;
    }
    let mut consumed = Vec::new();
    for lane in &lanes {
        let tally = &lane.tally;
        let mut latencies = tally
            .latencies
            .lock()
            .map(|all| all.clone())
            .unwrap_or_default();
        latencies.sort();
        let last = tally.last_projected.lock().ok().and_then(|last| *last);
        let received = tally.received.lock().map(|ids| ids.len()).unwrap_or(0);
        consumed.push(Consumed {
            name: lane.name,
            projected: tally.projected.load(Ordering::Relaxed),
            seconds: last.map_or(f64::NAN, |last| (last - started).as_secs_f64()),
            latencies,
            deliveries: received as u64 + in_queue(&sqs, &lane.queue_url).await,
        });
    }
    Figures {
        appended: shared.appended.lock().map(|all| all.len()).unwrap_or(0),
        requests: shared.requests.load(Ordering::Relaxed),
        consumers: consumed,
    }
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index].as_secs_f64() * 1000.0
}

/// The dispatcher alone on a backlog: 1,000 events on 100 streams appended
/// to `table` first, then sent to `queue` (a queue or the topic) in stream
/// batches of 100 records.
async fn backlog<Q: Queue>(args: &Args, table: &str, queue: Q) -> (usize, u64) {
    let dynamodb = connect(Some(&args.endpoint_url)).await;
    if let Err(err) = ensure_events_table(&dynamodb, table).await {
        eprintln!("{table}: {err}");
        std::process::exit(1);
    }
    let domain = shop::domain();
    let store = EventStore::new(dynamodb, table, domain.clone());
    for sequence in 1..=10 {
        for stream in 0..100 {
            let _ = store
                .append(Append::one(format!("order-{stream}"), event(sequence)))
                .await;
        }
    }
    let sent = AtomicUsize::new(0);
    let requests = AtomicU64::new(0);
    read_stream(
        &args.endpoint_url,
        table,
        100,
        || sent.load(Ordering::Relaxed) >= 1_000,
        |records| {
            let (queue, domain, sent, requests) = (&queue, &domain, &sent, &requests);
            async move {
                let outcome = dispatch(&records, domain, queue, Settings::default(), None).await;
                sent.fetch_add(outcome.dispatched, Ordering::Relaxed);
                requests.fetch_add(outcome.requests, Ordering::Relaxed);
            }
        },
    )
    .await;
    (
        sent.load(Ordering::Relaxed),
        requests.load(Ordering::Relaxed),
    )
}

/// Per event, or nothing when none was appended.
fn per_event(count: u64, events: usize) -> f64 {
    count as f64 / events.max(1) as f64
}

#[tokio::main]
async fn main() {
    let args = <Args as clap::Parser>::parse();
    println!("\n== Pipeline: append -> DynamoDB stream -> dispatcher -> SQS FIFO -> projector");
    println!(
        "   fan-out: dispatcher -> SNS FIFO topic -> two SQS FIFO queues (raw) -> shop, status"
    );
    println!(
        "   (DynamoDB Local and LocalStack on this machine; see the module's note on polling)"
    );
    println!(
        "{:<32} {:>8} {:>7} {:>7} {:>9} {:>8} {:>8} {:>9} {:>9}",
        "workload", "", "", "events", "events/s", "p50 ms", "p99 ms", "req/ev", "deliv/ev"
    );
    let cases: [(&str, usize, u64, usize, usize); 2] = [
        ("one hot aggregate (300 events)", 1, 300, 1, 1),
        ("100 aggregates (5 events each)", 100, 5, 8, 4),
    ];
    for (index, (label, streams, per_stream, producers, consumers)) in cases.into_iter().enumerate()
    {
        for &mode in &args.pipelines {
            let name = format!("pipeline-{index}-{}", mode.tag());
            let figures = run(
                &args, mode, &name, streams, per_stream, producers, consumers,
            )
            .await;
            for consumed in &figures.consumers {
                println!(
                    "{:<32} {:>8} {:>7} {:>7} {:>9.0} {:>8.1} {:>8.1} {:>9.3} {:>9.2}",
                    label,
                    mode.tag(),
                    consumed.name,
                    consumed.projected,
                    consumed.projected as f64 / consumed.seconds,
                    percentile(&consumed.latencies, 0.5),
                    percentile(&consumed.latencies, 0.99),
                    per_event(figures.requests, figures.appended),
                    per_event(consumed.deliveries, figures.appended),
                );
            }
        }
    }
    let sqs = sqs_client(&args.sqs_endpoint);
    if args.pipelines.contains(&Pipeline::Ours) {
        let url = fifo_queue(&sqs, "backlog").await;
        let (sent, requests) = backlog(
            &args,
            "backlog-events",
            SqsQueue::new(sqs.clone(), url.clone(), url),
        )
        .await;
        println!(
            "dispatcher on a backlog (1,000 events on 100 streams, batches of 100 records): \
             {requests} SendMessageBatch for {sent} events = {:.3} requests/event",
            per_event(requests, sent)
        );
    }
    if args.pipelines.contains(&Pipeline::Fanout) {
        let urls = [
            fifo_queue(&sqs, "backlog-fanout-shop").await,
            fifo_queue(&sqs, "backlog-fanout-status").await,
        ];
        let sns = sns_client(&args.sqs_endpoint);
        let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
        let topic_arn = fifo_topic(&sns, &sqs, "backlog-fanout", &urls).await;
        let topic = SnsTopic::new(sns, topic_arn, sqs.clone(), urls[0]);
        let (sent, requests) = backlog(&args, "backlog-fanout-events", topic).await;
        let mut delivered = Vec::new();
        for url in &urls {
            delivered.push(per_event(settled(&sqs, url).await, sent));
        }
        println!(
            "dispatcher on a backlog, to the topic (the same, two queues subscribed): \
             {requests} PublishBatch for {sent} events = {:.3} requests/event; \
             deliveries/event: shop {:.2}, status {:.2}",
            per_event(requests, sent),
            delivered[0],
            delivered[1],
        );
    }
}
