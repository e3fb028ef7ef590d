//! The cold starts of several builds of both functions (`--variant
//! NAME=DIR`), side by side in one run, and the TLS connections each opened.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::cold_start::spread;
use crate::figure_files::{Figure, Tables};
use crate::functions::{Reach, dispatcher_start, projector_figures, template_tunables};
use crate::requests::{Handler, measure};
use crate::workloads::{one_aggregate, realistic_mix};
use crate::{Args, sqs_stand_in};

/// One measure of the side-by-side cold starts.
#[derive(Clone, Copy)]
enum Measure {
    ProjectorHttp,
    ProjectorTls,
    ProjectorSystemRoots,
    /// One stream's batch: one write, so one connection.
    ProjectorHttpOneStream,
    ProjectorTlsOneStream,
    DispatcherHttp,
    DispatcherTls,
}

impl Measure {
    fn label(self) -> &'static str {
        match self {
            Measure::ProjectorHttp => "projector, over HTTP",
            Measure::ProjectorTls => "projector, through TLS",
            Measure::ProjectorSystemRoots => "projector, through TLS, system roots too",
            Measure::ProjectorHttpOneStream => "projector, one stream, over HTTP",
            Measure::ProjectorTlsOneStream => "projector, one stream, through TLS",
            Measure::DispatcherHttp => "dispatcher, over HTTP",
            Measure::DispatcherTls => "dispatcher, through TLS",
        }
    }
}

/// The columns of the table of cold starts by build.
const COLUMNS: [&str; 3] = [
    "median (ms)",
    "its CPU, median (ms)",
    "the same batch warm, median (ms)",
];

/// Messages of the mix DynamoDB Local answers before the cold starts.
const WARM_MESSAGES: usize = 10_000;

/// DynamoDB Local is a JVM: fresh, it compiles its own code while it
/// serves, on the same cores as the functions measured. The mix first, on a
/// table of its own, so that its compilers are done before the first start
/// (DynamoDB on AWS is always warm).
async fn warm_service(endpoint: &str) {
    let began = Instant::now();
    let warmed = measure(
        endpoint,
        endpoint,
        "variant-warm",
        &realistic_mix(WARM_MESSAGES, 7),
        Handler::Runner,
    )
    .await;
    println!(
        "   DynamoDB Local warmed first: {} messages of the mix ({} requests) on a table of its own, {:.1} s",
        warmed.messages,
        warmed.requests,
        began.elapsed().as_secs_f64()
    );
}

/// The cold starts of several builds (`--variant NAME=DIR`), side by side in
/// one run: DynamoDB Local warmed first, then each round starts every build
/// once per measure, the build that goes first rotating, so that a slower
/// moment of the machine is shared.
pub async fn print_variants(
    args: &Args,
    endpoint: &str,
    stand_in: Option<&sqs_stand_in::SqsStandIn>,
    tables: &mut Tables,
) {
    let builds: Vec<(&str, PathBuf)> = args
        .variants
        .iter()
        .filter_map(|variant| {
            let (name, dir) = variant.split_once('=')?;
            Some((name, PathBuf::from(dir)))
        })
        .collect();
    let (Some(tls), Some(ca)) = (args.tls_endpoint.as_deref(), args.tls_ca.as_deref()) else {
        return;
    };
    if builds.len() != args.variants.len() {
        println!("--variant takes NAME=DIR: {:?}", args.variants);
        return;
    }
    let plain_sqs = args
        .sqs_stand_in_port
        .map(|port| format!("http://127.0.0.1:{port}"));
    let mut measures = vec![Measure::ProjectorHttp, Measure::ProjectorTls];
    if args.tls_ca_bundle.is_some() {
        measures.push(Measure::ProjectorSystemRoots);
    }
    measures.extend([
        Measure::ProjectorHttpOneStream,
        Measure::ProjectorTlsOneStream,
    ]);
    if stand_in.is_some() {
        measures.push(Measure::DispatcherHttp);
        if args.sqs_tls_endpoint.is_some() {
            measures.push(Measure::DispatcherTls);
        }
    }
    println!("== Cold start by build, side by side: process start to the first batch answered");
    println!(
        "   ({} rounds after one not kept; a round starts each build once per measure, the first build rotating;",
        args.rounds
    );
    println!(
        "   projector: the mix's first batch (10 messages), or one stream's 10 events, on a new table;"
    );
    println!("   dispatcher: 3 stream records, one SendMessageBatch;");
    println!(
        "   warm, same: the projector's batch again on new entities, answered right after by the same process)"
    );
    if tls.starts_with("http://") {
        println!(
            "   the proxies listen in plain TCP: the rows \"through TLS\" take the same hop without TLS"
        );
    }
    warm_service(endpoint).await;
    type Figures = (Vec<Duration>, Vec<usize>, Vec<Duration>, Vec<Duration>);
    let mut figures: HashMap<(usize, usize), Figures> = HashMap::new();
    // Round 0 is not kept: it warms the proxies and the page cache.
    for round in 0..=args.rounds {
        for turn in 0..builds.len() {
            let index = (round + turn) % builds.len();
            let dir = &builds[index].1;
            for (slot, measure) in measures.iter().enumerate() {
                let start = match measure {
                    Measure::ProjectorHttp
                    | Measure::ProjectorTls
                    | Measure::ProjectorSystemRoots
                    | Measure::ProjectorHttpOneStream
                    | Measure::ProjectorTlsOneStream => {
                        let (function, ca) = match measure {
                            Measure::ProjectorHttp | Measure::ProjectorHttpOneStream => {
                                (endpoint, None)
                            }
                            Measure::ProjectorSystemRoots => (tls, args.tls_ca_bundle.as_deref()),
                            _ => (tls, Some(ca)),
                        };
                        let table = format!("variant-{index}-{slot}-{round}");
                        let reach = Reach {
                            setup: endpoint,
                            function,
                            ca,
                            table: &table,
                            tunables: template_tunables(),
                        };
                        // The mix's first batch (several streams, written
                        // at once: a connection each), or one aggregate's
                        // 10 events (one write).
                        let batch = match measure {
                            Measure::ProjectorHttpOneStream | Measure::ProjectorTlsOneStream => {
                                one_aggregate().batches
                            }
                            _ => realistic_mix(10, 13).batches,
                        };
                        projector_figures(&dir.join("projector"), &reach, &batch, true).await
                    }
                    Measure::DispatcherHttp | Measure::DispatcherTls => {
                        let (Some(stand_in), Some(plain)) = (stand_in, plain_sqs.as_deref()) else {
                            continue;
                        };
                        let (endpoint, ca) = match measure {
                            Measure::DispatcherHttp => (plain, None),
                            _ => (args.sqs_tls_endpoint.as_deref().unwrap_or(plain), Some(ca)),
                        };
                        dispatcher_start(&dir.join("dispatcher"), endpoint, ca, stand_in).await
                    }
                };
                if let Some(start) = start.filter(|_| round > 0) {
                    let entry = figures.entry((index, slot)).or_default();
                    entry.0.push(start.first_batch);
                    entry.1.push(start.connections);
                    entry.2.push(start.cpu);
                    entry.3.extend(start.again);
                }
            }
        }
    }
    // `scripts/bench --cold-start` (one build) or `--tls-variants`; under
    // `--plain-proxy` the rows "through TLS" take the same hop in plain TCP:
    // a table of their own.
    let table = match (builds.len(), tls.starts_with("http://")) {
        (1, false) => "cold-start-warmed",
        (1, true) => "cold-start-warmed-plain-proxy",
        (_, false) => "tls-variants",
        (_, true) => "tls-variants-plain-proxy",
    };
    tables.start(
        table,
        "Cold starts by build, side by side: process start to the first batch answered, \
         medians of new processes, DynamoDB Local warmed first",
        match builds.len() {
            1 => "scripts/bench --cold-start",
            _ => "scripts/bench --tls-variants",
        },
        "build: measure",
        &COLUMNS,
    );
    println!(
        "{:<24} {:<42} {:>10} {:>18} {:>12} {:>14} {:>16}",
        "build",
        "measure",
        "median ms",
        "range ms",
        "connections",
        "CPU ms median",
        "warm, same ms"
    );
    for (index, (name, dir)) in builds.iter().enumerate() {
        for (slot, measure) in measures.iter().enumerate() {
            let Some((times, connections, cpu, again)) = figures.get_mut(&(index, slot)) else {
                println!("{name:<24} {:<42} not measured", measure.label());
                continue;
            };
            connections.sort_unstable();
            let connections = match (connections.first(), connections.last()) {
                (Some(low), Some(high)) if low != high => format!("{low} to {high}"),
                (Some(low), _) => low.to_string(),
                _ => String::new(),
            };
            let cpu = spread(cpu).map(|(median, ..)| median);
            let again = spread(again).map(|(median, ..)| median);
            let row = format!("{name}: {}", measure.label());
            for (column, value) in
                COLUMNS
                    .into_iter()
                    .zip([spread(times).map(|(median, ..)| median), cpu, again])
            {
                if let Some(value) = value {
                    tables.record(table, Figure::cell(&row, column, value, 1, "ms"));
                }
            }
            let cpu = cpu.map_or(String::new(), |median| format!("{median:.1}"));
            let again = again.map_or(String::new(), |median| format!("{median:.1}"));
            if let Some((median, min, max, _)) = spread(times) {
                println!(
                    "{name:<24} {:<42} {median:>10.1} {:>18} {connections:>12} {cpu:>14} {again:>16}",
                    measure.label(),
                    format!("{min:.1} to {max:.1}")
                );
            }
        }
        let size = |binary: &str| {
            std::fs::metadata(dir.join(binary))
                .map(|meta| format!("{:.2} MB", meta.len() as f64 / 1e6))
                .unwrap_or_else(|_| "?".to_owned())
        };
        println!(
            "{name:<24} x86_64 release binaries: projector {}, dispatcher {}",
            size("projector"),
            size("dispatcher")
        );
    }
}
