//! What the runs print beyond the main table: per-event figures and
//! percentiles, a run's cost per event, and the drain workload's side by side.

use std::time::Duration;

use sequence_guard::runner::Outcome;

use crate::faults::{Faults, HotProfile};
use crate::figures::Figures;
use crate::{Pipeline, cost, meter};

/// What one run costs per event (see `../support/cost.rs`: which parts are
/// measured, which computed).
pub fn cost_of(mode: Pipeline, figures: &Figures, events: usize) -> cost::PerEvent {
    let events = events.max(1) as f64;
    // A failed request (a condition not met) answers no capacity; DynamoDB
    // bills it a write unit (items under 1 KB).
    let units = |usage: &meter::Usage| {
        (
            usage.read_units / events,
            (usage.write_units + usage.failed as f64) / events,
        )
    };
    let producer_units = match mode {
        Pipeline::Ours | Pipeline::Fanout => units(&figures.producer),
        // The naive producer: an `ADD` on the head, a `PutItem` of the event.
        Pipeline::Naive | Pipeline::Idempotency => (0.0, 2.0),
    };
    let mut consumer_units = (0.0, 0.0);
    let (mut sqs, mut invocations, mut busy) = (0.0, figures.batches as f64, figures.dispatch_busy);
    for consumed in &figures.consumers {
        let (read, write) = units(&consumed.usage);
        consumer_units.0 += read;
        consumer_units.1 += write;
        sqs += (consumed.receives + consumed.deletes) as f64;
        invocations += consumed.invocations as f64;
        busy += consumed.busy;
    }
    cost::PerEvent {
        producer_units,
        dispatcher_requests: figures.requests as f64 / events,
        publishes: mode == Pipeline::Fanout,
        consumer_sqs_requests: sqs / events,
        consumer_units,
        invocations: invocations / events,
        seconds: busy.as_secs_f64() / events,
    }
}

pub fn percentile(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index].as_secs_f64() * 1000.0
}

/// Per event, or nothing when none was appended.
pub fn per_event(count: u64, events: usize) -> f64 {
    count as f64 / events.max(1) as f64
}

/// Events per second drained: its slowest consumer's.
pub fn rate(figures: &Figures) -> f64 {
    figures
        .consumers
        .iter()
        .map(|consumed| consumed.projected as f64 / consumed.seconds)
        .fold(f64::INFINITY, f64::min)
}

/// The drain workload: events per second of each pipeline beside ours, and
/// where its time went.
pub fn print_drain(drained: &[(Pipeline, Figures)]) {
    let ours = drained
        .iter()
        .find(|(mode, _)| *mode == Pipeline::Ours)
        .map(|(_, figures)| rate(figures));
    println!(
        "\n== Drain: a filled event store, end to end (stream -> dispatcher -> SQS FIFO -> consumers)"
    );
    for (mode, figures) in drained {
        let events = rate(figures);
        let beside = match ours {
            Some(ours) if *mode != Pipeline::Ours => format!(" (ours: {:.1} x)", ours / events),
            _ => String::new(),
        };
        println!(
            "{:>11}: {:>6.0} events/s{beside}; all sent at {:.2} s, dispatcher busy {:.2} s in {} \
             batches, {} GetRecords ({:.2} s)",
            mode.tag(),
            events,
            figures.all_sent,
            figures.dispatch_busy.as_secs_f64(),
            figures.batches,
            figures.get_records.0,
            figures.get_records.1.as_secs_f64(),
        );
        for consumed in &figures.consumers {
            println!(
                "{:>11}  {}: last projected at {:.2} s; {} batches, busy {:.2} s ({:.1} ms a batch), \
                 receiving {:.2} s, deleting {:.2} s (sums over its consumers); DynamoDB {:.2} \
                 requests/event",
                "",
                consumed.name,
                consumed.seconds,
                consumed.invocations,
                consumed.busy.as_secs_f64(),
                consumed.busy.as_secs_f64() * 1000.0 / consumed.invocations.max(1) as f64,
                consumed.receiving.as_secs_f64(),
                consumed.deleting.as_secs_f64(),
                per_event(consumed.usage.requests, consumed.projected),
            );
        }
    }
}

/// The faults workload's profile: what each consumer saw of the hot order.
pub fn print_faults(label: &str, faults: &Faults, lanes: &[(&'static str, HotProfile)]) {
    println!(
        "\n== {label}: the hot order, consumer by consumer ({:.0}% of DynamoDB and KMS requests \
         failing, {:.0}% of batches killed after their writes; visibility timeout 5 s)",
        faults.requests * 100.0,
        faults.kills * 100.0
    );
    print!(
        "{:<8} {:>7} {:>8} {:>8} {:>9} {:>7} {:>7}",
        "consumer", "events", "p50 ms", "p99 ms", "rcpt/ev", "failed", "killed"
    );
    for outcome in PROFILED {
        print!(" {:>9}", outcome.as_str());
    }
    println!();
    for (name, hot) in lanes {
        let mut latencies = hot.latencies.clone();
        latencies.sort();
        print!(
            "{:<8} {:>7} {:>8.0} {:>8.0} {:>9.2} {:>7} {:>7}",
            name,
            latencies.len(),
            percentile(&latencies, 0.5),
            percentile(&latencies, 0.99),
            per_event(hot.received, latencies.len()),
            hot.failed_batches,
            hot.killed_batches,
        );
        for outcome in PROFILED {
            print!(" {:>9}", hot.count(outcome));
        }
        println!();
    }
}

/// The outcomes the faults profile counts for the hot order's messages.
pub const PROFILED: [Outcome; 8] = [
    Outcome::Applied,
    Outcome::Duplicate,
    Outcome::Parked,
    Outcome::Gap,
    Outcome::NotCreated,
    Outcome::Skipped,
    Outcome::StorageError,
    Outcome::Invalid,
];
