//! The worked example's `append`: sequence-guard's, on the shop's domain.

fn main() -> std::process::ExitCode {
    sequence_guard::cli::append(shop::domain())
}
