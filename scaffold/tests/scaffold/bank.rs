//! The examples' deployment files are what this version's `sync` writes:
//! the bank's (and its template lints), the lending library's.

use super::*;

#[test]
fn the_banks_deployment_files_are_this_versions_and_lint() {
    // GIVEN the bank, whose template.yaml, samconfig.toml, scripts and
    // binaries `sequence-guard sync` wrote
    let bank = root().join("examples/bank");
    let checked = run(Command::new(TOOL)
        .args(["sync", "--check", "--path"])
        .arg(&bank));
    // THEN regenerating them gives the same files
    assert!(
        checked.status.success(),
        "run `cargo run --bin sequence-guard -- sync --path examples/bank`: {}",
        seen(&checked)
    );
    assert_eq!(text(&checked.stdout), "");
    // (its samconfig.toml is the one rendered for its template:
    // `our_samconfig_and_the_banks_are_rendered_for_their_templates`)
    let read = |path: &Path| std::fs::read_to_string(path).expect("read");
    for binary in BINARIES {
        let main = read(&bank.join(format!("src/bin/bank-{binary}.rs")));
        assert!(
            main.contains(&format!("sequence_guard::cli::{binary}(bank::domain())")),
            "bank-{binary}: {main}"
        );
    }
    // AND its whole system, with its one consumer, runs from bank-local
    let system = read(&bank.join("src/system.rs"));
    assert!(
        system.contains("System::new(crate::domain()).consumer(\"projector\", crate::domain())\n}"),
        "{system}"
    );
    let local = read(&bank.join("src/bin/bank-local.rs"));
    assert!(
        local.contains("sequence_guard::cli::local(bank::system::system())"),
        "{local}"
    );
    // AND its template passes both linters
    lint(&bank);
}

#[test]
fn the_librarys_deployment_files_are_this_versions() {
    // GIVEN the lending library, made by `new`, its domain written by hand,
    // its process `loans` declared, then synced
    let library = root().join("examples/library");
    let checked = run(Command::new(TOOL)
        .args(["sync", "--check", "--path"])
        .arg(&library));
    // THEN regenerating its files gives the same files
    assert!(
        checked.status.success(),
        "run `cargo run --bin sequence-guard -- sync --path examples/library`: {}",
        seen(&checked)
    );
    assert_eq!(text(&checked.stdout), "");
    // AND its system has its process, which `library-local` runs
    let system = std::fs::read_to_string(library.join("src/system.rs")).expect("read");
    assert!(
        system.contains(".consumer(\"loans\", crate::loans::domain())\n}"),
        "{system}"
    );
    // (Its template is the consumer definition rendered for a process, as
    // the new crate's with its archiver, which both linters check in
    // new.rs: not linted a second time.)
}
