//! `payments-replay`: the payments process run locally, as `replay` runs
//! the projector; what it would append is printed, not sent.

fn main() -> std::process::ExitCode {
    if let Err(err) = shop::payments::window() {
        eprintln!("payments-replay: {err}");
        return std::process::ExitCode::from(2);
    }
    sequence_guard::cli::replay(shop::payments::domain())
}
