//! The bank's `projector`: sequence-guard's, on the bank's domain.

fn main() -> std::process::ExitCode {
    sequence_guard::cli::projector(bank::domain())
}
