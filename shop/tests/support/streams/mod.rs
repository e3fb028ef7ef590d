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
//!
//! Here: the mapping and its polls; `records` turns stream records into
//! Lambda's, `shards` reads the stream's shards, `delivery` invokes the
//! function with a batch and applies its answer.
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

mod delivery;
mod records;
mod shards;

pub use records::{lambda_record, stream_arn, streams_client};

use records::sequence;

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
}
