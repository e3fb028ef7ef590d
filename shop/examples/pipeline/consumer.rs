//! A consumer of a run: its queue, its table and runner, and the tasks that
//! poll the queue and project each batch as the pipeline's projector does.
//!
//! An event is projected once, when it first reaches the consumer's table:
//! by its own message (done, and not parked), drained when the gap it was
//! parked on closed, or read from the event store to close the gap of a
//! later message (the runner's fill; its own message is then a duplicate
//! and counts no second time). Its latency runs from its append to the
//! batch that projected it. A consumer runs until every event is projected
//! and its queue is empty: a duplicate left in the queue is received and
//! deleted within the run, not by the next one.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use aws_lambda_events::event::sqs::{SqsEvent, SqsMessage};
use aws_sdk_sqs::types::{DeleteMessageBatchRequestEntry, MessageSystemAttributeName};
use sequence_guard::Domain;
use sequence_guard::personal::Keyring;
use sequence_guard::producer::EventStore;
use sequence_guard::runner::{BatchReport, Invocation, Outcome, Runner, RunnerConfig};
use sequence_guard::store::dynamodb::{DynamoStore, create_table};
use serde_json::Value;

use crate::faults::{Dice, Failing, Faults};
use crate::figures::{Shared, Tally, add_time};
use crate::keys::{Wrapping, keyed};
use crate::naive::{idempotent_write, naive_write};
use crate::queues::in_queue;
use crate::{Pipeline, meter};

/// A consumer that has received nothing for this long stops, whatever it
/// has projected (it says so): a run never leaves a task polling behind it.
const IDLE_LIMIT: Duration = Duration::from_secs(60);

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
    let mut last_received = Instant::now();
    loop {
        // Done once every event is projected and no message is left.
        if tally.projected.load(Ordering::Relaxed) >= total && in_queue(&sqs, &queue_url).await == 0
        {
            break;
        }
        if last_received.elapsed() > IDLE_LIMIT {
            eprintln!(
                "{queue_url}: nothing received for {} s, {} of {total} events projected: the consumer stops",
                IDLE_LIMIT.as_secs(),
                tally.projected.load(Ordering::Relaxed)
            );
            break;
        }
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
        last_received = Instant::now();
        tally.receives.fetch_add(1, Ordering::Relaxed);
        tally.invocations.fetch_add(1, Ordering::Relaxed);
        let began = Instant::now();
        tally
            .receipts
            .fetch_add(messages.len() as u64, Ordering::Relaxed);
        let mut done: Vec<&aws_sdk_sqs::types::Message> = Vec::new();
        // The events this batch projected: (stream, sequence).
        let mut projected: Vec<(String, u64)> = Vec::new();
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
                projected = projected_by(&report);
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
        if matches!(mode, Pipeline::Naive | Pipeline::Idempotency) {
            projected = done.iter().map(|message| event_key(message)).collect();
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
        tally.project(&shared, projected, now);
    }
}

/// The events a batch's report says it projected: each message done but
/// parked (an event parked is projected when drained), each parked event
/// drained, each event read from the event store. A duplicate's event is
/// among them: projected before, it counts once ([`Tally::project`]), and
/// if its batch was killed after its write, at its duplicate.
fn projected_by(report: &BatchReport) -> Vec<(String, u64)> {
    let done = report
        .messages
        .iter()
        .filter(|message| !message.outcome.is_failure() && message.outcome != Outcome::Parked);
    let mut projected: Vec<(String, u64)> = done
        .filter_map(|message| Some((message.stream.clone(), message.sequence?)))
        .collect();
    for parking in &report.parking {
        projected.extend(
            parking
                .drained
                .iter()
                .map(|drained| (parking.stream.clone(), drained.sequence)),
        );
    }
    for filled in &report.filled {
        projected
            .extend((filled.from..=filled.to).map(|sequence| (filled.stream.clone(), sequence)));
    }
    projected
}

/// A message's event: its body's `aggregateId` and `sequence`.
fn event_key(message: &aws_sdk_sqs::types::Message) -> (String, u64) {
    let body: Value =
        serde_json::from_str(message.body.as_deref().unwrap_or("{}")).unwrap_or_default();
    (
        body["aggregateId"].as_str().unwrap_or_default().to_owned(),
        body["sequence"].as_u64().unwrap_or(0),
    )
}

/// The event store a consumer reads: its table, which holds the subjects'
/// keys too, how they are wrapped, and whether the consumer reads a gap's
/// events from it (as the projector does when `EVENT_STORE_TABLE` is set)
/// or waits for them as without it.
pub struct Reads<'a> {
    pub table: &'a str,
    pub wrapping: &'a Wrapping,
    pub fill: bool,
}

/// A consumer on its own table: `<name>-<consumer>`, projected by
/// `domain`; a domain that declares personal data opens it with the key
/// items in the event store's table, wrapped as `reads` says; with
/// `reads.fill`, a gap's events are read from the event store (one
/// `Query`, on the consumer's metered client: counted in its requests and
/// cost). Under `faults`, its DynamoDB and KMS requests fail as they say
/// (the dice seeded with `seed`), the event store's reads too.
pub async fn lane(
    dynamodb: &aws_sdk_dynamodb::Client,
    name: &'static str,
    table: String,
    queue_url: String,
    domain: Domain,
    reads: Reads<'_>,
    faults: Option<(Faults, u64)>,
) -> Lane {
    if let Err(err) = create_table(dynamodb, &table).await {
        eprintln!("{table}: {err}");
        std::process::exit(1);
    }
    let meter = meter::Meter::default();
    let mut dynamodb = meter.wrap(dynamodb);
    let mut wrapping = reads.wrapping.clone();
    let faults = faults.map(|(faults, seed)| {
        let failing = Failing::new(faults.requests, seed);
        dynamodb = failing.dynamodb(&dynamodb);
        if let Wrapping::Kms { client, .. } = &mut wrapping {
            *client = failing.kms(client);
        }
        (faults, Arc::new(Dice::new(seed.rotate_left(17))))
    });
    let (events_table, fill) = (reads.table.to_owned(), reads.fill);
    // A new process of the consumer: its runner on its table, which reads
    // the event store or not.
    let start = {
        let (dynamodb, table) = (dynamodb.clone(), table.clone());
        move |domain: Domain| {
            let mut store = DynamoStore::new(dynamodb.clone(), table.clone());
            if fill {
                let events =
                    EventStore::new(dynamodb.clone(), events_table.clone(), domain.clone());
                store = store.with_event_store(events);
            }
            Arc::new(Runner::new(domain, store, RunnerConfig::default()))
        }
    };
    let keyed_domain = keyed(domain.clone(), &dynamodb, reads.table, &wrapping);
    let keys = keyed_domain.keys().cloned();
    let runner = start(keyed_domain);
    let process: Process = {
        let (dynamodb, events_table) = (dynamodb.clone(), reads.table.to_owned());
        Arc::new(move || start(keyed(domain.clone(), &dynamodb, &events_table, &wrapping)))
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
