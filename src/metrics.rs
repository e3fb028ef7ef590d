//! CloudWatch metrics, in the Embedded Metric Format: one document per
//! invocation, written to stdout, where Lambda's log stream carries it to
//! CloudWatch.
//!
//! | metric | unit | what |
//! | --- | --- | --- |
//! | `Applied`, `Duplicate`, `Parked`, `Ignored`, `Conflict`, `Gap`, `NotCreated`, `Invalid`, `Skipped`, `StorageError`, `Rejected`, `HandlerError` | Count | messages by outcome |
//! | `ColdStart` | Count | 1 in the first invocation's document of each process, 0 after (Powertools' name) |
//! | `Drained` | Count | parked events applied (their gap closed) |
//! | `Filled` | Count | events read from the event store and applied before the message that waited for them (a gap closed at once) |
//! | `ParkingFull` | Count | gaps failed because `MAX_PARKED_PER_STREAM` events are parked on their entity |
//! | `OldestParkedAge` | Seconds | per entity that parked or drained, and from each sweep (0 when nothing is parked): how long the oldest parked event has waited |
//! | `ParkedEntities` | Count | from each sweep that walked the whole index: entities with events parked |
//! | `DeadlinesFired` | Count | a process's, from each sweep that had deadlines due: deadlines fired (their steps written) |
//! | `DeadlinesMoved` | Count | a process's: deadlines whose exact append found the stream moved (nothing written; decided again); at every sweep, the process is behind its streams |
//! | `DeadlinesFailed` | Count | a process's: deadlines not fired for a store error or a handler that broke its rule (tried again at the next sweep) |
//! | `SweepIncomplete` | Count | sweeps that reached their deadline before the end of the index |
//! | `Messages` | Count | messages in the batch |
//! | `DynamoDbRequests` | Count | requests the batch sent to the table |
//! | `BatchDuration` | Milliseconds | time to run the batch |
//!
//! When one process serves several invocations at once (Lambda Managed
//! Instances), a document holds what any of them recorded since the last
//! flush: each count and each duration is in exactly one document, so
//! CloudWatch's sums and percentiles are right, but a document is not one
//! invocation's.
//!
//! Every metric has the one dimension `Service`. The values are recorded
//! through the `metrics` facade; without an installed [`Emf`] collector (in
//! `replay` and in tests) recording does nothing.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use metrics::Unit;
use metrics_cloudwatch_embedded::{Builder, Collector};

use crate::runner::{BatchReport, Outcome};
use crate::sweep::SweepReport;

/// The metric name of an outcome.
pub fn metric_name(outcome: Outcome) -> &'static str {
    match outcome {
        Outcome::Applied => "Applied",
        Outcome::Duplicate => "Duplicate",
        Outcome::Parked => "Parked",
        Outcome::Ignored => "Ignored",
        Outcome::Conflict => "Conflict",
        Outcome::Gap => "Gap",
        Outcome::NotCreated => "NotCreated",
        Outcome::Invalid => "Invalid",
        Outcome::Skipped => "Skipped",
        Outcome::StorageError => "StorageError",
        Outcome::Rejected => "Rejected",
        Outcome::HandlerError => "HandlerError",
    }
}

/// Every metric besides the outcomes'.
pub const METRICS: [&str; 13] = [
    "ColdStart",
    "Drained",
    "Filled",
    "SweepIncomplete",
    "DeadlinesFired",
    "DeadlinesMoved",
    "DeadlinesFailed",
    "ParkingFull",
    "OldestParkedAge",
    "ParkedEntities",
    "Messages",
    "DynamoDbRequests",
    "BatchDuration",
];

/// The names of every metric the function emits.
pub fn emitted() -> Vec<&'static str> {
    Outcome::ALL
        .iter()
        .map(|outcome| metric_name(*outcome))
        .chain(METRICS)
        .collect()
}

/// Whether no invocation of this process has been recorded yet.
static COLD: AtomicBool = AtomicBool::new(true);

/// Records `ColdStart`: 1 for the first invocation of the process, 0 after
/// (as Powertools for AWS Lambda does).
pub fn record_cold_start() {
    let cold = COLD.swap(false, Ordering::Relaxed);
    metrics::counter!("ColdStart").increment(u64::from(cold));
}

/// Records one batch.
pub fn record(report: &BatchReport, elapsed: Duration) {
    for outcome in Outcome::ALL {
        let count = match outcome {
            // Parked events found to conflict count too.
            Outcome::Conflict => report.conflicts(),
            // And parked events whose handler faulted while drained.
            Outcome::HandlerError => report.handler_errors(),
            other => report.count(other),
        };
        metrics::counter!(metric_name(outcome)).increment(count as u64);
    }
    metrics::counter!("Drained").increment(report.drained() as u64);
    metrics::counter!("Filled").increment(report.filled_events());
    metrics::counter!("ParkingFull").increment(report.parking_full() as u64);
    for age in report
        .parking
        .iter()
        .filter_map(|parking| parking.oldest_parked_age_seconds)
    {
        metrics::histogram!("OldestParkedAge").record(age as f64);
    }
    metrics::counter!("Messages").increment(report.messages.len() as u64);
    metrics::counter!("DynamoDbRequests").increment(report.requests);
    metrics::histogram!("BatchDuration").record(elapsed.as_secs_f64() * 1000.0);
}

/// Records one sweep of parked events.
pub fn record_sweep(report: &SweepReport) {
    // Histograms, not gauges: a gauge would be written again with every
    // later document, and a count would be summed across sweeps.
    // A walk cut short by the deadline saw only part of the index: its
    // counts are not the index's, and a 0 would clear the alarm.
    if report.complete {
        metrics::histogram!("ParkedEntities").record(report.entities as f64);
        metrics::histogram!("OldestParkedAge")
            .record(report.oldest_parked_age_seconds.unwrap_or(0) as f64);
    } else {
        metrics::counter!("SweepIncomplete").increment(1);
        if let Some(age) = report.oldest_parked_age_seconds {
            metrics::histogram!("OldestParkedAge").record(age as f64);
        }
    }
    let drained: usize = report
        .drained
        .iter()
        .map(|parking| parking.drained.len())
        .sum();
    metrics::counter!("Drained").increment(drained as u64);
    if report.deadlines != crate::runner::DeadlineReport::default() {
        metrics::counter!("DeadlinesFired").increment(report.deadlines.fired);
        metrics::counter!("DeadlinesMoved").increment(report.deadlines.moved);
        metrics::counter!("DeadlinesFailed").increment(report.deadlines.failed);
    }
    // A parked event whose handler faults keeps its alarm on at every sweep.
    metrics::counter!("HandlerError")
        .increment(crate::runner::stuck_handler_errors(&report.drained) as u64);
}

/// The process's EMF collector (the `metrics` recorder), installed once by
/// the `projector` binary.
#[derive(Clone, Copy)]
pub struct Emf {
    collector: &'static Collector,
}

/// [`Emf::install`] could not install the EMF collector; holds the reason.
#[derive(Debug, thiserror::Error)]
#[error("cannot install the metrics collector: {0}")]
pub struct MetricsError(String);

impl Emf {
    /// Installs the collector as the process's `metrics` recorder.
    pub fn install(namespace: &str, service: &str) -> Result<Emf, MetricsError> {
        let emf = Emf::collector(namespace, service)?;
        for outcome in Outcome::ALL {
            metrics::describe_counter!(metric_name(outcome), Unit::Count, "messages by outcome");
        }
        metrics::describe_counter!("Drained", Unit::Count, "parked events applied");
        metrics::describe_counter!(
            "Filled",
            Unit::Count,
            "events read from the event store to close a gap"
        );
        metrics::describe_counter!(
            "ColdStart",
            Unit::Count,
            "1 for the first invocation of a process"
        );
        metrics::describe_counter!("ParkingFull", Unit::Count, "gaps not parked: no room");
        metrics::describe_histogram!(
            "OldestParkedAge",
            Unit::Seconds,
            "how long the oldest parked event has waited"
        );
        metrics::describe_histogram!("ParkedEntities", Unit::Count, "entities with events parked");
        metrics::describe_counter!(
            "SweepIncomplete",
            Unit::Count,
            "sweeps cut short by the deadline"
        );
        metrics::describe_counter!("Messages", Unit::Count, "messages in the batch");
        metrics::describe_counter!("DynamoDbRequests", Unit::Count, "requests to the table");
        metrics::describe_histogram!("BatchDuration", Unit::Milliseconds, "time to run the batch");
        Ok(emf)
    }

    /// Installs the collector as the process's `metrics` recorder, without
    /// describing the projector's metrics (the dispatcher's function).
    pub fn collector(namespace: &str, service: &str) -> Result<Emf, MetricsError> {
        let collector = Builder::new()
            .cloudwatch_namespace(namespace.to_owned())
            .with_dimension("Service", service.to_owned())
            .emit_zeros(true)
            .init()
            .map_err(|err| MetricsError(err.to_string()))?;
        Ok(Emf { collector })
    }

    /// Writes what was recorded since the last flush as one EMF document.
    pub fn flush(&self) {
        if let Err(err) = self.collector.flush(std::io::stdout().lock()) {
            tracing::warn!(error = %err, "cannot write the metrics document");
        }
    }
}

/// Records one dispatched batch's metrics (`BatchDuration` the time it
/// took).
pub(crate) fn record_dispatch(outcome: &crate::dispatcher::Dispatch, took: std::time::Duration) {
    metrics::counter!("Records").increment(outcome.records as u64);
    metrics::counter!("Dispatched").increment(outcome.dispatched as u64);
    metrics::counter!("SendRequests").increment(outcome.requests);
    metrics::counter!("Refused").increment(outcome.refused);
    metrics::counter!("Corrupt").increment(outcome.corrupt.len() as u64);
    metrics::counter!("BatchItemFailures").increment(u64::from(outcome.failure.is_some()));
    metrics::histogram!("BatchDuration").record(took.as_secs_f64() * 1000.0);
}

/// Describes the dispatcher's metrics to an installed collector (units).
pub fn describe_dispatcher() {
    use metrics::Unit;
    metrics::describe_counter!("Records", Unit::Count, "stream records in the batch");
    metrics::describe_counter!(
        "Dispatched",
        Unit::Count,
        "messages the queue or the topic took"
    );
    metrics::describe_counter!(
        "SendRequests",
        Unit::Count,
        "SendMessageBatch or PublishBatch requests"
    );
    metrics::describe_counter!("Refused", Unit::Count, "entries or requests refused");
    metrics::describe_counter!("Corrupt", Unit::Count, "event items reported as corrupt");
    metrics::describe_counter!(
        "BatchItemFailures",
        Unit::Count,
        "batches that named a record for redelivery"
    );
    metrics::describe_histogram!(
        "BatchDuration",
        Unit::Milliseconds,
        "time to send the batch"
    );
}
