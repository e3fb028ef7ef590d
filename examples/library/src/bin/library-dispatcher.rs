//! `library-dispatcher`: sequence-guard's `dispatcher`, on `library::domain()`.

fn main() -> std::process::ExitCode {
    sequence_guard::cli::dispatcher(library::domain())
}
