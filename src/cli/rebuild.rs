//! `rebuild`: projects the event store into a table through the same runner
//! and handlers as the function: each stream in order, a page at a time.
//!
//! ```text
//! rebuild --events-table NAME [--table NAME [--create-table]] [--endpoint-url URL]
//! rebuild --events-table NAME --versions [--endpoint-url URL]
//! rebuild --events-table NAME --table NAME --erasures [--check] [--endpoint-url URL]
//! ```
//!
//! Without `--table`, into an embedded table, printed at the end. Run against a
//! fresh table while the live one keeps serving, a changed projection can be
//! rebuilt and then swapped in; run again, it changes nothing (every event is
//! a duplicate).
//!
//! A counter's events (deduplicated effects) are absorbed by their dedup
//! records, which expire `DEDUP_TTL_SECONDS` after they were written (read
//! from the environment: give the consumer's). Into a table younger than
//! that window less a day (a fresh one, the embedded one) every addition is
//! applied, as the records it has absorb what it holds. Into an older table
//! (the live one, say), an addition is applied only to a counter the table
//! holds no item of; a stream that would add to a counter the table holds is
//! refused from that event on, named with why on stderr, and the rest goes
//! on: mend that counter by adding the difference `verify` shows
//! (expected - found) to its item, or rebuild into a fresh table (an event
//! appended to the store would not do: `verify` folds it too).
//!
//! Exit status: 0 when every event was applied (or a duplicate); 1 when a
//! table cannot be used, an event was not done (its reason is printed) or a
//! stream was refused (named); 2 for bad arguments or variables.
//!
//! A process's rebuild into a table appends what the process reacts with to
//! the events appended since its start, the table's creation: what the
//! store held before is folded without reacting (docs/processes.md, adding
//! a process to a live system). Into an embedded table it appends nothing.
//!
//! With `--erasures` it projects nothing: it applies every erasure the event
//! store records to the table again (`erasures.rs`; with `--check`, it only
//! names each entity that still holds a value of an erased subject).
//!
//! With `--versions` it projects nothing: it counts the stored events of each
//! type and version, one JSON line each (`{"type": "AccountOpened",
//! "version": 1, "events": 3, "current": 2}`), then `{"streams": n,
//! "events": n}`. An upcast from a version is needed as long as a line counts
//! events of it; a version above `current` is one this build cannot read.

mod additions;
mod erasures;

use std::collections::BTreeMap;
use std::io::{self, IsTerminal, Write};
use std::process::ExitCode;

use aws_lambda_events::event::sqs::SqsEvent;
use clap::Parser;

use super::{arguments, events_table};
use crate::domain::Domain;
use crate::lambda::epoch_seconds;
use crate::producer::EventStore;
use crate::runner::{Invocation, Runner, RunnerConfig};
use crate::store::Store;
use crate::store::dynamodb::{DynamoStore, check_table, connect, ready_table};
use crate::store::memory::MemoryStore;
pub(super) use additions::Additions;

/// Projects the event store into a table, stream by stream, in order,
/// through the projector's runner.
#[derive(Debug, Parser)]
#[command(name = "rebuild", version)]
struct Args {
    /// The event store's table (default: EVENTS_TABLE).
    #[arg(long, value_name = "NAME", env = "EVENTS_TABLE")]
    events_table: Option<String>,
    /// The projection's table; without it, an embedded one, printed at the end.
    #[arg(long, value_name = "NAME")]
    table: Option<String>,
    /// Create the projection's table first if it does not exist.
    #[arg(long, requires = "table")]
    create_table: bool,
    /// The DynamoDB endpoint, e.g. http://localhost:8000 for DynamoDB Local.
    #[arg(long, value_name = "URL")]
    endpoint_url: Option<String>,
    /// Project nothing: count the stored events of each type and version
    /// (which upcasts the store still needs).
    #[arg(long, conflicts_with = "table")]
    versions: bool,
    /// Project nothing: apply every erasure the event store records to
    /// `--table` again (a table restored from a backup), each entity's
    /// sequence kept.
    #[arg(long, requires = "table", conflicts_with = "versions")]
    erasures: bool,
    /// With `--erasures`: write nothing, name each entity that still holds
    /// a value of an erased subject (exit 1 if any).
    #[arg(long, requires = "erasures")]
    check: bool,
    /// How long the consumer keeps a dedup record (default:
    /// DEDUP_TTL_SECONDS, else the projector's default, 35 days; give the
    /// lowest it ever ran with): into a table older than that, less a day,
    /// a counter the table holds is not added to.
    #[arg(long, value_name = "SECONDS",
          value_parser = clap::value_parser!(u64).range(crate::config::DEDUP_TTL_RANGE))]
    dedup_ttl_seconds: Option<u64>,
}

/// What a rebuild did.
#[derive(Debug, Default)]
pub(super) struct Rebuilt {
    /// Streams read.
    pub(super) streams: u64,
    /// Events run through the runner.
    pub(super) events: u64,
    /// Events the runner did not complete (each named on stderr).
    pub(super) not_done: u64,
    /// Streams stopped at an addition that might be applied twice (each
    /// named on stderr).
    pub(super) refused: u64,
}

/// The `rebuild` binary of a domain: `fn main() -> ExitCode { cli::rebuild(my_domain()) }`.
#[tokio::main]
pub async fn rebuild(domain: Domain) -> ExitCode {
    if let Some(code) = super::refused("rebuild", &domain) {
        return code;
    }
    // The runner's and the sweep's log lines, to stderr, when RUST_LOG asks.
    crate::logging::init_local();
    let (name, args) = arguments::<Args>("rebuild", &domain);
    let Some(events_table) = events_table(&name, args.events_table, "--events-table") else {
        return ExitCode::from(2);
    };
    let config = match crate::config::runner_from_env() {
        Ok(config) => config,
        Err(err) => {
            eprintln!("{name}: {err}");
            return ExitCode::from(2);
        }
    };
    let client = connect(args.endpoint_url.as_deref()).await;
    if let Err(err) = check_table(&client, &events_table).await {
        eprintln!("{name}: {err}");
        return ExitCode::FAILURE;
    }
    // Personal data read with its subjects' keys, when the domain declares
    // some and PERSONAL_DATA_KEY names the KMS key.
    let domain = match super::keys::keyed(
        domain,
        &client,
        Some(&events_table),
        std::env::var("PERSONAL_DATA_KEY").ok(),
    )
    .await
    {
        Ok(domain) => domain,
        Err(err) => {
            eprintln!("{name}: {err}");
            return ExitCode::from(2);
        }
    };
    let events = EventStore::new(client.clone(), events_table, domain.clone());
    if args.versions {
        return print_versions(&name, &events, &domain).await;
    }
    let done = match &args.table {
        Some(table) => {
            if let Err(err) = ready_table(&client, table, args.create_table).await {
                eprintln!("{name}: {err}");
                return ExitCode::FAILURE;
            }
            if args.erasures {
                let store = DynamoStore::new(client, table.clone());
                return erasures::reapply(&name, &events, &domain, &store, args.check).await;
            }
            let target = (table.as_str(), events.table());
            let (config, appends_to) = match reacting(&name, &client, target, &domain, config).await
            {
                Ok(config) => config,
                Err(code) => return code,
            };
            let window = args.dedup_ttl_seconds.unwrap_or(config.dedup_ttl_seconds);
            let additions = match Additions::for_table(&client, table, window).await {
                Ok(additions) => additions,
                Err(err) => {
                    eprintln!("{name}: {err}");
                    return ExitCode::FAILURE;
                }
            };
            if let Some(caution) = additions.caution() {
                eprintln!("{name}: {caution}");
            }
            let mut store = DynamoStore::new(client.clone(), table.clone());
            if let Some(producer) = appends_to {
                let appends_to = EventStore::new(client, events.table().to_owned(), producer);
                store = store.with_event_store(appends_to);
            }
            let runner = Runner::new(domain, store, config);
            project(&name, &events, &runner, &[], &additions).await
        }
        None => {
            // A fresh embedded table: every dedup record it has is there. A
            // process's steps append nothing (nothing is sent from here).
            let config = RunnerConfig {
                appends: false,
                ..config
            };
            let runner = Runner::new(domain, MemoryStore::new(), config);
            let done = project(&name, &events, &runner, &[], &Additions::Apply).await;
            if done.is_ok() {
                let mut out = io::stdout().lock();
                if let Err(err) =
                    super::replay::print_state(&mut out, runner.domain(), runner.store())
                {
                    eprintln!("{name}: cannot write the output: {err}");
                }
            }
            done
        }
    };
    match done {
        Ok(rebuilt) => {
            let refused = match rebuilt.refused {
                0 => String::new(),
                refused => format!("; {refused} streams refused (named above)"),
            };
            println!(
                "rebuilt {} streams, {} events; {} not done{refused}; {} requests to the event store",
                rebuilt.streams,
                rebuilt.events,
                rebuilt.not_done,
                events.requests()
            );
            if rebuilt.not_done == 0 && rebuilt.refused == 0 {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        Err(err) => {
            eprintln!("{name}: {err}");
            ExitCode::FAILURE
        }
    }
}

/// A process's rebuild into its table reacts as the process does from its
/// start, the table's creation: what the store held before is folded
/// without reacting, what was appended since is reacted to (once: a live
/// delivery of an event the rebuild applied is a duplicate, and the other
/// way round), appended through the process's own producer's domain (its
/// personal data sealed as the process's function seals it). Said on
/// stderr. Any other domain's configuration is kept.
async fn reacting(
    name: &str,
    client: &aws_sdk_dynamodb::Client,
    (table, events_table): (&str, &str),
    domain: &Domain,
    config: RunnerConfig,
) -> Result<(RunnerConfig, Option<Domain>), ExitCode> {
    let Some(process) = domain.process() else {
        return Ok((config, None));
    };
    match crate::store::dynamodb::created_at(client, table).await {
        Ok(Some(start)) => {
            let producer = super::keys::keyed(
                process.store_domain().clone(),
                client,
                Some(events_table),
                std::env::var("PERSONAL_DATA_KEY").ok(),
            )
            .await
            .map_err(|err| {
                eprintln!("{name}: {err}");
                ExitCode::from(2)
            })?;
            eprintln!(
                "{name}: the process started when {table} was created ({start}, epoch seconds): events appended before are folded without reacting, those appended since are reacted to, once"
            );
            let config = RunnerConfig {
                appends: true,
                reacts_from: Some(start),
                ..config
            };
            Ok((config, Some(producer)))
        }
        Ok(None) => {
            eprintln!(
                "{name}: DynamoDB does not say when {table} was created: the process's start cannot be told, nothing rebuilt"
            );
            Err(ExitCode::FAILURE)
        }
        Err(err) => {
            eprintln!("{name}: {err}");
            Err(ExitCode::FAILURE)
        }
    }
}

/// `--versions`: the stored events counted per type and version, one JSON
/// line each, then the totals.
async fn print_versions(name: &str, events: &EventStore, domain: &Domain) -> ExitCode {
    match count_versions(events).await {
        Ok((streams, counted)) => {
            let mut out = io::stdout().lock();
            let total: u64 = counted.values().sum();
            let lines = counted
                .iter()
                .map(|((event_type, version), count)| {
                    serde_json::json!({
                        "type": event_type,
                        "version": version,
                        "events": count,
                        "current": domain.version(event_type),
                    })
                })
                .chain([serde_json::json!({"streams": streams, "events": total})]);
            for line in lines {
                if let Err(err) = writeln!(out, "{line}") {
                    eprintln!("{name}: cannot write the output: {err}");
                    return ExitCode::FAILURE;
                }
            }
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("{name}: {err}");
            ExitCode::FAILURE
        }
    }
}

/// The number of streams, and of events per type and version (the body's
/// `version`, 1 when absent; `null` for a body whose version cannot be
/// read), in the whole store.
async fn count_versions(
    events: &EventStore,
) -> Result<(u64, BTreeMap<(String, Option<u16>), u64>), crate::store::StoreError> {
    #[derive(serde::Deserialize)]
    struct Envelope {
        #[serde(rename = "type", default)]
        event_type: Option<String>,
        #[serde(default = "version_1")]
        version: serde_json::Value,
    }
    fn version_1() -> serde_json::Value {
        serde_json::Value::from(1)
    }
    let mut counted = BTreeMap::new();
    let mut streams = 0;
    let mut page = None;
    loop {
        let (found, next) = events.streams(page.take()).await?;
        for stream in found {
            streams += 1;
            let mut after = 0;
            loop {
                let stored = events.read(&stream, after, 100).await?;
                let Some(last) = stored.last() else { break };
                after = last.sequence;
                for event in &stored {
                    let envelope = serde_json::from_str::<Envelope>(&event.body).ok();
                    let version = envelope
                        .as_ref()
                        .and_then(|envelope| envelope.version.as_u64())
                        .and_then(|version| u16::try_from(version).ok())
                        .filter(|version| *version >= 1);
                    let event_type = envelope
                        .and_then(|envelope| envelope.event_type)
                        .unwrap_or_else(|| event.event_type.clone());
                    *counted.entry((event_type, version)).or_insert(0) += 1;
                }
            }
        }
        match next {
            Some(next) => page = Some(next),
            None => break,
        }
    }
    Ok((streams, counted))
}

/// Every stream of the store (or only those of `only`, when it names any),
/// in order, through the runner: batches of up to ten of a stream's events,
/// as SQS would deliver them; a stream whose additions may not be applied
/// (`additions`) stops before the first, named. `verify` folds the same
/// way, into memory.
pub(super) async fn project<S: Store>(
    name: &str,
    events: &EventStore,
    runner: &Runner<S>,
    only: &[String],
    additions: &Additions,
) -> Result<Rebuilt, crate::store::StoreError> {
    let progress = io::stderr().is_terminal();
    let mut rebuilt = Rebuilt::default();
    if only.is_empty() {
        let mut page = None;
        loop {
            let (streams, next) = events.streams(page.take()).await?;
            for stream in streams {
                let target = Target { runner, additions };
                project_stream(name, events, &target, &stream, &mut rebuilt, progress).await?;
            }
            match next {
                Some(next) => page = Some(next),
                None => break,
            }
        }
    } else {
        for stream in only {
            let target = Target { runner, additions };
            project_stream(name, events, &target, stream, &mut rebuilt, progress).await?;
        }
    }
    if progress {
        eprintln!();
    }
    Ok(rebuilt)
}

/// Where a rebuild projects: the runner, and what it may do with additions.
struct Target<'a, S> {
    runner: &'a Runner<S>,
    additions: &'a Additions,
}

/// One stream's events, in order, through the runner, a page at a time,
/// up to an addition that may not be applied.
async fn project_stream<S: Store>(
    name: &str,
    events: &EventStore,
    target: &Target<'_, S>,
    stream: &str,
    rebuilt: &mut Rebuilt,
    progress: bool,
) -> Result<(), crate::store::StoreError> {
    let runner = target.runner;
    rebuilt.streams += 1;
    let mut after = 0;
    let mut counters = BTreeMap::new();
    loop {
        let stored = events.read(stream, after, 100).await?;
        let Some(last) = stored.last() else { break };
        after = last.sequence;
        let refused = target
            .additions
            .first_refused(runner.domain(), &stored, &mut counters)
            .await?;
        let stored = match &refused {
            Some((index, _)) => &stored[..*index],
            None => &stored[..],
        };
        run_page(name, runner, stream, stored, rebuilt).await;
        if let Some((_, refusal)) = refused {
            rebuilt.refused += 1;
            // The consumer's verify: `status-verify` for `status-rebuild`.
            let verify = name.replacen("rebuild", "verify", 1);
            eprintln!(
                "{name}: stream {stream} refused from sequence {}: its events add to the counter {}, which the table already holds, and the table is older than the dedup window: an event it applied before may have lost its dedup record and would be added twice. Not applied; mend the counter by adding to its item the difference `{verify} --stream {stream}` shows (expected - found), or rebuild into a fresh table (the runbook \"a hole\" in docs/operate.md)",
                refusal.sequence, refusal.counter
            );
            break;
        }
        if progress {
            eprint!(
                "\r{name}: {} streams, {} events",
                rebuilt.streams, rebuilt.events
            );
            let _ = io::stderr().flush();
        }
    }
    Ok(())
}

/// A page of a stream's events through the runner, in batches of up to ten
/// (as SQS would deliver them); what was not done is named on stderr.
async fn run_page<S: Store>(
    name: &str,
    runner: &Runner<S>,
    stream: &str,
    stored: &[crate::producer::StoredEvent],
    rebuilt: &mut Rebuilt,
) {
    for chunk in stored.chunks(10) {
        let mut batch = SqsEvent::default();
        for event in chunk {
            // Sent when it was appended: a process reacts to it or not by it.
            let message = event.message(stream, format!("{stream}:{}", event.sequence));
            batch.records.push(message);
        }
        let invocation = Invocation {
            deadline: None,
            now: epoch_seconds(),
        };
        let report = match runner.run(&batch, invocation).await {
            Ok(report) => report,
            Err(err) => {
                eprintln!("{name}: {stream}: {err}");
                rebuilt.not_done += chunk.len() as u64;
                continue;
            }
        };
        rebuilt.events += chunk.len() as u64;
        for message in report
            .messages
            .iter()
            .filter(|message| message.outcome.is_failure())
        {
            rebuilt.not_done += 1;
            eprintln!(
                "{name}: {} not done: {} ({})",
                message.message_id,
                message.outcome.as_str(),
                message.reason.as_deref().unwrap_or("")
            );
        }
    }
}
