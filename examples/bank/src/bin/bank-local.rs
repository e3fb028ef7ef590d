//! `bank-local`: sequence-guard's `local`, on `bank::system::system()`:
//! the whole system on one machine, from a script of `local/`.

fn main() -> std::process::ExitCode {
    sequence_guard::cli::local(bank::system::system())
}
