//! `library-resend`: sequence-guard's `resend`, on `library::domain()`.

fn main() -> std::process::ExitCode {
    sequence_guard::cli::resend(library::domain())
}
