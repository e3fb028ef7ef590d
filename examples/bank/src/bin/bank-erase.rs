//! `bank-erase`: sequence-guard's `erase`, on `bank::domain()`.

fn main() -> std::process::ExitCode {
    sequence_guard::cli::erase(bank::domain())
}
