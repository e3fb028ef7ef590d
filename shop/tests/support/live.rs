//! A stack with the producer's half and the first consumer running, and a
//! second consumer subscribed to it later: what `tests/live_consumer.rs`
//! drives (a consumer added to a live system), and the consumers' tools run
//! as an operator runs them.

use std::time::{Duration, Instant};

use sequence_guard::producer::EventStore;
use sequence_guard::store::dynamodb::{connect, create_table, ensure_events_table};
use serde_json::Value;

use super::dynamodb_local;
use super::function::{Function, start_binary, start_with};
use super::items_of;
use super::localstack::{
    Poller, Queues, fifo_queues, fifo_topic, localstack, sns, sqs, subscribe_raw,
};
use super::metric_sum;
use super::personal_data::{keyed_domain, personal_data_key};
use super::runtime_api::RuntimeApi;
use super::streams::StreamSource;

/// One consumer: its queue (subscribed to the topic), its function, its
/// table.
pub struct Consumer {
    pub queues: Queues,
    pub poller: Poller,
    pub function: Function,
    pub table: String,
}

/// The producer's half and the first consumer, running.
pub struct Stack {
    pub name: String,
    pub events: EventStore,
    pub topic_arn: String,
    pub source: StreamSource,
    pub dispatcher: Function,
    pub orders: Consumer,
}

pub async fn stack(name: &str) -> Stack {
    let client = connect(Some(&dynamodb_local().endpoint)).await;
    let name = format!("live-{name}-{}", std::process::id());
    let events_table = format!("{name}-events");
    ensure_events_table(&client, &events_table)
        .await
        .expect("events table");
    let topic_arn = fifo_topic(&sns().await, &format!("{name}-events")).await;
    let failure_url = sqs()
        .await
        .create_queue()
        .queue_name(format!("{name}-dispatch-failures"))
        .send()
        .await
        .expect("failure queue")
        .queue_url
        .expect("failure queue url");
    let orders = consumer(&name, "orders", &topic_arn, None).await;
    let api = RuntimeApi::start().await;
    let dispatcher = start_binary(
        env!("CARGO_BIN_EXE_dispatcher"),
        &api,
        &[
            ("AWS_ENDPOINT_URL_SNS", &localstack().endpoint),
            ("AWS_ENDPOINT_URL_SQS", &localstack().endpoint),
            ("TOPIC_ARN", &topic_arn),
            ("FAILURE_QUEUE_URL", &failure_url),
            ("METRICS_SERVICE", "dispatcher-test"),
        ],
    );
    Stack {
        events: EventStore::new(
            client.clone(),
            events_table.clone(),
            keyed_domain(&client, &events_table),
        ),
        source: StreamSource::for_table(api, &events_table).await,
        name,
        topic_arn,
        dispatcher,
        orders,
    }
}

/// A consumer's table, queues and function, its queue subscribed to the
/// topic: the first consumer (`status` is `None`), or the status consumer
/// parking from the `status`th delivery.
pub async fn consumer(name: &str, which: &str, topic_arn: &str, status: Option<u32>) -> Consumer {
    let client = connect(Some(&dynamodb_local().endpoint)).await;
    let table = format!("{name}-{which}");
    create_table(&client, &table).await.expect("table");
    let sqs = sqs().await;
    // Visibility 1 s: a message that failed comes back quickly; 50
    // receives: nothing reaches the dead-letter queue while it waits.
    let queues = fifo_queues(&sqs, &format!("{name}-{which}"), 1, 50).await;
    subscribe_raw(&sns().await, topic_arn, &queues.arn).await;
    let api = RuntimeApi::start().await;
    // The first consumer opens the orders' personal data with the
    // subjects' keys, in the stack's events table.
    let function = match status {
        None => start_with(
            &api,
            Some(&table),
            &[
                ("EVENT_STORE_TABLE", &format!("{name}-events")),
                ("PERSONAL_DATA_KEY", &personal_data_key()),
            ],
        ),
        Some(park_after) => start_binary(
            env!("CARGO_BIN_EXE_status-projector"),
            &api,
            &[
                ("TABLE_NAME", &table),
                ("METRICS_SERVICE", "status-test"),
                ("PARK_AFTER_RECEIVES", &park_after.to_string()),
            ],
        ),
    };
    let poller = Poller {
        sqs,
        queue_url: queues.url.clone(),
        queue_arn: queues.arn.clone(),
        api,
    };
    Consumer {
        queues,
        poller,
        function,
        table,
    }
}

/// The payments process as a consumer added to the stack: its table (made
/// first: the process starts when it is created), then its queue
/// subscribed, its function (`payments-process`, a window of `window`
/// seconds) parking from the `park_after`th delivery.
pub async fn process(name: &str, topic_arn: &str, window: u64, park_after: u32) -> Consumer {
    let client = connect(Some(&dynamodb_local().endpoint)).await;
    let table = format!("{name}-payments");
    create_table(&client, &table).await.expect("table");
    let sqs = sqs().await;
    let queues = fifo_queues(&sqs, &format!("{name}-payments"), 1, 50).await;
    subscribe_raw(&sns().await, topic_arn, &queues.arn).await;
    let api = RuntimeApi::start().await;
    let function = start_binary(
        env!("CARGO_BIN_EXE_payments-process"),
        &api,
        &[
            ("TABLE_NAME", &table),
            ("EVENT_STORE_TABLE", &format!("{name}-events")),
            ("PAYMENT_WINDOW_SECONDS", &window.to_string()),
            ("METRICS_SERVICE", "payments-test"),
            ("PARK_AFTER_RECEIVES", &park_after.to_string()),
        ],
    );
    let poller = Poller {
        sqs,
        queue_url: queues.url.clone(),
        queue_arn: queues.arn.clone(),
        api,
    };
    Consumer {
        queues,
        poller,
        function,
        table,
    }
}

impl Consumer {
    /// Another mapping of the same queue to the same function, for a task.
    pub fn mapping(&self) -> Poller {
        Poller {
            sqs: self.poller.sqs.clone(),
            queue_url: self.poller.queue_url.clone(),
            queue_arn: self.poller.queue_arn.clone(),
            api: self.poller.api.clone(),
        }
    }

    /// The sum of one of its function's metrics.
    pub fn metric(&self, name: &str) -> f64 {
        metric_sum(&self.function.output(), name)
    }
}

/// Runs the dispatcher's mapping and these consumers' until none has
/// anything left.
pub async fn settle(source: &mut StreamSource, consumers: &[&Consumer]) {
    let started = Instant::now();
    loop {
        let sent = source.drain(Duration::from_secs(30)).await;
        let mut polled = false;
        for consumer in consumers {
            polled |= !consumer
                .poller
                .drain(Duration::from_secs(30))
                .await
                .is_empty();
        }
        if sent.is_empty() && !polled {
            return;
        }
        assert!(started.elapsed() < Duration::from_secs(120), "settled");
    }
}

/// Runs a consumer's tool (`status-rebuild`, `status-verify`,
/// `status-inspect`, ...) on DynamoDB Local, with `EVENTS_TABLE`,
/// `TABLE_NAME` and `PERSONAL_DATA_KEY` set as an operator's shell would,
/// its log lines asked for (JSON, on stderr): its exit code, stdout and
/// stderr.
pub async fn tool(
    exe: &str,
    events: &EventStore,
    table: &str,
    args: &[&str],
) -> (i32, String, String) {
    let output = tokio::process::Command::new(exe)
        .args(["--endpoint-url", &dynamodb_local().endpoint])
        .args(args)
        .env("EVENTS_TABLE", events.table())
        .env("TABLE_NAME", table)
        .env("PERSONAL_DATA_KEY", personal_data_key())
        .env("AWS_ACCESS_KEY_ID", "local")
        .env("AWS_SECRET_ACCESS_KEY", "local")
        .env("AWS_REGION", "us-east-1")
        .env("AWS_LAMBDA_LOG_FORMAT", "JSON")
        .env("RUST_LOG", "info")
        .output()
        .await
        .unwrap_or_else(|err| panic!("{exe}: {err}"));
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// The status table's parked events and entities marked parked.
pub async fn parked_in(table: &str) -> Vec<String> {
    items_of(&dynamodb_local().endpoint, table, &["STATUS#"])
        .await
        .into_iter()
        .filter(|((_, sk), attributes)| {
            sk.starts_with("PENDING#")
                || attributes.split(' ').any(|attribute| {
                    attribute.starts_with("parked=") || attribute.starts_with("parkedSince=")
                })
        })
        .map(|((pk, sk), _)| format!("{pk} {sk}"))
        .collect()
}

/// The verify summary's `differ`.
pub fn differ(stdout: &str) -> u64 {
    let summary: Value = serde_json::from_str(stdout.lines().last().unwrap_or_default())
        .unwrap_or_else(|err| panic!("a summary line: {err}: {stdout}"));
    summary["differ"].as_u64().expect("differ")
}

/// What a tool's log lines (JSON) say it drained, and cleared as
/// duplicates: parked events, counted.
pub fn drained_by(log: &str) -> (usize, usize) {
    let count = |line: &Value, field: &str| {
        line["fields"][field].as_str().map_or(0, |list| {
            list.split(',')
                .filter(|n| !n.trim().trim_matches(['[', ']']).is_empty())
                .count()
        })
    };
    log.lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .fold((0, 0), |(drained, cleared), line| {
            (
                drained + count(&line, "drained"),
                cleared + count(&line, "cleared"),
            )
        })
}
