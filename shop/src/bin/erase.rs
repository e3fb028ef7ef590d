//! The worked example's `erase`: sequence-guard's, on the shop's domain.

fn main() -> std::process::ExitCode {
    sequence_guard::cli::erase(shop::domain())
}
