//! The worked example's `verify`: sequence-guard's, on the shop's domain.

fn main() -> std::process::ExitCode {
    sequence_guard::cli::verify(shop::domain())
}
