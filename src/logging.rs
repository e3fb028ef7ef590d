//! Logging as Lambda's advanced logging controls ask for it, and never an
//! event's data.
//!
//! The level is `AWS_LAMBDA_LOG_LEVEL` (`TRACE` to `FATAL`), else `RUST_LOG`
//! (a level or `EnvFilter` directives), else `INFO`; `AWS_LAMBDA_LOG_FORMAT=JSON`
//! writes JSON lines. Whatever the level, other crates' lines are kept at
//! `INFO` and above: at `TRACE`, `lambda_runtime` logs every raw invocation
//! event, and at `DEBUG` and `TRACE` the AWS SDK logs requests, responses and
//! the items a failed condition returns. Those hold the events' personal
//! data (names, e-mail addresses); this crate's own lines never do.

use lambda_runtime::tracing::subscriber::filter::{EnvFilter, LevelFilter, filter_fn};
use lambda_runtime::tracing::subscriber::fmt::MakeWriter;
use lambda_runtime::tracing::subscriber::{self, Layer, prelude::*};
use tracing::Level;

/// The crates whose lines may go below `INFO`: this one's own.
const OWN_TARGETS: [&str; 1] = ["sequence_guard"];

/// Installs the process's subscriber, writing to stdout (where Lambda takes
/// the function's logs). Does nothing if one is installed already.
pub fn init() {
    init_with_writer(std::io::stdout);
}

/// Installs the process's subscriber, writing to `writer`.
pub fn init_with_writer<W>(writer: W)
where
    W: for<'writer> MakeWriter<'writer> + Send + Sync + 'static,
{
    init_at(writer, LevelFilter::INFO);
}

/// The subscriber of the local tools (`replay`, `rebuild`, `verify`,
/// `resend`): to stderr, so that their own output stays clean, and silent
/// unless `RUST_LOG` (or `AWS_LAMBDA_LOG_LEVEL`) asks for lines: their output
/// tells every outcome already; `RUST_LOG=warn` adds the runner's and the
/// sweep's warnings as the function logs them.
pub fn init_local() {
    init_at(std::io::stderr, LevelFilter::OFF);
}

fn init_at<W>(writer: W, default: LevelFilter)
where
    W: for<'writer> MakeWriter<'writer> + Send + Sync + 'static,
{
    let json = std::env::var("AWS_LAMBDA_LOG_FORMAT").is_ok_and(|f| f.eq_ignore_ascii_case("json"));
    let filter = level_filter(
        std::env::var("AWS_LAMBDA_LOG_LEVEL").ok().as_deref(),
        std::env::var("RUST_LOG").ok().as_deref(),
        default,
    );
    let no_data = filter_fn(|metadata| {
        *metadata.level() <= Level::INFO
            || OWN_TARGETS
                .iter()
                .any(|own| metadata.target().starts_with(own))
    });
    let layer = subscriber::fmt::layer()
        .with_target(false)
        .without_time()
        .with_writer(writer);
    let layer = if json {
        layer.json().with_filter(no_data).boxed()
    } else {
        layer.with_filter(no_data).boxed()
    };
    // Err: a subscriber is installed already (tests); keep it.
    let _ = subscriber::registry().with(filter).with(layer).try_init();
}

/// The filter of the level variables: Lambda's level first (its `FATAL`
/// is `ERROR` here), then `RUST_LOG`'s directives, else `default`.
fn level_filter(
    lambda_level: Option<&str>,
    rust_log: Option<&str>,
    default: LevelFilter,
) -> EnvFilter {
    let builder = EnvFilter::builder().with_default_directive(default.into());
    match lambda_level
        .map(str::trim)
        .filter(|level| !level.is_empty())
    {
        Some(level) => {
            let level = if level.eq_ignore_ascii_case("fatal") {
                LevelFilter::ERROR
            } else {
                level.parse().unwrap_or(LevelFilter::INFO)
            };
            builder.with_default_directive(level.into()).parse_lossy("")
        }
        None => builder.parse_lossy(rust_log.unwrap_or_default()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lambdas_level_comes_first_then_rust_log_then_info() {
        assert_eq!(
            level_filter(Some("TRACE"), Some("warn"), LevelFilter::INFO).max_level_hint(),
            Some(LevelFilter::TRACE)
        );
        assert_eq!(
            level_filter(Some("FATAL"), None, LevelFilter::INFO).max_level_hint(),
            Some(LevelFilter::ERROR)
        );
        assert_eq!(
            level_filter(None, Some("debug"), LevelFilter::INFO).max_level_hint(),
            Some(LevelFilter::DEBUG)
        );
        assert_eq!(
            level_filter(None, None, LevelFilter::INFO).max_level_hint(),
            Some(LevelFilter::INFO)
        );
        assert_eq!(
            level_filter(Some("nonsense"), None, LevelFilter::INFO).max_level_hint(),
            Some(LevelFilter::INFO)
        );
    }
}
