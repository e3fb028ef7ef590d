//! The worked example's `inspect`: sequence-guard's, on the shop's domain.

fn main() -> std::process::ExitCode {
    sequence_guard::cli::inspect(shop::domain())
}
