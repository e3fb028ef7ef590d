//! The whole pipeline on real parts: the producer's append on DynamoDB
//! Local, the table's DynamoDB stream read by an event source mapping
//! written for the tests (`support::streams`, Lambda's batches, partial
//! failures, bisect and retries), the `dispatcher` binary through a local
//! Lambda Runtime API, LocalStack's SQS FIFO queue, the SQS poller
//! (`support::localstack`) and the `projector` binary. Every test ends with
//! the projection compared to the fold of the event store (`rebuild` into a
//! fresh table), item by item. Here: the pipeline the topics share.

#[path = "../support/mod.rs"]
mod support;

mod corrupt_items;
mod faults;
mod messages;
mod races;
mod redelivery;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_sqs::types::MessageSystemAttributeName;
use sequence_guard::producer::{Append, AppendError, EventStore, NewEvent};
use sequence_guard::store::dynamodb::{connect, create_table, ensure_events_table};
use serde_json::{Value, json};
use support::fault_proxy::{Fault, FaultProxy};
use support::function::{Function, start_dispatcher, start_with};
use support::localstack::{Poller, Queues, bodies, fifo_queues, localstack, send, sqs};
use support::runtime_api::{Answer, RuntimeApi};
use support::streams::StreamSource;
use support::*;

/// Faults in front of the dispatcher's SQS and the projector's DynamoDB.
#[derive(Default)]
struct Faults {
    sqs: Option<Arc<FaultProxy>>,
    dynamodb: Option<Arc<FaultProxy>>,
}

struct Pipeline {
    name: String,
    events: EventStore,
    events_table: String,
    table: String,
    queues: Queues,
    failure_url: String,
    source: StreamSource,
    dispatcher: Function,
    sqs_endpoint: String,
    poller: Poller,
    projector: Function,
}

async fn pipeline(name: &str, faults: &Faults) -> Pipeline {
    let local = dynamodb_local();
    let client = connect(Some(&local.endpoint)).await;
    let name = format!("{name}-{}", std::process::id());
    let events_table = format!("{name}-events");
    let table = format!("{name}-projection");
    ensure_events_table(&client, &events_table)
        .await
        .expect("events table");
    create_table(&client, &table).await.expect("projection");
    let sqs = sqs().await;
    // Visibility 2 s: a gap comes back quickly; 50 receives: nothing reaches
    // the dead-letter queue while a gap waits.
    let queues = fifo_queues(&sqs, &name, 2, 50).await;
    let failure_url = sqs
        .create_queue()
        .queue_name(format!("{name}-dispatch-failures"))
        .send()
        .await
        .expect("failure queue")
        .queue_url
        .expect("failure queue url");
    let sqs_endpoint = faults.sqs.as_ref().map_or_else(
        || localstack().endpoint.clone(),
        |proxy| proxy.endpoint.clone(),
    );
    let dispatcher_api = RuntimeApi::start().await;
    let dispatcher = start_dispatcher(&dispatcher_api, &sqs_endpoint, &queues.url, &failure_url);
    let mut source = StreamSource::for_table(dispatcher_api, &events_table).await;
    source.on_failure = Some((sqs.clone(), failure_url.clone()));
    let projector_api = RuntimeApi::start().await;
    let dynamodb_endpoint = faults
        .dynamodb
        .as_ref()
        .map_or_else(|| local.endpoint.clone(), |proxy| proxy.endpoint.clone());
    // The projector opens the orders' personal data with the subjects'
    // keys, in the events table (through the same faults).
    let projector = start_with(
        &projector_api,
        Some(&table),
        &[
            ("AWS_ENDPOINT_URL_DYNAMODB", &dynamodb_endpoint),
            ("EVENT_STORE_TABLE", &events_table),
            ("PERSONAL_DATA_KEY", &personal_data::personal_data_key()),
        ],
    );
    let poller = Poller {
        sqs,
        queue_url: queues.url.clone(),
        queue_arn: queues.arn.clone(),
        api: projector_api,
    };
    Pipeline {
        events: EventStore::new(
            client.clone(),
            events_table.clone(),
            personal_data::keyed_domain(&client, &events_table),
        ),
        name,
        events_table,
        table,
        queues,
        failure_url,
        source,
        dispatcher,
        sqs_endpoint,
        poller,
        projector,
    }
}

impl Pipeline {
    /// Runs both event source mappings until neither has anything left.
    async fn settle(&mut self) {
        let started = Instant::now();
        loop {
            let sent = self.source.drain(Duration::from_secs(30)).await;
            let polled = self.poller.drain(Duration::from_secs(90)).await;
            if sent.is_empty() && polled.is_empty() {
                return;
            }
            assert!(
                started.elapsed() < Duration::from_secs(240),
                "the pipeline did not settle; dispatcher:\n{}\nprojector:\n{}",
                self.dispatcher.output(),
                self.projector.output()
            );
        }
    }

    /// The projection equals the fold of the event store: `rebuild` into a
    /// fresh table, compared item by item. Returns the items.
    async fn assert_projection_is_the_fold(&self) -> BTreeMap<(String, String), String> {
        self.assert_projection_is_the_fold_but(&[]).await
    }

    /// As [`Self::assert_projection_is_the_fold`], with `corrupt` events
    /// (`<stream>:<sequence>`) that `rebuild` must name as not done.
    async fn assert_projection_is_the_fold_but(
        &self,
        corrupt: &[&str],
    ) -> BTreeMap<(String, String), String> {
        let endpoint = &dynamodb_local().endpoint;
        let folded = format!("{}-fold", self.name);
        let (code, stdout, stderr) = run_local(
            env!("CARGO_BIN_EXE_rebuild"),
            endpoint,
            &[
                "--events-table",
                &self.events_table,
                "--table",
                &folded,
                "--create-table",
            ],
        );
        let not_done = format!(" {} not done", corrupt.len());
        assert!(stdout.contains(&not_done), "{stdout}{stderr}");
        for event in corrupt {
            assert!(stderr.contains(&format!("{event} not done")), "{stderr}");
        }
        assert_eq!(code, i32::from(!corrupt.is_empty()), "{stdout}{stderr}");
        let live = projection(endpoint, &self.table).await;
        let fold = projection(endpoint, &folded).await;
        assert_eq!(
            live,
            fold,
            "the projection is the fold of the event store; projector:\n{}",
            self.projector.output()
        );
        assert_eq!(self.dead_letters().await, 0, "nothing reached the DLQ");
        live
    }

    async fn dead_letters(&self) -> usize {
        bodies(&self.poller.sqs, &self.queues.dlq_url).await.len()
    }

    /// The reports in the dispatch failure queue.
    async fn failures(&self) -> Vec<Value> {
        bodies(&self.poller.sqs, &self.failure_url)
            .await
            .iter()
            .map(|body| serde_json::from_str(body).expect("a JSON report"))
            .collect()
    }

    /// Sum of a projector metric over its EMF documents.
    fn projected(&self, metric: &str) -> f64 {
        metric_sum(&self.projector.output(), metric)
    }

    fn dispatched(&self, metric: &str) -> f64 {
        metric_sum(&self.dispatcher.output(), metric)
    }

    async fn stored_events(&self, streams: &[String]) -> usize {
        let mut count = 0;
        for stream in streams {
            count += self
                .events
                .read(stream, 0, 10_000)
                .await
                .expect("read")
                .len();
        }
        count
    }
}

fn details(total: u64) -> Value {
    json!({ "customerName": "Ada", "email": "ada@example.com", "totalCents": total })
}

/// Appends until stored: another writer moving the head, or a storage
/// error, is tried again (the request id keeps it once).
async fn append(events: &EventStore, append: Append) {
    loop {
        match events.append(append.clone()).await {
            Ok(_) => return,
            Err(AppendError::Contention { .. } | AppendError::Store(_)) => continue,
            Err(err) => panic!("append: {err}"),
        }
    }
}

/// Orders created (one event each), then `updates` updates each.
async fn orders(events: &EventStore, ids: &[String], updates: u64) {
    for id in ids {
        append(
            events,
            Append::one(id.clone(), NewEvent::new("OrderCreated", details(100))),
        )
        .await;
    }
    for n in 1..=updates {
        for id in ids {
            append(
                events,
                Append::one(id.clone(), NewEvent::new("OrderUpdated", details(100 + n))),
            )
            .await;
        }
    }
}

fn names(prefix: &str, count: usize) -> Vec<String> {
    (0..count).map(|n| format!("{prefix}-{n}")).collect()
}
