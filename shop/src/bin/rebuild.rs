//! The worked example's `rebuild`: sequence-guard's, on the shop's domain.

fn main() -> std::process::ExitCode {
    sequence_guard::cli::rebuild(shop::domain())
}
