//! `local`: a crate's whole system run on one machine, from a script of
//! commands ([`script`]): its producer's appends, the dispatcher's and the
//! queues' work (each consumer given the new events in stream order), every
//! consumer and process (a process's appends are new events, given in turn
//! to every consumer), the scheduled sweep on a clock the script sets, and
//! erasing a subject. It prints what each command did and what each
//! consumer made of each event.
//!
//! ```text
//! local SCRIPT [--clock EPOCH_SECONDS] [--endpoint-url URL [--prefix NAME]]
//! ```
//!
//! By default everything is in memory (no AWS, no Docker): the event store
//! and every consumer's table. With `--endpoint-url` (DynamoDB Local, say),
//! the event store and each consumer's table are tables there
//! (`<prefix>-events`, `<prefix>-<consumer>`, made if missing), written as
//! the deployed functions write them. Personal data is sealed under a
//! master key of the run's own, or the one `PERSONAL_DATA_KEY` names:
//! `local:<32 bytes in base64url>`, or with `--endpoint-url` a KMS key too
//! (LocalStack's, with `AWS_ENDPOINT_URL_KMS`), as the functions use it.
//!
//! Exit status: 0 when every command ran and every message was done; 1
//! when an append or an erasure was refused, or a message failed (each
//! named in the output); 2 for bad arguments, a script that cannot be read
//! (the line named), or a system whose declarations cannot work.

mod script;
mod tables;
mod world;

use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::Parser;

use crate::domain::System;
use crate::personal::{DataKey, DynamoKeys, Keyring, LocalKeys};
use crate::producer::{EventStore, MemoryEvents};
use crate::runner::{Runner, RunnerConfig};
use crate::store::dynamodb::{DynamoStore, connect, ensure_events_table, ensure_table};
use crate::store::memory::MemoryStore;
use script::{Clock, Command};
use world::{Consumer, Log, World};

/// Runs a crate's whole system on one machine, from a script.
#[derive(Debug, Parser)]
#[command(name = "local", version, after_help = script::HELP)]
struct Args {
    /// The script: one command a line (append, clock, sweep, erase, show).
    #[arg(value_name = "SCRIPT")]
    script: PathBuf,
    /// The clock the run starts at, epoch seconds (default: now).
    #[arg(long, value_name = "EPOCH_SECONDS")]
    clock: Option<u64>,
    /// Run on DynamoDB at this endpoint (http://localhost:8000 for DynamoDB
    /// Local) instead of in memory.
    #[arg(long, value_name = "URL")]
    endpoint_url: Option<String>,
    /// The tables' prefix on DynamoDB (`<prefix>-events`, `<prefix>-<consumer>`).
    #[arg(
        long,
        value_name = "NAME",
        default_value = "local",
        requires = "endpoint_url"
    )]
    prefix: String,
}

/// The `local` binary of a crate: `fn main() -> ExitCode { cli::local(my_crate::system()) }`.
#[tokio::main]
pub async fn local(system: System) -> ExitCode {
    crate::logging::init_local();
    let name = super::program("local");
    let args = match Args::try_parse() {
        Ok(args) => args,
        Err(err) => {
            let _ = err.print();
            return ExitCode::from(if err.use_stderr() { 2 } else { 0 });
        }
    };
    if let Err(err) = system.check() {
        eprintln!("{name}: {err}");
        return ExitCode::from(2);
    }
    let text = match std::fs::read_to_string(&args.script) {
        Ok(text) => text,
        Err(err) => {
            eprintln!("{name}: cannot read {}: {err}", args.script.display());
            return ExitCode::from(2);
        }
    };
    let commands = match script::parse(&text) {
        Ok(commands) => commands,
        Err(err) => {
            eprintln!("{name}: {}: {err}", args.script.display());
            return ExitCode::from(2);
        }
    };
    let key = std::env::var("PERSONAL_DATA_KEY")
        .ok()
        .map(|key| key.trim().to_owned())
        .filter(|key| !key.is_empty());
    let clock = args.clock.unwrap_or_else(crate::clock::epoch_seconds);
    let personal = system.store().declares_personal();
    let mut out = io::stdout().lock();
    let done = match &args.endpoint_url {
        None => {
            let master = match key.as_deref().map_or_else(random_master, memory_master) {
                Ok(master) => master,
                Err(err) => {
                    eprintln!("{name}: {err}");
                    return ExitCode::from(2);
                }
            };
            let keys = Arc::new(Keyring::new(LocalKeys::with_master(master)));
            let system = system.with_keys(keys);
            let events = Arc::new(MemoryEvents::new(system.store().clone()));
            let consumers = system
                .consumers()
                .iter()
                .map(|(name, domain)| {
                    let store = MemoryStore::new().with_event_store(events.clone());
                    Consumer::new(
                        name.clone(),
                        Runner::new(domain.clone(), store, RunnerConfig::default()),
                    )
                })
                .collect();
            let mut world = World::new(Log::Memory(events), consumers, clock, personal);
            run(&mut out, &mut world, &commands).await
        }
        Some(endpoint) => {
            let client = connect(Some(endpoint)).await;
            let events_table = format!("{}-events", args.prefix);
            if let Err(err) = ensure_events_table(&client, &events_table).await {
                eprintln!("{name}: {err}");
                return ExitCode::FAILURE;
            }
            let keys = match key.as_deref() {
                Some(key) => super::keys::source(&client, &events_table, key).await,
                None => random_master()
                    .map(|master| DynamoKeys::local(client.clone(), &events_table, master)),
            };
            let keys = match keys {
                Ok(keys) => Arc::new(Keyring::new(keys)),
                Err(err) => {
                    eprintln!("{name}: {err}");
                    return ExitCode::from(2);
                }
            };
            let system = system.with_keys(keys);
            let events = EventStore::new(client.clone(), &events_table, system.store().clone());
            let mut consumers = Vec::new();
            for (consumer, domain) in system.consumers() {
                let table = format!("{}-{consumer}", args.prefix);
                if let Err(err) = ensure_table(&client, &table).await {
                    eprintln!("{name}: {err}");
                    return ExitCode::FAILURE;
                }
                let store =
                    DynamoStore::new(client.clone(), table).with_event_store(events.clone());
                consumers.push(Consumer::new(
                    consumer.clone(),
                    Runner::new(domain.clone(), store, RunnerConfig::default()),
                ));
            }
            let mut world = World::new(
                Log::Dynamo(Box::new(events), Default::default()),
                consumers,
                clock,
                personal,
            );
            run(&mut out, &mut world, &commands).await
        }
    };
    match done {
        Ok(0) => ExitCode::SUCCESS,
        Ok(failures) => {
            eprintln!("{name}: {failures} refused or failed (named above)");
            ExitCode::FAILURE
        }
        Err(err) => {
            eprintln!("{name}: cannot write the output: {err}");
            ExitCode::FAILURE
        }
    }
}

/// The master key `PERSONAL_DATA_KEY` names for a run in memory: a local
/// one only.
fn memory_master(key: &str) -> Result<DataKey, String> {
    if key.starts_with("local:") {
        super::keys::local_master(key)
    } else {
        Err("PERSONAL_DATA_KEY names a KMS key: a run in memory seals with a local key (`local:<32 bytes in base64url>`, or unset for one of the run's own); a KMS key needs --endpoint-url (and AWS_ENDPOINT_URL_KMS for LocalStack's)".to_owned())
    }
}

/// A master key of the run's own, when `PERSONAL_DATA_KEY` names none.
fn random_master() -> Result<DataKey, String> {
    DataKey::random_bytes()
        .and_then(|bytes| DataKey::new(&bytes))
        .map_err(|err| format!("no key for the run: {err}"))
}

/// Runs every command, each followed by the deliveries it causes; answers
/// how many appends, erasures, deadlines and messages were refused or failed.
async fn run<S: tables::Counters>(
    out: &mut impl Write,
    world: &mut World<S>,
    commands: &[(usize, String, Command)],
) -> io::Result<usize> {
    writeln!(out, "clock {}", world.clock)?;
    for (_, line, command) in commands {
        writeln!(out, "> {line}")?;
        match command {
            Command::Append {
                stream,
                event_type,
                data,
            } => {
                world.append(out, stream, event_type, data.clone()).await?;
                world.deliver(out).await?;
            }
            Command::Clock(clock) => {
                world.clock = match clock {
                    Clock::At(at) => *at,
                    Clock::After(seconds) => world.clock.saturating_add(*seconds),
                };
                world.set_clock(world.clock);
                writeln!(out, "  clock     {}", world.clock)?;
            }
            Command::Sweep => {
                world.sweep(out).await?;
                world.deliver(out).await?;
            }
            Command::Erase(subject) => {
                world.erase(out, subject).await?;
                world.deliver(out).await?;
            }
            Command::Show => world.show(out).await?,
        }
    }
    Ok(world.failures)
}
