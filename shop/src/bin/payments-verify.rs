//! `payments-verify`: the payments process's table compared with the fold
//! of the event store through the payments domain.

fn main() -> std::process::ExitCode {
    sequence_guard::cli::verify(shop::payments::domain())
}
