//! The Lambda function: reads its configuration, builds the DynamoDB client
//! once, and serves SQS batches (and the schedule's sweeps of parked events)
//! through the Lambda Runtime API.

use std::process::ExitCode;

use lambda_runtime::{LambdaEvent, service_fn};
use sequence_guard::config::Config;
use sequence_guard::lambda::dispatch;
use sequence_guard::metrics::Emf;
use sequence_guard::runner::Runner;
use sequence_guard::store::dynamodb::DynamoStore;

#[tokio::main]
async fn main() -> ExitCode {
    if std::env::var_os("AWS_LAMBDA_RUNTIME_API").is_none() {
        eprintln!(
            "projector is a Lambda function: it runs under a Lambda runtime (AWS_LAMBDA_RUNTIME_API is not set). \
             Locally: `cargo lambda watch` then `cargo lambda invoke projector --data-file events/01-order-created-and-updated.json`, \
             or without a runtime `cargo run --bin replay -- events/*.json`"
        );
        return ExitCode::from(2);
    }
    // Plain text, or JSON when AWS_LAMBDA_LOG_FORMAT=JSON; never event data.
    sequence_guard::logging::init();
    let config = match Config::from_env() {
        Ok(config) => config,
        Err(err) => {
            tracing::error!(error = %err, "cannot start");
            return ExitCode::FAILURE;
        }
    };
    let emf = match Emf::install(&config.metrics_namespace, &config.metrics_service) {
        Ok(emf) => Some(emf),
        Err(err) => {
            tracing::warn!(error = %err, "running without metrics");
            None
        }
    };
    let sdk = aws_config::load_from_env().await;
    let store = DynamoStore::new(aws_sdk_dynamodb::Client::new(&sdk), config.table_name);
    let runner = Runner::new(store, config.runner);
    let served = lambda_runtime::run(service_fn(|event: LambdaEvent<serde_json::Value>| {
        dispatch(&runner, emf.as_ref(), event)
    }))
    .await;
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            tracing::error!(error = %err, "the runtime stopped");
            ExitCode::FAILURE
        }
    }
}
