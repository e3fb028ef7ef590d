//! `status-inspect`: the operator's look at the status table (one order's
//! status, or every order with events parked), as `inspect` is for the
//! first consumer's.

fn main() -> std::process::ExitCode {
    sequence_guard::cli::inspect(shop::status::domain())
}
