//! `status-verify`: the status table compared with the fold of the event
//! store through the status domain, as `verify` does for the first consumer.

fn main() -> std::process::ExitCode {
    sequence_guard::cli::verify(shop::status::domain())
}
