//! The shop's second consumer, `status-projector`: sequence-guard's Lambda
//! function on the status domain (each order's status, no personal data).

fn main() -> std::process::ExitCode {
    sequence_guard::cli::projector(shop::status::domain())
}
