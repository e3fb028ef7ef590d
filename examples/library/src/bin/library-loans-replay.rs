//! `library-loans-replay`: sequence-guard's `replay`, on `library::loans::domain()`.

fn main() -> std::process::ExitCode {
    sequence_guard::cli::replay(library::loans::domain())
}
