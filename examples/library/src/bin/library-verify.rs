//! `library-verify`: sequence-guard's `verify`, on `library::domain()`.

fn main() -> std::process::ExitCode {
    sequence_guard::cli::verify(library::domain())
}
