//! A consumer of a run: its queue, its table and runner, and the tasks that
//! poll the queue and project each batch as the pipeline's projector does.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use aws_lambda_events::event::sqs::{SqsEvent, SqsMessage};
use aws_sdk_sqs::types::{DeleteMessageBatchRequestEntry, MessageSystemAttributeName};
use sequence_guard::Domain;
use sequence_guard::personal::Keyring;
use sequence_guard::runner::{Invocation, Runner, RunnerConfig};
use sequence_guard::store::dynamodb::{DynamoStore, create_table};
use serde_json::Value;

use crate::figures::{Shared, Tally, add_time};
use crate::keys::{Wrapping, keyed};
use crate::naive::{idempotent_write, naive_write};
use crate::{Pipeline, meter};

/// One consumer: its queue and its runner (on its own table).
#[derive(Clone)]
pub struct Lane {
    pub name: &'static str,
    pub queue_url: String,
    pub runner: Arc<Runner<DynamoStore>>,
    /// The naive projector's client and table.
    pub naive: (aws_sdk_dynamodb::Client, String),
    pub tally: Arc<Tally>,
    /// What its DynamoDB client sends and is billed (its key items'
    /// reads included).
    pub meter: meter::Meter,
    /// Its keyring, when its domain declares personal data (the shop's).
    pub keys: Option<Arc<Keyring>>,
}

/// One consumer task (an SQS poller and the projector behind it), until
/// every event is projected by its lane.
pub async fn consumer(
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

/// A consumer on its own table: `<name>-<consumer>`, projected by
/// `domain`; a domain that declares personal data opens it with the key
/// items in `events_table`, wrapped as `wrapping` says.
pub async fn lane(
    dynamodb: &aws_sdk_dynamodb::Client,
    name: &'static str,
    table: String,
    queue_url: String,
    domain: Domain,
    (events_table, wrapping): (&str, &Wrapping),
) -> Lane {
    if let Err(err) = create_table(dynamodb, &table).await {
        eprintln!("{table}: {err}");
        std::process::exit(1);
    }
    let meter = meter::Meter::default();
    let dynamodb = meter.wrap(dynamodb);
    let domain = keyed(domain, &dynamodb, events_table, wrapping);
    let keys = domain.keys().cloned();
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
        keys,
    }
}
