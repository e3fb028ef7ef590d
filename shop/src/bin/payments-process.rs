//! The shop's process, `payments-process`: sequence-guard's Lambda function
//! on the payments domain (each order's payment; it appends to the event
//! store, `EVENT_STORE_TABLE`).

fn main() -> std::process::ExitCode {
    if let Err(err) = shop::payments::window() {
        eprintln!("payments-process: cannot start: {err}");
        return std::process::ExitCode::from(2);
    }
    sequence_guard::cli::projector(shop::payments::domain())
}
