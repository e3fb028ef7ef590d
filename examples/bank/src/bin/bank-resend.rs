//! `bank-resend`: sequence-guard's `resend`, on `bank::domain()`.

fn main() -> std::process::ExitCode {
    sequence_guard::cli::resend(bank::domain())
}
