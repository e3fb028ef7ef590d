//! `replay`: runs sample events through the projector's runner, locally.
//!
//! Each FILE is an SQS event as Lambda delivers it (one invocation), a
//! scheduled event as EventBridge sends it (a sweep of parked events and,
//! for a process, of due deadlines, at the event's `time` when that is
//! later than the clock: the run's clock moves on to it), or
//! bare event bodies (one JSON object, or one a line) wrapped as the SQS
//! records Lambda would deliver (message ids `body-<n>`, the stream as the
//! group, the dispatcher's deduplication id, a first delivery), ten to a
//! batch. By
//! default on an embedded in-memory table, carried from file to file; with
//! `--table`, on DynamoDB (`--endpoint-url` for DynamoDB Local). Prints each
//! message's outcome, the events parked and drained, and the batch
//! response; on the embedded table, what it holds at the end. Reads the
//! function's variables (`GAP_POLICY`, `PARK_AFTER_RECEIVES`, ...).

use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use aws_lambda_events::event::sqs::SqsEvent;
use clap::Parser;

use super::arguments;
use crate::domain::Domain;
use crate::lambda::epoch_seconds;
use crate::runner::{Invocation, Outcome, Runner};
use crate::store::Store;
use crate::store::dynamodb::{DynamoStore, connect, ready_table};
use crate::store::memory::MemoryStore;
use crate::sweep::sweep;

mod input;
mod print;
#[cfg(test)]
mod tests;

use input::{Input, read};
pub(super) use print::print_state;
use print::{plural, print_batch, print_sweep};

const EXAMPLES: &str = "\
Examples:
  replay events/*.json
      the whole story, on an embedded table (no AWS, no Docker)
  GAP_POLICY=retry replay events/*.json
      the same story, its gaps retried instead of parked
  RUST_LOG=warn replay events/*.json
      with the runner's and the sweep's warnings, as the function logs them (stderr)
  replay --endpoint-url http://localhost:8000 --table sequence-guard --create-table events/*.json
      on DynamoDB Local (scripts/dynamodb-local.sh run 8000)
  replay --table my-table events/01-*.json
      on AWS, with the credentials and region of the environment (AWS_PROFILE, AWS_REGION)

Exit status: 0 when every file ran (messages may still fail, a gap or an
invalid body: that is the story); 1 when the table cannot be used, a message
hit a storage error or a refusal, a handler broke its rule (a process's append
that the event store refuses is one; the reason is on its line), a deadline
failed, or an invocation failed as a whole; 2 for bad arguments, files or
variables.";

/// Runs sample SQS events (and scheduled sweeps) through the projector's
/// runner, locally, and prints what became of each message.
#[derive(Debug, Parser)]
#[command(name = "replay", version, after_help = EXAMPLES)]
struct Args {
    /// SQS events as Lambda delivers them (`{"Records": [...]}`), each run
    /// as one invocation; scheduled events (`"source": "aws.events"`), each
    /// run as a sweep of parked events; or bare event bodies (one JSON
    /// object, or JSON lines), wrapped as SQS records ten to a batch.
    #[arg(required = true, value_name = "FILE")]
    files: Vec<PathBuf>,
    /// Run on this DynamoDB table instead of the embedded one (credentials
    /// and region from the environment).
    #[arg(long, value_name = "NAME")]
    table: Option<String>,
    /// The DynamoDB endpoint, e.g. http://localhost:8000 for DynamoDB Local
    /// (takes any credentials).
    #[arg(long, value_name = "URL", requires = "table")]
    endpoint_url: Option<String>,
    /// Create the table first if it does not exist (safe to repeat).
    #[arg(long, requires = "table")]
    create_table: bool,
}

/// The `replay` binary of a domain: `fn main() -> ExitCode { cli::replay(my_domain()) }`.
#[tokio::main]
pub async fn replay(domain: Domain) -> ExitCode {
    if let Some(code) = super::refused("replay", &domain) {
        return code;
    }
    // The runner's and the sweep's log lines, to stderr, when RUST_LOG asks.
    crate::logging::init_local();
    let (name, args) = arguments::<Args>("replay", &domain);
    // The same variables as the function (GAP_POLICY, PARK_AFTER_RECEIVES, ...).
    let config = match crate::config::runner_from_env() {
        Ok(config) => config,
        Err(err) => {
            eprintln!("{name}: {err}");
            return ExitCode::from(2);
        }
    };
    let inputs = match read_all(&domain, &args.files) {
        Ok(inputs) => inputs,
        Err(err) => {
            eprintln!("{name}: {err}");
            return ExitCode::from(2);
        }
    };
    let mut out = io::stdout().lock();
    let done = match &args.table {
        Some(_) if domain.process().is_some() => {
            eprintln!(
                "{name}: a process's replay runs on the embedded store, which is also its event store (what it would append is printed): drop --table; to run it on DynamoDB with the rest of the system (its appends given back to it and to every consumer), use the crate's `local` with --endpoint-url"
            );
            return ExitCode::from(2);
        }
        Some(table) => {
            let client = connect(args.endpoint_url.as_deref()).await;
            if let Err(err) = ready_table(&client, table, args.create_table).await {
                eprintln!("{name}: {err}");
                return ExitCode::FAILURE;
            }
            let runner = Runner::new(domain, DynamoStore::new(client, table.clone()), config);
            run_all(&mut out, &runner, &inputs, &|_| {})
                .await
                .and_then(|failed| {
                    writeln!(out, "\nDynamoDB requests: {}", runner.store().requests())?;
                    Ok(failed)
                })
        }
        None => {
            let runner = Runner::new(domain, MemoryStore::new(), config);
            // The streams stand at least where the input has them: what a
            // process appends goes after, as in the event store.
            let observe = |event: &SqsEvent| {
                for body in event
                    .records
                    .iter()
                    .filter_map(|record| record.body.as_deref())
                {
                    if let Ok(read) = runner.domain().parse(body)
                        && let Some(sequence) = read.sequence()
                    {
                        runner.store().observe(read.stream(), sequence);
                    }
                }
            };
            run_all(&mut out, &runner, &inputs, &observe)
                .await
                .and_then(|failed| {
                    print_state(&mut out, runner.domain(), runner.store())?;
                    Ok(failed)
                })
        }
    };
    exit_code(&name, done)
}

/// Reads every file, in order, each named as given; the first that cannot
/// be read is the error, prefixed with its name.
fn read_all(domain: &Domain, files: &[PathBuf]) -> Result<Vec<(String, Input)>, String> {
    files
        .iter()
        .map(|file| {
            let name = file.display().to_string();
            match read(domain, file) {
                Ok(input) => Ok((name, input)),
                Err(err) => Err(format!("{name}: {err}")),
            }
        })
        .collect()
}

/// What a replay did not do: messages (storage errors, refusals, handler
/// errors, a failed invocation's) and deadlines (failed in a sweep).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct NotDone {
    messages: usize,
    deadlines: u64,
}

/// The exit status of a replay that answered `done` (what it did not do,
/// or why the output stopped), said on stderr when not a success.
fn exit_code(name: &str, done: io::Result<NotDone>) -> ExitCode {
    match done {
        Ok(NotDone {
            messages: 0,
            deadlines: 0,
        }) => ExitCode::SUCCESS,
        Ok(NotDone {
            messages,
            deadlines,
        }) => {
            let mut said = Vec::new();
            if messages > 0 {
                said.push(format!(
                    "{messages} {} not done (storage errors, refusals, handlers that broke their rule, or a failed invocation)",
                    plural(messages, "message was", "messages were")
                ));
            }
            if deadlines > 0 {
                said.push(format!(
                    "{deadlines} {} failed",
                    plural(
                        usize::try_from(deadlines).unwrap_or(2),
                        "deadline",
                        "deadlines"
                    )
                ));
            }
            eprintln!("{name}: {}: see the reasons above", said.join("; "));
            ExitCode::FAILURE
        }
        // The reader went away (`| head`): end quietly.
        Err(err) if err.kind() == io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("{name}: cannot write the output: {err}");
            ExitCode::FAILURE
        }
    }
}

/// Runs every input; answers how many messages hit storage errors,
/// refusals or handler errors, and how many deadlines failed.
async fn run_all<S: Store>(
    out: &mut impl Write,
    runner: &Runner<S>,
    inputs: &[(String, Input)],
    observe: &dyn Fn(&SqsEvent),
) -> io::Result<NotDone> {
    let mut not_done = NotDone::default();
    // The run's clock: the wall clock, moved on (never back) by a scheduled
    // event's `time`, so that a sweep at a later time fires the deadlines
    // due by then, and what follows it is handled at that time.
    let mut clock = 0;
    for (file, input) in inputs {
        if let Input::Schedule(Some(time)) = input {
            clock = clock.max(*time);
        }
        clock = clock.max(epoch_seconds());
        let invocation = Invocation {
            deadline: None,
            now: clock,
        };
        match input {
            Input::Batch(event) => {
                observe(event);
                not_done.messages += run_batch(out, runner, file, event, invocation).await?;
            }
            Input::Batches(events) => {
                for (index, event) in events.iter().enumerate() {
                    let name = if events.len() == 1 {
                        file.clone()
                    } else {
                        format!("{file}, batch {}", index + 1)
                    };
                    observe(event);
                    not_done.messages += run_batch(out, runner, &name, event, invocation).await?;
                }
            }
            Input::Schedule(_) => {
                writeln!(out, "== {file} (scheduled sweep of parked events)")?;
                match sweep(runner, invocation).await {
                    Ok(report) => {
                        print_sweep(out, &report)?;
                        not_done.deadlines += report.deadlines.failed;
                    }
                    Err(err) => {
                        not_done.messages += 1;
                        writeln!(out, "  sweep failed: {err}")?;
                    }
                }
            }
        }
    }
    Ok(not_done)
}

/// Runs one batch and prints it; answers how many messages hit storage
/// errors, refusals or handler errors (a drained parked event's included).
async fn run_batch<S: Store>(
    out: &mut impl Write,
    runner: &Runner<S>,
    name: &str,
    event: &SqsEvent,
    invocation: Invocation,
) -> io::Result<usize> {
    let count = event.records.len();
    writeln!(
        out,
        "== {name} ({count} {})",
        plural(count, "message", "messages")
    )?;
    match runner.run(event, invocation).await {
        Ok(report) => {
            print_batch(out, event, &report, invocation.now)?;
            Ok(report.count(Outcome::StorageError)
                + report.count(Outcome::Rejected)
                + report.handler_errors())
        }
        Err(err) => {
            // On Lambda the whole batch would be retried.
            writeln!(out, "  invocation failed: {err}")?;
            Ok(event.records.len())
        }
    }
}
