//! `verify`: finds a hole. Folds the event store through the domain, as
//! `rebuild` does but in memory, and compares every entity and counter with
//! the projection table.
//!
//! ```text
//! verify [--events-table NAME] [--table NAME] [--stream ID]... [--endpoint-url URL]
//! ```
//!
//! One JSON line per entity and per counter that differs, then a summary:
//!
//! ```text
//! {"pk":"ORDER#order-7","sk":"STATE","expectedSequence":5,"foundSequence":3,"attributes":["lastEventId","sequence","totalCents"]}
//! {"pk":"SKU#SKU-B","sk":"STOCK","expected":10,"found":5,"attributes":["onHand"]}
//! {"pk":"MEMBER#ada","sk":"ACTIVITY","expected":3,"found":2,"attributes":["loans"]}
//! {"checked":9,"differ":3}
//! ```
//!
//! An entity's line names its sequences, a counter's its values (the
//! counter's attribute only: a number is not personal data), to choose
//! what to mend; each is `null` where that side has no item (or, for a
//! counter, holds none on it). `attributes` names (never shows) the
//! attributes whose values differ or that one side only has. Counters kept
//! on one item (a member's `onLoan` and `loans`) are each compared, and
//! each that differs has its own line, naming its attribute alone; an
//! attribute of a counter's item that no counter declares, when it
//! differs, is named on one more line of that item, both values `null`.
//! `checked` counts the entities and the counters (an item of counters one
//! for each, and one for attributes no counter declares). The engine's `pk`, `sk`, `parked` and `parkedSince` are not
//! compared; an item that holds only parked events is no item. A process's
//! state's deadline is compared by its presence (its time is the clock's
//! when the event was handled): `dueAt` is named when one side has one and
//! the other has none. The fold appends nothing (as `rebuild`): what a
//! process appended is in the store already. Without
//! `--stream`, every stream of the event store is folded and the table is
//! read whole (one `Scan`), so an entity or counter that no stream explains
//! is reported too (`expectedSequence` null). With `--stream`, only those
//! streams, and in the table only their items (an entity of each kind and
//! each counter under the stream's id).
//!
//! A projection that holds events the store has not is not a hole: a line
//! whose entity is beyond the fold's sequence, or whose item no stored
//! event explains, carries `"ahead": true`; one whose entity's
//! `lastEventId` is not the stored event's at its sequence carries
//! `"diverged": true` (the store is not the projection's history). The
//! summary counts them (`"ahead": n`, `"diverged": n`, when any), and
//! stderr names their streams.
//!
//! Exit status: 0 when all agree; 1 when any differs, or a table cannot be
//! read; 2 for bad arguments or a missing variable: `PERSONAL_DATA_KEY`
//! too, for a domain that declares personal data (the fold could not open
//! the values the event store keeps sealed). The caller needs
//! `dynamodb:DescribeTable`, `dynamodb:Scan` and `dynamodb:Query` on the
//! event store, and `dynamodb:DescribeTable`, `dynamodb:Scan` (or
//! `dynamodb:GetItem`, with `--stream`) on the projection; with personal
//! data, what the projector has to open it (`kms:Decrypt` on the key,
//! `dynamodb:BatchGetItem` on the event store's `SUBJECT#` items).

mod compare;
mod history;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::process::ExitCode;

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::AttributeValue;
use clap::Parser;
use clap::builder::NonEmptyStringValueParser;

use super::rebuild::{Additions, project};
use super::{arguments, events_table};
use crate::domain::Domain;
use crate::producer::EventStore;
use crate::runner::{Runner, RunnerConfig};
use crate::store::StoreError;
use crate::store::dynamodb::{check_table, connect};
use crate::store::memory::MemoryStore;
use crate::table::request_error;
use compare::{ItemKey, Side};

const EXAMPLES: &str = "\
Examples:
  verify --events-table <event store> --table <projection>
      every stream, and every item of the projection
  verify --stream <stream id> --stream <another>
      only these streams (EVENTS_TABLE and TABLE_NAME from the environment)
  verify --endpoint-url http://localhost:8000 --events-table events --table projection

Exit status: 0 when all agree; 1 when any differs (or a table cannot be read);
2 for bad arguments or a missing variable (PERSONAL_DATA_KEY too, where the
domain declares personal data).";

/// Compares the projection table with the fold of the event store, item by
/// item; prints what differs by attribute name, never by value.
#[derive(Debug, Parser)]
#[command(name = "verify", version, after_help = EXAMPLES)]
struct Args {
    /// The event store's table (default: EVENTS_TABLE).
    #[arg(long, value_name = "NAME", env = "EVENTS_TABLE")]
    events_table: Option<String>,
    /// The projection's table (default: TABLE_NAME).
    #[arg(long, value_name = "NAME", env = "TABLE_NAME")]
    table: Option<String>,
    /// Only this stream (repeat for more); without it, every stream of the
    /// event store, and the whole table.
    #[arg(long = "stream", value_name = "ID", value_parser = NonEmptyStringValueParser::new())]
    streams: Vec<String>,
    /// The DynamoDB endpoint, e.g. http://localhost:8000 for DynamoDB Local.
    #[arg(long, value_name = "URL")]
    endpoint_url: Option<String>,
}

/// The `verify` binary of a domain: `fn main() -> ExitCode { cli::verify(my_domain()) }`.
#[tokio::main]
pub async fn verify(domain: Domain) -> ExitCode {
    if let Some(code) = super::refused("verify", &domain) {
        return code;
    }
    // The runner's and the sweep's log lines, to stderr, when RUST_LOG asks.
    crate::logging::init_local();
    let (name, args) = arguments::<Args>("verify", &domain);
    let Some(events_table) = events_table(&name, args.events_table, "--events-table") else {
        return ExitCode::from(2);
    };
    let Some(table) = args.table.filter(|table| !table.is_empty()) else {
        eprintln!("{name}: TABLE_NAME is not set: name the projection's table (or give --table)");
        return ExitCode::from(2);
    };
    let config = match crate::config::runner_from_env() {
        Ok(config) => config,
        Err(err) => {
            eprintln!("{name}: {err}");
            return ExitCode::from(2);
        }
    };
    let Some(key) = personal_data_key(&name, &domain) else {
        return ExitCode::from(2);
    };
    let mut streams = args.streams;
    streams.sort();
    streams.dedup();
    let client = connect(args.endpoint_url.as_deref()).await;
    for table in [&events_table, &table] {
        if let Err(err) = check_table(&client, table).await {
            eprintln!("{name}: {err}");
            return ExitCode::FAILURE;
        }
    }

    // Personal data read with its subjects' keys, when the domain declares
    // some (PERSONAL_DATA_KEY names the KMS key).
    let domain = match super::keys::keyed(domain, &client, Some(&events_table), key).await {
        Ok(domain) => domain,
        Err(err) => {
            eprintln!("{name}: {err}");
            return ExitCode::from(2);
        }
    };
    // Fold: the store's streams through the projector's runner, in memory.
    let events = EventStore::new(client.clone(), events_table.clone(), domain.clone());
    let expected = match fold(&name, &events, &domain, config, &streams).await {
        Ok(expected) => expected,
        Err(code) => return code,
    };

    // Read: the whole table, or the streams' items.
    let found = read(&client, &table, &domain, &streams, &expected).await;
    let found = match found {
        Ok(found) => found,
        Err(err) => {
            eprintln!("{name}: cannot read table {table}: {err}");
            return ExitCode::FAILURE;
        }
    };

    // Compare, check the history of what the table holds, and report.
    let (checked, mut differences) = compare::compare(&expected, &found);
    if let Err(err) = history::mark_diverged(&events, &domain, &mut differences).await {
        eprintln!("{name}: cannot read the event store {events_table}: {err}");
        return ExitCode::FAILURE;
    }
    match report(&mut io::stdout().lock(), checked, &differences) {
        Ok(()) => {}
        Err(err) if err.kind() == io::ErrorKind::BrokenPipe => {}
        Err(err) => {
            eprintln!("{name}: cannot write the output: {err}");
            return ExitCode::FAILURE;
        }
    }
    explain(&name, &domain, &differences);
    if differences.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// `PERSONAL_DATA_KEY`, when set: `Some(None)` for a domain that declares
/// no personal data (it never reads a key). `None`, after saying why, for
/// one that declares some without it: the fold could not open the values
/// the event store keeps sealed, and every entity that holds them would be
/// a false difference (missing from the fold, so "ahead" of the store).
fn personal_data_key(name: &str, domain: &Domain) -> Option<Option<String>> {
    let key = std::env::var("PERSONAL_DATA_KEY")
        .ok()
        .filter(|key| !key.trim().is_empty());
    if key.is_none() && domain.declares_personal() {
        eprintln!(
            "{name}: PERSONAL_DATA_KEY is not set, and the domain projects personal data, which the event store keeps sealed: without the key the fold cannot open it, and every entity that holds some would differ falsely: nothing compared. Set PERSONAL_DATA_KEY as the projector has it (the KMS key the subjects' keys are wrapped under, with kms:Decrypt on it and dynamodb:BatchGetItem on the event store's SUBJECT# items)"
        );
        return None;
    }
    Some(key)
}

/// On stderr, the streams on which the table holds what the store has not:
/// not a hole that `resend` mends.
fn explain(name: &str, domain: &Domain, differences: &[compare::Difference]) {
    let ahead = history::streams(domain, differences, |difference| difference.ahead);
    if !ahead.is_empty() {
        eprintln!(
            "{name}: the projection is ahead of the event store on {} stream(s): {}: it holds events the store has not (fed directly, or the store restarted the stream at 1); see \"Switching the producer on over a projection fed directly\" in docs/event-store.md",
            ahead.len(),
            history::named(&ahead)
        );
    }
    let diverged = history::streams(domain, differences, |difference| difference.diverged);
    if !diverged.is_empty() {
        eprintln!(
            "{name}: the projection's last event is not the store's at its sequence on {} stream(s): {}: the store is not the projection's history; see \"Switching the producer on over a projection fed directly\" in docs/event-store.md",
            diverged.len(),
            history::named(&diverged)
        );
    }
}

/// The fold of the event store (or of `streams`) through the projector's
/// runner, in memory: the items the projection should hold. An error is
/// printed, and its exit status returned.
async fn fold(
    name: &str,
    events: &EventStore,
    domain: &Domain,
    config: RunnerConfig,
    streams: &[String],
) -> Result<BTreeMap<ItemKey, Side>, ExitCode> {
    let runner = fold_runner(domain, config);
    // In memory, from nothing: every addition is the fold's first.
    let folded = match project(name, events, &runner, streams, &Additions::Apply).await {
        Ok(folded) => folded,
        Err(err) => {
            eprintln!(
                "{name}: cannot read the event store {}: {err}",
                events.table()
            );
            return Err(ExitCode::FAILURE);
        }
    };
    if folded.not_done > 0 {
        eprintln!(
            "{name}: {} stored events were not done in the fold (named above): the projector cannot do them either",
            folded.not_done
        );
    }
    compare::expected(runner.store()).map_err(|err| {
        eprintln!("{name}: {err}");
        ExitCode::FAILURE
    })
}

/// The runner of the fold: the projector's, in memory, and, as `rebuild`'s,
/// without a process's appends (they are in the store already, and the
/// fold's embedded store never sees the streams: an `append_at` there
/// would find them elsewhere and fail a message the projector applied).
fn fold_runner(domain: &Domain, config: RunnerConfig) -> Runner<MemoryStore> {
    let config = RunnerConfig {
        appends: false,
        ..config
    };
    Runner::new(domain.clone(), MemoryStore::new(), config)
}

/// The projection's items to compare: the whole table, or the streams'
/// items and whatever else the fold holds.
async fn read(
    client: &Client,
    table: &str,
    domain: &Domain,
    streams: &[String],
    expected: &BTreeMap<ItemKey, Side>,
) -> Result<BTreeMap<ItemKey, Side>, StoreError> {
    if streams.is_empty() {
        return scan(client, table, domain).await;
    }
    let mut keys = compare::candidates(domain, streams);
    keys.extend(expected.keys().cloned());
    keys.sort();
    keys.dedup();
    get(client, table, domain, keys).await
}

/// One line per difference, then the summary (with the number of items
/// ahead of the store, and diverged from it, when there are any).
fn report(
    out: &mut impl Write,
    checked: u64,
    differences: &[compare::Difference],
) -> io::Result<()> {
    for difference in differences {
        writeln!(out, "{}", serde_json::to_string(difference)?)?;
    }
    let mut summary = serde_json::json!({"checked": checked, "differ": differences.len()});
    let ahead = differences.iter().filter(|d| d.ahead).count();
    let diverged = differences.iter().filter(|d| d.diverged).count();
    for (field, count) in [("ahead", ahead), ("diverged", diverged)] {
        if count > 0 {
            summary[field] = count.into();
        }
    }
    writeln!(out, "{summary}")
}

/// Every entity and counter item of the table (one strongly consistent
/// `Scan`, page by page).
async fn scan(
    client: &Client,
    table: &str,
    domain: &Domain,
) -> Result<BTreeMap<ItemKey, Side>, StoreError> {
    let mut found = BTreeMap::new();
    let mut start = None;
    loop {
        let output = client
            .scan()
            .table_name(table)
            .consistent_read(true)
            .set_exclusive_start_key(start)
            .send()
            .await
            .map_err(|err| request_error("Scan", &err))?;
        found.extend(
            output
                .items
                .unwrap_or_default()
                .into_iter()
                .filter_map(|item| compare::found(domain, item)),
        );
        start = output.last_evaluated_key.filter(|key| !key.is_empty());
        if start.is_none() {
            return Ok(found);
        }
    }
}

/// The items of these keys that the table holds (strongly consistent).
async fn get(
    client: &Client,
    table: &str,
    domain: &Domain,
    keys: Vec<ItemKey>,
) -> Result<BTreeMap<ItemKey, Side>, StoreError> {
    let mut found = BTreeMap::new();
    for (pk, sk) in keys {
        let output = client
            .get_item()
            .table_name(table)
            .key("pk", AttributeValue::S(pk))
            .key("sk", AttributeValue::S(sk))
            .consistent_read(true)
            .send()
            .await
            .map_err(|err| request_error("GetItem", &err))?;
        found.extend(output.item.and_then(|item| compare::found(domain, item)));
    }
    Ok(found)
}
