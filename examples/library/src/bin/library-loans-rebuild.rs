//! `library-loans-rebuild`: sequence-guard's `rebuild`, on `library::loans::domain()`.

fn main() -> std::process::ExitCode {
    sequence_guard::cli::rebuild(library::loans::domain())
}
