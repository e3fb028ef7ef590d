//! The bank's `replay`: sequence-guard's, on the bank's domain.

fn main() -> std::process::ExitCode {
    sequence_guard::cli::replay(bank::domain())
}
