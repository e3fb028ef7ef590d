//! `bank-append`: sequence-guard's `append`, on `bank::domain()`.

fn main() -> std::process::ExitCode {
    sequence_guard::cli::append(bank::domain())
}
