//! The benchmark: what a batch costs, side by side with a naive handler.
//!
//! ```text
//! scripts/bench        # builds in release, starts DynamoDB Local, runs this
//! ```
//!
//! Prints, never asserts:
//! - on DynamoDB Local, for (a) one aggregate with 10 events in one batch,
//!   and its next 10 in a process that wrote the first, (b) 10 existing aggregates with one update each, (c) a batch of 10
//!   duplicates, (d) a realistic mix (1,000 aggregates, skewed activity, 1 %
//!   duplicates, batches of 10): DynamoDB requests per message and sequential
//!   round trips per batch, for the runner (one process across the
//!   workload; and again keeping nothing warm) and for a naive handler (one read
//!   and one write per message, in order: the literal reading of the guard);
//! - on DynamoDB Local, (e) producers that send an event late, behind the
//!   next batch, through a simulated FIFO queue that redelivers failed messages:
//!   requests and deliveries per event with parking, and what
//!   `GAP_POLICY=retry` leaves in the dead-letter queue instead;
//! - on the embedded store: time per message (parse, decide, apply) on one
//!   thread, with glibc's defaults and again (in a new process) under the
//!   `GLIBC_TUNABLES` the template gives the consumers; `--cpu-only
//!   --handler runner|naive` runs one handler alone, for a profiler;
//! - for the release `projector`: time from process start to its first call
//!   for work, to its first batch answered (the cold start a user sees, over
//!   HTTP to DynamoDB Local and through a TLS proxy, with its CPU time), and
//!   peak memory after the mix, with glibc's defaults and the template's
//!   tunables (`--memory-only [--tunables VALUE]...` runs this alone);
//! - for the release `projector` under Lambda Managed Instances
//!   (`AWS_LAMBDA_MAX_CONCURRENCY` 1, 8 and 32): batches a second, CPU time a
//!   batch and peak memory of one process serving that many at once;
//! - for the release `dispatcher`: time from process start to its first
//!   stream batch answered (one `SendMessageBatch` to an SQS stand-in, over
//!   HTTP and through TLS);
//! - with `--variant NAME=DIR` (`scripts/bench --tls-variants`), only the
//!   cold starts of several builds of both functions, side by side in one
//!   run, and the TLS connections each opened;
//! - reading a body by its version (`--versions` runs this alone): parse
//!   time of a body without `version`, with `"version":1`, at a current
//!   version 2, and at version 1 upcast to 2;
//! - on DynamoDB Local, a process's step (`--process` runs this alone): the
//!   shop's payments process, requests, write and read units and dollars
//!   per step (each kind of message it handles, a deadline fired) and per
//!   order's lifecycle, one message a batch and ten;
//! - on DynamoDB Local, personal data (`--personal`, run by `scripts/bench`
//!   once LocalStack's KMS is up, with `--kms-endpoint`): units, requests and
//!   KMS requests per append and per message with an order's name and email
//!   sealed and without, and the CPU time of opening a sealed body.
//!
//! With `--figures DIR` each table printed is also written to DIR as JSON
//! and markdown (`scripts/bench` gives `docs/figures`); `--splice DIR
//! --into FILE...` regenerates the docs' marked tables from DIR.
//!
//! Layout: `main.rs` reads the arguments and runs the parts in turn;
//! `workloads.rs` makes the batches and `naive.rs` is the naive handler;
//! `requests.rs` is (a) to (d), `late_events.rs` is (e); `cpu.rs` is the embedded store's time per
//! message, `versions.rs` the time to read a body by its version;
//! `functions.rs` starts the release functions, for `cold_start.rs`,
//! `memory.rs`, `managed.rs` (several invocations at once in one process)
//! and `variants.rs` (several builds side by side);
//! `process.rs` is a process's step (`process/meter.rs`: the units DynamoDB
//! Local reports); `personal.rs` is personal data's cost;
//! `figure_files.rs` writes the tables of figures (`--figures DIR`) and
//! splices them into the docs (`--splice DIR --into FILE`).

mod cold_start;
mod cpu;
mod figure_files;
mod functions;
mod late_events;
mod managed;
mod memory;
mod naive;
mod personal;
mod process;
mod requests;
mod variants;
mod versions;
mod workloads;

#[path = "../../tests/support/runtime_api.rs"]
mod runtime_api;

#[allow(dead_code)] // some of the generator is for the simulation
#[path = "../../tests/support/rng.rs"]
mod rng;

#[allow(dead_code)] // only the latency of the faulty proxy is used here
#[path = "../../tests/support/fault_proxy.rs"]
mod fault_proxy;

#[path = "../support/producer.rs"]
mod producer;

#[allow(dead_code)] // only the DynamoDB prices are used here
#[path = "../support/cost.rs"]
mod cost;

#[path = "../support/sqs_stand_in.rs"]
mod sqs_stand_in;

#[path = "../support/keys.rs"]
mod keys;

#[allow(dead_code)] // the usage of a client, not its time
#[path = "../support/meter.rs"]
mod meter;

use std::path::PathBuf;
use std::time::Duration;

use crate::cpu::Handlers;
use crate::functions::{release_binary, template_tunables};
use crate::workloads::realistic_mix;

/// The benchmark: prints what a batch costs, side by side with a naive
/// handler. `scripts/bench` builds it, starts DynamoDB Local and runs it.
#[derive(Debug, clap::Parser)]
#[command(name = "bench")]
struct Args {
    /// DynamoDB Local's endpoint, e.g. http://127.0.0.1:8000 (its tables
    /// must not exist yet: start it fresh).
    #[arg(long, value_name = "URL", required_unless_present_any = ["cpu_only", "versions", "splice"])]
    endpoint_url: Option<String>,
    /// Only the embedded store's time per message (no DynamoDB): passes over
    /// the mix, the two handlers in alternation; also for a profiler
    /// (valgrind --tool=callgrind).
    #[arg(long)]
    cpu_only: bool,
    /// With `--cpu-only`: the passes of each handler measured, after one not
    /// kept (a pass is some 9 ms; with 20, a noisy stretch of the machine
    /// moved the median ratio by 0.1, with 100 by 0.02).
    #[arg(long, default_value_t = 100, requires = "cpu_only")]
    repeats: usize,
    /// With `--cpu-only`: only one of the two handlers, so that a profiler's
    /// count is that handler's (less a run with `--repeats 0`: the mix made
    /// and the pass not kept).
    #[arg(long, value_enum, default_value_t = Handlers::Both, requires = "cpu_only")]
    handler: Handlers,
    /// The whole run without the CPU passes (`scripts/bench` runs them with
    /// `--cpu-only` first, before any server starts).
    #[arg(long, conflicts_with = "cpu_only")]
    no_cpu: bool,
    /// The same DynamoDB Local through TLS (`scripts/tls-proxy.py`), for the
    /// cold start through a TLS handshake.
    #[arg(long, value_name = "URL", requires = "tls_ca")]
    tls_endpoint: Option<String>,
    /// The CA that signed the TLS proxy's certificate (the projector trusts
    /// it through `SSL_CERT_FILE`).
    #[arg(long, value_name = "FILE")]
    tls_ca: Option<String>,
    /// Only the time to read a body by its version (no DynamoDB).
    #[arg(long, conflicts_with = "cpu_only")]
    versions: bool,
    /// Only the producer's half (appends to the event store, on DynamoDB
    /// Local behind the 2 ms proxy).
    #[arg(long, conflicts_with_all = ["cpu_only", "versions"])]
    producer: bool,
    /// Only a process's step (the shop's payments process, on DynamoDB
    /// Local): requests, units and dollars per step.
    #[arg(long, conflicts_with_all = ["cpu_only", "versions", "producer"])]
    process: bool,
    /// Only personal data's cost (on DynamoDB Local): units, requests and
    /// KMS requests per append and per message, sealed and plain, and the
    /// CPU time of opening a sealed body.
    #[arg(long, conflicts_with_all = ["cpu_only", "versions", "producer", "process"])]
    personal: bool,
    /// With `--personal`: LocalStack's endpoint, whose KMS wraps the data
    /// keys (without it, a master key of the bench's own does, its KMS
    /// requests counted as KMS's would be).
    #[arg(long, value_name = "URL", requires = "personal")]
    kms_endpoint: Option<String>,
    /// A free port for the SQS stand-in (plain HTTP) the release dispatcher
    /// sends to, for its cold start.
    #[arg(long, value_name = "PORT")]
    sqs_stand_in_port: Option<u16>,
    /// The stand-in through TLS (`scripts/tls-proxy.py` in front of it; the
    /// CA of `--tls-ca`).
    #[arg(long, value_name = "URL", requires_all = ["sqs_stand_in_port", "tls_ca"])]
    sqs_tls_endpoint: Option<String>,
    /// The CA of `--tls-ca` with the system's root bundle in one file: what
    /// loading the roots of a real system costs.
    #[arg(long, value_name = "FILE")]
    tls_ca_bundle: Option<String>,
    /// Only the cold starts, of several builds side by side: NAME=DIR, DIR
    /// holding a `projector` and a `dispatcher`. Repeat for each build.
    #[arg(long = "variant", value_name = "NAME=DIR", requires = "tls_endpoint")]
    variants: Vec<String>,
    /// Rounds of the side-by-side cold starts (each starts every build once
    /// per measure).
    #[arg(long, default_value_t = 15)]
    rounds: usize,
    /// Only the release projector's peak memory, with glibc's defaults and
    /// with each `--tunables` (the template's when none is given).
    #[arg(long, conflicts_with_all = ["cpu_only", "versions", "producer"])]
    memory_only: bool,
    /// Only the release projector serving 1, 8 and 32 invocations at once
    /// (Lambda Managed Instances).
    #[arg(long, conflicts_with_all = ["cpu_only", "versions", "producer", "memory_only"])]
    managed: bool,
    /// A `GLIBC_TUNABLES` value to measure with `--memory-only`; repeat for more.
    #[arg(long, value_name = "VALUE", requires = "memory_only")]
    tunables: Vec<String>,
    /// Also write the figures printed to DIR: a JSON file and a markdown
    /// table for each table (`figure_files.rs`).
    #[arg(long, value_name = "DIR")]
    figures: Option<PathBuf>,
    /// Only render DIR's figures (every `NAME.json` to `NAME.md`, the
    /// headline figures to `headline.md`) and put each between its markers
    /// in the files of `--into`.
    #[arg(long, value_name = "DIR", conflicts_with = "figures")]
    splice: Option<PathBuf>,
    /// With `--splice`: a document whose marked regions are regenerated;
    /// repeat for more.
    #[arg(long, value_name = "FILE", requires = "splice")]
    into: Vec<PathBuf>,
}

#[tokio::main]
async fn main() {
    let args = <Args as clap::Parser>::parse();
    if let Some(dir) = &args.splice {
        if let Err(err) = figure_files::splice_all(dir, &args.into) {
            eprintln!("bench --splice: {err}");
            std::process::exit(1);
        }
        return;
    }
    let mut tables = figure_files::Tables::default();
    run(&args, &mut tables).await;
    if let Some(dir) = &args.figures {
        match tables.write_all(dir) {
            Ok(written) => {
                for path in written {
                    println!("wrote {}", path.display());
                }
            }
            Err(err) => {
                eprintln!("bench --figures: {err}");
                std::process::exit(1);
            }
        }
    }
}

/// The parts the arguments ask for, in turn.
async fn run(args: &Args, tables: &mut figure_files::Tables) {
    if args.versions {
        versions::print_versions(tables);
        return;
    }
    let Some(endpoint) = args.endpoint_url.clone().filter(|_| !args.cpu_only) else {
        cpu::print_cpu(args.repeats, args.handler, args.figures.as_deref(), tables);
        return;
    };
    let stand_in = match args.sqs_stand_in_port {
        Some(port) => sqs_stand_in::SqsStandIn::start(port).await,
        None => None,
    };
    if !args.variants.is_empty() {
        variants::print_variants(args, &endpoint, stand_in.as_ref(), tables).await;
        return;
    }
    if args.memory_only {
        let Some(projector) = release_binary("projector") else {
            return;
        };
        let mut tunables: Vec<Option<&str>> = vec![None];
        match args.tunables.is_empty() {
            true => tunables.push(template_tunables()),
            false => tunables.extend(args.tunables.iter().map(|value| Some(value.as_str()))),
        }
        memory::print_memory(
            &endpoint,
            &projector,
            &realistic_mix(3000, 13).batches,
            &tunables,
            tables,
        )
        .await;
        return;
    }
    if args.process {
        process::print_process(&endpoint, tables).await;
        return;
    }
    if args.personal {
        personal::print_personal(&endpoint, args.kms_endpoint.as_deref(), tables).await;
        return;
    }
    // A network between the function and DynamoDB: 2 ms per request, so that a
    // round trip is not hidden by the client's own time to issue a request.
    let upstream = endpoint.trim_start_matches("http://").to_owned();
    let proxy = fault_proxy::FaultProxy::start_with_latency(
        upstream,
        1,
        0,
        vec![],
        Duration::from_millis(2),
    )
    .await;
    if args.producer {
        producer::print_producer(&endpoint, &proxy.endpoint, tables).await;
        return;
    }
    if args.managed {
        if let Some(projector) = release_binary("projector") {
            managed::print_managed(&projector, &endpoint, &proxy.endpoint, tables).await;
        }
        return;
    }
    requests::print_requests(&endpoint, &proxy.endpoint, tables).await;

    late_events::print_late_events(&endpoint, &proxy.endpoint, tables).await;

    if !args.no_cpu {
        cpu::print_cpu(100, Handlers::Both, args.figures.as_deref(), tables);
    }
    versions::print_versions(tables);

    producer::print_producer(&endpoint, &proxy.endpoint, tables).await;

    process::print_process(&endpoint, tables).await;

    println!("\n== Release projector");
    cold_start::print_first_call(tables).await;
    let Some(projector) = release_binary("projector") else {
        return;
    };
    let mix = realistic_mix(3000, 13);
    memory::print_memory(
        &endpoint,
        &projector,
        &mix.batches,
        &[None, template_tunables()],
        tables,
    )
    .await;
    cold_start::print_projector(args, &endpoint, &projector, &mix.batches[..1], tables).await;
    managed::print_managed(&projector, &endpoint, &proxy.endpoint, tables).await;
    cold_start::print_dispatcher(args, stand_in.as_ref(), tables).await;
}
