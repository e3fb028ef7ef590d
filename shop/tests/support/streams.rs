//! DynamoDB Streams on DynamoDB Local, and an event source mapping written
//! for the tests that reads a table's stream and invokes the function as
//! Lambda's does for a DynamoDB stream with `ReportBatchItemFailures`,
//! `BisectBatchOnFunctionError`, `MaximumRetryAttempts` and an on-failure
//! SQS destination.
//!
//! What it follows of Lambda's documented behaviour:
//! - each shard is read in order from `TRIM_HORIZON`, one batch of at most
//!   `batch_size` records in flight per shard; a child shard is read only
//!   once its parent is read and completed;
//! - a response without failures completes the batch; one that lists
//!   sequence numbers completes the records before the lowest listed and
//!   retries the rest of the batch (one retry); an empty, null or unknown
//!   `itemIdentifier` fails the whole batch, retried as it was (one retry);
//! - a function error (error, timeout, crash) with `bisect_on_error` splits
//!   the batch in two, first half first, and splitting does not use up a
//!   retry ("Splitting a batch doesn't count towards the retry quota"); a
//!   batch of one, or any batch without bisecting, is retried whole (one
//!   retry);
//! - a batch that failed once more after `max_retry_attempts` retries is
//!   discarded: a record of it goes to the on-failure queue, if any, and the
//!   shard goes on after it.
//!
//! Records read but not yet completed stay buffered here, so that a retry
//! sends the very records sent before, as Lambda does.
#![allow(dead_code)] // each test binary uses part of this

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use aws_sdk_dynamodbstreams::Client;
use aws_sdk_dynamodbstreams::primitives::{DateTime, DateTimeFormat};
use aws_sdk_dynamodbstreams::types::{AttributeValue, Record, ShardIteratorType};
use serde_json::{Value, json};

use super::dynamodb_local;
use super::runtime_api::{Answer, RuntimeApi};

/// The function's ARN as the on-failure records name it.
const FUNCTION_ARN: &str = "arn:aws:lambda:us-east-1:123456789012:function:sequence-guard";
/// GetRecords returns at most this many records a call.
const GET_RECORDS_LIMIT: usize = 1000;

/// A DynamoDB Streams client for the shared DynamoDB Local, with local
/// credentials in us-east-1.
pub async fn streams_client() -> Client {
    let config = aws_sdk_dynamodbstreams::config::Builder::new()
        .behavior_version(aws_sdk_dynamodbstreams::config::BehaviorVersion::latest())
        .endpoint_url(&dynamodb_local().endpoint)
        .region(aws_sdk_dynamodbstreams::config::Region::new("us-east-1"))
        .credentials_provider(aws_sdk_dynamodbstreams::config::Credentials::new(
            "local", "local", None, None, "local",
        ))
        .build();
    Client::from_conf(config)
}

/// The ARN of `table`'s stream on the shared DynamoDB Local (its
/// `LatestStreamArn`); the table must have a stream, as
/// `ensure_events_table` gives it.
pub async fn stream_arn(table: &str) -> String {
    let client = sequence_guard::store::dynamodb::connect(Some(&dynamodb_local().endpoint)).await;
    client
        .describe_table()
        .table_name(table)
        .send()
        .await
        .expect("DescribeTable")
        .table
        .and_then(|table| table.latest_stream_arn)
        .unwrap_or_else(|| panic!("{table} has no stream"))
}

/// An attribute map as DynamoDB JSON (`{"pk": {"S": "..."}}`).
fn dynamodb_json(map: &HashMap<String, AttributeValue>) -> Value {
    serde_json::to_value(serde_dynamo::Item::from(map.clone())).expect("DynamoDB JSON")
}

/// A stream record as Lambda delivers it to a function.
pub fn lambda_record(record: &Record, stream_arn: &str) -> Value {
    let change = record
        .dynamodb
        .as_ref()
        .expect("a stream record has its change");
    let mut dynamodb = json!({
        "ApproximateCreationDateTime": change.approximate_creation_date_time.map(|at| at.secs()),
        "Keys": change.keys.as_ref().map(dynamodb_json).unwrap_or_else(|| json!({})),
        "SequenceNumber": change.sequence_number,
        "SizeBytes": change.size_bytes,
        "StreamViewType": change.stream_view_type.as_ref().map(|view| view.as_str()),
    });
    if let Some(image) = &change.new_image {
        dynamodb["NewImage"] = dynamodb_json(image);
    }
    if let Some(image) = &change.old_image {
        dynamodb["OldImage"] = dynamodb_json(image);
    }
    let mut lambda = json!({
        "eventID": record.event_id,
        "eventName": record.event_name.as_ref().map(|name| name.as_str()),
        "eventVersion": "1.1",
        "eventSource": "aws:dynamodb",
        "awsRegion": "us-east-1",
        "dynamodb": dynamodb,
        "eventSourceARN": stream_arn,
    });
    if let Some(identity) = &record.user_identity {
        lambda["userIdentity"] = json!({
            "type": identity.r#type,
            "principalId": identity.principal_id,
        });
    }
    lambda
}

/// A record's sequence number.
fn sequence(record: &Record) -> String {
    record
        .dynamodb
        .as_ref()
        .and_then(|change| change.sequence_number.clone())
        .expect("a stream record has a sequence number")
}

/// What one poll did: the batch sent, the answer, and what followed.
#[derive(Debug, Clone)]
pub struct StreamPoll {
    pub shard_id: String,
    /// The sequence numbers sent, in order.
    pub sent: Vec<String>,
    pub answer: Answer,
    /// The `itemIdentifier`s the response listed (`None` for an empty or
    /// null one), in its order.
    pub failures: Vec<Option<String>>,
    /// Whether these records (all or some) had been sent before.
    pub retry: bool,
    /// The retries this batch had used up when sent.
    pub retries: u32,
    /// The sequence numbers completed (checkpointed) by this answer.
    pub completed: Vec<String>,
    /// The function failed and the batch was split in two, each half to be
    /// sent next, first half first.
    pub bisected: bool,
    /// The batch (from the lowest failure on, or whole) is to be sent again.
    pub retried: bool,
    /// The sequence numbers given up after their last retry.
    pub discarded: Vec<String>,
    /// The on-failure record sent for them, if a destination is set.
    pub on_failure: Option<Value>,
}

/// A batch to send: the first `len` records of its shard's buffer.
#[derive(Debug, Clone)]
struct Batch {
    len: usize,
    retries: u32,
    invokes: u32,
    sent_before: bool,
}

struct Shard {
    id: String,
    parent: Option<String>,
    iterator: Option<String>,
    opened: bool,
    /// The shard is closed and every record of it was read.
    ended: bool,
    /// The last sequence number read, to open the shard again after it.
    last_read: Option<String>,
    /// Read and not yet completed, in order; `plan` covers its front.
    buffer: VecDeque<Record>,
    /// The batches to send next, over the front of `buffer`, in order.
    plan: VecDeque<Batch>,
}

impl Shard {
    fn done(&self) -> bool {
        self.ended && self.buffer.is_empty() && self.plan.is_empty()
    }

    fn planned(&self) -> usize {
        self.plan.iter().map(|batch| batch.len).sum()
    }
}

/// How the function answered a batch.
enum Verdict {
    Complete,
    /// Completed before this index of the batch; retry from it.
    FailedFrom(usize),
    /// The response named no usable record: the whole batch failed.
    Invalid,
    /// The invocation failed (error, timeout, crash).
    FunctionError,
}

/// An event source mapping as Lambda runs it for a DynamoDB stream.
pub struct StreamSource {
    /// The function invoked.
    pub api: RuntimeApi,
    pub stream_arn: String,
    /// At most this many records a batch (Lambda's default: 100).
    pub batch_size: usize,
    /// Retries before a batch is discarded (default here: 3).
    pub max_retry_attempts: u32,
    /// Split a batch in two on a function error (default here: true).
    pub bisect_on_error: bool,
    /// The on-failure destination: a standard SQS queue's client and URL.
    pub on_failure: Option<(aws_sdk_sqs::Client, String)>,
    client: Client,
    shards: Vec<Shard>,
}

impl StreamSource {
    /// A mapping of the stream `stream_arn` to the function behind `api`,
    /// from the start of the stream, with the defaults above.
    pub async fn new(api: RuntimeApi, stream_arn: &str) -> StreamSource {
        StreamSource {
            api,
            stream_arn: stream_arn.to_owned(),
            batch_size: 100,
            max_retry_attempts: 3,
            bisect_on_error: true,
            on_failure: None,
            client: streams_client().await,
            shards: Vec::new(),
        }
    }

    /// A mapping of `table`'s stream, as [`StreamSource::new`].
    pub async fn for_table(api: RuntimeApi, table: &str) -> StreamSource {
        StreamSource::new(api, &stream_arn(table).await).await
    }

    /// Invokes the function behind `api` with these Lambda records, as
    /// `{"Records": [...]}`.
    pub async fn invoke(api: &RuntimeApi, records: &[Value]) -> Answer {
        api.invoke(&json!({ "Records": records }).to_string()).await
    }

    /// Records read from the stream and not yet completed.
    pub fn pending(&self) -> usize {
        self.shards.iter().map(|shard| shard.buffer.len()).sum()
    }

    /// One invocation's worth of work on the first shard that has some: the
    /// pending retry, else up to `batch_size` new records; `None` when no
    /// shard had anything to send.
    pub async fn poll(&mut self) -> Option<StreamPoll> {
        self.discover().await;
        for index in 0..self.shards.len() {
            if !self.readable(index) {
                continue;
            }
            if self.shards[index].plan.is_empty() {
                let missing = self
                    .batch_size
                    .saturating_sub(self.shards[index].buffer.len());
                if missing > 0 {
                    self.read_shard(index, missing).await;
                }
                let shard = &mut self.shards[index];
                if shard.buffer.is_empty() {
                    continue;
                }
                let len = self.batch_size.min(shard.buffer.len());
                shard.plan.push_back(Batch {
                    len,
                    retries: 0,
                    invokes: 0,
                    sent_before: false,
                });
            }
            return Some(self.deliver(index).await);
        }
        None
    }

    /// Polls until two polls in a row found nothing to send (nothing new,
    /// nothing pending), or `limit` passes. Returns every poll.
    pub async fn drain(&mut self, limit: Duration) -> Vec<StreamPoll> {
        let started = Instant::now();
        let mut polls = Vec::new();
        let mut idle = 0;
        while started.elapsed() < limit {
            match self.poll().await {
                Some(poll) => {
                    idle = 0;
                    polls.push(poll);
                }
                None => {
                    idle += 1;
                    if idle >= 2 {
                        break;
                    }
                    // Lambda polls a shard four times a second.
                    tokio::time::sleep(Duration::from_millis(250)).await;
                }
            }
        }
        polls
    }

    /// Up to `max` new records as Lambda records, taken from the stream
    /// without invoking: for a test that delivers batches itself. They are
    /// consumed: neither `poll` nor `read` returns them again. Records of a
    /// pending retry are not among them.
    pub async fn read(&mut self, max: usize) -> Vec<Value> {
        self.discover().await;
        let mut records = Vec::new();
        for index in 0..self.shards.len() {
            if records.len() >= max {
                break;
            }
            if !self.readable(index) {
                continue;
            }
            let wanted = max - records.len();
            let planned = self.shards[index].planned();
            let unplanned = self.shards[index].buffer.len() - planned;
            if unplanned < wanted {
                self.read_shard(index, wanted - unplanned).await;
            }
            let shard = &mut self.shards[index];
            let end = shard.buffer.len().min(planned + wanted);
            records.extend(
                shard
                    .buffer
                    .drain(planned..end)
                    .map(|record| lambda_record(&record, &self.stream_arn)),
            );
        }
        records
    }

    /// Whether a shard may be read: its parent, if known, is done.
    fn readable(&self, index: usize) -> bool {
        let shard = &self.shards[index];
        if shard.done() {
            return false;
        }
        match &shard.parent {
            None => true,
            Some(parent) => self
                .shards
                .iter()
                .find(|other| &other.id == parent)
                .is_none_or(Shard::done),
        }
    }

    /// Learns the stream's shards (DescribeStream, every page).
    async fn discover(&mut self) {
        let known: HashSet<String> = self.shards.iter().map(|shard| shard.id.clone()).collect();
        let mut start: Option<String> = None;
        loop {
            let described = self
                .client
                .describe_stream()
                .stream_arn(&self.stream_arn)
                .set_exclusive_start_shard_id(start.clone())
                .send()
                .await
                .expect("DescribeStream")
                .stream_description
                .expect("a stream description");
            for shard in described.shards.unwrap_or_default() {
                let Some(id) = shard.shard_id else { continue };
                if known.contains(&id) {
                    continue;
                }
                self.shards.push(Shard {
                    id,
                    parent: shard.parent_shard_id,
                    iterator: None,
                    opened: false,
                    ended: false,
                    last_read: None,
                    buffer: VecDeque::new(),
                    plan: VecDeque::new(),
                });
            }
            start = described.last_evaluated_shard_id;
            if start.is_none() {
                return;
            }
        }
    }

    /// Reads up to `max` more records of a shard into its buffer (one
    /// GetRecords, after a GetShardIterator the first time).
    async fn read_shard(&mut self, index: usize, max: usize) {
        let shard = &mut self.shards[index];
        if shard.ended {
            return;
        }
        if !shard.opened {
            shard.iterator = Some(
                open(
                    &self.client,
                    &self.stream_arn,
                    &shard.id,
                    shard.last_read.as_deref(),
                )
                .await,
            );
            shard.opened = true;
        }
        let Some(iterator) = shard.iterator.clone() else {
            shard.ended = true;
            return;
        };
        let result = self
            .client
            .get_records()
            .shard_iterator(iterator)
            .limit(max.min(GET_RECORDS_LIMIT) as i32)
            .send()
            .await;
        let output = match result {
            Ok(output) => output,
            Err(err)
                if err
                    .as_service_error()
                    .is_some_and(|err| err.is_expired_iterator_exception()) =>
            {
                // An iterator lives 15 minutes: open the shard again after
                // the last record read, and read on the next poll.
                shard.opened = false;
                return;
            }
            Err(err) => panic!("GetRecords on {}: {err:?}", shard.id),
        };
        let records = output.records.unwrap_or_default();
        if let Some(last) = records.last() {
            shard.last_read = Some(sequence(last));
        }
        shard.buffer.extend(records);
        shard.iterator = output.next_shard_iterator;
        if shard.iterator.is_none() {
            shard.ended = true;
        }
    }

    /// Sends the first planned batch of a shard and applies the answer.
    async fn deliver(&mut self, index: usize) -> StreamPoll {
        let mut batch = self.shards[index]
            .plan
            .pop_front()
            .expect("a planned batch");
        let shard_id = self.shards[index].id.clone();
        let records: Vec<Record> = self.shards[index]
            .buffer
            .iter()
            .take(batch.len)
            .cloned()
            .collect();
        let sent: Vec<String> = records.iter().map(sequence).collect();
        let lambda: Vec<Value> = records
            .iter()
            .map(|record| lambda_record(record, &self.stream_arn))
            .collect();
        let answer = StreamSource::invoke(&self.api, &lambda).await;
        batch.invokes += 1;
        let (failures, verdict) = verdict(&answer, &sent);
        let mut poll = StreamPoll {
            shard_id,
            sent: sent.clone(),
            answer: answer.clone(),
            failures,
            retry: batch.sent_before,
            retries: batch.retries,
            completed: Vec::new(),
            bisected: false,
            retried: false,
            discarded: Vec::new(),
            on_failure: None,
        };
        let (done, rest) = match verdict {
            Verdict::Complete => (batch.len, None),
            Verdict::FailedFrom(first) => (first, Some(batch.len - first)),
            Verdict::Invalid | Verdict::FunctionError => (0, Some(batch.len)),
        };
        let shard = &mut self.shards[index];
        poll.completed = shard
            .buffer
            .drain(..done)
            .map(|record| sequence(&record))
            .collect();
        let Some(rest) = rest else { return poll };
        let rest_records: Vec<Record> = shard.buffer.iter().take(rest).cloned().collect();
        if matches!(verdict, Verdict::FunctionError) && self.bisect_on_error && rest > 1 {
            // Splitting does not use up a retry.
            let first = rest.div_ceil(2);
            let half = |len| Batch {
                len,
                sent_before: true,
                ..batch.clone()
            };
            shard.plan.push_front(half(rest - first));
            shard.plan.push_front(half(first));
            poll.bisected = true;
        } else if batch.retries < self.max_retry_attempts {
            shard.plan.push_front(Batch {
                len: rest,
                retries: batch.retries + 1,
                invokes: batch.invokes,
                sent_before: true,
            });
            poll.retried = true;
        } else {
            poll.discarded = shard
                .buffer
                .drain(..rest)
                .map(|record| sequence(&record))
                .collect();
            if let Some((sqs, queue_url)) = &self.on_failure {
                let shard_id = poll.shard_id.clone();
                let record = on_failure_record(
                    &self.stream_arn,
                    &shard_id,
                    &rest_records,
                    batch.invokes,
                    &answer,
                );
                sqs.send_message()
                    .queue_url(queue_url)
                    .message_body(record.to_string())
                    .send()
                    .await
                    .expect("send the on-failure record");
                poll.on_failure = Some(record);
            }
        }
        poll
    }
}

/// Opens a shard: after `after` if given, else at its start.
async fn open(client: &Client, stream_arn: &str, shard_id: &str, after: Option<&str>) -> String {
    let request = client
        .get_shard_iterator()
        .stream_arn(stream_arn)
        .shard_id(shard_id);
    let request = match after {
        Some(sequence) => request
            .shard_iterator_type(ShardIteratorType::AfterSequenceNumber)
            .sequence_number(sequence),
        None => request.shard_iterator_type(ShardIteratorType::TrimHorizon),
    };
    request
        .send()
        .await
        .expect("GetShardIterator")
        .shard_iterator
        .expect("a shard iterator")
}

/// The `itemIdentifier`s an answer lists, and what it means for a batch of
/// these sequence numbers.
fn verdict(answer: &Answer, sent: &[String]) -> (Vec<Option<String>>, Verdict) {
    let body = match answer {
        Answer::Error(_) => return (Vec::new(), Verdict::FunctionError),
        Answer::Response(body) => body,
    };
    // An empty or null response, or one without a list: complete success.
    let response: Value = serde_json::from_str(body).unwrap_or(Value::Null);
    let failures = match response.get("batchItemFailures") {
        None | Some(Value::Null) => return (Vec::new(), Verdict::Complete),
        Some(Value::Array(failures)) => failures,
        Some(_) => return (Vec::new(), Verdict::Invalid),
    };
    let identifiers: Vec<Option<String>> = failures
        .iter()
        .map(|failure| {
            failure
                .get("itemIdentifier")
                .and_then(Value::as_str)
                .filter(|id| !id.is_empty())
                .map(str::to_owned)
        })
        .collect();
    if identifiers.is_empty() {
        return (identifiers, Verdict::Complete);
    }
    let positions: Option<Vec<usize>> = identifiers
        .iter()
        .map(|id| sent.iter().position(|seq| Some(seq) == id.as_ref()))
        .collect();
    match positions.and_then(|positions| positions.into_iter().min()) {
        Some(first) => (identifiers, Verdict::FailedFrom(first)),
        None => (identifiers, Verdict::Invalid),
    }
}

static REQUESTS: AtomicU64 = AtomicU64::new(0);

/// The record Lambda sends to an on-failure destination for a discarded
/// batch of a DynamoDB stream.
fn on_failure_record(
    stream_arn: &str,
    shard_id: &str,
    records: &[Record],
    invokes: u32,
    last: &Answer,
) -> Value {
    let arrival = |record: Option<&Record>| {
        record
            .and_then(|record| record.dynamodb.as_ref())
            .and_then(|change| change.approximate_creation_date_time)
            .map(|at| {
                DateTime::from_secs(at.secs())
                    .fmt(DateTimeFormat::DateTime)
                    .expect("a timestamp")
            })
    };
    let mut response_context = json!({ "statusCode": 200, "executedVersion": "$LATEST" });
    if matches!(last, Answer::Error(_)) {
        response_context["functionError"] = json!("Unhandled");
    }
    let request = REQUESTS.fetch_add(1, Ordering::Relaxed);
    json!({
        "requestContext": {
            "requestId": format!("00000000-0000-4000-8000-{:012x}", request),
            "functionArn": FUNCTION_ARN,
            "condition": "RetryAttemptsExhausted",
            "approximateInvokeCount": invokes,
        },
        "responseContext": response_context,
        "version": "1.0",
        "timestamp": DateTime::from_millis(DateTime::from(std::time::SystemTime::now()).to_millis().expect("now in milliseconds"))
            .fmt(DateTimeFormat::DateTime)
            .expect("a timestamp"),
        "DDBStreamBatchInfo": {
            "shardId": shard_id,
            "startSequenceNumber": records.first().map(sequence),
            "endSequenceNumber": records.last().map(sequence),
            "approximateArrivalOfFirstRecord": arrival(records.first()),
            "approximateArrivalOfLastRecord": arrival(records.last()),
            "batchSize": records.len(),
            "streamArn": stream_arn,
        },
    })
}
