//! The binaries of any domain, each a one-line `main` in the user's crate:
//!
//! ```no_run
//! # fn my_domain() -> sequence_guard::Domain { unimplemented!() }
//! // src/bin/projector.rs: the Lambda function
//! fn main() -> std::process::ExitCode {
//!     sequence_guard::cli::projector(my_domain())
//! }
//! ```
//!
//! - [`projector()`]: the Lambda function (SQS batches and the schedule's sweeps).
//! - [`replay()`]: runs sample events through the same runner, on an embedded
//!   table or on DynamoDB.
//! - [`inspect()`]: one entity or one counter's item (every counter on it)
//!   in the table, or every entity with events parked.
//! - [`append()`]: one event appended to the event store (the producer's half).
//! - [`dispatcher()`]: the Lambda function on the event store's change records,
//!   sending appended events to the queue.
//! - [`rebuild()`]: the event store projected into a table through the same
//!   runner, stream by stream.
//! - [`verify()`]: the fold of the event store, in memory, compared with the
//!   projection table item by item: what differs, by attribute name (finds
//!   a hole).
//! - [`erase()`]: a subject forgotten: its data key deleted, and each of its
//!   streams told, so that every consumer replaces its personal data with
//!   the placeholder.
//! - [`resend()`]: a stream's stored events, or a range of them, sent to the
//!   queue again exactly as the dispatcher sent them (mends a hole).
//! - [`local()`]: a crate's whole system ([`crate::domain::System`]) on one
//!   machine, from a script: appends, every consumer and process, the
//!   sweep on a clock the script sets, erasure; in memory or on DynamoDB.

mod append;
mod counters;
mod dispatcher;
mod erase;
mod inspect;
mod keys;
mod local;
mod projector;
mod rebuild;
mod replay;
mod resend;
#[cfg(test)]
mod test_domain;
mod verify;

pub use append::append;
pub use dispatcher::dispatcher;
pub use erase::erase;
pub use inspect::inspect;
pub use local::local;
pub use projector::projector;
pub use rebuild::rebuild;
pub use replay::replay;
pub use resend::resend;
pub use verify::verify;

/// The binary's name (as started, or `default`) and its arguments, parsed;
/// help, version and bad arguments end the process as clap does (exit 0 or
/// 2), under that name. `--version` prints the domain's version
/// ([`crate::Domain::with_crate_version`]) and the library's.
fn arguments<A: clap::CommandFactory + clap::FromArgMatches>(
    default: &str,
    domain: &crate::Domain,
) -> (String, A) {
    let name = program(default);
    // Leaked once per process: clap keeps the name as long as it runs.
    let parsed = A::command()
        .name(name.clone().leak() as &str)
        .version(version(domain).leak() as &str)
        .try_get_matches()
        .and_then(|matches| A::from_arg_matches(&matches));
    match parsed {
        Ok(args) => (name, args),
        Err(err) => err.exit(),
    }
}

/// `1.4.0 (sequence-guard 0.2.0)`: the domain's crate and the library.
fn version(domain: &crate::Domain) -> String {
    let library = concat!("sequence-guard ", env!("CARGO_PKG_VERSION"));
    match domain.crate_version() {
        Some(version) => format!("{version} ({library})"),
        None => format!("({library})"),
    }
}

/// The event store's table, from `--flag` or `EVENTS_TABLE`; `None` after
/// saying it is missing.
fn events_table(name: &str, table: Option<String>, flag: &str) -> Option<String> {
    let table = table.filter(|table| !table.is_empty());
    if table.is_none() {
        eprintln!("{name}: EVENTS_TABLE is not set: name the event store's table (or give {flag})");
    }
    table
}

/// The name the binary was started as (for its messages), or `default`.
fn program(default: &str) -> String {
    std::env::args_os()
        .next()
        .and_then(|path| {
            std::path::Path::new(&path)
                .file_name()
                .map(|name| name.to_string_lossy().into_owned())
        })
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| default.to_owned())
}

/// Whether the process runs under a Lambda runtime; when it does not, says
/// so under the binary's name (`default`) with `how` (a line on running it
/// locally, `{name}` standing for that name) and answers exit code 2.
fn outside_lambda(default: &str, how: &str) -> Option<std::process::ExitCode> {
    if std::env::var_os("AWS_LAMBDA_RUNTIME_API").is_some() {
        return None;
    }
    let name = program(default);
    eprintln!(
        "{name} is a Lambda function: it runs under a Lambda runtime (AWS_LAMBDA_RUNTIME_API is not set). {}",
        how.replace("{name}", &name)
    );
    Some(std::process::ExitCode::from(2))
}

/// Exit code 2, after saying what is wrong, when the domain's declarations
/// cannot work ([`crate::Domain::check`]): every binary refuses to start.
fn refused(default: &str, domain: &crate::Domain) -> Option<std::process::ExitCode> {
    let err = domain.check().err()?;
    let name = program(default);
    eprintln!("{name}: cannot start: {err}");
    Some(std::process::ExitCode::from(2))
}

/// The exit code of a Lambda function whose runtime stopped.
fn served(result: Result<(), lambda_runtime::Error>) -> std::process::ExitCode {
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(err) => {
            tracing::error!(error = %err, "the runtime stopped");
            std::process::ExitCode::FAILURE
        }
    }
}
