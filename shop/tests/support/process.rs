//! The payments process's Lambda function (`payments-process`) as Lambda
//! runs it: one execution environment on its own local Runtime API, its
//! DynamoDB requests (its table and the event store's) through a faulty
//! proxy, killed mid-invocation when a test says so and started again, as
//! Lambda starts a new environment after a crash. The mappings of a
//! pipeline as tasks that run at once until told to stop, as on AWS: the
//! stream's, each queue's, and the schedule's. And the shop's customers,
//! and the fold of an order's stream that the process answers for.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use sequence_guard::Domain;
use sequence_guard::producer::{Append, AppendError, EventStore, NewEvent, StoredEvent};
use sequence_guard::runner::{Invocation, Runner, RunnerConfig};
use sequence_guard::store::dynamodb::{DynamoStore, connect, create_table};
use serde_json::{Value, json};
use shop::payments::NOT_PAID;

use super::fault_proxy::FaultProxy;
use super::function::{Function, start_binary};
use super::localstack::{Poller, localstack};
use super::runtime_api::{Answer, RuntimeApi};
use super::streams::StreamSource;
use super::{batch, dynamodb_local, message, outcomes};

/// The schedule's event (EventBridge): the sweep, which fires the due
/// deadlines first.
pub const SCHEDULED: &str = include_str!("../../../events/12-scheduled-sweep.json");

pub struct ProcessFunction {
    /// The Runtime API of the environment running now (a new one after
    /// each kill: the dead one's API is left behind with it).
    pub api: RuntimeApi,
    pub function: Function,
    /// Every DynamoDB request of the function goes through it.
    pub proxy: Arc<FaultProxy>,
    variables: Vec<(String, String)>,
    /// The environments killed, for their output.
    dead: Vec<Function>,
    /// Kills (each followed by a new environment).
    pub kills: u64,
}

impl ProcessFunction {
    /// Starts `payments-process` on `table`, appending to `events_table`,
    /// with a window of `window_seconds`, its DynamoDB behind `proxy`.
    pub async fn start(
        proxy: Arc<FaultProxy>,
        table: &str,
        events_table: &str,
        window_seconds: u64,
        service: &str,
    ) -> ProcessFunction {
        let variables: Vec<(String, String)> = [
            ("TABLE_NAME", table.to_owned()),
            ("EVENT_STORE_TABLE", events_table.to_owned()),
            ("PAYMENT_WINDOW_SECONDS", window_seconds.to_string()),
            ("AWS_ENDPOINT_URL_DYNAMODB", proxy.endpoint.clone()),
            ("METRICS_SERVICE", service.to_owned()),
        ]
        .into_iter()
        .map(|(name, value)| (name.to_owned(), value))
        .collect();
        let api = RuntimeApi::start().await;
        let function = spawn(&api, &variables);
        ProcessFunction {
            api,
            function,
            proxy,
            variables,
            dead: Vec::new(),
            kills: 0,
        }
    }

    /// A new environment, on a new Runtime API (nothing of the dead one's
    /// can take an invocation meant for the new one).
    pub async fn restart(&mut self) {
        let api = RuntimeApi::start().await;
        let function = spawn(&api, &self.variables);
        self.api = api;
        self.dead
            .push(std::mem::replace(&mut self.function, function));
    }

    /// Runs `work` (an invocation of this function); with `kill_after`,
    /// kills the function (SIGKILL) once the proxy has forwarded that many
    /// more of its requests while the invocation is still running, fails
    /// what it was handed as Lambda does, and starts a new environment.
    /// Whether it was killed.
    pub async fn guarded<T>(
        &mut self,
        work: impl Future<Output = T>,
        kill_after: Option<u64>,
    ) -> (T, bool) {
        let Some(requests) = kill_after else {
            return (work.await, false);
        };
        let counts = self.proxy.counts.clone();
        let start = counts.forwarded.load(Ordering::Relaxed);
        let pid = self.function.child.id();
        let api = self.api.clone();
        let done = AtomicBool::new(false);
        let work = async {
            let out = work.await;
            done.store(true, Ordering::Relaxed);
            out
        };
        let watcher = async {
            loop {
                if done.load(Ordering::Relaxed) {
                    return false;
                }
                if counts.forwarded.load(Ordering::Relaxed) >= start + requests {
                    let Some(pid) = pid else { return false };
                    let killed = std::process::Command::new("kill")
                        .args(["-9", &pid.to_string()])
                        .status()
                        .is_ok_and(|status| status.success());
                    api.crashed();
                    return killed;
                }
                tokio::time::sleep(Duration::from_micros(200)).await;
            }
        };
        let (out, killed) = tokio::join!(work, watcher);
        if killed {
            self.kills += 1;
            self.restart().await;
        }
        (out, killed)
    }

    /// What every environment wrote, the dead ones' first.
    pub fn output(&self) -> String {
        let mut output: String = self.dead.iter().map(Function::output).collect();
        output.push_str(&self.function.output());
        output
    }
}

fn spawn(api: &RuntimeApi, variables: &[(String, String)]) -> Function {
    let variables: Vec<(&str, &str)> = variables
        .iter()
        .map(|(name, value)| (name.as_str(), value.as_str()))
        .collect();
    start_binary(env!("CARGO_BIN_EXE_payments-process"), api, &variables)
}

/// What one task of the pipeline saw, for the report.
#[derive(Default)]
pub struct Seen {
    /// Messages received (a redelivery counts again).
    pub deliveries: u64,
    pub invocations: u64,
    /// Invocations that ended in a kill with the function's answer lost.
    pub killed_mid_invocation: u64,
    pub failed_invocations: u64,
    /// Time spent in invocations.
    pub busy: Duration,
}

impl Seen {
    /// Adds what another task saw.
    pub fn add(&mut self, other: &Seen) {
        self.deliveries += other.deliveries;
        self.invocations += other.invocations;
        self.killed_mid_invocation += other.killed_mid_invocation;
        self.failed_invocations += other.failed_invocations;
        self.busy += other.busy;
    }
}

pub type Task<T> = tokio::task::JoinHandle<T>;

/// The stream's mapping, until `stop`: the records sent go in `sent`.
pub fn dispatch(
    mut source: StreamSource,
    dispatcher: Function,
    stop: Arc<AtomicBool>,
    sent: Arc<AtomicU64>,
) -> Task<Function> {
    tokio::spawn(async move {
        while !stop.load(Ordering::Relaxed) {
            match source.poll().await {
                Some(poll) => {
                    sent.fetch_add(poll.sent.len() as u64, Ordering::Relaxed);
                }
                None => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        }
        dispatcher
    })
}

/// A queue's mapping, until `stop`.
pub fn consume(
    poller: Poller,
    function: Function,
    stop: Arc<AtomicBool>,
    received: Arc<AtomicU64>,
) -> Task<(Function, Seen)> {
    tokio::spawn(async move {
        let mut seen = Seen::default();
        while !stop.load(Ordering::Relaxed) {
            if let Some(poll) = poller.poll().await {
                seen.invocations += 1;
                seen.deliveries += poll.received.len() as u64;
                received.fetch_add(poll.received.len() as u64, Ordering::Relaxed);
            }
        }
        (function, seen)
    })
}

/// The process's queue mapping, until `stop`: the `kills`th batches are
/// killed after two of their DynamoDB requests.
pub fn consume_killing(
    mut poller: Poller,
    mut function: ProcessFunction,
    kills: &'static [u64],
    stop: Arc<AtomicBool>,
    received: Arc<AtomicU64>,
) -> Task<(ProcessFunction, Seen)> {
    tokio::spawn(async move {
        let mut seen = Seen::default();
        while !stop.load(Ordering::Relaxed) {
            let Some(batch) = poller.receive().await else {
                continue;
            };
            seen.invocations += 1;
            let count = batch.len() as u64;
            seen.deliveries += count;
            received.fetch_add(count, Ordering::Relaxed);
            let kill = kills.contains(&seen.invocations).then_some(2);
            let began = Instant::now();
            let (poll, killed) = function.guarded(poller.invoke(batch), kill).await;
            seen.busy += began.elapsed();
            if killed {
                poller.api = function.api.clone();
            }
            if poll.failed.len() as u64 == count {
                seen.failed_invocations += 1;
                seen.killed_mid_invocation += u64::from(killed);
            }
        }
        (function, seen)
    })
}

/// The schedule, until `stop`: from `offset` on, a sweep 700 ms after the
/// last one ended, in an environment of its own; the `kills`th sweeps are
/// killed mid-way.
pub fn schedule(
    mut function: ProcessFunction,
    kills: &'static [u64],
    offset: Duration,
    stop: Arc<AtomicBool>,
) -> Task<(ProcessFunction, Seen)> {
    tokio::spawn(async move {
        let mut seen = Seen::default();
        tokio::time::sleep(offset).await;
        while !stop.load(Ordering::Relaxed) {
            tokio::time::sleep(Duration::from_millis(700)).await;
            seen.invocations += 1;
            // After the 16 partitions of the due index and two more.
            let kill = kills.contains(&seen.invocations).then_some(18);
            let api = function.api.clone();
            let began = Instant::now();
            let (answer, killed) = function
                .guarded(async move { api.invoke(SCHEDULED).await }, kill)
                .await;
            seen.busy += began.elapsed();
            if matches!(answer, Answer::Error(_)) {
                seen.failed_invocations += 1;
                seen.killed_mid_invocation += u64::from(killed);
            }
        }
        (function, seen)
    })
}

/// Items of `table` with a deadline (`dueAt`).
pub async fn deadlines_left(table: &str) -> usize {
    let client = connect(Some(&dynamodb_local().endpoint)).await;
    let scanned = client
        .scan()
        .table_name(table)
        .consistent_read(true)
        .filter_expression("attribute_exists(dueAt)")
        .send()
        .await
        .expect("scan");
    scanned.items.unwrap_or_default().len()
}

/// Appends until stored (a storage error or another writer is tried
/// again; the request id keeps it once).
pub async fn append(events: &EventStore, append: Append) {
    loop {
        match events.append(append.clone()).await {
            Ok(_) => return,
            Err(AppendError::Contention { .. } | AppendError::Store(_)) => continue,
            Err(err) => panic!("append: {err}"),
        }
    }
}

/// Publishes the stored events of `stream` to the topic again, under new
/// deduplication ids (as a second publish does): each queue gets them
/// again. How many.
pub async fn publish_again(
    events: &EventStore,
    sns: &aws_sdk_sns::Client,
    topic: &str,
    stream: &str,
    round: u64,
) -> u64 {
    let stored = events.read(stream, 0, 10_000).await.expect("read");
    for event in &stored {
        sns.publish()
            .topic_arn(topic)
            .message(&event.body)
            .message_group_id(stream)
            .message_deduplication_id(format!("again-{round}-{stream}-{}", event.sequence))
            .send()
            .await
            .expect("publish again");
    }
    stored.len() as u64
}

/// Folds `stored` (each stream in order) through `domain` into a fresh
/// table, as `rebuild` does; the table's name.
pub async fn fold_into_table(
    name: &str,
    domain: &Domain,
    config: &RunnerConfig,
    stored: &[(String, String)],
) -> String {
    let client = connect(Some(&dynamodb_local().endpoint)).await;
    let table = format!("{name}-fold-{}", FOLDS.fetch_add(1, Ordering::Relaxed));
    create_table(&client, &table).await.expect("fold table");
    let runner = Runner::new(
        domain.clone(),
        DynamoStore::new(client, table.clone()),
        config.clone(),
    );
    for (index, (stream, body)) in stored.iter().enumerate() {
        let event = batch(vec![message(&format!("fold-{index}"), stream, body)]);
        let invocation = Invocation {
            deadline: None,
            now: 1_800_000_000,
        };
        let report = runner.run(&event, invocation).await.expect("a batch");
        for outcome in outcomes(&report) {
            assert!(!outcome.is_failure(), "the fold of {body}: {outcome:?}");
        }
    }
    table
}

static FOLDS: AtomicU64 = AtomicU64::new(0);

/// The `dispatcher` binary on `events_table`'s stream, publishing to the
/// topic on LocalStack, what it cannot send reported to `failure_url`:
/// the stream's mapping and the function.
pub async fn dispatch_to_topic(
    events_table: &str,
    topic: &str,
    sqs: &aws_sdk_sqs::Client,
    failure_url: &str,
) -> (StreamSource, Function) {
    let api = RuntimeApi::start().await;
    let dispatcher = start_binary(
        env!("CARGO_BIN_EXE_dispatcher"),
        &api,
        &[
            ("AWS_ENDPOINT_URL_SNS", &localstack().endpoint),
            ("AWS_ENDPOINT_URL_SQS", &localstack().endpoint),
            ("TOPIC_ARN", topic),
            ("FAILURE_QUEUE_URL", failure_url),
            ("AWS_LAMBDA_FUNCTION_NAME", "sequence-guard-dispatcher"),
            ("METRICS_SERVICE", "dispatcher-test"),
        ],
    );
    let mut source = StreamSource::for_table(api, events_table).await;
    source.on_failure = Some((sqs.clone(), failure_url.to_owned()));
    (source, dispatcher)
}

/// What a customer does to an order, `at` after creating it.
pub enum Step {
    Pay(u64),
    Cancel,
    Update(u64),
    /// Every event of the order stored so far, published to the topic again.
    Publish,
}

/// One order's customer: creates it with `total`, then follows `steps`
/// (each at its time after the creation); events published again are
/// counted in `published`.
pub async fn customer(
    events: EventStore,
    sns: aws_sdk_sns::Client,
    topic: String,
    order: String,
    total: u64,
    steps: Vec<(u64, Step)>,
    published: Arc<AtomicU64>,
) {
    let details = |total: u64| json!({ "customerName": "Ada", "email": "ada@example.com", "totalCents": total });
    let command = |n: usize, event: NewEvent| Append {
        request_id: Some(format!("{order}-command-{n}")),
        ..Append::one(order.clone(), event)
    };
    append(
        &events,
        command(0, NewEvent::new("OrderCreated", details(total))),
    )
    .await;
    let created = Instant::now();
    for (n, (at, step)) in steps.into_iter().enumerate() {
        tokio::time::sleep_until((created + Duration::from_millis(at)).into()).await;
        let event = match step {
            Step::Pay(cents) => NewEvent::new("PaymentReceived", json!({ "amountCents": cents })),
            Step::Cancel => NewEvent::new("OrderCancelled", json!({ "reason": "changed mind" })),
            Step::Update(total) => NewEvent::new("OrderUpdated", details(total)),
            Step::Publish => {
                let count = publish_again(&events, &sns, &topic, &order, 1).await;
                published.fetch_add(count, Ordering::Relaxed);
                continue;
            }
        };
        append(&events, command(n + 1, event)).await;
    }
}

/// What an order's stream says.
#[derive(Debug, Default)]
pub struct Fold {
    /// The total of its last `OrderCreated` or `OrderUpdated`.
    pub total: u64,
    pub paid: u64,
    /// Paid before its first cancel.
    pub paid_before_cancel: u64,
    pub payments_after_cancel: Vec<u64>,
    pub refunds: Vec<u64>,
    pub cancels: u64,
    /// Cancels the process appended (its deadline's).
    pub cancels_by_deadline: u64,
}

/// The fold of an order's stored events; panics if the process cancelled
/// it after another cancel or once paid in full.
pub fn fold(order: &str, stored: &[StoredEvent]) -> Fold {
    let mut fold = Fold::default();
    for event in stored {
        let body: Value = serde_json::from_str(&event.body).expect("a stored body is JSON");
        let data = &body["data"];
        let amount = data["amountCents"].as_u64().unwrap_or(0);
        match event.event_type.as_str() {
            "OrderCreated" | "OrderUpdated" => {
                fold.total = data["totalCents"].as_u64().unwrap_or(0)
            }
            "PaymentReceived" if fold.cancels > 0 => fold.payments_after_cancel.push(amount),
            "PaymentReceived" => fold.paid_before_cancel += amount,
            "RefundRequested" => fold.refunds.push(amount),
            "OrderCancelled" => {
                if data["reason"] == NOT_PAID {
                    // Its cancel is at the sequence it saw awaiting payment:
                    // never after another cancel, never of an order paid in full.
                    assert!(
                        fold.cancels == 0 && fold.paid_before_cancel < fold.total,
                        "{order}: the process cancelled a cancelled or paid order: {stored:#?}"
                    );
                    fold.cancels_by_deadline += 1;
                }
                fold.cancels += 1;
            }
            other => panic!("{order}: an event of type {other}"),
        }
        fold.paid = fold.paid_before_cancel + fold.payments_after_cancel.iter().sum::<u64>();
    }
    fold
}
