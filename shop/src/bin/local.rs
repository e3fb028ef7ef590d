//! The shop's whole system on one machine, `local`: its event store and its
//! three consumers (orders, status, the payments process), run from a
//! script (`shop/local/*.txt`), in memory or on DynamoDB Local.

fn main() -> std::process::ExitCode {
    if let Err(err) = shop::payments::window() {
        eprintln!("local: cannot start: {err}");
        return std::process::ExitCode::from(2);
    }
    sequence_guard::cli::local(shop::system())
}
