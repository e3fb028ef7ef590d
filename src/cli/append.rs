//! `append`: appends one event to the event store (docs/event-store.md).
//!
//! ```text
//! append --stream ID --type TYPE --data '<json object>' [--request-id ID] [--expected-sequence N]
//! ```
//!
//! Prints one JSON line, `{"streamId": ..., "sequence": n, "eventId": ...,
//! "duplicateRequest": false}`. Exit status: 0 appended (or a request id seen
//! before: the first answer, `"duplicateRequest": true`); 1 a storage error
//! after retries (safe to run again with the same request id); 2 invalid
//! input (the error names the field), a stream that holds events of another
//! kind (the error names the stream and both kinds), personal data of an
//! erased subject (the error names the subject), or `EVENTS_TABLE` (or, for
//! a domain that declares personal data, `PERSONAL_DATA_KEY`) missing; 3 the stream is not at `--expected-sequence` (the error names
//! where it is).

use std::process::ExitCode;

use clap::Parser;
use serde_json::Value;

use super::{arguments, events_table};
use crate::domain::Domain;
use crate::producer::{Append, AppendError, EventStore, ExpectedSequence, NewEvent};
use crate::store::dynamodb::{TableError, check_table, connect, ensure_events_table};

const EXAMPLES: &str = "\
Examples (TYPE: one of the domain's event types; DATA: its data as JSON):
  append --stream <stream id> --type <TYPE> --data '<DATA>' --request-id <command id> --expected-sequence 0
      the first event of a new stream, once per command id
  append --stream <stream id> --type <TYPE> --data '<DATA>'
      the next event of the stream, whatever its sequence
  append --endpoint-url http://localhost:8000 --table events --create-table --stream <stream id> --type <TYPE> --data '<DATA>'
      on DynamoDB Local (scripts/dynamodb-local.sh run 8000)

Exit status: 0 appended (or the request id seen before: the first answer again);
1 a storage error after retries (safe to run again with the same request id);
2 invalid input, a stream of another kind, an erased subject's personal data,
  or EVENTS_TABLE (PERSONAL_DATA_KEY for personal data) missing;
3 the stream is not at --expected-sequence.";

/// Appends one event to the event store, with the next sequence of its
/// stream, all or nothing (with a request id, the request record with it).
#[derive(Debug, Parser)]
#[command(name = "append", version, after_help = EXAMPLES)]
struct Args {
    /// The stream: the aggregateId (the counter's id for a deduplicated
    /// effect).
    #[arg(long, value_name = "ID")]
    stream: String,
    /// The event type.
    #[arg(long = "type", value_name = "TYPE")]
    event_type: String,
    /// The event's data, a JSON object.
    #[arg(long, value_name = "JSON")]
    data: String,
    /// Makes a retried command safe: run again with the same id, it appends
    /// nothing and prints the first answer.
    #[arg(long, value_name = "ID")]
    request_id: Option<String>,
    /// Append only if the stream is at this sequence (0: a new stream).
    #[arg(long, value_name = "N")]
    expected_sequence: Option<u64>,
    /// The event store's table (default: EVENTS_TABLE).
    #[arg(long, value_name = "NAME", env = "EVENTS_TABLE")]
    table: Option<String>,
    /// The DynamoDB endpoint, e.g. http://localhost:8000 for DynamoDB Local.
    #[arg(long, value_name = "URL")]
    endpoint_url: Option<String>,
    /// Create the table first if it does not exist (safe to repeat).
    #[arg(long)]
    create_table: bool,
    /// The KMS key the subjects' data keys are wrapped under, for a domain
    /// that declares personal data (its values are sealed before they are
    /// stored).
    #[arg(long, value_name = "KEY", env = "PERSONAL_DATA_KEY")]
    personal_data_key: Option<String>,
}

/// What a storage error leaves: the caller runs the command again.
const MAYBE: &str =
    "nothing or all of it appended: run again with the same --request-id to be sure";

/// The `append` binary of a domain: `fn main() -> ExitCode { cli::append(my_domain()) }`.
#[tokio::main]
pub async fn append(domain: Domain) -> ExitCode {
    if let Some(code) = super::refused("append", &domain) {
        return code;
    }
    let (name, args) = arguments::<Args>("append", &domain);
    let Some(table) = events_table(&name, args.table, "--table") else {
        return ExitCode::from(2);
    };
    let data: Value = match serde_json::from_str(&args.data) {
        Ok(data @ Value::Object(_)) => data,
        Ok(_) => {
            eprintln!("{name}: --data must be a JSON object");
            return ExitCode::from(2);
        }
        Err(err) => {
            eprintln!("{name}: --data is not JSON: {err}");
            return ExitCode::from(2);
        }
    };
    let client = connect(args.endpoint_url.as_deref()).await;
    // Only --create-table asks about the table first: an append of a known
    // sequence is one request, and the table is looked at when it fails.
    if args.create_table {
        if let Err(err) = ensure_events_table(&client, &table).await {
            eprintln!("{name}: {err}");
            return ExitCode::FAILURE;
        }
    }
    let domain =
        match super::keys::keyed(domain, &client, Some(&table), args.personal_data_key).await {
            Ok(domain) => domain,
            Err(err) => {
                eprintln!("{name}: {err}; nothing appended");
                return ExitCode::from(2);
            }
        };
    let store = EventStore::new(client.clone(), table.clone(), domain);
    let append = Append {
        stream_id: args.stream,
        events: vec![NewEvent::new(args.event_type, data)],
        expected: args
            .expected_sequence
            .map_or(ExpectedSequence::Any, ExpectedSequence::Exact),
        request_id: args.request_id,
        writes: Vec::new(),
    };
    match store.append(append).await {
        Ok(appended) => {
            match serde_json::to_string(&appended) {
                Ok(line) => println!("{line}"),
                Err(err) => eprintln!("{name}: appended, but cannot print the answer: {err}"),
            }
            ExitCode::SUCCESS
        }
        Err(err @ AppendError::ExpectedSequence { .. }) => {
            eprintln!("{name}: {err}; nothing appended");
            ExitCode::from(3)
        }
        Err(AppendError::Invalid { reason, .. }) => {
            eprintln!("{name}: invalid event: {reason}; nothing appended");
            ExitCode::from(2)
        }
        Err(
            err @ (AppendError::Refused(_)
            | AppendError::Condition { .. }
            | AppendError::OtherKind { .. }),
        ) => {
            eprintln!("{name}: {err}; nothing appended");
            ExitCode::from(2)
        }
        Err(err @ AppendError::Store(_)) => {
            // When the table is why (missing, not active), that is the answer.
            match check_table(&client, &table).await {
                Err(
                    table_err @ (TableError::Missing { .. }
                    | TableError::NotReady { .. }
                    | TableError::Unreachable { .. }
                    | TableError::NoCredentials),
                ) => {
                    eprintln!("{name}: {table_err}; nothing appended");
                }
                _ => eprintln!("{name}: {err}; {MAYBE}"),
            }
            ExitCode::FAILURE
        }
        Err(err @ AppendError::Erased { .. }) => {
            eprintln!("{name}: {err}; nothing appended");
            ExitCode::from(2)
        }
        Err(err @ AppendError::Keys(_)) => {
            // The key is read before anything is written.
            match check_table(&client, &table).await {
                Err(
                    table_err @ (TableError::Missing { .. }
                    | TableError::NotReady { .. }
                    | TableError::Unreachable { .. }
                    | TableError::NoCredentials),
                ) => eprintln!("{name}: {table_err}; nothing appended"),
                _ => eprintln!("{name}: {err}; nothing appended, safe to run again"),
            }
            ExitCode::FAILURE
        }
        Err(err @ AppendError::Contention { .. }) => {
            eprintln!("{name}: {err}; {MAYBE}");
            ExitCode::FAILURE
        }
    }
}
