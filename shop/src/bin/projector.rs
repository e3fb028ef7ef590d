//! The worked example's `projector`: sequence-guard's, on the shop's domain.

fn main() -> std::process::ExitCode {
    sequence_guard::cli::projector(shop::domain())
}
