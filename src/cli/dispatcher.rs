//! `dispatcher`, the Lambda function on the event store's stream: reads its
//! configuration, builds the clients once, and sends each stream batch to
//! the FIFO queue, or publishes it to the FIFO topic (docs/event-store.md:
//! the dispatcher, many consumers).

use std::process::ExitCode;
use std::time::Duration;

use lambda_runtime::{LambdaEvent, service_fn};

use crate::config::DispatcherConfig;
use crate::dispatcher::Destination;
use crate::domain::Domain;
use crate::lambda::respond_to_stream;
use crate::metrics::Emf;
use crate::metrics::describe_dispatcher;

/// The dispatcher of a domain (its own `bootstrap`):
/// `fn main() -> ExitCode { cli::dispatcher(my_domain()) }`. The domain
/// checks each stored body as the consumer will read it: an item that is
/// not a message of the domain is reported, not sent.
#[tokio::main]
pub async fn dispatcher(domain: Domain) -> ExitCode {
    if let Some(code) = super::refused("dispatcher", &domain) {
        return code;
    }
    if let Some(code) = super::outside_lambda(
        "dispatcher",
        "It reads the event store's DynamoDB stream. Locally: `cargo lambda watch` then \
         `cargo lambda invoke {name} --data-file events/dispatcher/stream-batch.json` (QUEUE_URL or TOPIC_ARN, and FAILURE_QUEUE_URL set)",
    ) {
        return code;
    }
    crate::logging::init();
    let config = match DispatcherConfig::from_env() {
        Ok(config) => config,
        Err(err) => {
            tracing::error!(error = %err, "cannot start");
            return ExitCode::FAILURE;
        }
    };
    let emf = match Emf::collector(&config.metrics_namespace, &config.metrics_service) {
        Ok(emf) => {
            describe_dispatcher();
            Some(emf)
        }
        Err(err) => {
            tracing::warn!(error = %err, "running without metrics");
            None
        }
    };
    // A call that hangs must not outlast the invocation: the sending stops
    // 4 s before the deadline (`Settings::margin`), more than one call takes.
    let timeouts = aws_config::timeout::TimeoutConfig::builder()
        .operation_attempt_timeout(Duration::from_secs(1))
        .operation_timeout(Duration::from_secs(3))
        .build();
    let sdk = crate::sdk::from_env().timeout_config(timeouts).load().await;
    let queue = Destination::new(
        &config.target,
        aws_sdk_sqs::Client::new(&sdk),
        || aws_sdk_sns::Client::new(&sdk),
        config.failure_queue_url,
    );
    // Shared, not borrowed: `run_concurrent` serves several invocations at
    // once when `AWS_LAMBDA_MAX_CONCURRENCY` is above 1 (Managed Instances).
    let shared = std::sync::Arc::new((domain, queue));
    super::served(
        lambda_runtime::run_concurrent(service_fn(move |event: LambdaEvent<serde_json::Value>| {
            let shared = std::sync::Arc::clone(&shared);
            async move { respond_to_stream(&shared.0, &shared.1, emf.as_ref(), event).await }
        }))
        .await,
    )
}
