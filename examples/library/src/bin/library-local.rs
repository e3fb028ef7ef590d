//! `library-local`: sequence-guard's `local`, on `library::system::system()`:
//! the whole system on one machine, from a script of `local/`.

fn main() -> std::process::ExitCode {
    sequence_guard::cli::local(library::system::system())
}
