//! The dispatcher's invocation: a batch of the event store's change
//! records sent ([`crate::dispatcher::dispatch`]), its metrics recorded, and
//! the partial batch response (the first record not sent, for redelivery).

use std::time::Instant;

use lambda_runtime::LambdaEvent;
use serde_json::Value;
use tracing::Instrument;

use super::{InvocationError, deadline, invocation_span};
use crate::dispatcher::{Queue, Settings, dispatch};
use crate::domain::Domain;
use crate::metrics::{self, Emf};

/// Handles one invocation: sends the stream batch, records its metrics
/// (one EMF document when `emf` is given) and answers with the partial
/// batch response.
pub async fn respond_to_stream<Q: Queue>(
    domain: &Domain,
    queue: &Q,
    emf: Option<&Emf>,
    event: LambdaEvent<Value>,
) -> Result<Value, InvocationError> {
    let span = invocation_span(&event.context);
    metrics::record_cold_start();
    let started = Instant::now();
    let deadline = deadline(event.context.deadline);
    let Some(records) = event.payload.get("Records").and_then(Value::as_array) else {
        let keys: Vec<&str> = event
            .payload
            .as_object()
            .map(|object| object.keys().map(String::as_str).collect())
            .unwrap_or_default();
        return Err(InvocationError::NotAStreamBatch(format!("fields {keys:?}")));
    };
    let outcome = dispatch(records, domain, queue, Settings::default(), Some(deadline))
        .instrument(span.clone())
        .await;
    if let Some(reason) = &outcome.unusable {
        span.in_scope(
            || tracing::error!(reason = %reason, "the stream is set up wrong: nothing sent"),
        );
        return Err(InvocationError::Unusable(reason.clone()));
    }
    span.in_scope(|| {
        if let Some(failure) = &outcome.failure {
            tracing::warn!(
                sequence_number = %failure,
                reason = outcome.failure_reason.as_deref().unwrap_or_default(),
                "a record is not sent: it and the records after it come again"
            );
        }
        tracing::info!(
            records = outcome.records,
            dispatched = outcome.dispatched,
            skipped = outcome.skipped,
            requests = outcome.requests,
            refused = outcome.refused,
            corrupt = outcome.corrupt.len(),
            "batch sent"
        );
    });
    metrics::record_dispatch(&outcome, started.elapsed());
    if let Some(emf) = emf {
        emf.flush();
    }
    serde_json::to_value(outcome.response())
        .map_err(|err| InvocationError::NotAStreamBatch(err.to_string()))
}
