//! The bank's `rebuild`: sequence-guard's, on the bank's domain.

fn main() -> std::process::ExitCode {
    sequence_guard::cli::rebuild(bank::domain())
}
