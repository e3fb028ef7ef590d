//! The worked example's `resend`: sequence-guard's, on the shop's domain.

fn main() -> std::process::ExitCode {
    sequence_guard::cli::resend(shop::domain())
}
