//! `replay`: runs sample events through the projector's runner, locally.
//!
//! Each FILE is an SQS event as Lambda delivers it (one invocation), a
//! scheduled event as EventBridge sends it (a sweep of parked events), or
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

use aws_lambda_events::event::sqs::{SqsEvent, SqsMessage};
use clap::Parser;
use serde_json::Value;

use super::arguments;
use crate::domain::Domain;
use crate::lambda::epoch_seconds;
use crate::runner::{BatchReport, Invocation, Outcome, Runner};
use crate::store::Store;
use crate::store::dynamodb::{DynamoStore, check_table, connect, ensure_table};
use crate::store::memory::MemoryStore;
use crate::sweep::{SweepReport, sweep};

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

Exit status: 0 when every file ran (messages may still fail: that is the story);
1 when the table cannot be used, a message hit a storage error or a refusal, or
an invocation failed as a whole; 2 for bad arguments, files or variables.";

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

/// One file, read.
enum Input {
    /// An SQS event as Lambda delivers it: one invocation.
    Batch(SqsEvent),
    /// Bare event bodies (one, or JSON lines), wrapped as SQS records: one
    /// invocation per ten.
    Batches(Vec<SqsEvent>),
    Schedule,
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
    let mut inputs = Vec::new();
    for file in &args.files {
        match read(&domain, file) {
            Ok(input) => inputs.push((file.display().to_string(), input)),
            Err(err) => {
                eprintln!("{name}: {}: {err}", file.display());
                return ExitCode::from(2);
            }
        }
    }
    let mut out = io::stdout().lock();
    let done = match &args.table {
        Some(table) => {
            let client = connect(args.endpoint_url.as_deref()).await;
            let ready = if args.create_table {
                ensure_table(&client, table).await.map(|_| ())
            } else {
                check_table(&client, table).await
            };
            if let Err(err) = ready {
                eprintln!("{name}: {err}");
                return ExitCode::FAILURE;
            }
            let runner = Runner::new(domain, DynamoStore::new(client, table.clone()), config);
            run_all(&mut out, &runner, &inputs)
                .await
                .and_then(|failed| {
                    writeln!(out, "\nDynamoDB requests: {}", runner.store().requests())?;
                    Ok(failed)
                })
        }
        None => {
            let runner = Runner::new(domain, MemoryStore::new(), config);
            run_all(&mut out, &runner, &inputs)
                .await
                .and_then(|failed| {
                    print_state(&mut out, runner.domain(), runner.store())?;
                    Ok(failed)
                })
        }
    };
    match done {
        Ok(0) => ExitCode::SUCCESS,
        Ok(failed) => {
            eprintln!(
                "{name}: {failed} {} not done (storage errors, refusals, or a failed invocation): see the reasons above",
                plural(failed, "message was", "messages were")
            );
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

/// Reads one file: what is wrong with it, said plainly.
fn read(domain: &Domain, file: &std::path::Path) -> Result<Input, String> {
    let text = std::fs::read_to_string(file).map_err(|err| match err.kind() {
        io::ErrorKind::NotFound => "no such file".to_owned(),
        io::ErrorKind::IsADirectory => "is a directory, not an event file".to_owned(),
        io::ErrorKind::PermissionDenied => "permission denied".to_owned(),
        io::ErrorKind::InvalidData => "not UTF-8 text".to_owned(),
        _ => format!("cannot read it: {err}"),
    })?;
    let value: Value = match serde_json::from_str(&text) {
        Ok(value) => value,
        // Several lines, the first an object: one event body a line (JSON lines).
        Err(_) if json_lines(&text) => return bodies(domain, &text),
        Err(err) => return Err(format!("not JSON: {err}")),
    };
    if value.get("eventId").is_some() || value.get("type").is_some() {
        // One bare event body.
        return Ok(Input::Batches(vec![wrapped(domain, &[text.trim()], 0)]));
    }
    if value.get("Records").is_some() {
        return serde_json::from_value(value)
            .map(Input::Batch)
            .map_err(|err| format!("not an SQS event as Lambda delivers it: {err}"));
    }
    if value.get("source").and_then(Value::as_str) == Some("aws.events") {
        return Ok(Input::Schedule);
    }
    Err(
        "neither an SQS event (`{\"Records\": [...]}`), a scheduled event (`\"source\": \"aws.events\"`), nor an event body (`{\"eventId\": ..., \"type\": ...}`)"
            .to_owned(),
    )
}

/// Whether the text reads as JSON lines: more than one line, the first a
/// JSON object.
fn json_lines(text: &str) -> bool {
    let mut lines = text.lines().map(str::trim).filter(|line| !line.is_empty());
    let first = lines.next();
    lines.next().is_some()
        && first.is_some_and(|line| matches!(serde_json::from_str(line), Ok(Value::Object(_))))
}

/// JSON lines of event bodies, in SQS batches of ten, in order.
fn bodies(domain: &Domain, text: &str) -> Result<Input, String> {
    let lines: Vec<(usize, &str)> = text
        .lines()
        .enumerate()
        .map(|(index, line)| (index + 1, line.trim()))
        .filter(|(_, line)| !line.is_empty())
        .collect();
    for (number, line) in &lines {
        match serde_json::from_str::<Value>(line) {
            Ok(Value::Object(_)) => {}
            Ok(_) => {
                return Err(format!(
                    "line {number} is not a JSON object (an event body)"
                ));
            }
            Err(err) => return Err(format!("line {number} is not JSON: {err}")),
        }
    }
    let bodies: Vec<&str> = lines.iter().map(|(_, line)| *line).collect();
    Ok(Input::Batches(
        bodies
            .chunks(MAX_BATCH)
            .enumerate()
            .map(|(index, chunk)| wrapped(domain, chunk, index * MAX_BATCH))
            .collect(),
    ))
}

/// The most messages SQS gives a function in one FIFO batch.
const MAX_BATCH: usize = 10;

/// Event bodies as the SQS records Lambda would deliver: message ids
/// `body-<n>` (from `first` + 1), the group the event's stream (as the
/// domain reads it; for a body it cannot read, the `aggregateId`, else the
/// `eventId`), the deduplication id as the dispatcher makes it, a first
/// delivery.
fn wrapped(domain: &Domain, bodies: &[&str], first: usize) -> SqsEvent {
    let mut event = SqsEvent::default();
    for (index, body) in bodies.iter().enumerate() {
        let raw: Value = serde_json::from_str(body).unwrap_or(Value::Null);
        let text = |value: Option<&Value>| value.and_then(Value::as_str).map(str::to_owned);
        let event_id = text(raw.get("eventId")).unwrap_or_default();
        let group = domain
            .parse(body)
            .map(|event| event.stream().to_owned())
            .ok()
            .or_else(|| text(raw.get("aggregateId")))
            .unwrap_or_else(|| event_id.clone());
        let sequence = raw.get("sequence").and_then(Value::as_u64);
        let mut message = SqsMessage::default();
        message.message_id = Some(format!("body-{}", first + index + 1));
        message.body = Some((*body).to_owned());
        if !group.is_empty() {
            message.attributes.insert(
                "MessageDeduplicationId".to_owned(),
                crate::dispatcher::deduplication_id(&group, sequence, &event_id),
            );
            message.attributes.insert(
                "MessageGroupId".to_owned(),
                crate::dispatcher::group_id(&group),
            );
        }
        message
            .attributes
            .insert("ApproximateReceiveCount".to_owned(), "1".to_owned());
        event.records.push(message);
    }
    event
}

/// Runs every input; answers how many messages hit storage errors.
async fn run_all<S: Store>(
    out: &mut impl Write,
    runner: &Runner<S>,
    inputs: &[(String, Input)],
) -> io::Result<usize> {
    let mut storage_failures = 0;
    for (file, input) in inputs {
        let invocation = Invocation {
            deadline: None,
            now: epoch_seconds(),
        };
        match input {
            Input::Batch(event) => {
                storage_failures += run_batch(out, runner, file, event, invocation).await?;
            }
            Input::Batches(events) => {
                for (index, event) in events.iter().enumerate() {
                    let name = if events.len() == 1 {
                        file.clone()
                    } else {
                        format!("{file}, batch {}", index + 1)
                    };
                    storage_failures += run_batch(out, runner, &name, event, invocation).await?;
                }
            }
            Input::Schedule => {
                writeln!(out, "== {file} (scheduled sweep of parked events)")?;
                match sweep(runner, invocation).await {
                    Ok(report) => print_sweep(out, &report)?,
                    Err(err) => {
                        storage_failures += 1;
                        writeln!(out, "  sweep failed: {err}")?;
                    }
                }
            }
        }
    }
    Ok(storage_failures)
}

/// Runs one batch and prints it; answers how many messages hit storage
/// errors or refusals.
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
            Ok(report.count(Outcome::StorageError) + report.count(Outcome::Rejected))
        }
        Err(err) => {
            // On Lambda the whole batch would be retried.
            writeln!(out, "  invocation failed: {err}")?;
            Ok(event.records.len())
        }
    }
}

fn print_batch(
    out: &mut impl Write,
    event: &SqsEvent,
    report: &BatchReport,
    now: u64,
) -> io::Result<()> {
    // Columns as wide as their longest cell (a long message id, say).
    let rows: Vec<[String; 5]> = report
        .messages
        .iter()
        .zip(&event.records)
        .map(|(message, record)| {
            // An invalid body may still name its type and sequence.
            let raw: Option<Value> = record
                .body
                .as_deref()
                .and_then(|body| serde_json::from_str(body).ok());
            let field = |name: &str| raw.as_ref().and_then(|raw| raw.get(name)).cloned();
            let event_type = message.event_type.map(str::to_owned).or_else(|| {
                field("type")
                    .and_then(|value| value.as_str().map(|text| text.chars().take(40).collect()))
            });
            let sequence = message
                .sequence
                .or_else(|| field("sequence").and_then(|value| value.as_u64()));
            let reason = message
                .reason
                .as_deref()
                .map(|reason| format!(" ({reason})"))
                .unwrap_or_default();
            [
                message.message_id.clone(),
                message.stream.clone(),
                sequence.map_or_else(|| "seq -".to_owned(), |sequence| format!("seq {sequence}")),
                event_type.unwrap_or_else(|| "?".to_owned()),
                format!("{}{reason}", message.outcome.as_str()),
            ]
        })
        .collect();
    let width = |column: usize| {
        rows.iter()
            .map(|row| row[column].chars().count())
            .max()
            .unwrap_or(0)
    };
    let widths = [width(0), width(1), width(2), width(3)];
    for row in &rows {
        writeln!(
            out,
            "  {:<w0$}  {:<w1$}  {:<w2$}  {:<w3$}  {}",
            row[0],
            row[1],
            row[2],
            row[3],
            row[4],
            w0 = widths[0],
            w1 = widths[1],
            w2 = widths[2],
            w3 = widths[3],
        )?;
    }
    for parking in &report.parking {
        if !parking.parked.is_empty() {
            writeln!(
                out,
                "  parked  {} seq {} (waiting for {}; {} parked on it)",
                parking.stream,
                list(&parking.parked),
                parking
                    .waiting_for
                    .map_or_else(|| "-".to_owned(), |next| next.to_string()),
                parking.parked_now
            )?;
        }
        if !parking.cleared.is_empty() {
            writeln!(
                out,
                "  cleared {} seq {} (behind the entity; conflicts recorded: {})",
                parking.stream,
                list(&parking.cleared),
                if parking.conflicts.is_empty() {
                    "none".to_owned()
                } else {
                    list(&parking.conflicts)
                }
            )?;
        }
        for drained in &parking.drained {
            writeln!(
                out,
                "  drained {} seq {} {} (event {}, message {}, parked {} s before)",
                parking.stream,
                drained.sequence,
                drained.event_type,
                drained.event_id,
                drained.message_id,
                now.saturating_sub(drained.parked_at)
            )?;
        }
    }
    let response = serde_json::to_string(&report.response()).unwrap_or_else(|err| err.to_string());
    writeln!(out, "  response: {response}")
}

fn print_sweep(out: &mut impl Write, report: &SweepReport) -> io::Result<()> {
    let drained: usize = report
        .drained
        .iter()
        .map(|parking| parking.drained.len())
        .sum();
    for parking in &report.drained {
        for event in &parking.drained {
            writeln!(
                out,
                "  drained {} seq {} {} (event {}, message {})",
                parking.stream, event.sequence, event.event_type, event.event_id, event.message_id
            )?;
        }
    }
    for stream in &report.longest {
        writeln!(
            out,
            "  waiting {}: for seq {}, {} parked, for {} s",
            stream.key, stream.waiting_for, stream.parked, stream.parked_for_seconds
        )?;
    }
    writeln!(
        out,
        "  {} with events parked; drained {drained}; oldest waiting {}",
        count(report.entities, "entity", "entities"),
        report
            .oldest_parked_age_seconds
            .map_or_else(|| "-".to_owned(), |age| format!("{age} s"))
    )
}

/// The embedded table: each entity and counter, named as `inspect` takes
/// them, and what is parked.
pub(super) fn print_state(
    out: &mut impl Write,
    domain: &Domain,
    store: &MemoryStore,
) -> io::Result<()> {
    writeln!(out, "\nEmbedded table:")?;
    let entities = store.entities();
    let counters = store.counters();
    let parking = store.parking();
    if entities.is_empty() && counters.is_empty() && parking.is_empty() {
        return writeln!(out, "  (empty: no message was applied)");
    }
    for (key, entity) in entities {
        writeln!(
            out,
            "  {:<7} {:<12} sequence {:<3} {}",
            key.kind().label(),
            key.id(),
            entity.sequence(),
            entity.summary()
        )?;
    }
    for (counter, id, value) in counters {
        writeln!(
            out,
            "  {:<7} {id:<12} {} {value}",
            domain.counter_name(counter),
            counter.attribute
        )?;
    }
    for (key, inspection) in parking {
        let parked: Vec<u64> = inspection
            .parked
            .iter()
            .map(|parked| parked.sequence)
            .collect();
        if !parked.is_empty() {
            writeln!(out, "  parked  {key}: seq {}", list(&parked))?;
        }
        for conflict in &inspection.conflicts {
            writeln!(
                out,
                "  conflict {key}: seq {} event {}",
                conflict.sequence, conflict.event_id
            )?;
        }
    }
    Ok(())
}

fn plural<'a>(n: usize, one: &'a str, many: &'a str) -> &'a str {
    if n == 1 { one } else { many }
}

fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", plural(n, one, many))
}

fn list(sequences: &[u64]) -> String {
    sequences
        .iter()
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}
