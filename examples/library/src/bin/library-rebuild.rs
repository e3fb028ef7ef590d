//! `library-rebuild`: sequence-guard's `rebuild`, on `library::domain()`.

fn main() -> std::process::ExitCode {
    sequence_guard::cli::rebuild(library::domain())
}
