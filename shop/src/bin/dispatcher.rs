//! The worked example's `dispatcher`: sequence-guard's, on the shop's domain.

fn main() -> std::process::ExitCode {
    sequence_guard::cli::dispatcher(shop::domain())
}
