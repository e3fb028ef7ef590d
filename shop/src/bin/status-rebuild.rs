//! `status-rebuild`: the event store projected into the status consumer's
//! table, as `rebuild` does for the first consumer (catching a consumer up
//! when it is added to a live system).

fn main() -> std::process::ExitCode {
    sequence_guard::cli::rebuild(shop::status::domain())
}
