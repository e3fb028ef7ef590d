//! The embedded store's time per message (parse, decide, apply) on one
//! thread, the runner beside the naive handler, with glibc's defaults and
//! again (in a new process) under the template's `GLIBC_TUNABLES`.

use std::path::Path;
use std::time::Duration;

use sequence_guard::runner::{Invocation, Runner, RunnerConfig};
use sequence_guard::store::memory::MemoryStore;

use crate::cold_start::spread;
use crate::figure_files::{Figure, Tables};
use crate::functions::template_tunables;
use crate::naive::naive;
use crate::workloads::{Workload, realistic_mix};

/// The handlers `--cpu-only` times.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Handlers {
    Both,
    Runner,
    Naive,
}

/// The CPU time this thread has spent (`CLOCK_THREAD_CPUTIME_ID`: to the
/// nanosecond, where `/proc` counts in scheduler ticks).
pub(crate) fn thread_cpu() -> Duration {
    let time = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    Duration::new(
        u64::try_from(time.tv_sec).unwrap_or(0),
        u32::try_from(time.tv_nsec).unwrap_or(0),
    )
}

/// One pass over `workload` on a new embedded store, by the runner or the
/// naive handler: the CPU time this thread spent on it.
fn embedded_pass(
    runtime: &tokio::runtime::Runtime,
    workload: &Workload,
    naive_handler: bool,
) -> Duration {
    let domain = shop::domain();
    let store = MemoryStore::new();
    let runner = Runner::new(shop::domain(), &store, RunnerConfig::default());
    let invocation = Invocation {
        deadline: None,
        now: 1_764_489_600,
    };
    let before = thread_cpu();
    for event in &workload.batches {
        if naive_handler {
            runtime.block_on(naive(&domain, &store, event, invocation.now));
        } else {
            let _ = runtime.block_on(runner.run(event, invocation));
        }
    }
    thread_cpu().saturating_sub(before)
}

/// What `--cpu-only` measured: the CPU time of each pass, by handler.
#[derive(Default)]
struct Passes {
    runner: Vec<Duration>,
    naive: Vec<Duration>,
}

/// `repeats` passes of each handler that `handlers` names, in alternation
/// (runner, naive, runner, ...) after one pass of each not kept, so that a
/// slower stretch of the machine falls on both.
fn embedded_passes(workload: &Workload, repeats: usize, handlers: Handlers) -> Passes {
    let runtime = match tokio::runtime::Builder::new_current_thread().build() {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("no runtime: {err}");
            std::process::exit(1);
        }
    };
    let mut passes = Passes::default();
    for round in 0..=repeats {
        if handlers != Handlers::Naive {
            let time = embedded_pass(&runtime, workload, false);
            if round > 0 {
                passes.runner.push(time);
            }
        }
        if handlers != Handlers::Runner {
            let time = embedded_pass(&runtime, workload, true);
            if round > 0 {
                passes.naive.push(time);
            }
        }
    }
    passes
}

/// The embedded store's time per message, the runner and the naive handler.
/// Under `GLIBC_TUNABLES` (the template's, when `scripts/bench` runs it)
/// its figures are the table `cpu`, else `cpu-glibc-defaults`; the run
/// under the template's tunables is a new process, given `figures` too.
pub fn print_cpu(repeats: usize, handlers: Handlers, figures: Option<&Path>, tables: &mut Tables) {
    let tunables = std::env::var("GLIBC_TUNABLES").ok();
    let table = match &tunables {
        Some(_) => "cpu",
        None => "cpu-glibc-defaults",
    };
    let title = match &tunables {
        Some(_) => "CPU a message on the embedded store (parse, decide, apply), one thread, \
                    under the template's `GLIBC_TUNABLES`; medians of passes in alternation"
            .to_owned(),
        None => "CPU a message on the embedded store (parse, decide, apply), one thread, \
                 with glibc's defaults; medians of passes in alternation"
            .to_owned(),
    };
    tables.start(table, &title, "scripts/bench", "figure", &[]);
    let with = tunables
        .as_deref()
        .map_or(String::new(), |value| format!(", GLIBC_TUNABLES={value}"));
    println!("\n== Embedded store: time per message (parse, decide, apply), one thread{with}");
    let mix = realistic_mix(3000, 11);
    let messages = mix.batches.iter().map(|b| b.records.len()).sum::<usize>();
    // On a thread of its own, outside the tokio runtime of main.
    let passes = std::thread::scope(|scope| {
        scope
            .spawn(|| embedded_passes(&mix, repeats, handlers))
            .join()
            .unwrap_or_default()
    });
    let mut medians = Vec::new();
    for (name, times) in [("runner", &passes.runner), ("naive ", &passes.naive)] {
        let mut times: Vec<Duration> = times.clone();
        if let Some((median, min, max, runs)) = spread(&mut times) {
            let scale = 1e3 / messages.max(1) as f64;
            medians.push(median * scale);
            println!(
                "{name}: {:.2} µs/message CPU, median of {runs} passes of {messages} messages (min {:.2}, max {:.2})",
                median * scale,
                min * scale,
                max * scale
            );
        }
    }
    // Each pass of the runner beside the naive pass that followed it.
    let mut ratios: Vec<f64> = passes
        .runner
        .iter()
        .zip(&passes.naive)
        .map(|(runner, naive)| runner.as_secs_f64() / naive.as_secs_f64().max(f64::MIN_POSITIVE))
        .collect();
    ratios.sort_by(f64::total_cmp);
    if let [runner, naive] = medians[..] {
        let figure = Figure::new("CPU a message, the runner", runner, 2, "µs")
            .baseline("naive handler", naive);
        tables.record(
            table,
            match tunables {
                Some(_) => figure.headline("CPU a message on the embedded store"),
                None => figure,
            },
        );
    }
    if let Some(median) = ratios.get(ratios.len() / 2) {
        tables.record(
            table,
            Figure::new(
                "the runner ÷ the naive handler, pass beside pass",
                *median,
                2,
                "",
            ),
        );
        println!(
            "runner / naive, pass beside pass: median {median:.2} times ({} pairs, {:.2} to {:.2})",
            ratios.len(),
            ratios.first().copied().unwrap_or(*median),
            ratios.last().copied().unwrap_or(*median)
        );
    }
    // The same under the template's glibc tunables: glibc reads them when a
    // process starts, so in a new process of this benchmark.
    let handler = clap::ValueEnum::to_possible_value(&handlers);
    if let (None, Some(value), Some(handler)) = (tunables, template_tunables(), handler) {
        let status = std::env::current_exe().and_then(|exe| {
            std::process::Command::new(exe)
                .args(["--cpu-only", "--repeats", &repeats.to_string()])
                .args(["--handler", handler.get_name()])
                .args(figures.map(|dir| {
                    let mut dir_arg = std::ffi::OsString::from("--figures=");
                    dir_arg.push(dir);
                    dir_arg
                }))
                .env("GLIBC_TUNABLES", value)
                .status()
        });
        if let Err(err) = status {
            println!("with GLIBC_TUNABLES={value}: not measured ({err})");
        }
    }
}
