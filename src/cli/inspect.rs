//! `inspect`: the operator's look at the table.
//!
//! ```text
//! inspect --table NAME [--endpoint-url URL] KIND ID      (KIND: one of the domain's entity kinds or counters)
//! inspect --table NAME [--endpoint-url URL] --parked
//! ```
//!
//! The first shows one aggregate's entity: its sequence, the events parked
//! on it (and the sequence it waits for) and the conflicts recorded for it;
//! for a counter, its value, and the value of every other counter kept on
//! its item (a member's `onLoan` and `loans`), read together. The second lists every entity with events
//! parked, longest waiting first, walking the whole index from its start
//! (entries an earlier release left in the index's older layout included,
//! as they are: the sweep alone moves them). Bodies are not printed (they
//! may hold personal data); they are in the table's `PENDING#` and
//! `CONFLICT#` items. It reads only: credentials and region come from the
//! environment, as for the AWS CLI, and the caller needs no more than
//! `dynamodb:DescribeTable`, `dynamodb:Query`, `dynamodb:GetItem` and
//! `dynamodb:BatchGetItem` on the table.

use std::io::{self, Write};
use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser};

use super::program;
use crate::domain::Domain;
use crate::entity::EntityKey;
use crate::handling::Counter;
use crate::lambda::epoch_seconds;
use crate::store::dynamodb::{DynamoStore, check_table, connect};
use crate::store::{ConflictRecord, Inspection, Store, StoreError};
use crate::sweep::{LOGGED, look};

const EXAMPLES: &str = "\
Examples (KIND above lists this domain's kinds and counters):
  inspect --table <table> <KIND> <id>
      one entity, or one counter
  inspect --table <table> --parked
      every entity with events parked, longest waiting first
  inspect --endpoint-url http://localhost:8000 --table <table> <KIND> <id>
      on DynamoDB Local

Exit status: 0 when the table was read; 1 when it cannot be used; 2 for bad arguments.";

/// The operator's look at the projection table: one entity (its sequence,
/// the events parked on it, its conflicts) or every entity with events parked.
#[derive(Debug, Parser)]
#[command(name = "inspect", version, after_help = EXAMPLES)]
struct Args {
    /// The DynamoDB table (the stack's `TableName` output).
    #[arg(long, value_name = "NAME", env = "TABLE_NAME")]
    table: String,
    /// The DynamoDB endpoint, e.g. http://localhost:8000 for DynamoDB Local.
    #[arg(long, value_name = "URL")]
    endpoint_url: Option<String>,
    /// List every entity with events parked, longest waiting first.
    #[arg(long, conflicts_with_all = ["kind", "id"])]
    parked: bool,
    /// What to look at: an entity kind or a counter of the domain.
    #[arg(required_unless_present = "parked", requires = "id")]
    kind: Option<String>,
    /// Its id: the aggregateId, or the counter's id.
    #[arg(required_unless_present = "parked")]
    id: Option<String>,
}

/// What a KIND argument names.
enum Target {
    Entity(EntityKey),
    /// The counters kept on one item, in the order registered.
    Counters(Vec<&'static Counter>, String),
}

/// The `inspect` binary of a domain: `fn main() -> ExitCode { cli::inspect(my_domain()) }`.
#[tokio::main]
pub async fn inspect(domain: Domain) -> ExitCode {
    if let Some(code) = super::refused("inspect", &domain) {
        return code;
    }
    let name = program("inspect");
    let args = parse(&name, &domain);
    let target = target(&domain, &args);
    let client = connect(args.endpoint_url.as_deref()).await;
    if let Err(err) = check_table(&client, &args.table).await {
        eprintln!("{name}: {err}");
        return ExitCode::FAILURE;
    }
    let store = DynamoStore::new(client, args.table.clone());
    let now = epoch_seconds();
    let mut out = io::stdout().lock();
    let shown = match (args.parked, target) {
        (true, _) => show_parked(&mut out, &domain, &store, now).await,
        (false, Some(Target::Counters(counters, id))) => {
            show_counters(&mut out, &domain, &store, &counters, &id).await
        }
        (false, Some(Target::Entity(key))) => show_entity(&mut out, &store, &key, now).await,
        // clap requires one or the other.
        (false, None) => Ok(()),
    };
    match shown {
        Ok(()) => ExitCode::SUCCESS,
        Err(Shown::Output(err)) if err.kind() == io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(Shown::Output(err)) => {
            eprintln!("{name}: cannot write the output: {err}");
            ExitCode::FAILURE
        }
        Err(Shown::Store(err)) => {
            eprintln!("{name}: cannot read table {}: {err}", args.table);
            ExitCode::FAILURE
        }
    }
}

/// The arguments, parsed under `name`, KIND checked against the domain's
/// kinds and counters; help, version and bad arguments end the process as
/// clap does.
fn parse(name: &str, domain: &Domain) -> Args {
    let mut kinds: Vec<String> = domain.kinds().iter().map(|kind| kind.label()).collect();
    // One name for each counter's item (the counters on it share it).
    for counter in domain.counters() {
        let name = domain.counter_name(counter);
        if !kinds.contains(&name) {
            kinds.push(name);
        }
    }
    let mut command = Args::command()
        .name(name.to_owned().leak() as &str)
        .version(super::version(domain).leak() as &str)
        .after_help(format!("KIND: one of {}\n\n{EXAMPLES}", kinds.join(", ")));
    let args = match command
        .try_get_matches_from_mut(std::env::args_os())
        .and_then(|matches| Args::from_arg_matches(&matches))
    {
        Ok(args) => args,
        Err(err) => err.exit(),
    };
    if let Some(kind) = args.kind.as_deref()
        && !kinds.iter().any(|known| known == kind)
    {
        command
            .error(
                clap::error::ErrorKind::InvalidValue,
                format!(
                    "invalid value '{kind}' for '<KIND>'\n  [possible values: {}]",
                    kinds.join(", ")
                ),
            )
            .exit();
    }
    args
}

/// What KIND and ID name, when given: an entity, or every counter kept on
/// the named counter's item.
fn target(domain: &Domain, args: &Args) -> Option<Target> {
    match (args.kind.as_deref(), args.id.clone()) {
        (Some(kind), Some(id)) => match (domain.kind(kind), domain.counter_named(kind)) {
            (Some(kind), _) => Some(Target::Entity(EntityKey::new(kind, id))),
            (None, Some(named)) => {
                let on_item = domain
                    .counters()
                    .iter()
                    .copied()
                    .filter(|counter| {
                        (counter.kind, counter.sort_key) == (named.kind, named.sort_key)
                    })
                    .collect();
                Some(Target::Counters(on_item, id))
            }
            // clap checked it against the domain's names.
            (None, None) => None,
        },
        _ => None,
    }
}

/// What can stop a look.
#[derive(Debug, thiserror::Error)]
enum Shown {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("cannot write the output: {0}")]
    Output(#[from] io::Error),
}

/// The values of the counters kept on one item, a line each.
async fn show_counters(
    out: &mut impl Write,
    domain: &Domain,
    store: &DynamoStore,
    counters: &[&'static Counter],
    id: &str,
) -> Result<(), Shown> {
    let Some(first) = counters.first() else {
        return Ok(());
    };
    writeln!(out, "{} {id}", domain.counter_name(first))?;
    let values = store.counters_on_item(counters, id).await?;
    if values.iter().all(Option::is_none) {
        writeln!(out, "  no addition applied yet")?;
        return Ok(());
    }
    for (counter, value) in counters.iter().zip(values) {
        match value {
            Some(value) => writeln!(out, "  {} {value}", counter.attribute)?,
            None => writeln!(out, "  {} (no addition applied yet)", counter.attribute)?,
        }
    }
    Ok(())
}

/// One entity: where it stands, what is parked on it, its conflicts.
async fn show_entity(
    out: &mut impl Write,
    store: &DynamoStore,
    key: &EntityKey,
    now: u64,
) -> Result<(), Shown> {
    let inspection = store.inspect(key).await?;
    writeln!(out, "{key}")?;
    let at = match &inspection.stored.entity {
        Some(entity) => {
            writeln!(
                out,
                "  sequence {} (last event {})",
                entity.sequence(),
                entity.last_event_id()
            )?;
            writeln!(out, "  {}", entity.summary())?;
            entity.sequence()
        }
        None => {
            writeln!(out, "  not created")?;
            0
        }
    };
    if let Some(due) = inspection.stored.due_at {
        // A process's deadline: fired by the first sweep after it.
        if due > now {
            writeln!(out, "  deadline at {due} (in {} s)", due - now)?;
        } else {
            writeln!(
                out,
                "  deadline at {due} (due {} s ago: the next sweep fires it)",
                now - due
            )?;
        }
    }
    show_parked_events(out, &inspection, at, now)?;
    show_conflicts(out, &inspection.conflicts, now)
}

/// The events parked on an entity at sequence `at`, and the one it waits
/// for.
fn show_parked_events(
    out: &mut impl Write,
    inspection: &Inspection,
    at: u64,
    now: u64,
) -> Result<(), Shown> {
    if inspection.parked.is_empty() {
        writeln!(out, "  nothing parked")?;
        return Ok(());
    }
    let since = inspection
        .stored
        .parking
        .since
        .map_or_else(String::new, |since| {
            format!(", parked for {} s", now.saturating_sub(since))
        });
    writeln!(
        out,
        "  waiting for {}; {} parked{since}",
        at.saturating_add(1),
        inspection.parked.len()
    )?;
    for parked in &inspection.parked {
        writeln!(
            out,
            "    seq {} {} event {} message {} parked {} s ago",
            parked.sequence,
            parked.event_type,
            parked.event_id,
            parked.message_id,
            now.saturating_sub(parked.parked_at)
        )?;
    }
    Ok(())
}

/// The conflicts recorded for an entity.
fn show_conflicts(
    out: &mut impl Write,
    conflicts: &[ConflictRecord],
    now: u64,
) -> Result<(), Shown> {
    if conflicts.is_empty() {
        writeln!(out, "  no conflicts")?;
        return Ok(());
    }
    writeln!(
        out,
        "  {} {}",
        conflicts.len(),
        if conflicts.len() == 1 {
            "conflict"
        } else {
            "conflicts"
        }
    )?;
    for conflict in conflicts {
        writeln!(
            out,
            "    seq {} event {} first seen {} s ago",
            conflict.sequence,
            conflict.event_id,
            now.saturating_sub(conflict.seen_at)
        )?;
    }
    Ok(())
}

/// Every entity with events parked, longest waiting first.
async fn show_parked(
    out: &mut impl Write,
    domain: &Domain,
    store: &DynamoStore,
    now: u64,
) -> Result<(), Shown> {
    let report = look(domain, store, now).await?;
    writeln!(
        out,
        "{} {} with events parked",
        report.entities,
        if report.entities == 1 {
            "entity"
        } else {
            "entities"
        }
    )?;
    for stream in &report.longest {
        writeln!(
            out,
            "  {}: waiting for {}, {} parked, for {} s{}",
            stream.key,
            stream.waiting_for,
            stream.parked,
            stream.parked_for_seconds,
            if stream.drainable {
                " (it is parked itself: the next sweep drains them)"
            } else {
                ""
            }
        )?;
    }
    if report.entities > report.longest.len() {
        writeln!(out, "  (the {LOGGED} longest waiting shown)")?;
    }
    Ok(())
}
