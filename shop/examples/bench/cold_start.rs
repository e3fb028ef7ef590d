//! Cold starts of the release functions: the projector's process start to
//! its first call for work and to its first batch answered (over HTTP and
//! through TLS), and the dispatcher's to its first stream batch answered.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use aws_lambda_events::event::sqs::SqsEvent;

use crate::figure_files::{Figure, Tables};
use crate::functions::{
    Reach, dispatcher_start, projector_figures, release_binary, template_tunables,
};
use crate::{Args, runtime_api, sqs_stand_in};

/// The line of one cold-start measure: the times to the first batch
/// answered, the function's CPU time by then, and (when measured) the same
/// batch on new entities answered warm right after; recorded in the table
/// `cold-start` as `what` (and its CPU), the README's row `headline`.
fn print_starts(
    (label, what, headline): (&str, &str, Option<&str>),
    times: &mut [Duration],
    cpu: &mut [Duration],
    again: &mut [Duration],
    tables: &mut Tables,
) {
    let cpu = spread(cpu).map_or(0.0, |(median, ..)| median);
    let warm = spread(again).map(|(median, ..)| median);
    let again = warm.map_or(String::new(), |median| {
        format!("; the same batch on new entities, warm: median {median:.1} ms")
    });
    match spread(times) {
        Some((median, min, max, runs)) => {
            println!(
                "process start to the first batch answered, {label}: median {median:.1} ms (min {min:.1}, max {max:.1}, {runs} runs; its CPU time median {cpu:.1} ms{again})"
            );
            let figure = Figure::new(what, median, 1, "ms");
            let figure = match warm {
                Some(warm) => figure.baseline("the same batch answered warm", warm),
                None => figure,
            };
            let figure = match headline {
                Some(headline) => figure.headline(headline),
                None => figure,
            };
            tables.record(COLD_START, figure);
            let cpu_of = format!("{what}: its CPU time");
            tables.record(COLD_START, Figure::new(&cpu_of, cpu, 1, "ms"));
        }
        None => println!("process start to the first batch answered, {label}: not measured"),
    }
}

/// The table of this file's figures.
const COLD_START: &str = "cold-start";

/// Records a release binary's size.
fn record_size(tables: &mut Tables, what: &str, binary: &Path) {
    if let Ok(meta) = std::fs::metadata(binary) {
        let megabytes = meta.len() as f64 / 1e6;
        println!("x86_64 release binary (stripped by the profile): {megabytes:.2} MB");
        tables.record(COLD_START, Figure::new(what, megabytes, 2, "MB"));
    }
}

/// Median, min and max in ms of `times` (sorted here), and how many.
pub fn spread(times: &mut [Duration]) -> Option<(f64, f64, f64, usize)> {
    times.sort();
    let ms = |time: &Duration| time.as_secs_f64() * 1e3;
    Some((
        ms(times.get(times.len() / 2)?),
        ms(times.first()?),
        ms(times.last()?),
        times.len(),
    ))
}

async fn start_times(samples: usize) -> Vec<Duration> {
    let mut times = Vec::new();
    let Some(projector) = std::env::current_exe()
        .ok()
        .and_then(|exe| Some(exe.parent()?.parent()?.join("projector")))
    else {
        return times;
    };
    for _ in 0..samples {
        let api = runtime_api::RuntimeApi::start().await;
        let started = Instant::now();
        let Ok(mut child) = tokio::process::Command::new(&projector)
            .env_clear()
            .env("AWS_LAMBDA_RUNTIME_API", &api.address)
            .env("AWS_LAMBDA_FUNCTION_NAME", "bench")
            .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "128")
            .env("AWS_LAMBDA_FUNCTION_VERSION", "1")
            .env("TABLE_NAME", "bench-start")
            .env("AWS_REGION", "us-east-1")
            .env("AWS_ACCESS_KEY_ID", "local")
            .env("AWS_SECRET_ACCESS_KEY", "local")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
        else {
            return times;
        };
        let deadline = Instant::now() + Duration::from_secs(5);
        while api.first_next().is_none() && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_micros(200)).await;
        }
        if let Some(at) = api.first_next() {
            times.push(at - started);
        }
        let _ = child.kill().await;
    }
    times.sort();
    times
}

/// The release dispatcher's cold start, over HTTP and through TLS, to the
/// SQS stand-in.
pub async fn print_dispatcher(
    args: &Args,
    stand_in: Option<&sqs_stand_in::SqsStandIn>,
    tables: &mut Tables,
) {
    println!("\n== Release dispatcher (SendMessageBatch to a local SQS stand-in)");
    let (Some(stand_in), Some(port)) = (stand_in, args.sqs_stand_in_port) else {
        println!(
            "process start to the first batch answered: not measured (no --sqs-stand-in-port)"
        );
        return;
    };
    let Some(dispatcher) = release_binary("dispatcher") else {
        return;
    };
    let plain = format!("http://127.0.0.1:{port}");
    for (label, endpoint, ca) in [
        ("over HTTP", Some(plain.as_str()), None),
        (
            "through TLS (a local TLS proxy)",
            args.sqs_tls_endpoint.as_deref(),
            args.tls_ca.as_deref(),
        ),
    ] {
        let Some(endpoint) = endpoint else {
            println!(
                "process start to the first batch answered, {label}: not measured (no --sqs-tls-endpoint)"
            );
            continue;
        };
        let (mut times, mut cpu) = (Vec::new(), Vec::new());
        for _ in 0..7 {
            if let Some(start) = dispatcher_start(&dispatcher, endpoint, ca, stand_in).await {
                times.push(start.first_batch);
                cpu.push(start.cpu);
            }
        }
        let (what, headline) = match ca {
            None => (
                "dispatcher: process start to its first batch answered, over HTTP",
                None,
            ),
            Some(_) => (
                "dispatcher: process start to its first batch answered, through TLS",
                Some("cold start through TLS, the dispatcher's first batch answered"),
            ),
        };
        print_starts(
            (label, what, headline),
            &mut times,
            &mut cpu,
            &mut [],
            tables,
        );
    }
    record_size(tables, "x86_64 release dispatcher, stripped", &dispatcher);
}

/// The release projector's process start to its first call for work.
pub async fn print_first_call(tables: &mut Tables) {
    tables.start(
        COLD_START,
        "The release functions' cold start: medians of new processes, DynamoDB Local and an \
         SQS stand-in on the same cores",
        "scripts/bench",
        "figure",
        &[],
    );
    let times = start_times(20).await;
    if times.is_empty() {
        println!(
            "process start to first call for work: not measured (the projector did not start)"
        );
    }
    if let (Some(first), Some(last)) = (times.first(), times.last()) {
        println!(
            "process start to first call for work: median {:.1} ms (min {:.1}, max {:.1}, {} runs)",
            times[times.len() / 2].as_secs_f64() * 1e3,
            first.as_secs_f64() * 1e3,
            last.as_secs_f64() * 1e3,
            times.len()
        );
        tables.record(
            COLD_START,
            Figure::new(
                "projector: process start to its first call for work",
                times[times.len() / 2].as_secs_f64() * 1e3,
                1,
                "ms",
            ),
        );
    }
}

/// The release projector's start to its first batch answered, on `first`
/// (the mix's first batch), over HTTP and through TLS (`--tls-endpoint`);
/// then the size of its binary.
pub async fn print_projector(
    args: &Args,
    endpoint: &str,
    projector: &Path,
    first: &[SqsEvent],
    tables: &mut Tables,
) {
    // The cold start a user sees: start to the first batch answered, a new
    // process and table each time, over plain HTTP and through TLS.
    for (label, function, ca) in [
        ("DynamoDB Local over HTTP", Some(endpoint), None),
        (
            "DynamoDB Local through TLS (a local TLS proxy)",
            args.tls_endpoint.as_deref(),
            args.tls_ca.as_deref(),
        ),
    ] {
        let Some(function) = function else {
            println!(
                "process start to the first batch answered, {label}: not measured (no --tls-endpoint)"
            );
            continue;
        };
        let (mut times, mut cpu, mut again) = (Vec::new(), Vec::new(), Vec::new());
        for run in 0..7 {
            let table = format!("start-{}-{run}", label.len());
            let reach = Reach {
                setup: endpoint,
                function,
                ca,
                table: &table,
                tunables: template_tunables(),
            };
            if let Some(start) = projector_figures(projector, &reach, first, true).await {
                times.push(start.first_batch);
                cpu.push(start.cpu);
                again.extend(start.again);
            }
        }
        let (what, headline) = match ca {
            None => (
                "projector: process start to its first batch answered (the mix's first, 8 \
                 streams), over HTTP",
                None,
            ),
            Some(_) => (
                "projector: process start to its first batch answered (the mix's first, 8 \
                 streams), through TLS",
                Some("cold start through TLS, the projector's first batch of 8 streams answered"),
            ),
        };
        print_starts(
            (label, what, headline),
            &mut times,
            &mut cpu,
            &mut again,
            tables,
        );
    }
    record_size(tables, "x86_64 release projector, stripped", projector);
}
