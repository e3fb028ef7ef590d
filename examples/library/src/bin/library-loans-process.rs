//! `library-loans-process`: sequence-guard's `projector`, on `library::loans::domain()`.

fn main() -> std::process::ExitCode {
    sequence_guard::cli::projector(library::loans::domain())
}
