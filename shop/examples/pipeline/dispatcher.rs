//! The dispatcher of a run: the stream's batches sent to the queue or the
//! topic, by the dispatcher's code (ours, fan-out) or one `SendMessage` per
//! event (naive, idempotency).

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use sequence_guard::Domain;
use sequence_guard::dispatcher::{Queue, Read, Settings, dispatch, read};

use crate::Pipeline;
use crate::figures::{Shared, add_time};
use crate::stream::read_stream;

/// What the dispatcher of a run works with: `queue` is the queue (ours,
/// naive) or the topic (fan-out).
pub struct Wiring<Q> {
    pub endpoint: String,
    pub table: String,
    pub queue: Q,
    pub sqs: aws_sdk_sqs::Client,
    pub queue_url: String,
    pub domain: Domain,
    pub shared: Arc<Shared>,
    pub total: usize,
    /// Each batch's records out of order: its second half first, each half
    /// reversed, as two shards read in parallel can give a stream's events.
    pub reordered: bool,
}

impl Wiring<()> {
    /// The same wiring, sending to `queue`.
    pub fn to<Q>(self, queue: Q) -> Wiring<Q> {
        Wiring {
            endpoint: self.endpoint,
            table: self.table,
            queue,
            sqs: self.sqs,
            queue_url: self.queue_url,
            domain: self.domain,
            shared: self.shared,
            total: self.total,
            reordered: self.reordered,
        }
    }
}

/// The dispatcher of a pipeline, until every event is sent.
pub async fn dispatcher<Q: Queue>(mode: Pipeline, wiring: Wiring<Q>) {
    let Wiring {
        endpoint,
        table,
        queue,
        sqs,
        queue_url,
        domain,
        shared,
        total,
        reordered,
    } = wiring;
    let (endpoint, table) = (endpoint.as_str(), table.as_str());
    let done = || shared.dispatched.load(Ordering::Relaxed) >= total;
    let polled = read_stream(endpoint, table, 100, done, |records| {
        let (queue, sqs, queue_url, domain, shared) = (&queue, &sqs, &queue_url, &domain, &shared);
        async move {
            let began = Instant::now();
            // Out of order: the later shard's half first, each half
            // reversed (the dispatcher orders a stream within a batch, not
            // across them).
            let shards: Vec<Vec<serde_json::Value>> = if reordered {
                let (first, second) = records.split_at(records.len() / 2);
                [second, first]
                    .into_iter()
                    .filter(|half| !half.is_empty())
                    .map(|half| half.iter().rev().cloned().collect())
                    .collect()
            } else {
                vec![records]
            };
            match mode {
                Pipeline::Ours | Pipeline::Fanout => {
                    for records in &shards {
                        let sent =
                            dispatch(records, domain, queue, Settings::default(), None).await;
                        shared.requests.fetch_add(sent.requests, Ordering::Relaxed);
                        shared
                            .dispatched
                            .fetch_add(sent.dispatched, Ordering::Relaxed);
                    }
                }
                Pipeline::Naive | Pipeline::Idempotency => {
                    for record in shards.iter().flatten() {
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
