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

use crate::faults::{Dice, Failing, Faults};
use crate::figures::{HOT_STREAM, Shared, Tally, add_time};
use crate::keys::{Wrapping, keyed};
use crate::naive::{idempotent_write, naive_write};
use crate::{Pipeline, meter};

/// A new process of a consumer: its runner, with nothing warm and no key
/// kept.
pub type Process = Arc<dyn Fn() -> Arc<Runner<DynamoStore>> + Send + Sync>;

/// One consumer: its queue and its runner (on its own table).
#[derive(Clone)]
pub struct Lane {
    pub name: &'static str,
    pub queue_url: String,
    /// The process its tasks share (as Managed Instances would run them).
    pub runner: Arc<Runner<DynamoStore>>,
    /// Under faults: each task runs a process of its own (one invocation
    /// at a time, as Lambda's default), and a killed batch's task starts
    /// a new one.
    pub process: Process,
    pub faults: Option<(Faults, Arc<Dice>)>,
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
        process,
        faults,
        naive,
        tally,
        ..
    } = lane;
    let mut runner = if faults.is_some() { process() } else { runner };
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
        tally
            .receipts
            .fetch_add(messages.len() as u64, Ordering::Relaxed);
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
                let killed = faults
                    .as_ref()
                    .is_some_and(|(faults, dice)| dice.roll(faults.kills));
                tally.profile_hot(&report, killed);
                if killed {
                    // The process died before it answered: nothing is
                    // deleted, and the next batch finds a new process.
                    add_time(&tally.busy, began.elapsed());
                    runner = process();
                    continue;
                }
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
        let latencies: Vec<(bool, Duration)> = match shared.appended.lock() {
            Ok(appended) => keys
                .iter()
                .filter_map(|key| {
                    let at = appended.get(key)?;
                    Some((key.0 == HOT_STREAM, now.duration_since(*at)))
                })
                .collect(),
            Err(_) => Vec::new(),
        };
        if let Ok(mut hot) = tally.hot.lock() {
            hot.latencies
                .extend(latencies.iter().filter(|(hot, _)| *hot).map(|(_, at)| *at));
        }
        if let Ok(mut all) = tally.latencies.lock() {
            all.extend(latencies.into_iter().map(|(_, at)| at));
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
/// items in `events_table`, wrapped as `wrapping` says. Under `faults`,
/// its DynamoDB and KMS requests fail as they say (the dice seeded with
/// `seed`).
pub async fn lane(
    dynamodb: &aws_sdk_dynamodb::Client,
    name: &'static str,
    table: String,
    queue_url: String,
    domain: Domain,
    (events_table, wrapping): (&str, &Wrapping),
    faults: Option<(Faults, u64)>,
) -> Lane {
    if let Err(err) = create_table(dynamodb, &table).await {
        eprintln!("{table}: {err}");
        std::process::exit(1);
    }
    let meter = meter::Meter::default();
    let mut dynamodb = meter.wrap(dynamodb);
    let mut wrapping = wrapping.clone();
    let faults = faults.map(|(faults, seed)| {
        let failing = Failing::new(faults.requests, seed);
        dynamodb = failing.dynamodb(&dynamodb);
        if let Wrapping::Kms { client, .. } = &mut wrapping {
            *client = failing.kms(client);
        }
        (faults, Arc::new(Dice::new(seed.rotate_left(17))))
    });
    let keyed_domain = keyed(domain.clone(), &dynamodb, events_table, &wrapping);
    let keys = keyed_domain.keys().cloned();
    let runner = Arc::new(Runner::new(
        keyed_domain,
        DynamoStore::new(dynamodb.clone(), table.clone()),
        RunnerConfig::default(),
    ));
    let process: Process = {
        let (dynamodb, table, events_table) =
            (dynamodb.clone(), table.clone(), events_table.to_owned());
        Arc::new(move || {
            Arc::new(Runner::new(
                keyed(domain.clone(), &dynamodb, &events_table, &wrapping),
                DynamoStore::new(dynamodb.clone(), table.clone()),
                RunnerConfig::default(),
            ))
        })
    };
    Lane {
        name,
        queue_url,
        runner,
        process,
        faults,
        naive: (dynamodb, table),
        tally: Arc::new(Tally::default()),
        meter,
        keys,
    }
}
