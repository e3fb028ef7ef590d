//! The bank's deployment files are what this version's `sync` writes, and
//! its template lints.

use super::*;

#[test]
fn the_banks_deployment_files_are_this_versions_and_lint() {
    // GIVEN the bank, whose template.yaml, samconfig.toml, scripts and four
    // binaries `sequence-guard sync` wrote (and a new crate named bank)
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
    let dir = scratch("bank").join("bank");
    let made = new_crate("bank", &dir);
    assert!(made.status.success(), "{}", seen(&made));
    let read = |path: &Path| std::fs::read_to_string(path).expect("read");
    assert_eq!(
        read(&bank.join("samconfig.toml")),
        read(&dir.join("samconfig.toml")),
        "the bank's samconfig.toml is the generated one"
    );
    for binary in BINARIES {
        let main = read(&bank.join(format!("src/bin/bank-{binary}.rs")));
        assert!(
            main.contains(&format!("sequence_guard::cli::{binary}(bank::domain())")),
            "bank-{binary}: {main}"
        );
    }
    // AND its template passes both linters
    lint(&bank);
}
