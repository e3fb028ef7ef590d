//! `library-loans-verify`: sequence-guard's `verify`, on `library::loans::domain()`.

fn main() -> std::process::ExitCode {
    sequence_guard::cli::verify(library::loans::domain())
}
