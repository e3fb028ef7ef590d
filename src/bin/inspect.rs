//! The operator's look at the table.
//!
//! ```text
//! inspect --table NAME [--endpoint-url URL] (order|product) ID
//! inspect --table NAME [--endpoint-url URL] --parked
//! ```
//!
//! The first shows one aggregate's entity: its sequence, the events parked
//! on it (and the sequence it waits for) and the conflicts recorded for it.
//! The second lists every entity with events parked, longest waiting first.
//! Bodies are not printed (they may hold personal data); they are in the
//! table's `PENDING#` and `CONFLICT#` items. Credentials and region come
//! from the environment, as for the AWS CLI; the caller needs
//! `dynamodb:Query` and `dynamodb:BatchGetItem` on the table.

use std::process::ExitCode;

use sequence_guard::domain::{Entity, EntityKey};
use sequence_guard::lambda::epoch_seconds;
use sequence_guard::store::Store;
use sequence_guard::store::dynamodb::{DynamoStore, connect};
use sequence_guard::sweep::{LOGGED, look};

const USAGE: &str = "usage: inspect --table NAME [--endpoint-url URL] (order|product) ID\n       inspect --table NAME [--endpoint-url URL] --parked";

#[derive(Debug, PartialEq, Eq)]
enum What {
    Entity(EntityKey),
    Parked,
}

#[derive(Debug)]
struct Args {
    table: String,
    endpoint_url: Option<String>,
    what: What,
}

fn parse_args(mut args: impl Iterator<Item = String>) -> Result<Args, String> {
    let mut table = None;
    let mut endpoint_url = None;
    let mut parked = false;
    let mut words = Vec::new();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--table" => table = Some(args.next().ok_or("--table needs a name")?),
            "--endpoint-url" => {
                endpoint_url = Some(args.next().ok_or("--endpoint-url needs a URL")?)
            }
            "--parked" => parked = true,
            "-h" | "--help" => return Err(USAGE.to_owned()),
            flag if flag.starts_with("--") => {
                return Err(format!("unknown option {flag}\n{USAGE}"));
            }
            _ => words.push(arg),
        }
    }
    let table = table.ok_or_else(|| format!("--table is required\n{USAGE}"))?;
    let what = match (parked, words.as_slice()) {
        (true, []) => What::Parked,
        (false, [kind, id]) if !id.is_empty() => match kind.as_str() {
            "order" => What::Entity(EntityKey::Order(id.clone())),
            "product" => What::Entity(EntityKey::Product(id.clone())),
            other => {
                return Err(format!(
                    "unknown entity kind `{other}`: `order` or `product`\n{USAGE}"
                ));
            }
        },
        _ => return Err(format!("name one entity, or --parked\n{USAGE}")),
    };
    Ok(Args {
        table,
        endpoint_url,
        what,
    })
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = match parse_args(std::env::args().skip(1)) {
        Ok(args) => args,
        Err(message) => {
            eprintln!("{message}");
            return ExitCode::from(2);
        }
    };
    let store = DynamoStore::new(
        connect(args.endpoint_url.as_deref()).await,
        args.table.clone(),
    );
    let now = epoch_seconds();
    let shown = match &args.what {
        What::Entity(key) => show_entity(&store, key, now).await,
        What::Parked => show_parked(&store, now).await,
    };
    match shown {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("cannot read table {}: {err}", args.table);
            ExitCode::FAILURE
        }
    }
}

fn describe(key: &EntityKey) -> (&'static str, &str) {
    match key {
        EntityKey::Order(id) => ("order", id),
        EntityKey::Product(id) => ("product", id),
    }
}

async fn show_entity(
    store: &DynamoStore,
    key: &EntityKey,
    now: u64,
) -> Result<(), sequence_guard::store::StoreError> {
    let inspection = store.inspect(key).await?;
    let (kind, id) = describe(key);
    println!("{kind} {id}");
    let at = match &inspection.stored.entity {
        Some(entity) => {
            println!(
                "  sequence {} (last event {})",
                entity.sequence(),
                entity.last_event_id()
            );
            if let Entity::Order(order) = entity {
                println!("  status {:?}", order.status);
            }
            entity.sequence()
        }
        None => {
            println!("  not created");
            0
        }
    };
    if inspection.parked.is_empty() {
        println!("  nothing parked");
    } else {
        let since = inspection
            .stored
            .parking
            .since
            .map_or_else(String::new, |since| {
                format!(", parked for {} s", now.saturating_sub(since))
            });
        println!(
            "  waiting for {}; {} parked{since}",
            at.saturating_add(1),
            inspection.parked.len()
        );
        for parked in &inspection.parked {
            println!(
                "    seq {} {} event {} message {} parked {} s ago",
                parked.sequence,
                parked.event_type,
                parked.event_id,
                parked.message_id,
                now.saturating_sub(parked.parked_at)
            );
        }
    }
    if inspection.conflicts.is_empty() {
        println!("  no conflicts");
    } else {
        println!("  {} conflicts", inspection.conflicts.len());
        for conflict in &inspection.conflicts {
            println!(
                "    seq {} event {} first seen {} s ago",
                conflict.sequence,
                conflict.event_id,
                now.saturating_sub(conflict.seen_at)
            );
        }
    }
    Ok(())
}

async fn show_parked(
    store: &DynamoStore,
    now: u64,
) -> Result<(), sequence_guard::store::StoreError> {
    let report = look(store, now).await?;
    println!("{} entities with events parked", report.entities);
    for stream in &report.longest {
        let (kind, id) = describe(&stream.key);
        println!(
            "  {kind} {id}: waiting for {}, {} parked, for {} s{}",
            stream.waiting_for,
            stream.parked,
            stream.parked_for_seconds,
            if stream.drainable {
                " (it is parked itself: the next sweep drains them)"
            } else {
                ""
            }
        );
    }
    if report.entities > report.longest.len() {
        println!("  (the {LOGGED} longest waiting shown)");
    }
    Ok(())
}
