//! The tables of figures a run writes with `--figures DIR`
//! (`../bench/figure_files.rs`): the live workloads (`pipeline`), the drain
//! (`drain`), what a million events cost (`cost`, and its parts in
//! `cost-parts`), and the dispatcher alone on a backlog (`backlog`).

use crate::faults::{Faults, HotProfile};
use crate::figure_files::{Figure, Tables};
use crate::figures::{Consumed, Figures};
use crate::report::{PROFILED, per_event, percentile, rate};
use crate::{Pipeline, cost};

/// The live workloads' columns.
const LIVE: [&str; 5] = [
    "events/s",
    "latency p50 (ms)",
    "latency p99 (ms)",
    "dispatcher's requests an event",
    "deliveries an event",
];

/// The cost's parts.
const PARTS: [&str; 6] = [
    "producer",
    "dispatcher",
    "SQS",
    "consumer DynamoDB",
    "Lambda",
    "total",
];

/// Starts every table (a table a run has no figure for is not written).
pub fn start(tables: &mut Tables) {
    tables.start(
        "pipeline",
        "The pipeline, live: append, the table's stream, the dispatcher, SQS FIFO (or SNS FIFO \
         to two queues), the consumers; latency from an event's append to its projection",
        "scripts/bench",
        "workload, pipeline, consumer",
        &LIVE,
    );
    tables.start(
        "drain",
        "A filled event store (3,000 events) drained end to end, both emulators warmed first",
        "scripts/bench",
        "pipeline",
        &["events/s", "sequence-guard ÷ it", "last event sent (s)"],
    );
    let columns: Vec<&str> = [
        Pipeline::Ours,
        Pipeline::Naive,
        Pipeline::Idempotency,
        Pipeline::Fanout,
    ]
    .map(Pipeline::column)
    .to_vec();
    tables.start(
        "cost",
        &format!(
            "What a million events cost on AWS, in $ (on-demand, us-east-1, prices read {})",
            cost::PRICES_READ
        ),
        "scripts/bench",
        "workload",
        &columns,
    );
    tables.start(
        "cost-parts",
        "What a million events cost on AWS, in $, by part",
        "scripts/bench",
        "workload, pipeline",
        &PARTS,
    );
    tables.start(
        "backlog",
        "The dispatcher alone on a backlog (1,000 events on 100 streams, batches of 100 records)",
        "scripts/bench",
        "figure",
        &[],
    );
}

/// One consumer of a live run.
pub fn record_live(
    tables: &mut Tables,
    workload: &str,
    mode: Pipeline,
    figures: &Figures,
    consumed: &Consumed,
) {
    let row = format!("{workload}, {}, {}", mode.tag(), consumed.name);
    let values = [
        (consumed.projected as f64 / consumed.seconds, 0),
        (percentile(&consumed.latencies, 0.5), 0),
        (percentile(&consumed.latencies, 0.99), 0),
        (per_event(figures.requests, figures.appended), 2),
        (per_event(consumed.deliveries, figures.appended), 2),
    ];
    for (column, (value, decimals)) in LIVE.into_iter().zip(values) {
        tables.record("pipeline", Figure::cell(&row, column, value, decimals, ""));
    }
}

/// The drain: each pipeline's events per second beside ours.
pub fn record_drain(tables: &mut Tables, drained: &[(Pipeline, Figures)]) {
    let of = |wanted: Pipeline| {
        drained
            .iter()
            .find(|(mode, _)| *mode == wanted)
            .map(|(_, figures)| rate(figures))
    };
    let (ours, naive) = (of(Pipeline::Ours), of(Pipeline::Naive));
    for (mode, figures) in drained {
        let row = mode.column();
        let events = rate(figures);
        let figure = Figure::cell(row, "events/s", events, 0, "events/s");
        let figure = match (mode, naive) {
            (Pipeline::Ours, Some(naive)) => figure
                .baseline("naive pipeline", naive)
                .headline("a filled event store drained end to end"),
            _ => figure,
        };
        tables.record("drain", figure);
        if let (Some(ours), false) = (ours, *mode == Pipeline::Ours) {
            let ratio = Figure::cell(row, "sequence-guard ÷ it", ours / events, 1, "");
            tables.record("drain", ratio);
        }
        let sent = Figure::cell(row, "last event sent (s)", figures.all_sent, 1, "s");
        tables.record("drain", sent);
    }
}

/// What a million events cost, each workload and pipeline.
pub fn record_costs(tables: &mut Tables, costs: &[(String, Pipeline, cost::PerEvent)]) {
    for (workload, mode, per_event) in costs {
        let dollars = cost::per_million(per_event);
        let naive = costs
            .iter()
            .find(|(other, mode, _)| other == workload && *mode == Pipeline::Naive)
            .map(|(_, _, naive)| cost::per_million(naive)[5]);
        let figure = Figure::cell(workload, mode.column(), dollars[5], 2, "$");
        let figure = match (mode, naive) {
            (Pipeline::Ours, Some(naive)) => figure.baseline("naive pipeline", naive),
            _ => figure,
        };
        tables.record("cost", figure);
        let row = format!("{workload}, {}", mode.tag());
        for (column, value) in PARTS.into_iter().zip(dollars) {
            tables.record("cost-parts", Figure::cell(&row, column, value, 2, "$"));
        }
    }
}

/// The dispatcher's requests an event on the backlog, `to` the queue or
/// the topic.
pub fn record_backlog(tables: &mut Tables, to: &str, requests: f64) {
    let name = format!("the dispatcher's requests an event, {to}");
    tables.record("backlog", Figure::new(&name, requests, 3, ""));
}

/// The faults workload: what each consumer saw of the hot order.
pub fn record_faults(tables: &mut Tables, faults: &Faults, lanes: &[(&'static str, HotProfile)]) {
    let mut columns = vec![
        "latency p50 (ms)".to_owned(),
        "latency p99 (ms)".to_owned(),
        "deliveries a hot event".to_owned(),
        "batches failed".to_owned(),
        "batches killed".to_owned(),
    ];
    columns.extend(PROFILED.map(|outcome| outcome.as_str().to_owned()));
    let columns: Vec<&str> = columns.iter().map(String::as_str).collect();
    tables.start(
        "pipeline-faults",
        &format!(
            "A hot order beside 100 orders of 5 events, through the fan-out, under the same \
             faults for both consumers: {:.0}% of their DynamoDB and KMS requests failing, {:.0}% \
             of their batches killed after their writes (SQS visibility timeout 5 s); the hot \
             order's messages, each delivery counted",
            faults.requests * 100.0,
            faults.kills * 100.0
        ),
        "scripts/bench",
        "consumer",
        &columns,
    );
    for (name, hot) in lanes {
        let mut latencies = hot.latencies.clone();
        latencies.sort();
        let values = [
            (percentile(&latencies, 0.5), 0),
            (percentile(&latencies, 0.99), 0),
            (per_event(hot.received, latencies.len()), 2),
            (hot.failed_batches as f64, 0),
            (hot.killed_batches as f64, 0),
        ]
        .into_iter()
        .chain(PROFILED.map(|outcome| (hot.count(outcome) as f64, 0)));
        for (column, (value, decimals)) in columns.iter().zip(values) {
            tables.record(
                "pipeline-faults",
                Figure::cell(name, column, value, decimals, ""),
            );
        }
    }
}
