//! `library-replay`: sequence-guard's `replay`, on `library::domain()`.

fn main() -> std::process::ExitCode {
    sequence_guard::cli::replay(library::domain())
}
