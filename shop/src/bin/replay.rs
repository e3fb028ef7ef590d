//! The worked example's `replay`: sequence-guard's, on the shop's domain.

fn main() -> std::process::ExitCode {
    sequence_guard::cli::replay(shop::domain())
}
