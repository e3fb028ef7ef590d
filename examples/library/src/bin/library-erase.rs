//! `library-erase`: sequence-guard's `erase`, on `library::domain()`.

fn main() -> std::process::ExitCode {
    sequence_guard::cli::erase(library::domain())
}
