//! `payments-inspect`: the operator's look at the payments process's table
//! (one order's payment, or every state with events parked).

fn main() -> std::process::ExitCode {
    sequence_guard::cli::inspect(shop::payments::domain())
}
