//! `bank-verify`: sequence-guard's `verify`, on `bank::domain()`.

fn main() -> std::process::ExitCode {
    sequence_guard::cli::verify(bank::domain())
}
