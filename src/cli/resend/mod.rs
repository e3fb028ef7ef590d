//! `resend`: mends a hole. Sends a stream's stored events, or a range of
//! them, to the queue or the topic again, as the dispatcher sent them.
//!
//! ```text
//! resend --stream ID [--from SEQUENCE] [--to SEQUENCE] [--events-table NAME] [--queue-url URL | --topic-arn ARN] [--dedup-ttl-seconds SECONDS] [--endpoint-url URL]
//! ```
//!
//! Each event item of the range becomes the record the event store's
//! stream carried for its `INSERT`, and goes through the dispatcher's own
//! code ([`dispatch`](crate::dispatcher::dispatch)): the same
//! `MessageGroupId` and body (byte for byte), in stream order, at most ten
//! per `SendMessageBatch` (or `PublishBatch`), refusals sent again. The
//! consumer's guard absorbs what it applied already. The producer's trace
//! header is not stored with the event as read here, so a resent message
//! carries no `AWSTraceHeader`.
//!
//! The `MessageDeduplicationId` is the run's own
//! ([`resend_deduplication_id`](crate::dispatcher::resend_deduplication_id):
//! the dispatcher's, marked with the time the run started). SQS and SNS
//! drop a message whose deduplication id they took in the last five
//! minutes: under the dispatcher's id, an event it sent a moment ago would
//! vanish again. So a resent event reaches every consumer whatever its age.
//! No consumer keys on the deduplication id (the guard keys on the stream
//! and sequence, or the `eventId`).
//!
//! A counter's event (a type the domain handles with
//! [`Handling::add`](crate::Handling::add), without a sequence) is absorbed
//! only by its dedup record, which the consumer keeps `DEDUP_TTL_SECONDS`
//! from when it handled it (`--dedup-ttl-seconds`; the projector's default,
//! 35 days, when unset; with several consumers, give the shortest). A
//! resent copy may wait up to 35 days before it is handled (the queue's 14
//! days, the dead-letter queue's 14, a week to redrive). The whole range is
//! looked at before anything is sent: one that holds such an event whose
//! record may expire before then (`appendedAt` + the window before now + 35
//! days and an hour) is refused, nothing sent (resent, it would be added
//! again). Under the default window, that is every counter's event.
//!
//! The target is the dispatcher's: the queue `QUEUE_URL` (`--queue-url`)
//! or the topic `TOPIC_ARN` (`--topic-arn`), exactly one of them. Through
//! a topic, every consumer's queue gets the events again, and each
//! consumer's guard absorbs what it applied. The SQS and SNS endpoints are
//! the SDK's (`AWS_ENDPOINT_URL_SQS`, `AWS_ENDPOINT_URL_SNS`),
//! `--endpoint-url` is DynamoDB's.
//!
//! It prints one JSON line, `{"streamId": ..., "from": n, "to": n, "sent":
//! n, "requests": n}` (`to` is `null` when open). Exit status: 0 when every
//! event of the range was taken; 1 when one was not (the first such is
//! named, with its sequence and why; nothing after it is read) or the range
//! holds no event, or the event store cannot be read; 2 for bad arguments,
//! a missing variable, or a range holding a counter's event past its dedup
//! window (named; nothing sent, no line printed). The caller needs
//! `dynamodb:DescribeTable` and `dynamodb:Query` on the event store and
//! `sqs:SendMessage` on the queue, or `sns:Publish` on the topic and, for a
//! topic encrypted with a customer key (the template's is),
//! `kms:GenerateDataKey*` and `kms:Decrypt` on that key.

use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use clap::builder::NonEmptyStringValueParser;

use super::{arguments, events_table};
use crate::config::DEDUP_TTL_RANGE;
use crate::dispatcher::{Destination, Target};
use crate::domain::Domain;
use crate::producer::EventStore;
use crate::runner::RunnerConfig;
use crate::store::dynamodb::{check_table, connect};

mod resending;
mod send;
#[cfg(test)]
mod tests;
mod window;

use resending::Resending;
use send::{Sent, Stop, send_range};
use window::{Window, look};

/// The largest sequence (docs/behaviour.md, The message).
const MAX_SEQUENCE: u64 = i64::MAX as u64;

const EXAMPLES: &str = "\
Examples:
  resend --stream <stream id> --from 4
      its events from sequence 4 on (verify names where a hole starts)
  resend --stream <stream id> --from 2 --to 3
  QUEUE_URL=https://sqs.<region>.amazonaws.com/<account>/<queue>.fifo EVENTS_TABLE=<event store> resend --stream <stream id>
  TOPIC_ARN=arn:aws:sns:<region>:<account>:<topic>.fifo EVENTS_TABLE=<event store> resend --stream <stream id>
      to every consumer's queue, through the topic the dispatcher publishes to

A counter's event is not resent when its dedup record (kept DEDUP_TTL_SECONDS)
may expire before a resent copy is handled (it may wait 35 days: the queue's
14, the dead-letter queue's 14, a week to redrive): the range is refused
whole. Under the default window, 35 days, that is every counter's event.

Exit status: 0 when every event was taken; 1 when one was not (named), the
range holds no event or the event store cannot be read; 2 for bad arguments,
a missing variable, or a counter's event past its dedup window (named,
nothing sent).";

/// Sends the stored events of one stream (from `--from` to `--to`) to the
/// queue or the topic again, as the dispatcher sent them, under
/// deduplication ids of this run's own.
#[derive(Debug, Parser)]
#[command(name = "resend", version, after_help = EXAMPLES)]
struct Args {
    /// The stream: the aggregateId, or a deduplicated effect's counter id.
    #[arg(long, value_name = "ID", value_parser = NonEmptyStringValueParser::new())]
    stream: String,
    /// The first sequence to send (default: 1).
    #[arg(long, value_name = "SEQUENCE", value_parser = clap::value_parser!(u64).range(1..=MAX_SEQUENCE))]
    from: Option<u64>,
    /// The last sequence to send (default: the stream's last).
    #[arg(long, value_name = "SEQUENCE", value_parser = clap::value_parser!(u64).range(1..=MAX_SEQUENCE))]
    to: Option<u64>,
    /// The event store's table (default: EVENTS_TABLE).
    #[arg(long, value_name = "NAME", env = "EVENTS_TABLE")]
    events_table: Option<String>,
    /// The SQS FIFO queue the dispatcher sends to (default: QUEUE_URL).
    #[arg(long, value_name = "URL", env = "QUEUE_URL")]
    queue_url: Option<String>,
    /// Or the SNS FIFO topic the dispatcher publishes to (default:
    /// TOPIC_ARN).
    #[arg(long, value_name = "ARN", env = "TOPIC_ARN")]
    topic_arn: Option<String>,
    /// The DynamoDB endpoint, e.g. http://localhost:8000 for DynamoDB Local.
    #[arg(long, value_name = "URL")]
    endpoint_url: Option<String>,
    /// How long the consumers keep a dedup record (default:
    /// DEDUP_TTL_SECONDS, else the projector's default, 35 days; with
    /// several consumers, the shortest): a counter's event older than
    /// that less 35 days (a resent copy's longest wait) and an hour is
    /// not resent.
    #[arg(long, value_name = "SECONDS", env = "DEDUP_TTL_SECONDS",
          value_parser = clap::value_parser!(u64).range(DEDUP_TTL_RANGE))]
    dedup_ttl_seconds: Option<u64>,
}

/// The line a resend prints.
#[derive(Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct Summary<'a> {
    stream_id: &'a str,
    from: u64,
    /// `null` when the range is open.
    to: Option<u64>,
    /// Messages the queue (or the topic) took.
    sent: u64,
    /// `SendMessageBatch` (or `PublishBatch`) requests.
    requests: u64,
}

/// The `resend` binary of a domain: `fn main() -> ExitCode { cli::resend(my_domain()) }`.
#[tokio::main]
pub async fn resend(domain: Domain) -> ExitCode {
    if let Some(code) = super::refused("resend", &domain) {
        return code;
    }
    // The runner's and the sweep's log lines, to stderr, when RUST_LOG asks.
    crate::logging::init_local();
    let (name, args) = arguments::<Args>("resend", &domain);
    let from = args.from.unwrap_or(1);
    let to = args.to.unwrap_or(MAX_SEQUENCE);
    if from > to {
        eprintln!("{name}: --from {from} is after --to {to}: the range holds nothing");
        return ExitCode::from(2);
    }
    let Some(events_table) = events_table(&name, args.events_table, "--events-table") else {
        return ExitCode::from(2);
    };
    let target = match target(args.queue_url, args.topic_arn) {
        Ok(target) => target,
        Err(message) => {
            eprintln!("{name}: {message}");
            return ExitCode::from(2);
        }
    };
    let client = connect(args.endpoint_url.as_deref()).await;
    if let Err(err) = check_table(&client, &events_table).await {
        eprintln!("{name}: {err}");
        return ExitCode::FAILURE;
    }
    let events = EventStore::new(client, events_table.clone(), domain.clone());
    let stream = args.stream;
    let window = Window {
        ttl_seconds: args
            .dedup_ttl_seconds
            .unwrap_or(RunnerConfig::default().dedup_ttl_seconds),
        now: crate::lambda::epoch_seconds(),
    };
    // The whole range is looked at before anything is sent.
    match look(&events, &domain, &stream, &(from..=to), window).await {
        Ok(None) => {}
        Ok(Some(too_old)) => {
            eprintln!("{name}: {}", too_old.explain(&stream, window));
            return ExitCode::from(2);
        }
        Err(err) => {
            eprintln!("{name}: cannot read the event store {events_table}: {err}");
            return ExitCode::FAILURE;
        }
    }
    // Nothing is reported: a refused event stops the resend, named.
    let sdk = sdk().await;
    let queue = Resending::new(
        Destination::new(
            &target,
            aws_sdk_sqs::Client::new(&sdk),
            || aws_sdk_sns::Client::new(&sdk),
            String::new(),
        ),
        run_started(),
    );
    let mut sent = Sent::default();
    let outcome = send_range(&events, &domain, &queue, &stream, from..=to, &mut sent).await;
    let summary = Summary {
        stream_id: &stream,
        from,
        to: args.to,
        sent: sent.events,
        requests: sent.requests,
    };
    match serde_json::to_string(&summary) {
        Ok(line) => println!("{line}"),
        Err(err) => eprintln!("{name}: cannot write the summary: {err}"),
    }
    exit_code(&name, &summary, &events_table, outcome)
}

/// The exit status of a resend that sent `summary` and ended with
/// `outcome`, said on stderr when not a success.
fn exit_code(
    name: &str,
    summary: &Summary<'_>,
    events_table: &str,
    outcome: Result<(), Stop>,
) -> ExitCode {
    let stream = summary.stream_id;
    match outcome {
        Ok(()) if summary.sent == 0 => {
            let upto = summary
                .to
                .map_or_else(String::new, |to| format!(" to {to}"));
            let from = summary.from;
            eprintln!("{name}: stream {stream} holds no event from {from}{upto}: nothing sent");
            ExitCode::FAILURE
        }
        Ok(()) => ExitCode::SUCCESS,
        Err(Stop::NotTaken(first)) => {
            eprintln!(
                "{name}: stream {stream} sequence {} not taken: {}",
                first.sequence, first.reason
            );
            ExitCode::FAILURE
        }
        Err(Stop::Store(err)) => {
            eprintln!("{name}: cannot read the event store {events_table}: {err}");
            ExitCode::FAILURE
        }
    }
}

/// The dispatcher's target, from `--queue-url`/`QUEUE_URL` and
/// `--topic-arn`/`TOPIC_ARN`: exactly one, as the dispatcher reads them.
fn target(queue_url: Option<String>, topic_arn: Option<String>) -> Result<Target, String> {
    crate::config::target_from_values(queue_url, topic_arn).map_err(|err| {
        format!(
            "{err}: name the SQS FIFO queue (--queue-url) or the SNS FIFO topic (--topic-arn) \
             the dispatcher sends to"
        )
    })
}

/// Now, in epoch milliseconds: what makes a run's deduplication ids its
/// own.
fn run_started() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| {
            u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
        })
}

/// The SDK's configuration for the SQS and SNS clients: its environment
/// (`AWS_ENDPOINT_URL_SQS`, `AWS_ENDPOINT_URL_SNS` and the rest),
/// `us-east-1` when no region is set; a call gives up after 20 s.
async fn sdk() -> aws_config::SdkConfig {
    let timeouts = aws_config::timeout::TimeoutConfig::builder()
        .operation_attempt_timeout(Duration::from_secs(5))
        .operation_timeout(Duration::from_secs(20))
        .build();
    let sdk = crate::sdk::from_env().timeout_config(timeouts).load().await;
    if sdk.region().is_some() {
        return sdk;
    }
    sdk.to_builder()
        .region(aws_config::Region::new("us-east-1"))
        .build()
}
