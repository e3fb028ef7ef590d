//! The operator's look at the table.
//!
//! ```text
//! inspect --table NAME [--endpoint-url URL] (order|product|sku) ID
//! inspect --table NAME [--endpoint-url URL] --parked
//! ```
//!
//! The first shows one aggregate's entity: its sequence, the events parked
//! on it (and the sequence it waits for) and the conflicts recorded for it;
//! for a sku, its `onHand`. The second lists every entity with events
//! parked, longest waiting first. Bodies are not printed (they may hold
//! personal data); they are in the table's `PENDING#` and `CONFLICT#` items.
//! Credentials and region come from the environment, as for the AWS CLI; the
//! caller needs `dynamodb:DescribeTable`, `dynamodb:Query`,
//! `dynamodb:GetItem` and `dynamodb:BatchGetItem` on the table.

use std::io::{self, Write};
use std::process::ExitCode;

use clap::{Parser, ValueEnum};
use sequence_guard::domain::{Entity, EntityKey, OrderStatus};
use sequence_guard::lambda::epoch_seconds;
use sequence_guard::store::dynamodb::{DynamoStore, check_table, connect};
use sequence_guard::store::{Store, StoreError};
use sequence_guard::sweep::{LOGGED, look};

const EXAMPLES: &str = "\
Examples:
  inspect --table sequence-guard order order-42
  inspect --table sequence-guard sku SKU-LAMP
  inspect --table sequence-guard --parked
  inspect --endpoint-url http://localhost:8000 --table sequence-guard order order-100

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
    /// What to look at.
    #[arg(value_enum, required_unless_present = "parked", requires = "id")]
    kind: Option<Kind>,
    /// Its id: the aggregateId, or the sku.
    #[arg(required_unless_present = "parked")]
    id: Option<String>,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Kind {
    Order,
    Product,
    /// The stock of a sku.
    Sku,
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    let client = connect(args.endpoint_url.as_deref()).await;
    if let Err(err) = check_table(&client, &args.table).await {
        eprintln!("inspect: {err}");
        return ExitCode::FAILURE;
    }
    let store = DynamoStore::new(client, args.table.clone());
    let now = epoch_seconds();
    let mut out = io::stdout().lock();
    let shown = match (args.parked, args.kind, args.id) {
        (true, _, _) => show_parked(&mut out, &store, now).await,
        (false, Some(Kind::Sku), Some(sku)) => show_stock(&mut out, &store, &sku).await,
        (false, Some(Kind::Order), Some(id)) => {
            show_entity(&mut out, &store, &EntityKey::Order(id), now).await
        }
        (false, Some(Kind::Product), Some(id)) => {
            show_entity(&mut out, &store, &EntityKey::Product(id), now).await
        }
        // clap requires one or the other.
        _ => Ok(()),
    };
    match shown {
        Ok(()) => ExitCode::SUCCESS,
        Err(Shown::Output(err)) if err.kind() == io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(Shown::Output(err)) => {
            eprintln!("inspect: cannot write the output: {err}");
            ExitCode::FAILURE
        }
        Err(Shown::Store(err)) => {
            eprintln!("inspect: cannot read table {}: {err}", args.table);
            ExitCode::FAILURE
        }
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

async fn show_stock(out: &mut impl Write, store: &DynamoStore, sku: &str) -> Result<(), Shown> {
    writeln!(out, "sku {sku}")?;
    match store.on_hand(sku).await? {
        Some(on_hand) => writeln!(out, "  onHand {on_hand}")?,
        None => writeln!(out, "  no adjustment applied yet")?,
    }
    Ok(())
}

fn describe(key: &EntityKey) -> (&'static str, &str) {
    match key {
        EntityKey::Order(id) => ("order", id),
        EntityKey::Product(id) => ("product", id),
    }
}

async fn show_entity(
    out: &mut impl Write,
    store: &DynamoStore,
    key: &EntityKey,
    now: u64,
) -> Result<(), Shown> {
    let inspection = store.inspect(key).await?;
    let (kind, id) = describe(key);
    writeln!(out, "{kind} {id}")?;
    let at = match &inspection.stored.entity {
        Some(entity) => {
            writeln!(
                out,
                "  sequence {} (last event {})",
                entity.sequence(),
                entity.last_event_id()
            )?;
            if let Entity::Order(order) = entity {
                // As the table stores it (and replay prints it).
                let status = match order.status {
                    OrderStatus::Open => "OPEN",
                    OrderStatus::Cancelled => "CANCELLED",
                };
                writeln!(out, "  status {status}")?;
            }
            entity.sequence()
        }
        None => {
            writeln!(out, "  not created")?;
            0
        }
    };
    if inspection.parked.is_empty() {
        writeln!(out, "  nothing parked")?;
    } else {
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
    }
    if inspection.conflicts.is_empty() {
        writeln!(out, "  no conflicts")?;
    } else {
        let conflicts = inspection.conflicts.len();
        writeln!(
            out,
            "  {conflicts} {}",
            if conflicts == 1 {
                "conflict"
            } else {
                "conflicts"
            }
        )?;
        for conflict in &inspection.conflicts {
            writeln!(
                out,
                "    seq {} event {} first seen {} s ago",
                conflict.sequence,
                conflict.event_id,
                now.saturating_sub(conflict.seen_at)
            )?;
        }
    }
    Ok(())
}

async fn show_parked(out: &mut impl Write, store: &DynamoStore, now: u64) -> Result<(), Shown> {
    let report = look(store, now).await?;
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
        let (kind, id) = describe(&stream.key);
        writeln!(
            out,
            "  {kind} {id}: waiting for {}, {} parked, for {} s{}",
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
