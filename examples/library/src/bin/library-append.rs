//! `library-append`: sequence-guard's `append`, on `library::domain()`.

fn main() -> std::process::ExitCode {
    sequence_guard::cli::append(library::domain())
}
