//! The parts, started for one test: an events table and a KMS key; the
//! stream's mapping and the `dispatcher` binary; an SNS FIFO topic and two
//! SQS FIFO queues (each with its dead-letter queue); the `projector`
//! (with the key) and the `status-projector` (without), each with its
//! table; the tools run as an operator runs them. Every body a queue
//! delivers and every line a binary writes is kept, for the markers.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use aws_sdk_sqs::types::{Message, MessageSystemAttributeName};
use sequence_guard::personal::{DynamoKeys, Keyring};
use sequence_guard::producer::{Append, AppendError, EventStore, NewEvent, StoredEvent};
use sequence_guard::store::dynamodb::{connect, create_table, ensure_events_table};
use serde_json::Value;

use crate::support::dynamodb_local;
use crate::support::function::{Function, start_binary};
use crate::support::localstack::{
    Poller, Queues, bodies, fifo_queues, fifo_topic, kms, kms_key, localstack, sns, sqs,
    subscribe_raw,
};
use crate::support::runtime_api::RuntimeApi;
use crate::support::streams::StreamSource;

/// One consumer: its queues, its mapping, its function, its table, and
/// every body its queue delivered.
pub struct Consumer {
    pub queues: Queues,
    pub poller: Poller,
    pub function: Function,
    pub table: String,
    /// Each message its queue delivered, by id: its body.
    pub bodies: BTreeMap<String, String>,
    exe: &'static str,
    variables: Vec<(String, String)>,
    /// The output of its earlier processes.
    retired: String,
}

impl Consumer {
    fn start(exe: &'static str, api: &RuntimeApi, variables: &[(String, String)]) -> Function {
        let pairs: Vec<(&str, &str)> = variables
            .iter()
            .map(|(name, value)| (name.as_str(), value.as_str()))
            .collect();
        start_binary(exe, api, &pairs)
    }

    /// Polls its queue as Lambda's mapping does until it stays empty (or
    /// `limit` passes), keeping each body; the batches polled.
    pub async fn drain(&mut self, limit: Duration) -> usize {
        let started = Instant::now();
        let (mut polled, mut empty) = (0, 0);
        while started.elapsed() < limit {
            match self.poller.receive().await {
                Some(batch) => {
                    empty = 0;
                    polled += 1;
                    self.bodies.extend(batch.iter().filter_map(delivered));
                    self.poller.invoke(batch).await;
                }
                None => {
                    if self.poller.in_queue().await == 0 {
                        empty += 1;
                        if empty >= 2 {
                            break;
                        }
                    }
                }
            }
        }
        polled
    }

    /// A new process of the function (a new Lambda instance: it holds no
    /// key), on a Runtime API of its own; the old one is stopped.
    pub async fn restart(&mut self) {
        let api = RuntimeApi::start().await;
        let function = Consumer::start(self.exe, &api, &self.variables);
        let old = std::mem::replace(&mut self.function, function);
        self.retired.push_str(&old.output());
        drop(old);
        self.poller.api = api;
    }

    /// Everything its processes wrote.
    pub fn output(&self) -> String {
        format!("{}{}", self.retired, self.function.output())
    }
}

pub struct Pipeline {
    pub key_id: String,
    pub events: EventStore,
    pub events_table: String,
    pub topic_arn: String,
    pub failure_url: String,
    pub source: StreamSource,
    pub dispatcher: Function,
    pub orders: Consumer,
    pub status: Consumer,
    pub sqs: aws_sdk_sqs::Client,
    /// What the tools printed, stdout and stderr.
    tools: Arc<Mutex<String>>,
}

impl Pipeline {
    pub async fn start(test: &str) -> Pipeline {
        crate::logs::capture();
        let local = dynamodb_local();
        let endpoint = localstack().endpoint.clone();
        let client = connect(Some(&local.endpoint)).await;
        let name = format!("pp-{test}-{}", std::process::id());
        let events_table = format!("{name}-events");
        ensure_events_table(&client, &events_table)
            .await
            .expect("events table");
        let kms = kms().await;
        let key_id = kms_key(&kms).await;
        let sqs = sqs().await;
        let sns = sns().await;
        let topic_arn = fifo_topic(&sns, &format!("{name}-events")).await;
        let failure_url = sqs
            .create_queue()
            .queue_name(format!("{name}-dispatch-failures"))
            .send()
            .await
            .expect("failure queue")
            .queue_url
            .expect("failure queue url");

        let mut consumers = Vec::new();
        for (consumer, exe) in [
            ("orders", env!("CARGO_BIN_EXE_projector")),
            ("status", env!("CARGO_BIN_EXE_status-projector")),
        ] {
            let table = format!("{name}-{consumer}");
            create_table(&client, &table).await.expect("table");
            // Visibility 2 s: a message left in flight comes back quickly.
            let queues = fifo_queues(&sqs, &format!("{name}-{consumer}"), 2, 50).await;
            subscribe_raw(&sns, &topic_arn, &queues.arn).await;
            let mut variables = vec![
                ("TABLE_NAME".to_owned(), table.clone()),
                ("METRICS_SERVICE".to_owned(), format!("{consumer}-test")),
                // Every line the function writes, at its finest.
                ("AWS_LAMBDA_LOG_LEVEL".to_owned(), "TRACE".to_owned()),
            ];
            if consumer == "orders" {
                // The orders project the names: they open them.
                variables.extend([
                    ("PERSONAL_DATA_KEY".to_owned(), key_id.clone()),
                    ("EVENT_STORE_TABLE".to_owned(), events_table.clone()),
                    ("AWS_ENDPOINT_URL_KMS".to_owned(), endpoint.clone()),
                ]);
            }
            let api = RuntimeApi::start().await;
            let function = Consumer::start(exe, &api, &variables);
            let poller = Poller {
                sqs: sqs.clone(),
                queue_url: queues.url.clone(),
                queue_arn: queues.arn.clone(),
                api,
            };
            consumers.push(Consumer {
                queues,
                poller,
                function,
                table,
                bodies: BTreeMap::new(),
                exe,
                variables,
                retired: String::new(),
            });
        }
        let status = consumers.pop().expect("status");
        let orders = consumers.pop().expect("orders");

        let dispatcher_api = RuntimeApi::start().await;
        let dispatcher = start_binary(
            env!("CARGO_BIN_EXE_dispatcher"),
            &dispatcher_api,
            &[
                ("AWS_ENDPOINT_URL_SNS", &endpoint),
                ("AWS_ENDPOINT_URL_SQS", &endpoint),
                ("TOPIC_ARN", &topic_arn),
                ("FAILURE_QUEUE_URL", &failure_url),
                ("AWS_LAMBDA_FUNCTION_NAME", "sequence-guard-dispatcher"),
                ("METRICS_SERVICE", "dispatcher-test"),
                ("AWS_LAMBDA_LOG_LEVEL", "TRACE"),
            ],
        );
        let mut source = StreamSource::for_table(dispatcher_api, &events_table).await;
        source.on_failure = Some((sqs.clone(), failure_url.clone()));

        // The producer: the shop's domain with the subjects' keys.
        let keys = DynamoKeys::new(client.clone(), &events_table, kms, &key_id);
        let domain = shop::domain().with_keys(Arc::new(Keyring::new(keys)));
        Pipeline {
            key_id,
            events: EventStore::new(client, events_table.clone(), domain),
            events_table,
            topic_arn,
            failure_url,
            source,
            dispatcher,
            orders,
            status,
            sqs,
            tools: Arc::default(),
        }
    }

    /// Appends one event, trying again while another writer moves the head
    /// or the store fails; its sequence.
    pub async fn append(&self, stream: &str, event_type: &str, data: Value) -> u64 {
        let append = Append::one(stream, NewEvent::new(event_type, data));
        loop {
            match self.events.append(append.clone()).await {
                Ok(appended) => return appended.sequence,
                Err(AppendError::Contention { .. } | AppendError::Store(_)) => continue,
                Err(err) => panic!("append {event_type} to {stream}: {err}"),
            }
        }
    }

    /// A stream's stored events, in order.
    pub async fn stored(&self, stream: &str) -> Vec<StoredEvent> {
        self.events.read(stream, 0, 1000).await.expect("read")
    }

    /// The stream's mapping until nothing is left to send: every stored
    /// event on both queues, none consumed yet.
    pub async fn dispatch(&mut self) -> usize {
        self.source.drain(Duration::from_secs(30)).await.len()
    }

    /// Every mapping, until none has anything left.
    pub async fn settle(&mut self) {
        let started = Instant::now();
        loop {
            let sent = self.dispatch().await;
            let (orders, status) = tokio::join!(
                self.orders.drain(Duration::from_secs(30)),
                self.status.drain(Duration::from_secs(30))
            );
            if sent + orders + status == 0 {
                return;
            }
            assert!(
                started.elapsed() < Duration::from_secs(120),
                "the pipeline did not settle; dispatcher:\n{}",
                self.dispatcher.output()
            );
        }
    }

    /// Runs a tool of the worked example as an operator does, on DynamoDB
    /// Local and LocalStack's KMS, with `RUST_LOG=trace` and these
    /// variables besides: its exit code, stdout and stderr (kept).
    pub async fn tool(
        &self,
        exe: &str,
        args: &[&str],
        variables: &[(&str, &str)],
    ) -> (i32, String, String) {
        let mut command = tokio::process::Command::new(exe);
        command
            .args(["--endpoint-url", &dynamodb_local().endpoint])
            .args(args)
            .env_remove("TABLE_NAME")
            .env_remove("QUEUE_URL")
            .env_remove("TOPIC_ARN")
            .env("AWS_ACCESS_KEY_ID", "local")
            .env("AWS_SECRET_ACCESS_KEY", "local")
            .env("AWS_REGION", "us-east-1")
            .env("EVENTS_TABLE", &self.events_table)
            .env("PERSONAL_DATA_KEY", &self.key_id)
            .env("AWS_ENDPOINT_URL_KMS", &localstack().endpoint)
            .env("RUST_LOG", "trace");
        for (name, value) in variables {
            command.env(name, value);
        }
        let output = command
            .output()
            .await
            .unwrap_or_else(|err| panic!("{exe}: {err}"));
        let (stdout, stderr) = (
            String::from_utf8_lossy(&output.stdout).into_owned(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        );
        {
            let mut tools = self.tools.lock().expect("tools");
            tools.push_str(&stdout);
            tools.push_str(&stderr);
        }
        (output.status.code().unwrap_or(-1), stdout, stderr)
    }

    /// Every line every binary wrote so far.
    pub fn logs(&self) -> String {
        [
            self.dispatcher.output(),
            self.orders.output(),
            self.status.output(),
            self.tools.lock().expect("tools").clone(),
            crate::logs::captured(),
        ]
        .join("\n")
    }

    /// The orders' queue holding a stream's events 1, 2 and 3 (and no
    /// other): 1 applied, 3 delivered as for the third time (so a gap
    /// parked), 2 received and left in flight, returned.
    pub async fn park_the_third(&mut self) -> Message {
        // All three in the queue first (the topic delivers a moment after
        // the dispatcher publishes): one receive then takes them together.
        let started = Instant::now();
        while self.orders.poller.in_queue().await < 3 {
            assert!(started.elapsed() < Duration::from_secs(10), "3 queued");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let mut received: Vec<Message> = Vec::new();
        for _ in 0..10 {
            if received.len() == 3 {
                break;
            }
            for message in self.orders.poller.receive().await.unwrap_or_default() {
                if !received
                    .iter()
                    .any(|seen| seen.message_id == message.message_id)
                {
                    received.push(message);
                }
            }
        }
        received.sort_by_key(sequence_of);
        assert_eq!(
            received.iter().map(sequence_of).collect::<Vec<_>>(),
            [1, 2, 3]
        );
        self.orders
            .bodies
            .extend(received.iter().filter_map(delivered));
        let [one, two, mut three] = <[Message; 3]>::try_from(received).expect("three");
        let poll = self.orders.poller.invoke(vec![one]).await;
        assert!(poll.failed.is_empty(), "{poll:?}");
        three.attributes.get_or_insert_default().insert(
            MessageSystemAttributeName::ApproximateReceiveCount,
            "3".to_owned(),
        );
        let poll = self.orders.poller.invoke(vec![three]).await;
        assert!(poll.failed.is_empty(), "parked, so completed: {poll:?}");
        two
    }

    /// Every body given up: both dead-letter queues and the dispatcher's
    /// failure queue (taken from them).
    pub async fn given_up(&self) -> Vec<String> {
        let mut given_up = Vec::new();
        for url in [
            &self.orders.queues.dlq_url,
            &self.status.queues.dlq_url,
            &self.failure_url,
        ] {
            given_up.extend(bodies(&self.sqs, url).await);
        }
        given_up
    }
}

/// The `sequence` of a message's body.
fn sequence_of(message: &Message) -> u64 {
    let body: Value =
        serde_json::from_str(message.body.as_deref().unwrap_or_default()).expect("a JSON body");
    body["sequence"].as_u64().expect("a sequence")
}

/// A delivered message's id and body.
fn delivered(message: &Message) -> Option<(String, String)> {
    Some((message.message_id.clone()?, message.body.clone()?))
}
