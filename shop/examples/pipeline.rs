//! The pipeline benchmark: from append to projected state, on DynamoDB Local
//! (the event store, its stream, the projection) and LocalStack's SQS FIFO.
//!
//! ```text
//! scripts/bench        # starts DynamoDB Local and LocalStack, runs this after bench.rs
//! ```
//!
//! Prints, never asserts, for one hot aggregate and for 100 aggregates:
//! events per second from the first append to the last event projected, the
//! latency of each event from its append to its projection (median, 99th
//! percentile), and the dispatcher's SQS requests per event; side by side
//! with a naive pipeline (one `SendMessage` per event, one conditional write
//! per message). Then the dispatcher alone on a backlog (full batches of 100
//! stream records): SQS requests per event.
//!
//! The stream is read as tightly as DynamoDB Local answers; on AWS, Lambda
//! polls a shard about four times a second, which adds up to 250 ms to each
//! event's latency, the same for both pipelines.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use aws_lambda_events::event::sqs::{SqsEvent, SqsMessage};
use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_dynamodbstreams::types::ShardIteratorType;
use aws_sdk_sqs::types::{DeleteMessageBatchRequestEntry, MessageSystemAttributeName};
use sequence_guard::Domain;
use sequence_guard::dispatcher::{Read, Settings, SqsQueue, dispatch, read};
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
    /// LocalStack's endpoint (SQS).
    #[arg(long, value_name = "URL")]
    sqs_endpoint: String,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Pipeline {
    Ours,
    Naive,
}

/// What one run measured.
struct Figures {
    events: usize,
    seconds: f64,
    latencies: Vec<Duration>,
    sqs_requests: u64,
}

/// Everything one run shares between its tasks.
struct Shared {
    appended: Mutex<HashMap<(String, u64), Instant>>,
    latencies: Mutex<Vec<Duration>>,
    projected: AtomicUsize,
    dispatched: AtomicUsize,
    sqs_requests: AtomicU64,
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

/// What the dispatcher of a run works with.
struct Wiring {
    endpoint: String,
    table: String,
    queue: SqsQueue,
    sqs: aws_sdk_sqs::Client,
    queue_url: String,
    domain: Domain,
    shared: Arc<Shared>,
    total: usize,
}

/// The dispatcher of a pipeline, until every event is sent.
async fn dispatcher(mode: Pipeline, wiring: Wiring) {
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
                Pipeline::Ours => {
                    let sent = dispatch(&records, domain, queue, Settings::default(), None).await;
                    shared
                        .sqs_requests
                        .fetch_add(sent.requests, Ordering::Relaxed);
                    shared
                        .dispatched
                        .fetch_add(sent.dispatched, Ordering::Relaxed);
                }
                Pipeline::Naive => {
                    for record in &records {
                        let Read::Send(message) = read(record, domain) else {
                            continue;
                        };
                        shared.sqs_requests.fetch_add(1, Ordering::Relaxed);
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

/// One consumer (an SQS poller and the projector behind it), until every
/// event is projected.
async fn consumer(
    mode: Pipeline,
    sqs: aws_sdk_sqs::Client,
    queue_url: String,
    runner: Arc<Runner<DynamoStore>>,
    naive: (aws_sdk_dynamodb::Client, String),
    shared: Arc<Shared>,
    total: usize,
) {
    while shared.projected.load(Ordering::Relaxed) < total {
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
        let mut done: Vec<&aws_sdk_sqs::types::Message> = Vec::new();
        match mode {
            Pipeline::Ours => {
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
        if let Ok(mut all) = shared.latencies.lock() {
            all.extend(latencies);
        }
        shared.projected.fetch_add(done.len(), Ordering::Relaxed);
    }
}

/// One run: `streams` orders of `per_stream` events each, appended by
/// `producers` producers while the dispatcher and `consumers` consumers run.
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
    let table = format!("{name}-projection");
    if let Err(err) = ensure_events_table(&dynamodb, &events_table).await {
        eprintln!("{events_table}: {err}");
        std::process::exit(1);
    }
    if let Err(err) = create_table(&dynamodb, &table).await {
        eprintln!("{table}: {err}");
        std::process::exit(1);
    }
    let sqs = sqs_client(&args.sqs_endpoint);
    let Ok(created) = sqs
        .create_queue()
        .queue_name(format!("{name}.fifo"))
        .attributes(aws_sdk_sqs::types::QueueAttributeName::FifoQueue, "true")
        .attributes(
            aws_sdk_sqs::types::QueueAttributeName::VisibilityTimeout,
            "5",
        )
        .send()
        .await
    else {
        eprintln!("cannot create the queue {name}.fifo");
        std::process::exit(1);
    };
    let queue_url = created.queue_url.unwrap_or_default();
    let total = streams * per_stream as usize;
    let shared = Arc::new(Shared {
        appended: Mutex::new(HashMap::new()),
        latencies: Mutex::new(Vec::new()),
        projected: AtomicUsize::new(0),
        dispatched: AtomicUsize::new(0),
        sqs_requests: AtomicU64::new(0),
    });
    let domain = shop::domain();
    let store = EventStore::new(dynamodb.clone(), events_table.clone(), domain.clone());
    let runner = Arc::new(Runner::new(
        domain.clone(),
        DynamoStore::new(dynamodb.clone(), table.clone()),
        RunnerConfig::default(),
    ));
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
        queue: SqsQueue::new(sqs.clone(), queue_url.clone(), queue_url.clone()),
        sqs: sqs.clone(),
        queue_url: queue_url.clone(),
        domain: domain.clone(),
        shared: shared.clone(),
        total,
    };
    tasks.push(tokio::spawn(dispatcher(mode, wiring)));
    for _ in 0..consumers {
        tasks.push(tokio::spawn(consumer(
            mode,
            sqs.clone(),
            queue_url.clone(),
            runner.clone(),
            (dynamodb.clone(), table.clone()),
            shared.clone(),
            total,
        )));
    }
    for task in tasks {
        let _ = tokio::time::timeout(Duration::from_secs(300), task).await;
    }
    let seconds = started.elapsed().as_secs_f64();
    let mut latencies = shared
        .latencies
        .lock()
        .map(|all| all.clone())
        .unwrap_or_default();
    latencies.sort();
    Figures {
        events: shared.projected.load(Ordering::Relaxed),
        seconds,
        latencies,
        sqs_requests: shared.sqs_requests.load(Ordering::Relaxed),
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
/// first, then sent in stream batches of 100 records.
async fn backlog(args: &Args) -> (usize, u64) {
    let dynamodb = connect(Some(&args.endpoint_url)).await;
    let table = "backlog-events";
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
    let sqs = sqs_client(&args.sqs_endpoint);
    let queue_url = sqs
        .create_queue()
        .queue_name("backlog.fifo")
        .attributes(aws_sdk_sqs::types::QueueAttributeName::FifoQueue, "true")
        .send()
        .await
        .ok()
        .and_then(|created| created.queue_url)
        .unwrap_or_default();
    let queue = SqsQueue::new(sqs, queue_url.clone(), queue_url);
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

#[tokio::main]
async fn main() {
    let args = <Args as clap::Parser>::parse();
    println!("\n== Pipeline: append -> DynamoDB stream -> dispatcher -> SQS FIFO -> projector");
    println!(
        "   (DynamoDB Local and LocalStack on this machine; see the module's note on polling)"
    );
    println!(
        "{:<34} {:>6} {:>7} {:>9} {:>8} {:>8} {:>12}",
        "workload", "", "events", "events/s", "p50 ms", "p99 ms", "SQS req/ev"
    );
    let cases: [(&str, usize, u64, usize, usize); 2] = [
        ("one hot aggregate (300 events)", 1, 300, 1, 1),
        ("100 aggregates (5 events each)", 100, 5, 8, 4),
    ];
    for (index, (label, streams, per_stream, producers, consumers)) in cases.into_iter().enumerate()
    {
        for (mode, tag) in [(Pipeline::Ours, "ours"), (Pipeline::Naive, "naive")] {
            let name = format!("pipeline-{index}-{tag}");
            let figures = run(
                &args, mode, &name, streams, per_stream, producers, consumers,
            )
            .await;
            println!(
                "{:<34} {:>6} {:>7} {:>9.0} {:>8.1} {:>8.1} {:>12.3}",
                label,
                tag,
                figures.events,
                figures.events as f64 / figures.seconds,
                percentile(&figures.latencies, 0.5),
                percentile(&figures.latencies, 0.99),
                figures.sqs_requests as f64 / figures.events.max(1) as f64,
            );
        }
    }
    let (sent, requests) = backlog(&args).await;
    println!(
        "dispatcher on a backlog (1,000 events on 100 streams, batches of 100 records): \
         {requests} SendMessageBatch for {sent} events = {:.3} requests/event",
        requests as f64 / sent.max(1) as f64
    );
}
