//! The bank's `inspect`: sequence-guard's, on the bank's domain.

fn main() -> std::process::ExitCode {
    sequence_guard::cli::inspect(bank::domain())
}
