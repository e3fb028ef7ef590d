//! `erase`: a subject forgotten (docs/personal-data.md).
//!
//! ```text
//! erase --subject ID [--table NAME] [--endpoint-url URL]
//! ```
//!
//! Deletes the subject's data key from the event store's table, so that
//! every stored copy of their personal data is unreadable for ever and an
//! append of it is refused, then appends a `PersonalDataErased` event to
//! each of their streams, so that every consumer replaces their personal
//! data with its placeholder, under the guard. Prints one JSON line. Exit
//! status: 0 done (run again: 0, nothing more to do); 1 a storage error
//! (safe to run again); 2 bad arguments, or a domain or table that cannot
//! hold personal data.
//!
//! The subject is the id exactly as `append` stored it: nothing trimmed
//! or normalised (`order-9 ` is not `order-9`). An id no stream can have
//! (empty, over 256 characters, a character SQS does not carry) is refused
//! (2, nothing written). An id that never had a key is said so (on stderr,
//! and `"subjectKnown": false`): nothing of theirs was sealed here, and it
//! is marked erased all the same, so that an append of personal data for
//! it is refused from then on.

use std::process::ExitCode;
use std::sync::Arc;

use clap::Parser;
use serde::Serialize;

use super::{arguments, events_table};
use crate::domain::Domain;
use crate::personal::Keyring;
use crate::producer::EraseError;
use crate::producer::{EventStore, stream_id_problem};
use crate::store::dynamodb::connect;

const EXAMPLES: &str = "\
Examples:
  erase --subject <subject id>
      the subject forgotten in the event store EVENTS_TABLE names
  erase --endpoint-url http://localhost:8000 --table events --subject <subject id>
      on DynamoDB Local

The subject is taken exactly as given (no trimming): it must be an id a stream
can have (1 to 256 characters). One that never had a key is said so, and marked
erased all the same: an append of personal data for it is refused from then on.

Exit status: 0 done (again: 0, nothing more to do); 1 a storage error (safe to
run again); 2 bad arguments, or a domain that declares no personal data.";

/// Forgets a subject: deletes their data key, and tells every consumer.
#[derive(Debug, Parser)]
#[command(name = "erase", version, after_help = EXAMPLES)]
struct Args {
    /// The subject: the aggregate id of their streams (or the id a domain's
    /// personal declaration names), exactly as appended: nothing is
    /// trimmed.
    #[arg(long, value_name = "ID")]
    subject: String,
    /// The event store's table (default: EVENTS_TABLE).
    #[arg(long, value_name = "NAME", env = "EVENTS_TABLE")]
    table: Option<String>,
    /// The DynamoDB endpoint, e.g. http://localhost:8000 for DynamoDB Local.
    #[arg(long, value_name = "URL")]
    endpoint_url: Option<String>,
}

/// The line `erase` prints.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Printed<'a> {
    subject: &'a str,
    /// Whether the store held a key item of the subject before (a key, or
    /// an earlier erasure).
    subject_known: bool,
    key_deleted: bool,
    streams_told: Vec<Told<'a>>,
    already_done: bool,
}

#[derive(Serialize)]
struct Told<'a> {
    stream: &'a str,
    sequence: u64,
}

/// The `erase` binary of a domain: `fn main() -> ExitCode { cli::erase(my_domain()) }`.
#[tokio::main]
pub async fn erase(domain: Domain) -> ExitCode {
    if let Some(code) = super::refused("erase", &domain) {
        return code;
    }
    let (name, args) = arguments::<Args>("erase", &domain);
    let Some(table) = events_table(&name, args.table, "--table") else {
        return ExitCode::from(2);
    };
    // Exactly as given: a trimmed id is another person's.
    let subject = args.subject.as_str();
    if let Some(problem) = stream_id_problem(subject) {
        eprintln!("{name}: --subject {subject:?} is no id a stream can have: it {problem}");
        return ExitCode::from(2);
    }
    if !domain.declares_personal() {
        eprintln!("{name}: the domain declares no personal data: there is nothing to erase");
        return ExitCode::from(2);
    }
    let client = connect(args.endpoint_url.as_deref()).await;
    // Erasure deletes a key item and appends events without personal data:
    // it never calls KMS, and needs no PERSONAL_DATA_KEY.
    let key = std::env::var("PERSONAL_DATA_KEY").unwrap_or_default();
    let keys = match super::keys::source(&client, &table, &key).await {
        Ok(keys) => keys,
        Err(err) => {
            eprintln!("{name}: {err}");
            return ExitCode::from(2);
        }
    };
    let domain = domain.with_keys(Arc::new(Keyring::new(keys)));
    let store = EventStore::new(client, table, domain);
    match crate::producer::erase(&store, subject).await {
        Ok(erased) => {
            // Told by the item the erasure replaced: no read of its own,
            // which the erase policy does not grant.
            let subject_known = erased.had_key_item || !erased.told.is_empty();
            if !subject_known {
                eprintln!(
                    "{name}: the subject {subject:?} had no key in this event store: no personal data of theirs was sealed here, so no key was deleted and no stream told (the id is taken exactly as given: check it). It is marked erased all the same: an append of personal data for {subject:?} is refused from now on."
                );
            }
            let printed = Printed {
                subject,
                subject_known,
                key_deleted: erased.key_deleted,
                streams_told: erased
                    .told
                    .iter()
                    .map(|(stream, sequence)| Told {
                        stream,
                        sequence: *sequence,
                    })
                    .collect(),
                already_done: erased.already_done,
            };
            match serde_json::to_string(&printed) {
                Ok(line) => println!("{line}"),
                Err(err) => eprintln!("{name}: erased, but cannot print the answer: {err}"),
            }
            ExitCode::SUCCESS
        }
        Err(err @ EraseError::NotConfigured(_)) => {
            eprintln!("{name}: {err}");
            ExitCode::from(2)
        }
        Err(err) => {
            eprintln!("{name}: {err}; safe to run again");
            ExitCode::FAILURE
        }
    }
}
