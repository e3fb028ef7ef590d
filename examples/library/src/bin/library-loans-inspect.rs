//! `library-loans-inspect`: sequence-guard's `inspect`, on `library::loans::domain()`.

fn main() -> std::process::ExitCode {
    sequence_guard::cli::inspect(library::loans::domain())
}
