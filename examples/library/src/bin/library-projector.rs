//! `library-projector`: sequence-guard's `projector`, on `library::domain()`.

fn main() -> std::process::ExitCode {
    sequence_guard::cli::projector(library::domain())
}
