//! Runs sample SQS events through the projector's runner, locally.
//!
//! ```text
//! replay [--endpoint-url URL --table NAME [--create-table]] FILE...
//! ```
//!
//! Each FILE is an SQS event as Lambda delivers it, run as one invocation.
//! By default on an embedded in-memory table, carried from file to file; with
//! `--endpoint-url` and `--table`, on DynamoDB. Prints each message's
//! outcome, the events parked and drained, and the batch response; on the
//! embedded table, what it holds at the end.

use std::process::ExitCode;

use aws_lambda_events::event::sqs::SqsEvent;
use sequence_guard::domain::{Entity, EntityKey, OrderStatus};
use sequence_guard::lambda::epoch_seconds;
use sequence_guard::runner::{Invocation, Runner};
use sequence_guard::store::Store;
use sequence_guard::store::dynamodb::{DynamoStore, connect, create_table};
use sequence_guard::store::memory::MemoryStore;

const USAGE: &str = "usage: replay [--endpoint-url URL --table NAME [--create-table]] FILE...";

#[derive(Debug, Default)]
struct Args {
    endpoint_url: Option<String>,
    table: Option<String>,
    create_table: bool,
    files: Vec<String>,
}

fn parse_args(mut args: impl Iterator<Item = String>) -> Result<Args, String> {
    let mut parsed = Args::default();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--endpoint-url" => {
                parsed.endpoint_url = Some(args.next().ok_or("--endpoint-url needs a URL")?)
            }
            "--table" => parsed.table = Some(args.next().ok_or("--table needs a name")?),
            "--create-table" => parsed.create_table = true,
            "-h" | "--help" => return Err(USAGE.to_owned()),
            flag if flag.starts_with("--") => {
                return Err(format!("unknown option {flag}\n{USAGE}"));
            }
            _ => parsed.files.push(arg),
        }
    }
    if parsed.files.is_empty() {
        return Err(format!("no event files given\n{USAGE}"));
    }
    if parsed.endpoint_url.is_some() != parsed.table.is_some() {
        return Err(format!("--endpoint-url and --table go together\n{USAGE}"));
    }
    if parsed.create_table && parsed.table.is_none() {
        return Err(format!(
            "--create-table needs --endpoint-url and --table\n{USAGE}"
        ));
    }
    Ok(parsed)
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
    // The same variables as the function (GAP_POLICY, PARK_AFTER_RECEIVES, ...).
    let config = match sequence_guard::config::runner_from_env() {
        Ok(config) => config,
        Err(err) => {
            eprintln!("{err}");
            return ExitCode::from(2);
        }
    };
    let mut events = Vec::new();
    for file in &args.files {
        let read = std::fs::read_to_string(file)
            .map_err(|err| err.to_string())
            .and_then(|text| {
                serde_json::from_str::<SqsEvent>(&text).map_err(|err| err.to_string())
            });
        match read {
            Ok(event) => events.push((file.as_str(), event)),
            Err(err) => {
                eprintln!("{file}: not an SQS event: {err}");
                return ExitCode::from(2);
            }
        }
    }

    match (&args.endpoint_url, &args.table) {
        (Some(url), Some(table)) => {
            let client = connect(Some(url)).await;
            if args.create_table
                && let Err(err) = create_table(&client, table).await
            {
                eprintln!("cannot create table {table}: {err}");
                return ExitCode::FAILURE;
            }
            let runner = Runner::new(DynamoStore::new(client, table.clone()), config);
            replay(&runner, &events).await;
            println!("\nDynamoDB requests: {}", runner.store().requests());
        }
        _ => {
            let runner = Runner::new(MemoryStore::new(), config);
            replay(&runner, &events).await;
            print_state(runner.store());
        }
    }
    ExitCode::SUCCESS
}

async fn replay<S: Store>(runner: &Runner<S>, events: &[(&str, SqsEvent)]) {
    for (file, event) in events {
        println!("== {file} ({} messages)", event.records.len());
        let invocation = Invocation {
            deadline: None,
            now: epoch_seconds(),
        };
        match runner.run(event, invocation).await {
            Ok(report) => {
                for message in &report.messages {
                    let sequence = message
                        .sequence
                        .map_or_else(|| "-".to_owned(), |sequence| sequence.to_string());
                    let reason = message
                        .reason
                        .as_deref()
                        .map(|reason| format!(" ({reason})"))
                        .unwrap_or_default();
                    println!(
                        "  {:<38} {:<14} seq {:<4} {:<20} {}{}",
                        message.message_id,
                        message.stream,
                        sequence,
                        message.event_type.unwrap_or("?"),
                        message.outcome.as_str(),
                        reason
                    );
                }
                for parking in &report.parking {
                    if !parking.parked.is_empty() {
                        println!(
                            "  parked  {} seq {} (waiting for {}; {} parked on it)",
                            parking.stream,
                            list(&parking.parked),
                            parking
                                .waiting_for
                                .map_or_else(|| "-".to_owned(), |next| next.to_string()),
                            parking.parked_now
                        );
                    }
                    if !parking.cleared.is_empty() {
                        println!(
                            "  cleared {} seq {} (behind the entity; conflicts recorded: {})",
                            parking.stream,
                            list(&parking.cleared),
                            if parking.conflicts.is_empty() {
                                "none".to_owned()
                            } else {
                                list(&parking.conflicts)
                            }
                        );
                    }
                    for drained in &parking.drained {
                        println!(
                            "  drained {} seq {} {} (message {}, parked {} s before)",
                            parking.stream,
                            drained.sequence,
                            drained.event_type,
                            drained.message_id,
                            invocation.now.saturating_sub(drained.parked_at)
                        );
                    }
                }
                let response =
                    serde_json::to_string(&report.response()).unwrap_or_else(|err| err.to_string());
                println!("  response: {response}");
            }
            Err(err) => println!("  invocation failed: {err}"),
        }
    }
}

fn print_state(store: &MemoryStore) {
    println!("\nEmbedded table:");
    for entity in store.entities() {
        match entity {
            Entity::Order(order) => println!(
                "  order   {:<12} sequence {:<3} totalCents {:<6} status {}",
                order.id,
                order.sequence,
                order.total_cents,
                match order.status {
                    OrderStatus::Open => "OPEN",
                    OrderStatus::Cancelled => "CANCELLED",
                }
            ),
            Entity::Product(product) => println!(
                "  product {:<12} sequence {:<3} priceCents {}",
                product.id, product.sequence, product.price_cents
            ),
        }
    }
    for (sku, on_hand) in store.stock() {
        println!("  stock   {sku:<12} onHand {on_hand}");
    }
    for (key, inspection) in store.parking() {
        let (kind, id) = match &key {
            EntityKey::Order(id) => ("order", id),
            EntityKey::Product(id) => ("product", id),
        };
        let parked: Vec<u64> = inspection
            .parked
            .iter()
            .map(|parked| parked.sequence)
            .collect();
        if !parked.is_empty() {
            println!("  parked  {kind} {id}: seq {}", list(&parked));
        }
        for conflict in &inspection.conflicts {
            println!(
                "  conflict {kind} {id}: seq {} event {}",
                conflict.sequence, conflict.event_id
            );
        }
    }
}

fn list(sequences: &[u64]) -> String {
    sequences
        .iter()
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}
