//! `status-replay`: the status consumer run locally, as `replay` runs the
//! projector.

fn main() -> std::process::ExitCode {
    sequence_guard::cli::replay(shop::status::domain())
}
