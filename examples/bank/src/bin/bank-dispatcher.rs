//! `bank-dispatcher`: sequence-guard's `dispatcher`, on `bank::domain()`.

fn main() -> std::process::ExitCode {
    sequence_guard::cli::dispatcher(bank::domain())
}
