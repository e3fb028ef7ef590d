//! Lambda Managed Instances: the release projector serving 1, 8 and 32
//! invocations at once in one process (`AWS_LAMBDA_MAX_CONCURRENCY`), on
//! DynamoDB Local behind the 2 ms proxy. Each invocation in flight works on
//! message groups of its own, as a FIFO event source mapping hands them out:
//! the mix, its ids prefixed by lane. Prints batches a second, the CPU time
//! a batch and the peak memory of the process.

use std::path::Path;
use std::time::Instant;

use aws_lambda_events::event::sqs::SqsEvent;
use sequence_guard::store::dynamodb::{connect, create_table};

use crate::figure_files::{Figure, Tables};
use crate::functions::{cpu_time, function_command, peak_kb, prefixed, warm};
use crate::runtime_api::RuntimeApi;
use crate::workloads::realistic_mix;

/// Invocations at once.
const CONCURRENCY: [usize; 3] = [1, 8, 32];

/// Batches each lane sends, one after the other.
const BATCHES_A_LANE: usize = 40;

/// `batches` on message groups of lane `lane` alone.
fn lane(batches: &[SqsEvent], lane: usize) -> Vec<SqsEvent> {
    let prefix = format!("lane{lane}-");
    batches
        .iter()
        .map(|batch| prefixed(batch, &prefix))
        .collect()
}

/// What one process serving `concurrency` invocations at once did.
struct Served {
    batches: usize,
    seconds: f64,
    cpu_ms_a_batch: f64,
    peak_mb: f64,
}

async fn serve(
    projector: &Path,
    (setup, via): (&str, &str),
    table: &str,
    concurrency: usize,
    mix: &[SqsEvent],
) -> Option<Served> {
    let client = connect(Some(setup)).await;
    create_table(&client, table).await.ok()?;
    warm(&client, table).await;
    let api = RuntimeApi::start().await;
    let mut command = function_command(projector, &api);
    command
        .env("TABLE_NAME", table)
        .env("AWS_ENDPOINT_URL_DYNAMODB", via)
        .env("AWS_LAMBDA_MAX_CONCURRENCY", concurrency.to_string());
    let mut child = command.spawn().ok()?;
    let pid = child.id()?;
    // One batch answered first: the process is up, its connections open.
    let first = lane(&mix[..1], usize::MAX);
    api.invoke(&serde_json::to_string(&first[0]).ok()?).await;
    let cpu_before = cpu_time(pid);
    let began = Instant::now();
    let mut lanes = Vec::new();
    for index in 0..concurrency {
        let api = api.clone();
        let bodies: Vec<String> = lane(mix, index)
            .iter()
            .filter_map(|batch| serde_json::to_string(batch).ok())
            .collect();
        lanes.push(tokio::spawn(async move {
            for body in &bodies {
                api.invoke(body).await;
            }
            bodies.len()
        }));
    }
    let mut batches = 0;
    for lane in lanes {
        batches += lane.await.unwrap_or(0);
    }
    let seconds = began.elapsed().as_secs_f64();
    let cpu = cpu_time(pid).saturating_sub(cpu_before);
    let peak_kb = peak_kb(pid)?;
    let _ = child.kill().await;
    Some(Served {
        batches,
        seconds,
        cpu_ms_a_batch: cpu.as_secs_f64() * 1000.0 / batches.max(1) as f64,
        peak_mb: peak_kb as f64 / 1024.0,
    })
}

/// Batches a second, CPU a batch and peak memory at 1, 8 and 32
/// invocations at once.
pub async fn print_managed(projector: &Path, setup: &str, via: &str, tables: &mut Tables) {
    println!(
        "\n== Lambda Managed Instances: one release projector, several invocations at once \
         ({BATCHES_A_LANE} batches of the mix each, message groups of their own, 2 ms a request)"
    );
    tables.start(
        "managed",
        "One release projector process serving several invocations at once \
         (AWS_LAMBDA_MAX_CONCURRENCY), each sending 40 batches of the skewed mix on message \
         groups of its own, on DynamoDB Local behind a proxy adding 2 ms a request",
        "scripts/bench",
        "invocations at once",
        &["batches a second", "CPU a batch (ms)", "peak memory (MB)"],
    );
    let mix = realistic_mix(BATCHES_A_LANE * 10, 11).batches;
    // DynamoDB Local is a JVM: the same work first, not measured, so that
    // its compilers are done before the first measure (AWS's is warm).
    let _ = serve(projector, (setup, via), "managed-warm", 8, &mix).await;
    let mut single = None;
    for concurrency in CONCURRENCY {
        let table = format!("managed-{concurrency}");
        let Some(served) = serve(projector, (setup, via), &table, concurrency, &mix).await else {
            println!("{concurrency} at once: not measured");
            continue;
        };
        let rate = served.batches as f64 / served.seconds;
        println!(
            "{concurrency:>3} at once: {rate:>7.1} batches/s ({} batches in {:.1} s), \
             CPU {:.2} ms a batch, peak memory {:.1} MB",
            served.batches, served.seconds, served.cpu_ms_a_batch, served.peak_mb
        );
        let row = concurrency.to_string();
        let mut figure = Figure::cell(&row, "batches a second", rate, 0, "");
        if let Some(single) = single {
            figure = figure.baseline("one at a time", single);
        } else {
            single = Some(rate);
        }
        tables.record("managed", figure);
        tables.record(
            "managed",
            Figure::cell(&row, "CPU a batch (ms)", served.cpu_ms_a_batch, 2, "ms"),
        );
        tables.record(
            "managed",
            Figure::cell(&row, "peak memory (MB)", served.peak_mb, 1, "MB"),
        );
    }
}
