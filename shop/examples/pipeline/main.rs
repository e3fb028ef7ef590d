//! The pipeline benchmark: from append to projected state, on DynamoDB Local
//! (the event store, its stream, the projections) and LocalStack's SQS FIFO
//! and SNS FIFO.
//!
//! ```text
//! scripts/bench        # starts DynamoDB Local and LocalStack, runs this after bench
//! pipeline --endpoint-url http://127.0.0.1:8000 --sqs-endpoint http://127.0.0.1:4566 \
//!     --pipelines ours,fanout   # some of the pipelines only, given the endpoints
//! ```
//!
//! Prints, never asserts, for one hot aggregate and for 100 aggregates (and
//! a hot order's events filled first and drained with each batch of change
//! records out of order, as two shards give them: the consumers reading a
//! gap's events from the event store, then, in the next run, without it),
//! for each consumer: events per second from the first append to its last
//! event projected, the latency of each event from its append to its
//! projection (median, 99th percentile; an event is projected once, when
//! it first reaches the table: by its message, drained from parking, or
//! read from the event store before a later message, `consumer.rs`), the
//! messages its queue delivered per event appended (each receipt,
//! redeliveries and duplicates included), and the dispatcher's
//! requests per event. Four pipelines: ours
//! (the dispatcher's code sending to one SQS FIFO queue), a naive one (one
//! `SendMessage` per event, one conditional write per message), the usual
//! batch handler with an idempotency utility behind the naive dispatcher
//! (per message: the idempotency record's conditional put, the handler's
//! write, the record's update), and the fan-out (the dispatcher's code
//! publishing to an SNS FIFO topic that feeds two SQS FIFO queues by raw
//! delivery: the shop's consumer and the status consumer,
//! `shop::status::domain()`, each with its own table).
//!
//! The drain workload takes the producers out of the way: an event store
//! filled first (250 orders of 10 events and one hot order of 500, one
//! `append` each), then drained end to end by each pipeline in turn, from
//! the stream's start (`GetRecords`, 100 records a batch, one batch at a
//! time, as the mapping with `ParallelizationFactor` 1 does) through SQS
//! FIFO to ten concurrent consumers (the template's `MaximumConcurrency`;
//! a message group is in one batch at a time, as SQS FIFO gives it): events
//! per second until the last event is projected, side by side, and where
//! the time went (the dispatcher's busy time and `GetRecords`, the
//! consumers' batches, receives and deletes). Before the first workload, a
//! third of the drain workload is drained through each pipeline and not
//! kept, so that no pipeline pays for warming DynamoDB Local and LocalStack
//! for the others.
//!
//! The faults workload (`faults.rs`) runs a hot order beside 100 others
//! through the fan-out with the same injected faults for both consumers (a
//! share of their DynamoDB and KMS requests failing, a share of their
//! batches killed after their writes), each consumer polled by four tasks
//! with a process each, and follows the hot order's messages through each
//! consumer: what became of every delivery, the batches that failed (its
//! message group then waits a visibility timeout), its latency.
//!
//! Then what a million events cost on AWS for each workload and pipeline
//! (`../support/cost.rs`: the prices, their sources and date; which parts are
//! measured and which computed), with each client's DynamoDB units measured
//! by `../support/meter.rs`; and the dispatcher alone on a backlog (full
//! batches of 100 stream records), to a queue and to the topic: requests
//! per event.
//!
//! An order's `customerName` and `email` are personal data: the producers
//! seal them with their subject's data key and the shop's consumer opens
//! them, each with a keyring of its own over the key items in the event
//! store's table (`../support/keys.rs`), the keys wrapped under a KMS key
//! made on LocalStack (`--local-keys`: a master key of the benchmark's own).
//! Their requests and units are in the producer's and the consumer's
//! figures; the KMS requests per event are printed apart. The status
//! consumer declares no personal data and reads no key.
//!
//! The stream is read as tightly as DynamoDB Local answers; on AWS, Lambda
//! polls a shard about four times a second, which adds up to 250 ms to each
//! event's latency, the same for both pipelines.
//!
//! Layout: `run.rs` is one run of a workload through one pipeline, started
//! from `main`; `dispatcher.rs` and `consumer.rs` (with `naive.rs`, the
//! naive projectors) are its tasks, `stream.rs` and `queues.rs` what they
//! read and send to; `figures.rs` what they count; `faults.rs` what the
//! faults workload injects and follows; `drain.rs` fills the
//! drain workload's store; `backlog.rs` is the dispatcher alone; `report.rs`
//! prints what is not in the main table; `tables.rs` records the figures
//! that `--figures DIR` writes (`../bench/figure_files.rs`).

use std::time::Instant;

use sequence_guard::dispatcher::{SnsTopic, SqsQueue};

mod backlog;
mod consumer;
mod dispatcher;
mod drain;
mod faults;
mod figures;
mod naive;
mod queues;
mod report;
mod run;
mod stream;
mod tables;

#[path = "../support/cost.rs"]
mod cost;
#[allow(dead_code)] // the splice is the bench's
#[path = "../bench/figure_files.rs"]
mod figure_files;
#[allow(dead_code)] // the bench's helpers
#[path = "../support/keys.rs"]
mod keys;
#[path = "../support/meter.rs"]
mod meter;

use crate::backlog::backlog;
use crate::drain::{fill, warm_up};
use crate::faults::{Faults, HotProfile};
use crate::figures::Figures;
use crate::queues::{fifo_queue, fifo_topic, settled, sns_client, sqs_client};
use crate::report::{cost_of, per_event, percentile, print_drain, print_faults};
use crate::run::{Case, run};

#[derive(Debug, clap::Parser)]
#[command(name = "pipeline")]
struct Args {
    /// DynamoDB Local's endpoint.
    #[arg(long, value_name = "URL")]
    endpoint_url: String,
    /// LocalStack's endpoint (SQS, and SNS for the fan-out).
    #[arg(long, value_name = "URL")]
    sqs_endpoint: String,
    /// The pipelines to run, in this order.
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = [Pipeline::Ours, Pipeline::Naive, Pipeline::Idempotency, Pipeline::Fanout])]
    pipelines: Vec<Pipeline>,
    /// The workloads to run (all by default).
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = [Workload::Hot, Workload::Many, Workload::Drain, Workload::Reordered, Workload::Faults])]
    workloads: Vec<Workload>,
    /// The drain workload: events on each of its many streams.
    #[arg(long, default_value_t = 10)]
    drain_per_stream: u64,
    /// The drain workload: its many streams.
    #[arg(long, default_value_t = 250)]
    drain_streams: usize,
    /// The drain workload: events on its hot stream.
    #[arg(long, default_value_t = 500)]
    drain_hot: u64,
    /// Concurrent consumers (invocations) per queue on the drain workload:
    /// the template's `MaximumConcurrency` default.
    #[arg(long, default_value_t = 10)]
    drain_consumers: usize,
    /// Added to the name of each run's tables, queues and topics, so that a
    /// run can follow another on the same servers.
    #[arg(long, default_value = "")]
    tag: String,
    /// The faults workload: the hot order's events.
    #[arg(long, default_value_t = 300)]
    fault_hot: u64,
    /// The faults workload: the share of each consumer's DynamoDB and KMS
    /// requests that fail.
    #[arg(long, default_value_t = 0.02)]
    fault_requests: f64,
    /// The faults workload: the share of batches killed after their writes.
    #[arg(long, default_value_t = 0.02)]
    fault_kills: f64,
    /// Wrap the orders' data keys under a master key of the benchmark's
    /// own instead of a KMS key on LocalStack (`--sqs-endpoint`), e.g. for
    /// a LocalStack started without KMS.
    #[arg(long)]
    local_keys: bool,
    /// What wraps the orders' data keys (made at the start).
    #[arg(skip = keys::Wrapping::Local)]
    keys: keys::Wrapping,
    /// Also write the figures printed to DIR: a JSON file and a markdown
    /// table for each table (`../bench/figure_files.rs`).
    #[arg(long, value_name = "DIR")]
    figures: Option<std::path::PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Workload {
    /// One hot aggregate, 300 events, one producer.
    Hot,
    /// 100 aggregates, 5 events each, 8 producers.
    Many,
    /// An event store filled first, then drained end to end.
    Drain,
    /// A hot order (300 events) beside 100 orders of 5, through the
    /// fan-out, with the same faults for both consumers: a share of their
    /// requests failing and of their batches killed (`faults.rs`); prints
    /// what each consumer saw of the hot order.
    Faults,
    /// One hot order's 300 events filled first, then drained with each
    /// batch of change records out of order, as two shards read in parallel
    /// give them: the batch's second half first, each half reversed (ours and
    /// the fan-out only: the naive consumers have no parking and would not
    /// get past a gap). Each pipeline runs twice in a row: its consumers
    /// reading a gap's events from the event store, then without it (a gap
    /// retried, then parked).
    Reordered,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Pipeline {
    /// The dispatcher's code to one SQS FIFO queue, the runner behind it.
    Ours,
    /// One `SendMessage` per event, one conditional write per message.
    Naive,
    /// The naive dispatcher, and the usual consumer of a batch with an
    /// idempotency utility: per message, the idempotency record's
    /// conditional put, the handler's write, the record's update.
    Idempotency,
    /// The dispatcher's code to an SNS FIFO topic, two queues subscribed.
    Fanout,
}

impl Pipeline {
    /// Its column in the cost table.
    fn column(self) -> &'static str {
        match self {
            Pipeline::Ours => "sequence-guard",
            Pipeline::Naive => "naive pipeline",
            Pipeline::Idempotency => "batch + idempotency utility",
            Pipeline::Fanout => "fan-out to two consumers",
        }
    }

    fn tag(self) -> &'static str {
        match self {
            Pipeline::Ours => "ours",
            Pipeline::Naive => "naive",
            Pipeline::Idempotency => "idempotency",
            Pipeline::Fanout => "fan-out",
        }
    }
}

/// What one consumer of the faults workload saw of the hot order.
type Hot = (&'static str, HotProfile);

#[tokio::main]
async fn main() {
    let mut args = <Args as clap::Parser>::parse();
    let mut figures_out = figure_files::Tables::default();
    tables::start(&mut figures_out);
    if !args.local_keys {
        args.keys = keys::kms_wrapping(&args.sqs_endpoint).await;
    }
    println!("\n== Pipeline: append -> DynamoDB stream -> dispatcher -> SQS FIFO -> projector");
    println!(
        "   fan-out: dispatcher -> SNS FIFO topic -> two SQS FIFO queues (raw) -> shop, status"
    );
    println!(
        "   (DynamoDB Local and LocalStack on this machine; see the module's note on polling)"
    );
    println!(
        "{:<34} {:>11} {:>7} {:>7} {:>9} {:>8} {:>8} {:>9} {:>9}",
        "workload", "", "", "events", "events/s", "p50 ms", "p99 ms", "req/ev", "deliv/ev"
    );
    let mut costs: Vec<(String, Pipeline, cost::PerEvent)> = Vec::new();
    let mut drained: Vec<(Pipeline, Figures)> = Vec::new();
    let mut kms: Vec<String> = Vec::new();
    let mut profiles: Vec<(String, Faults, Vec<Hot>)> = Vec::new();
    let mut warmed = false;
    for &workload in &args.workloads {
        // The first measured workload finds DynamoDB Local and LocalStack
        // warm, as every later one does: without it, the first pipeline of
        // the first workload paid for the JVM compiling its own code.
        if !warmed && matches!(workload, Workload::Hot | Workload::Many | Workload::Drain) {
            warm_up(&args).await;
            warmed = true;
        }
        let filled;
        let (label, case) = match workload {
            Workload::Hot => (
                "one hot aggregate (300 events)".to_owned(),
                Case {
                    streams: 1,
                    per_stream: 300,
                    producers: 1,
                    consumers: 1,
                    filled: None,
                    reordered: false,
                    hot: 0,
                    faults: None,
                    fill: true,
                },
            ),
            Workload::Many => (
                "100 aggregates (5 events each)".to_owned(),
                Case {
                    streams: 100,
                    per_stream: 5,
                    producers: 8,
                    consumers: 4,
                    filled: None,
                    reordered: false,
                    hot: 0,
                    faults: None,
                    fill: true,
                },
            ),
            Workload::Faults => (
                format!(
                    "hot order under faults ({} + 100 x 5 events)",
                    args.fault_hot
                ),
                Case {
                    streams: 100,
                    per_stream: 5,
                    producers: 4,
                    consumers: 4,
                    filled: None,
                    reordered: false,
                    hot: args.fault_hot,
                    faults: Some(Faults {
                        requests: args.fault_requests,
                        kills: args.fault_kills,
                    }),
                    fill: true,
                },
            ),
            Workload::Reordered => {
                filled = fill(&args, "reordered-events", 0, 0, 300).await;
                (
                    "one hot order out of order (300 events, filled first)".to_owned(),
                    Case {
                        consumers: 1,
                        reordered: true,
                        ..Case::drain(&args, &filled)
                    },
                )
            }
            Workload::Drain => {
                let began = Instant::now();
                filled = fill(
                    &args,
                    "drain-events",
                    args.drain_streams,
                    args.drain_per_stream,
                    args.drain_hot,
                )
                .await;
                println!(
                    "drain: filled the event store with {} events ({} streams of {} and one of                      {}) in {:.1} s, then each pipeline drains it from the stream's start",
                    filled.keys.len(),
                    args.drain_streams,
                    args.drain_per_stream,
                    args.drain_hot,
                    began.elapsed().as_secs_f64()
                );
                (
                    format!("drain ({} events, filled first)", filled.keys.len()),
                    Case::drain(&args, &filled),
                )
            }
        };
        // The out-of-order workload runs each pipeline twice in a row:
        // its consumers reading a gap's events from the event store, then
        // waiting for them as without it.
        let variants: &[bool] = if case.reordered {
            &[true, false]
        } else {
            &[true]
        };
        for &mode in &args.pipelines {
            if case.reordered && !matches!(mode, Pipeline::Ours | Pipeline::Fanout) {
                continue;
            }
            if case.faults.is_some() && mode != Pipeline::Fanout {
                continue;
            }
            for &fill in variants {
                let case = Case { fill, ..case };
                let name = format!("pipeline-{workload:?}-{}{}", mode.tag(), args.tag);
                let (label, name) = if fill {
                    (label.clone(), name.to_lowercase())
                } else {
                    (
                        format!("{label}, without the event store's fill"),
                        format!("{name}-without-fill").to_lowercase(),
                    )
                };
                let figures = run(&args, mode, &name, &case).await;
                for consumed in &figures.consumers {
                    println!(
                        "{:<34} {:>11} {:>7} {:>7} {:>9.0} {:>8.1} {:>8.1} {:>9.3} {:>9.2}",
                        label,
                        mode.tag(),
                        consumed.name,
                        consumed.projected,
                        consumed.projected as f64 / consumed.seconds,
                        percentile(&consumed.latencies, 0.5),
                        percentile(&consumed.latencies, 0.99),
                        per_event(figures.requests, figures.appended),
                        per_event(consumed.deliveries, figures.appended),
                    );
                    tables::record_live(&mut figures_out, &label, mode, &figures, consumed);
                }
                let consumer_kms: Vec<String> = figures
                    .consumers
                    .iter()
                    .map(|consumed| {
                        format!(
                            "{} {:.3}",
                            consumed.name,
                            per_event(consumed.kms, figures.appended)
                        )
                    })
                    .collect();
                kms.push(format!(
                    "{:<34} {:>11}  producer {:.3}, {}",
                    label,
                    mode.tag(),
                    per_event(figures.producer_kms, figures.appended),
                    consumer_kms.join(", ")
                ));
                if let Some(faults) = case.faults {
                    profiles.push((
                        label.clone(),
                        faults,
                        figures
                            .consumers
                            .iter()
                            .map(|c| (c.name, c.hot.clone()))
                            .collect(),
                    ));
                }
                // The cost table compares the designs on the same workloads.
                if !case.reordered && case.faults.is_none() {
                    costs.push((
                        label.clone(),
                        mode,
                        cost_of(mode, &figures, figures.appended),
                    ));
                }
                if workload == Workload::Drain {
                    drained.push((mode, figures));
                }
            }
        }
    }
    for (label, faults, lanes) in &profiles {
        print_faults(label, faults, lanes);
        tables::record_faults(&mut figures_out, faults, lanes);
    }
    if !drained.is_empty() {
        print_drain(&drained);
        tables::record_drain(&mut figures_out, &drained);
    }
    if !kms.is_empty() {
        println!(
            "\n== KMS requests per event appended (the orders' data keys made and unwrapped; {})",
            match args.keys {
                keys::Wrapping::Local => "a local master key, counted as KMS's would be",
                keys::Wrapping::Kms { .. } => "LocalStack's KMS",
            }
        );
        for line in &kms {
            println!("{line}");
        }
    }
    if !costs.is_empty() {
        println!("\n== What a million events cost (AWS on-demand prices, us-east-1)");
        cost::print_prices();
        cost::print_header();
        for (label, mode, per_event) in &costs {
            cost::print_row(label, mode.tag(), per_event);
        }
        tables::record_costs(&mut figures_out, &costs);
    }
    let sqs = sqs_client(&args.sqs_endpoint);
    if args.pipelines.contains(&Pipeline::Ours) {
        let url = fifo_queue(&sqs, "backlog").await;
        let (sent, requests) = backlog(
            &args,
            "backlog-events",
            SqsQueue::new(sqs.clone(), url.clone(), url),
        )
        .await;
        println!(
            "dispatcher on a backlog (1,000 events on 100 streams, batches of 100 records): \
             {requests} SendMessageBatch for {sent} events = {:.3} requests/event",
            per_event(requests, sent)
        );
        tables::record_backlog(
            &mut figures_out,
            "to the queue (`SendMessageBatch`)",
            per_event(requests, sent),
        );
    }
    if args.pipelines.contains(&Pipeline::Fanout) {
        let urls = [
            fifo_queue(&sqs, "backlog-fanout-shop").await,
            fifo_queue(&sqs, "backlog-fanout-status").await,
        ];
        let sns = sns_client(&args.sqs_endpoint);
        let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
        let topic_arn = fifo_topic(&sns, &sqs, "backlog-fanout", &urls).await;
        let topic = SnsTopic::new(sns, topic_arn, sqs.clone(), urls[0]);
        let (sent, requests) = backlog(&args, "backlog-fanout-events", topic).await;
        let mut delivered = Vec::new();
        for url in &urls {
            delivered.push(per_event(settled(&sqs, url).await, sent));
        }
        println!(
            "dispatcher on a backlog, to the topic (the same, two queues subscribed): \
             {requests} PublishBatch for {sent} events = {:.3} requests/event; \
             deliveries/event: shop {:.2}, status {:.2}",
            per_event(requests, sent),
            delivered[0],
            delivered[1],
        );
        tables::record_backlog(
            &mut figures_out,
            "to the topic (`PublishBatch`)",
            per_event(requests, sent),
        );
    }
    if let Some(dir) = &args.figures {
        match figures_out.write_all(dir) {
            Ok(written) => {
                for path in written {
                    println!("wrote {}", path.display());
                }
            }
            Err(err) => {
                eprintln!("pipeline --figures: {err}");
                std::process::exit(1);
            }
        }
    }
}
