//! LocalStack's SQS, SNS and KMS, in host mode (no Docker), started once per test
//! binary, and an event source mapping written for the tests that polls a
//! FIFO queue and invokes the function as Lambda's does.

use std::collections::HashMap;
use std::net::TcpStream;
use std::process::{ChildStdin, Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use aws_sdk_sqs::Client;
use aws_sdk_sqs::types::{
    DeleteMessageBatchRequestEntry, MessageSystemAttributeName, QueueAttributeName,
};
use md5::{Digest, Md5};
use serde_json::json;

use super::free_port;
use super::function::failures;
use super::runtime_api::{Answer, RuntimeApi};

pub struct LocalStack {
    pub endpoint: String,
    _stdin: Mutex<ChildStdin>,
}

static LOCALSTACK: OnceLock<LocalStack> = OnceLock::new();

/// The shared LocalStack of this test binary, installed (once, into the cache)
/// and started on first use.
pub fn localstack() -> &'static LocalStack {
    LOCALSTACK
        .get_or_init(|| start().unwrap_or_else(|err| panic!("LocalStack could not start: {err}")))
}

fn start() -> Result<LocalStack, String> {
    let tools = concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/python-tools.sh");
    let output = Command::new("bash")
        .args([tools, "localstack"])
        .output()
        .map_err(|err| format!("cannot run {tools}: {err}"))?;
    if !output.status.success() {
        return Err(format!(
            "{tools} localstack failed: {}",
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    let bin = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    // LocalStack's own main, with what its KMS needs on Python 3.10 and 3.11.
    let main = concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/run-localstack.py");
    let port = free_port();
    let root = std::env::temp_dir().join(format!("sequence-guard-localstack-{port}"));
    std::fs::create_dir_all(&root).map_err(|err| err.to_string())?;
    let log = root.join("localstack.log");
    let mut child = Command::new("bash")
        .arg("-c")
        .arg(r#""$1/python" "$3" >"$2" 2>&1 & pid=$!; read -r _; kill "$pid" 2>/dev/null; wait"#)
        .args(["watchdog", &bin, &log.display().to_string(), main])
        .current_dir(&root)
        .env("OVERRIDE_IN_DOCKER", "0")
        .env("SERVICES", "sqs,sns,kms")
        .env("EAGER_SERVICE_LOADING", "1")
        .env("GATEWAY_LISTEN", format!("127.0.0.1:{port}"))
        .env("FILESYSTEM_ROOT", &root)
        .env("DNS_ADDRESS", "0")
        .env("DISABLE_EVENTS", "1")
        .env("SKIP_SSL_CERT_DOWNLOAD", "1")
        .stdin(Stdio::piped())
        .spawn()
        .map_err(|err| format!("cannot start LocalStack: {err}"))?;
    let stdin = child
        .stdin
        .take()
        .ok_or("no stdin for LocalStack's watchdog")?;
    let started = Instant::now();
    loop {
        let ready = TcpStream::connect(("127.0.0.1", port)).is_ok()
            && std::fs::read_to_string(&log).is_ok_and(|text| text.contains("Ready."));
        if ready {
            break;
        }
        if started.elapsed() > Duration::from_secs(120) {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            return Err(format!("not ready after 120 s; its log:\n{text}"));
        }
        if let Ok(Some(status)) = child.try_wait() {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            return Err(format!("exited with {status}; its log:\n{text}"));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Ok(LocalStack {
        endpoint: format!("http://127.0.0.1:{port}"),
        _stdin: Mutex::new(stdin),
    })
}

pub async fn sqs() -> Client {
    let config = aws_sdk_sqs::config::Builder::new()
        .behavior_version(aws_sdk_sqs::config::BehaviorVersion::latest())
        .endpoint_url(&localstack().endpoint)
        .region(aws_sdk_sqs::config::Region::new("us-east-1"))
        .credentials_provider(aws_sdk_sqs::config::Credentials::new(
            "test", "test", None, None, "test",
        ))
        .build();
    Client::from_conf(config)
}

/// An SNS client for the shared LocalStack.
pub async fn sns() -> aws_sdk_sns::Client {
    let config = aws_sdk_sns::config::Builder::new()
        .behavior_version(aws_sdk_sns::config::BehaviorVersion::latest())
        .endpoint_url(&localstack().endpoint)
        .region(aws_sdk_sns::config::Region::new("us-east-1"))
        .credentials_provider(aws_sdk_sns::config::Credentials::new(
            "test", "test", None, None, "test",
        ))
        .build();
    aws_sdk_sns::Client::from_conf(config)
}

/// A KMS client for the shared LocalStack.
pub async fn kms() -> aws_sdk_kms::Client {
    let config = aws_sdk_kms::config::Builder::new()
        .behavior_version(aws_sdk_kms::config::BehaviorVersion::latest())
        .endpoint_url(&localstack().endpoint)
        .region(aws_sdk_kms::config::Region::new("us-east-1"))
        .credentials_provider(aws_sdk_kms::config::Credentials::new(
            "test", "test", None, None, "test",
        ))
        .build();
    aws_sdk_kms::Client::from_conf(config)
}

/// A new symmetric KMS key (as the stack's `PERSONAL_DATA_KEY`); its id.
pub async fn kms_key(kms: &aws_sdk_kms::Client) -> String {
    kms.create_key()
        .description("sequence-guard tests: personal data keys")
        .send()
        .await
        .expect("create a KMS key")
        .key_metadata
        .map(|metadata| metadata.key_id)
        .expect("the key's id")
}

/// One event store table on DynamoDB Local and one key of LocalStack's
/// KMS, for one test of subjects' keys: a test's own processes (its own
/// keyrings and event stores) are made over it.
pub struct KeyedEventStore {
    pub dynamodb: aws_sdk_dynamodb::Client,
    pub kms: aws_sdk_kms::Client,
    pub table: String,
    pub key_id: String,
}

impl KeyedEventStore {
    /// The table `<prefix>-<name>-<pid>`, made now, and a new key.
    pub async fn new(prefix: &str, name: &str) -> KeyedEventStore {
        let dynamodb =
            sequence_guard::store::dynamodb::connect(Some(&super::dynamodb_local().endpoint)).await;
        let table = format!("{prefix}-{name}-{}", std::process::id());
        sequence_guard::store::dynamodb::ensure_events_table(&dynamodb, &table)
            .await
            .expect("events table");
        let kms = kms().await;
        let key_id = kms_key(&kms).await;
        KeyedEventStore {
            dynamodb,
            kms,
            table,
            key_id,
        }
    }

    /// A key source of its own (its own request counts).
    pub fn keys(&self) -> std::sync::Arc<sequence_guard::personal::DynamoKeys> {
        std::sync::Arc::new(sequence_guard::personal::DynamoKeys::new(
            self.dynamodb.clone(),
            &self.table,
            self.kms.clone(),
            &self.key_id,
        ))
    }
}

/// An SNS FIFO topic (`<name>.fifo`, no content-based deduplication, as
/// the template's); its ARN.
pub async fn fifo_topic(sns: &aws_sdk_sns::Client, name: &str) -> String {
    sns.create_topic()
        .name(format!("{name}.fifo"))
        .attributes("FifoTopic", "true")
        .attributes("ContentBasedDeduplication", "false")
        .send()
        .await
        .expect("create topic")
        .topic_arn
        .expect("topic ARN")
}

/// Subscribes a queue to a topic as the template does: raw delivery, no
/// filter policy.
pub async fn subscribe_raw(sns: &aws_sdk_sns::Client, topic_arn: &str, queue_arn: &str) {
    sns.subscribe()
        .topic_arn(topic_arn)
        .protocol("sqs")
        .endpoint(queue_arn)
        .attributes("RawMessageDelivery", "true")
        .return_subscription_arn(true)
        .send()
        .await
        .expect("subscribe");
}

/// A FIFO queue with a FIFO dead-letter queue behind it.
pub struct Queues {
    pub url: String,
    pub arn: String,
    pub dlq_url: String,
}

pub async fn fifo_queues(
    sqs: &Client,
    name: &str,
    visibility_seconds: u32,
    max_receive_count: u32,
) -> Queues {
    let dlq = sqs
        .create_queue()
        .queue_name(format!("{name}-dlq.fifo"))
        .attributes(QueueAttributeName::FifoQueue, "true")
        .send()
        .await
        .expect("create DLQ");
    let dlq_url = dlq.queue_url.expect("DLQ url");
    let dlq_arn = queue_arn(sqs, &dlq_url).await;
    let queue = sqs
        .create_queue()
        .queue_name(format!("{name}.fifo"))
        .attributes(QueueAttributeName::FifoQueue, "true")
        .attributes(
            QueueAttributeName::VisibilityTimeout,
            visibility_seconds.to_string(),
        )
        .attributes(
            QueueAttributeName::RedrivePolicy,
            json!({ "deadLetterTargetArn": dlq_arn, "maxReceiveCount": max_receive_count })
                .to_string(),
        )
        .send()
        .await
        .expect("create queue");
    let url = queue.queue_url.expect("queue url");
    let arn = queue_arn(sqs, &url).await;
    Queues { url, arn, dlq_url }
}

async fn queue_arn(sqs: &Client, url: &str) -> String {
    sqs.get_queue_attributes()
        .queue_url(url)
        .attribute_names(QueueAttributeName::QueueArn)
        .send()
        .await
        .expect("queue attributes")
        .attributes
        .and_then(|attributes| attributes.get(&QueueAttributeName::QueueArn).cloned())
        .expect("queue ARN")
}

/// Sends one message, as a producer does.
pub async fn send(sqs: &Client, url: &str, group: &str, dedup: &str, body: &str) {
    sqs.send_message()
        .queue_url(url)
        .message_group_id(group)
        .message_deduplication_id(dedup)
        .message_body(body)
        .send()
        .await
        .expect("send");
}

/// Takes every message waiting in a queue (received and deleted) and returns
/// their bodies, in order. Deleting matters for FIFO queues: a group's next
/// messages are not handed out while earlier ones are in flight.
pub async fn bodies(sqs: &Client, url: &str) -> Vec<String> {
    let mut bodies = Vec::new();
    loop {
        let received = sqs
            .receive_message()
            .queue_url(url)
            .max_number_of_messages(10)
            .send()
            .await
            .expect("receive");
        let messages = received.messages.unwrap_or_default();
        if messages.is_empty() {
            return bodies;
        }
        for message in messages {
            sqs.delete_message()
                .queue_url(url)
                .receipt_handle(message.receipt_handle.clone().unwrap_or_default())
                .send()
                .await
                .expect("delete");
            bodies.extend(message.body);
        }
    }
}

/// Moves every message of a dead-letter queue back to its source queue, as
/// an operator's redrive does: same message group, a new deduplication id.
/// Returns the bodies moved, in order.
pub async fn redrive(sqs: &Client, dlq_url: &str, url: &str) -> Vec<String> {
    let mut moved = Vec::new();
    loop {
        let received = sqs
            .receive_message()
            .queue_url(dlq_url)
            .max_number_of_messages(10)
            .message_system_attribute_names(MessageSystemAttributeName::MessageGroupId)
            .send()
            .await
            .expect("receive from the DLQ");
        let messages = received.messages.unwrap_or_default();
        if messages.is_empty() {
            return moved;
        }
        for message in messages {
            let body = message.body.clone().unwrap_or_default();
            let group = message
                .attributes
                .as_ref()
                .and_then(|attributes| attributes.get(&MessageSystemAttributeName::MessageGroupId))
                .cloned()
                .expect("a FIFO message has a group");
            let dedup = format!(
                "redriven-{}",
                message.message_id.clone().unwrap_or_default()
            );
            send(sqs, url, &group, &dedup, &body).await;
            sqs.delete_message()
                .queue_url(dlq_url)
                .receipt_handle(message.receipt_handle.clone().unwrap_or_default())
                .send()
                .await
                .expect("delete from the DLQ");
            moved.push(body);
        }
    }
}

/// What one poll did.
#[derive(Debug, Default, Clone)]
pub struct Poll {
    pub received: Vec<String>,
    pub failed: Vec<String>,
}

/// An event source mapping as Lambda runs it for a FIFO queue: batches of at
/// most 10, completed messages deleted, failed ones left to their visibility
/// timeout (and so to the dead-letter queue after `maxReceiveCount`).
pub struct Poller {
    pub sqs: Client,
    pub queue_url: String,
    pub queue_arn: String,
    pub api: RuntimeApi,
}

impl Poller {
    /// Receives one batch and hands it to the function; `None` when nothing came.
    pub async fn poll(&self) -> Option<Poll> {
        let batch = self.receive().await?;
        Some(self.invoke(batch).await)
    }

    /// Receives a batch, as Lambda's poller does, without invoking.
    pub async fn receive(&self) -> Option<Vec<aws_sdk_sqs::types::Message>> {
        let received = self
            .sqs
            .receive_message()
            .queue_url(&self.queue_url)
            .max_number_of_messages(10)
            .wait_time_seconds(1)
            .message_system_attribute_names(MessageSystemAttributeName::All)
            .send()
            .await
            .expect("receive");
        received.messages.filter(|messages| !messages.is_empty())
    }

    /// Invokes the function with a received batch and deletes what it completed.
    pub async fn invoke(&self, batch: Vec<aws_sdk_sqs::types::Message>) -> Poll {
        let records: Vec<serde_json::Value> =
            batch.iter().map(|message| self.record(message)).collect();
        let event = json!({ "Records": records }).to_string();
        let answer = self.api.invoke(&event).await;
        let failed = match &answer {
            Answer::Response(_) => failures(&answer),
            // The invocation failed as a whole: every message goes back.
            Answer::Error(_) => batch.iter().filter_map(|m| m.message_id.clone()).collect(),
        };
        let completed: Vec<DeleteMessageBatchRequestEntry> = batch
            .iter()
            .filter(|message| {
                message
                    .message_id
                    .as_ref()
                    .is_some_and(|id| !failed.contains(id))
            })
            .enumerate()
            .filter_map(|(index, message)| {
                DeleteMessageBatchRequestEntry::builder()
                    .id(index.to_string())
                    .receipt_handle(message.receipt_handle.clone()?)
                    .build()
                    .ok()
            })
            .collect();
        if !completed.is_empty() {
            // A receipt handle gone stale (the message was received again) fails to
            // delete, as on SQS: the message comes back and is found done.
            let _ = self
                .sqs
                .delete_message_batch()
                .queue_url(&self.queue_url)
                .set_entries(Some(completed))
                .send()
                .await;
        }
        Poll {
            received: batch.iter().filter_map(|m| m.message_id.clone()).collect(),
            failed,
        }
    }

    /// A record shaped as Lambda delivers it.
    fn record(&self, message: &aws_sdk_sqs::types::Message) -> serde_json::Value {
        let body = message.body.clone().unwrap_or_default();
        let attributes: HashMap<String, String> = message
            .attributes
            .clone()
            .unwrap_or_default()
            .into_iter()
            .map(|(name, value)| (name.as_str().to_owned(), value))
            .collect();
        let md5: String = Md5::digest(body.as_bytes())
            .iter()
            .map(|byte| format!("{byte:02x}"))
            .collect();
        json!({
            "messageId": message.message_id,
            "receiptHandle": message.receipt_handle,
            "body": body,
            "attributes": attributes,
            "messageAttributes": {},
            "md5OfBody": md5,
            "eventSource": "aws:sqs",
            "eventSourceARN": self.queue_arn,
            "awsRegion": "us-east-1",
        })
    }

    /// Polls until the queue has stayed empty through two polls in a row, or
    /// `limit` passes. Returns every poll.
    pub async fn drain(&self, limit: Duration) -> Vec<Poll> {
        let started = Instant::now();
        let mut polls = Vec::new();
        let mut empty = 0;
        while started.elapsed() < limit {
            match self.poll().await {
                Some(poll) => {
                    empty = 0;
                    polls.push(poll);
                }
                None => {
                    if self.in_queue().await == 0 {
                        empty += 1;
                        if empty >= 2 {
                            break;
                        }
                    }
                }
            }
        }
        polls
    }

    /// Messages in the queue, visible or in flight.
    pub async fn in_queue(&self) -> u64 {
        let attributes = self
            .sqs
            .get_queue_attributes()
            .queue_url(&self.queue_url)
            .attribute_names(QueueAttributeName::ApproximateNumberOfMessages)
            .attribute_names(QueueAttributeName::ApproximateNumberOfMessagesNotVisible)
            .send()
            .await
            .expect("queue attributes")
            .attributes
            .unwrap_or_default();
        [
            QueueAttributeName::ApproximateNumberOfMessages,
            QueueAttributeName::ApproximateNumberOfMessagesNotVisible,
        ]
        .iter()
        .filter_map(|name| attributes.get(name)?.parse::<u64>().ok())
        .sum()
    }
}
