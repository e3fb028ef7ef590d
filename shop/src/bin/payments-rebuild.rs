//! `payments-rebuild`: the event store projected into the payments
//! process's table (its states and deadlines; nothing is appended again:
//! what the process appended is in the store already).

fn main() -> std::process::ExitCode {
    sequence_guard::cli::rebuild(shop::payments::domain())
}
