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
//! appended, and the dispatcher's requests per event. Four pipelines: ours
//! (the dispatcher's code sending to one SQS FIFO queue), a naive one (one
//! `SendMessage` per event, one conditional write per message), the usual
//! batch handler with an idempotency utility behind the naive dispatcher
//! (per message: the idempotency record's conditional put, the handler's
//! write, the record's update), and the fan-out (the dispatcher's code
//! publishing to an SNS FIFO topic that feeds two SQS FIFO queues by raw
//! delivery: the shop's consumer and the status consumer,
//! `shop::status::domain()`, each with its own table).
//!
//! The drain workload takes the producers out of the way: an event store
//! filled first (250 orders of 10 events and one hot order of 500, one
//! `append` each), then drained end to end by each pipeline in turn, from
//! the stream's start (`GetRecords`, 100 records a batch, one batch at a
//! time, as the mapping with `ParallelizationFactor` 1 does) through SQS
//! FIFO to ten concurrent consumers (the template's `MaximumConcurrency`;
//! a message group is in one batch at a time, as SQS FIFO gives it): events
//! per second until the last event is projected, side by side, and where
//! the time went (the dispatcher's busy time and `GetRecords`, the
//! consumers' batches, receives and deletes). A third of the workload is
//! drained through each pipeline first and not kept, so that none of them
//! pays for warming DynamoDB Local and LocalStack for the others.
//!
//! Then what a million events cost on AWS for each workload and pipeline
//! (`support/cost.rs`: the prices, their sources and date; which parts are
//! measured and which computed), with each client's DynamoDB units measured
//! by `support/meter.rs`; and the dispatcher alone on a backlog (full
//! batches of 100 stream records), to a queue and to the topic: requests
//! per event.
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

#[path = "support/cost.rs"]
mod cost;
#[path = "support/meter.rs"]
mod meter;

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
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = [Pipeline::Ours, Pipeline::Naive, Pipeline::Idempotency, Pipeline::Fanout])]
    pipelines: Vec<Pipeline>,
    /// The workloads to run (all by default).
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = [Workload::Hot, Workload::Many, Workload::Drain])]
    workloads: Vec<Workload>,
    /// The drain workload: events on each of its many streams.
    #[arg(long, default_value_t = 10)]
    drain_per_stream: u64,
    /// The drain workload: its many streams.
    #[arg(long, default_value_t = 250)]
    drain_streams: usize,
    /// The drain workload: events on its hot stream.
    #[arg(long, default_value_t = 500)]
    drain_hot: u64,
    /// Concurrent consumers (invocations) per queue on the drain workload:
    /// the template's `MaximumConcurrency` default.
    #[arg(long, default_value_t = 10)]
    drain_consumers: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Workload {
    /// One hot aggregate, 300 events, one producer.
    Hot,
    /// 100 aggregates, 5 events each, 8 producers.
    Many,
    /// An event store filled first, then drained end to end.
    Drain,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Pipeline {
    /// The dispatcher's code to one SQS FIFO queue, the runner behind it.
    Ours,
    /// One `SendMessage` per event, one conditional write per message.
    Naive,
    /// The naive dispatcher, and the usual consumer of a batch with an
    /// idempotency utility: per message, the idempotency record's
    /// conditional put, the handler's write, the record's update.
    Idempotency,
    /// The dispatcher's code to an SNS FIFO topic, two queues subscribed.
    Fanout,
}

impl Pipeline {
    fn tag(self) -> &'static str {
        match self {
            Pipeline::Ours => "ours",
            Pipeline::Naive => "naive",
            Pipeline::Idempotency => "idempotency",
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
    /// The producers' DynamoDB requests and units (on the drain workload:
    /// the fill's).
    producer: meter::Usage,
    /// The dispatcher: stream batches sent, busy time sending them,
    /// `GetRecords` calls and their time, when the last event was sent
    /// (seconds from the start).
    batches: u64,
    dispatch_busy: Duration,
    get_records: (u64, Duration),
    all_sent: f64,
}

/// What one consumer of a run measured.
struct Consumed {
    name: &'static str,
    projected: usize,
    seconds: f64,
    latencies: Vec<Duration>,
    /// Messages its queue received: distinct ids handed out, and any left.
    deliveries: u64,
    /// Batches projected (one invocation each), receives that brought
    /// messages, `DeleteMessageBatch` requests.
    invocations: u64,
    receives: u64,
    deletes: u64,
    /// Time projecting (the invocations' busy time), in receives, in
    /// deletes: sums over its concurrent consumers.
    busy: Duration,
    receiving: Duration,
    deleting: Duration,
    /// Its DynamoDB requests and units.
    usage: meter::Usage,
}

/// Everything one run shares between its tasks.
struct Shared {
    appended: Mutex<HashMap<(String, u64), Instant>>,
    dispatched: AtomicUsize,
    requests: AtomicU64,
    /// Stream batches sent, and the time sending them.
    batches: AtomicU64,
    dispatch_busy: Mutex<Duration>,
    get_records: Mutex<(u64, Duration)>,
    /// When every event was sent.
    all_sent: Mutex<Option<Instant>>,
}

impl Shared {
    fn new(appended: HashMap<(String, u64), Instant>) -> Self {
        Shared {
            appended: Mutex::new(appended),
            dispatched: AtomicUsize::new(0),
            requests: AtomicU64::new(0),
            batches: AtomicU64::new(0),
            dispatch_busy: Mutex::new(Duration::ZERO),
            get_records: Mutex::new((0, Duration::ZERO)),
            all_sent: Mutex::new(None),
        }
    }
}

/// Adds `more` to a shared duration.
fn add_time(total: &Mutex<Duration>, more: Duration) {
    if let Ok(mut total) = total.lock() {
        *total += more;
    }
}

fn time_of(total: &Mutex<Duration>) -> Duration {
    total.lock().map(|total| *total).unwrap_or_default()
}

/// What one consumer's tasks share: its counts.
#[derive(Default)]
struct Tally {
    latencies: Mutex<Vec<Duration>>,
    projected: AtomicUsize,
    received: Mutex<HashSet<String>>,
    last_projected: Mutex<Option<Instant>>,
    invocations: AtomicU64,
    receives: AtomicU64,
    deletes: AtomicU64,
    busy: Mutex<Duration>,
    receiving: Mutex<Duration>,
    deleting: Mutex<Duration>,
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
    /// What its DynamoDB client sends and is billed.
    meter: meter::Meter,
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
/// hands each batch to `send` until `done`; answers the `GetRecords` calls
/// made and their time.
async fn read_stream<F, Fut>(
    endpoint: &str,
    table: &str,
    limit: i32,
    done: impl Fn() -> bool,
    mut send: F,
) -> (u64, Duration)
where
    F: FnMut(Vec<Value>) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let mut polled = (0, Duration::ZERO);
    let dynamodb = connect(Some(endpoint)).await;
    let streams = streams_client(endpoint);
    let Ok(described) = dynamodb.describe_table().table_name(table).send().await else {
        return polled;
    };
    let Some(arn) = described.table.and_then(|t| t.latest_stream_arn) else {
        return polled;
    };
    let Ok(stream) = streams.describe_stream().stream_arn(&arn).send().await else {
        return polled;
    };
    let shards = stream
        .stream_description
        .and_then(|d| d.shards)
        .unwrap_or_default();
    let Some(shard) = shards.first().and_then(|s| s.shard_id.clone()) else {
        return polled;
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
            return polled;
        }
        let began = Instant::now();
        let answer = streams
            .get_records()
            .shard_iterator(&current)
            .limit(limit)
            .send()
            .await;
        polled.0 += 1;
        polled.1 += began.elapsed();
        let Ok(answer) = answer else {
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
    polled
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
    let polled = read_stream(endpoint, table, 100, done, |records| {
        let (queue, sqs, queue_url, domain, shared) = (&queue, &sqs, &queue_url, &domain, &shared);
        async move {
            let began = Instant::now();
            match mode {
                Pipeline::Ours | Pipeline::Fanout => {
                    let sent = dispatch(&records, domain, queue, Settings::default(), None).await;
                    shared.requests.fetch_add(sent.requests, Ordering::Relaxed);
                    shared
                        .dispatched
                        .fetch_add(sent.dispatched, Ordering::Relaxed);
                }
                Pipeline::Naive | Pipeline::Idempotency => {
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
            add_time(&shared.dispatch_busy, began.elapsed());
            shared.batches.fetch_add(1, Ordering::Relaxed);
            if shared.dispatched.load(Ordering::Relaxed) >= total
                && let Ok(mut all_sent) = shared.all_sent.lock()
            {
                all_sent.get_or_insert_with(Instant::now);
            }
        }
    })
    .await;
    if let Ok(mut get_records) = shared.get_records.lock() {
        *get_records = polled;
    }
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

/// Whether a DynamoDB call failed on its condition.
fn condition_failed<E: aws_sdk_dynamodb::error::ProvideErrorMetadata>(err: &E) -> bool {
    err.code() == Some("ConditionalCheckFailedException")
}

/// The usual idempotency utility around the naive projector's write, as a
/// batch handler runs it for each message in turn: the idempotency record
/// put if absent (or expired), the handler's write, the record marked
/// completed. A record already there: the message was handled before.
async fn idempotent_write(
    client: &aws_sdk_dynamodb::Client,
    table: &str,
    body: &Value,
) -> Result<(), String> {
    let id = body["eventId"].as_str().unwrap_or_default();
    let key =
        |item: aws_sdk_dynamodb::operation::update_item::builders::UpdateItemFluentBuilder| {
            item.key("pk", AttributeValue::S(format!("IDEMPOTENCY#{id}")))
                .key("sk", AttributeValue::S("IDEMPOTENCY".to_owned()))
        };
    let now = sequence_guard::lambda::epoch_seconds();
    let claimed = client
        .put_item()
        .table_name(table)
        .item("pk", AttributeValue::S(format!("IDEMPOTENCY#{id}")))
        .item("sk", AttributeValue::S("IDEMPOTENCY".to_owned()))
        .item("status", AttributeValue::S("INPROGRESS".to_owned()))
        .item("expiration", AttributeValue::N((now + 3600).to_string()))
        .condition_expression("attribute_not_exists(pk) OR expiration < :now")
        .expression_attribute_values(":now", AttributeValue::N(now.to_string()))
        .send()
        .await;
    match claimed {
        Ok(_) => {}
        Err(err) if condition_failed(&err) => return Ok(()),
        Err(err) => return Err(err.to_string()),
    }
    naive_write(client, table, body).await?;
    key(client.update_item().table_name(table))
        .update_expression("SET #status = :done")
        .expression_attribute_names("#status", "status")
        .expression_attribute_values(":done", AttributeValue::S("COMPLETED".to_owned()))
        .send()
        .await
        .map(|_| ())
        .map_err(|err| err.to_string())
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
        let began = Instant::now();
        let received = sqs
            .receive_message()
            .queue_url(&queue_url)
            .max_number_of_messages(10)
            .wait_time_seconds(1)
            .message_system_attribute_names(MessageSystemAttributeName::All)
            .send()
            .await;
        add_time(&tally.receiving, began.elapsed());
        let Ok(received) = received else {
            continue;
        };
        let messages = received.messages.unwrap_or_default();
        if messages.is_empty() {
            continue;
        }
        tally.receives.fetch_add(1, Ordering::Relaxed);
        tally.invocations.fetch_add(1, Ordering::Relaxed);
        let began = Instant::now();
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
                    add_time(&tally.busy, began.elapsed());
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
            Pipeline::Idempotency => {
                for message in &messages {
                    let body: Value = serde_json::from_str(message.body.as_deref().unwrap_or("{}"))
                        .unwrap_or_default();
                    if idempotent_write(&naive.0, &naive.1, &body).await.is_ok() {
                        done.push(message);
                    } else {
                        break; // the rest of the group after it, in order
                    }
                }
            }
        }
        add_time(&tally.busy, began.elapsed());
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
            let began = Instant::now();
            let _ = sqs
                .delete_message_batch()
                .queue_url(&queue_url)
                .set_entries(Some(entries))
                .send()
                .await;
            add_time(&tally.deleting, began.elapsed());
            tally.deletes.fetch_add(1, Ordering::Relaxed);
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
    let meter = meter::Meter::default();
    let dynamodb = meter.wrap(dynamodb);
    let runner = Arc::new(Runner::new(
        domain,
        DynamoStore::new(dynamodb.clone(), table.clone()),
        RunnerConfig::default(),
    ));
    Lane {
        name,
        queue_url,
        runner,
        naive: (dynamodb, table),
        tally: Arc::new(Tally::default()),
        meter,
    }
}

/// An event store filled before its pipeline starts.
struct Filled {
    table: String,
    /// (stream, sequence) of every event in it.
    keys: Vec<(String, u64)>,
    /// What filling it cost (our `append`, one event each).
    usage: meter::Usage,
}

/// Fills `table`: `streams` orders of `per_stream` events each (seven
/// writers), and one hot order of `hot` events (one writer, in order), each
/// event one `append` at its expected sequence.
async fn fill(args: &Args, table: &str, streams: usize, per_stream: u64, hot: u64) -> Filled {
    let meter = meter::Meter::default();
    let dynamodb = meter.wrap(&connect(Some(&args.endpoint_url)).await);
    if let Err(err) = ensure_events_table(&dynamodb, table).await {
        eprintln!("{table}: {err}");
        std::process::exit(1);
    }
    let store = EventStore::new(dynamodb, table, shop::domain());
    let keys = Arc::new(Mutex::new(Vec::new()));
    let writers = 7;
    let mut tasks = Vec::new();
    for writer in 0..=writers {
        let (store, keys) = (store.clone(), keys.clone());
        let mine: Vec<(String, u64)> = if writer == 0 {
            vec![("order-hot".to_owned(), hot)]
        } else {
            (0..streams)
                .filter(|stream| stream % writers == writer - 1)
                .map(|stream| (format!("order-{stream}"), per_stream))
                .collect()
        };
        tasks.push(tokio::spawn(async move {
            let most = mine.iter().map(|(_, events)| *events).max().unwrap_or(0);
            for sequence in 1..=most {
                for (stream, events) in &mine {
                    if sequence > *events {
                        continue;
                    }
                    let append = Append {
                        expected: ExpectedSequence::Exact(sequence - 1),
                        ..Append::one(stream.clone(), event(sequence))
                    };
                    if store.append(append).await.is_ok()
                        && let Ok(mut keys) = keys.lock()
                    {
                        keys.push((stream.clone(), sequence));
                    }
                }
            }
        }));
    }
    for task in tasks {
        let _ = task.await;
    }
    let keys = keys.lock().map(|keys| keys.clone()).unwrap_or_default();
    Filled {
        table: table.to_owned(),
        keys,
        usage: meter.usage(),
    }
}

/// Drains a third of the drain workload (a store of its own) through each
/// pipeline in turn, kept nowhere, so that every measured drain finds
/// DynamoDB Local and LocalStack warm. Without it the first pipeline paid
/// for DynamoDB Local compiling its own code (a JVM starts interpreted) and
/// the ones after it did not: the same build read 4.3 to 4.9 times the
/// naive pipeline when ours ran first and 6.1 when it ran second.
async fn warm_up(args: &Args) {
    let began = Instant::now();
    let filled = fill(
        args,
        "drain-warm-events",
        args.drain_streams / 3,
        args.drain_per_stream,
        args.drain_hot / 3,
    )
    .await;
    let case = Case::drain(args, &filled);
    for &mode in &args.pipelines {
        run(args, mode, &format!("pipeline-warm-{}", mode.tag()), &case).await;
    }
    println!(
        "drain: warmed DynamoDB Local and LocalStack first: each pipeline drained {} events of a store of its own, not kept ({:.1} s)",
        filled.keys.len(),
        began.elapsed().as_secs_f64()
    );
}

/// One workload: `streams` orders of `per_stream` events each, appended by
/// `producers` producers while the dispatcher and `consumers` tasks per
/// consumer run; or, with `filled`, that event store drained.
struct Case<'a> {
    streams: usize,
    per_stream: u64,
    producers: usize,
    consumers: usize,
    filled: Option<&'a Filled>,
}

impl<'a> Case<'a> {
    /// `filled` drained by the drain workload's consumers, no producer.
    fn drain(args: &Args, filled: &'a Filled) -> Self {
        Case {
            streams: 0,
            per_stream: 0,
            producers: 0,
            consumers: args.drain_consumers,
            filled: Some(filled),
        }
    }
}

/// One run of `case` through the pipeline `mode`.
async fn run(args: &Args, mode: Pipeline, name: &str, case: &Case<'_>) -> Figures {
    let dynamodb = connect(Some(&args.endpoint_url)).await;
    let producer_meter = meter::Meter::default();
    let events_table = match case.filled {
        Some(filled) => filled.table.clone(),
        None => format!("{name}-events"),
    };
    if case.filled.is_none()
        && let Err(err) = ensure_events_table(&dynamodb, &events_table).await
    {
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
    let started = Instant::now();
    let (total, appended) = match case.filled {
        Some(filled) => (
            filled.keys.len(),
            filled
                .keys
                .iter()
                .map(|key| (key.clone(), started))
                .collect(),
        ),
        None => (case.streams * case.per_stream as usize, HashMap::new()),
    };
    let shared = Arc::new(Shared::new(appended));
    let domain = shop::domain();
    let store = EventStore::new(
        producer_meter.wrap(&dynamodb),
        events_table.clone(),
        domain.clone(),
    );
    let mut tasks = Vec::new();
    let producers = if case.filled.is_some() {
        0
    } else {
        case.producers
    };
    for producer in 0..producers {
        let (store, shared) = (store.clone(), shared.clone());
        let mine: Vec<String> = (0..case.streams)
            .filter(|stream| stream % producers == producer)
            .map(|stream| format!("order-{stream}"))
            .collect();
        let per_stream = case.per_stream;
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
        for _ in 0..case.consumers {
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
            invocations: tally.invocations.load(Ordering::Relaxed),
            receives: tally.receives.load(Ordering::Relaxed),
            deletes: tally.deletes.load(Ordering::Relaxed),
            busy: time_of(&tally.busy),
            receiving: time_of(&tally.receiving),
            deleting: time_of(&tally.deleting),
            usage: lane.meter.usage(),
        });
    }
    let all_sent = shared
        .all_sent
        .lock()
        .ok()
        .and_then(|at| *at)
        .map_or(f64::NAN, |at| (at - started).as_secs_f64());
    Figures {
        appended: shared.appended.lock().map(|all| all.len()).unwrap_or(0),
        requests: shared.requests.load(Ordering::Relaxed),
        consumers: consumed,
        producer: match case.filled {
            Some(filled) => filled.usage,
            None => producer_meter.usage(),
        },
        batches: shared.batches.load(Ordering::Relaxed),
        dispatch_busy: time_of(&shared.dispatch_busy),
        get_records: shared
            .get_records
            .lock()
            .map(|polled| *polled)
            .unwrap_or_default(),
        all_sent,
    }
}

/// What one run costs per event (see `support/cost.rs`: which parts are
/// measured, which computed).
fn cost_of(mode: Pipeline, figures: &Figures, events: usize) -> cost::PerEvent {
    let events = events.max(1) as f64;
    // A failed request (a condition not met) answers no capacity; DynamoDB
    // bills it a write unit (items under 1 KB).
    let units = |usage: &meter::Usage| {
        (
            usage.read_units / events,
            (usage.write_units + usage.failed as f64) / events,
        )
    };
    let producer_units = match mode {
        Pipeline::Ours | Pipeline::Fanout => units(&figures.producer),
        // The naive producer: an `ADD` on the head, a `PutItem` of the event.
        Pipeline::Naive | Pipeline::Idempotency => (0.0, 2.0),
    };
    let mut consumer_units = (0.0, 0.0);
    let (mut sqs, mut invocations, mut busy) = (0.0, figures.batches as f64, figures.dispatch_busy);
    for consumed in &figures.consumers {
        let (read, write) = units(&consumed.usage);
        consumer_units.0 += read;
        consumer_units.1 += write;
        sqs += (consumed.receives + consumed.deletes) as f64;
        invocations += consumed.invocations as f64;
        busy += consumed.busy;
    }
    cost::PerEvent {
        producer_units,
        dispatcher_requests: figures.requests as f64 / events,
        publishes: mode == Pipeline::Fanout,
        consumer_sqs_requests: sqs / events,
        consumer_units,
        invocations: invocations / events,
        seconds: busy.as_secs_f64() / events,
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

/// The drain workload: events per second of each pipeline beside ours, and
/// where its time went.
fn print_drain(drained: &[(Pipeline, Figures)]) {
    let rate = |figures: &Figures| {
        figures
            .consumers
            .iter()
            .map(|consumed| consumed.projected as f64 / consumed.seconds)
            .fold(f64::INFINITY, f64::min)
    };
    let ours = drained
        .iter()
        .find(|(mode, _)| *mode == Pipeline::Ours)
        .map(|(_, figures)| rate(figures));
    println!(
        "\n== Drain: a filled event store, end to end (stream -> dispatcher -> SQS FIFO -> consumers)"
    );
    for (mode, figures) in drained {
        let events = rate(figures);
        let beside = match ours {
            Some(ours) if *mode != Pipeline::Ours => format!(" (ours: {:.1} x)", ours / events),
            _ => String::new(),
        };
        println!(
            "{:>11}: {:>6.0} events/s{beside}; all sent at {:.2} s, dispatcher busy {:.2} s in {} \
             batches, {} GetRecords ({:.2} s)",
            mode.tag(),
            events,
            figures.all_sent,
            figures.dispatch_busy.as_secs_f64(),
            figures.batches,
            figures.get_records.0,
            figures.get_records.1.as_secs_f64(),
        );
        for consumed in &figures.consumers {
            println!(
                "{:>11}  {}: last projected at {:.2} s; {} batches, busy {:.2} s ({:.1} ms a batch), \
                 receiving {:.2} s, deleting {:.2} s (sums over its consumers); DynamoDB {:.2} \
                 requests/event",
                "",
                consumed.name,
                consumed.seconds,
                consumed.invocations,
                consumed.busy.as_secs_f64(),
                consumed.busy.as_secs_f64() * 1000.0 / consumed.invocations.max(1) as f64,
                consumed.receiving.as_secs_f64(),
                consumed.deleting.as_secs_f64(),
                per_event(consumed.usage.requests, consumed.projected),
            );
        }
    }
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
        "{:<34} {:>11} {:>7} {:>7} {:>9} {:>8} {:>8} {:>9} {:>9}",
        "workload", "", "", "events", "events/s", "p50 ms", "p99 ms", "req/ev", "deliv/ev"
    );
    let mut costs: Vec<(String, Pipeline, cost::PerEvent)> = Vec::new();
    let mut drained: Vec<(Pipeline, Figures)> = Vec::new();
    for &workload in &args.workloads {
        let filled;
        let (label, case) = match workload {
            Workload::Hot => (
                "one hot aggregate (300 events)".to_owned(),
                Case {
                    streams: 1,
                    per_stream: 300,
                    producers: 1,
                    consumers: 1,
                    filled: None,
                },
            ),
            Workload::Many => (
                "100 aggregates (5 events each)".to_owned(),
                Case {
                    streams: 100,
                    per_stream: 5,
                    producers: 8,
                    consumers: 4,
                    filled: None,
                },
            ),
            Workload::Drain => {
                warm_up(&args).await;
                let began = Instant::now();
                filled = fill(
                    &args,
                    "drain-events",
                    args.drain_streams,
                    args.drain_per_stream,
                    args.drain_hot,
                )
                .await;
                println!(
                    "drain: filled the event store with {} events ({} streams of {} and one of                      {}) in {:.1} s, then each pipeline drains it from the stream's start",
                    filled.keys.len(),
                    args.drain_streams,
                    args.drain_per_stream,
                    args.drain_hot,
                    began.elapsed().as_secs_f64()
                );
                (
                    format!("drain ({} events, filled first)", filled.keys.len()),
                    Case::drain(&args, &filled),
                )
            }
        };
        for &mode in &args.pipelines {
            let name = format!("pipeline-{workload:?}-{}", mode.tag()).to_lowercase();
            let figures = run(&args, mode, &name, &case).await;
            for consumed in &figures.consumers {
                println!(
                    "{:<34} {:>11} {:>7} {:>7} {:>9.0} {:>8.1} {:>8.1} {:>9.3} {:>9.2}",
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
            costs.push((
                label.clone(),
                mode,
                cost_of(mode, &figures, figures.appended),
            ));
            if workload == Workload::Drain {
                drained.push((mode, figures));
            }
        }
    }
    if !drained.is_empty() {
        print_drain(&drained);
    }
    if !costs.is_empty() {
        println!("\n== What a million events cost (AWS on-demand prices, us-east-1)");
        cost::print_prices();
        cost::print_header();
        for (label, mode, per_event) in &costs {
            cost::print_row(label, mode.tag(), per_event);
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
