//! `projector`, the Lambda function: reads its configuration, builds the DynamoDB client
//! once, and serves SQS batches (and the schedule's sweeps of parked events)
//! through the Lambda Runtime API.

use std::process::ExitCode;

use lambda_runtime::{LambdaEvent, service_fn};

use crate::config::Config;
use crate::domain::Domain;
use crate::lambda::respond;
use crate::metrics::Emf;
use crate::runner::Runner;
use crate::store::dynamodb::DynamoStore;

/// The Lambda function of a domain (the `bootstrap`):
/// `fn main() -> ExitCode { cli::projector(my_domain()) }`.
#[tokio::main]
pub async fn projector(domain: Domain) -> ExitCode {
    if let Some(code) = super::refused("projector", &domain) {
        return code;
    }
    if let Some(code) = super::outside_lambda(
        "projector",
        "Locally: `cargo lambda watch` then `cargo lambda invoke {name} --data-file <an SQS event>.json`, \
         or without a runtime the domain's replay binary (`cargo run --bin replay -- events/*.json` for the worked example)",
    ) {
        return code;
    }
    // Plain text, or JSON when AWS_LAMBDA_LOG_FORMAT=JSON; never event data.
    crate::logging::init();
    let mut config = match Config::from_env() {
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
    let sdk = crate::sdk::from_env().load().await;
    let client = aws_sdk_dynamodb::Client::new(&sdk);
    let mut store = DynamoStore::new(client.clone(), config.table_name.clone());
    // A domain that projects personal data opens it with the subjects'
    // keys; one that declares none never reads a key.
    if domain.declares_personal() && config.personal_data_key.is_none() {
        tracing::warn!(
            "the domain declares personal data and PERSONAL_DATA_KEY is not set: sealed values will not be opened (their messages fail, and reach the dead-letter queue)"
        );
    }
    let domain = match super::keys::keyed(
        domain,
        &client,
        config.event_store_table.as_deref(),
        config.personal_data_key.clone(),
    )
    .await
    {
        Ok(domain) => domain,
        Err(err) => {
            tracing::error!(error = %err, "cannot start");
            return ExitCode::FAILURE;
        }
    };
    if let Some(process) = domain.process() {
        // A process's steps append to the event store in their transactions.
        let Some(table) = config.event_store_table else {
            tracing::error!(
                process = process.name(),
                "cannot start: a process needs EVENT_STORE_TABLE, the event store's table it appends to"
            );
            return ExitCode::FAILURE;
        };
        // What it appends is sealed like any producer's.
        let producer = match super::keys::keyed(
            process.store_domain().clone(),
            &client,
            Some(&table),
            config.personal_data_key.clone(),
        )
        .await
        {
            Ok(producer) => producer,
            Err(err) => {
                tracing::error!(error = %err, "cannot start");
                return ExitCode::FAILURE;
            }
        };
        // Its start, its table's creation: an event appended before it that
        // a gap's read brings in is folded without reacting, as its
        // rebuild folds it (live messages are all sent after it).
        match crate::store::dynamodb::created_at(&client, &config.table_name).await {
            Ok(Some(start)) => {
                config.runner.reacts_from = Some(start);
            }
            Ok(None) => {
                tracing::error!(
                    table = %config.table_name,
                    "cannot start: DynamoDB does not say when the process's table was created (its start)"
                );
                return ExitCode::FAILURE;
            }
            Err(err) => {
                tracing::error!(error = %err, "cannot start: reading when the process's table was created (its start)");
                return ExitCode::FAILURE;
            }
        }
        let events = crate::producer::EventStore::new(client, table, producer)
            .with_retry_budget(std::time::Duration::from_secs(5));
        store = store.with_event_store(events);
    } else if let Some(table) = config.event_store_table {
        // A consumer of an event store reads a gap's events from it.
        let events = crate::producer::EventStore::new(client, table, domain.clone());
        store = store.with_event_store(events);
    }
    // Shared, not borrowed: under Lambda Managed Instances
    // (`AWS_LAMBDA_MAX_CONCURRENCY` above 1) `run_concurrent` serves several
    // invocations at once in this process; otherwise one at a time, as `run`.
    let runner = std::sync::Arc::new(Runner::new(domain, store, config.runner));
    super::served(
        lambda_runtime::run_concurrent(service_fn(move |event: LambdaEvent<serde_json::Value>| {
            let runner = std::sync::Arc::clone(&runner);
            async move { respond(&runner, emf.as_ref(), event).await }
        }))
        .await,
    )
}
