//! `library-inspect`: sequence-guard's `inspect`, on `library::domain()`.

fn main() -> std::process::ExitCode {
    sequence_guard::cli::inspect(library::domain())
}
