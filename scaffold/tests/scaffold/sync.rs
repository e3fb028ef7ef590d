//! `sequence-guard sync`: our files restored, the team's kept (its lock
//! too), `--check` naming what differs; a consumer the team added is never
//! deleted.

use super::*;

#[test]
fn sync_restores_our_files_keeps_theirs_and_check_names_what_differs() {
    // GIVEN a crate whose template sync made, whose deploy settings were
    // edited, and which lost a binary; its template is an older one's
    let dir = scratch("sync").join("parcels");
    let made = new_crate("parcels", &dir);
    assert!(made.status.success(), "{}", seen(&made));
    let template = std::fs::read_to_string(dir.join("template.yaml")).expect("read");
    let settings = "# the team's\nversion = 0.1\n";
    std::fs::write(dir.join("samconfig.toml"), settings).expect("write");
    let lock = std::fs::read_to_string(dir.join("Cargo.lock")).expect("read") + "# the team's\n";
    std::fs::write(dir.join("Cargo.lock"), &lock).expect("write");
    std::fs::remove_file(dir.join("src/bin/parcels-verify.rs")).expect("rm");
    let older = template.replace("rate(5 minutes)", "rate(10 minutes)");
    std::fs::write(dir.join("template.yaml"), &older).expect("write");
    let sync = |args: &[&str]| {
        run(Command::new(TOOL)
            .args(["sync", "--path"])
            .arg(&dir)
            .args(args))
    };

    // WHEN checked, THEN both are named and nothing is written
    let checked = sync(&["--check"]);
    assert_eq!(checked.status.code(), Some(1), "{}", seen(&checked));
    assert!(
        text(&checked.stdout).ends_with("src/bin/parcels-verify.rs: missing\n"),
        "{}",
        seen(&checked)
    );
    assert!(text(&checked.stdout).starts_with("template.yaml: differs"));
    assert!(text(&checked.stderr).contains("run `sequence-guard sync --path"));
    assert_eq!(
        std::fs::read_to_string(dir.join("template.yaml")).expect("read"),
        older
    );

    // WHEN a template sync made with an older hash is synced... it was
    // changed (its hash no longer matches): sync refuses, writes nothing
    let refused = sync(&[]);
    assert_eq!(refused.status.code(), Some(1), "{}", seen(&refused));
    assert!(
        text(&refused.stderr).contains("- ") && text(&refused.stderr).contains("rate(10 minutes)")
    );
    assert!(text(&refused.stderr).contains("changed by hand"));
    assert!(
        !dir.join("src/bin/parcels-verify.rs").exists(),
        "nothing written: {}",
        seen(&refused)
    );

    // WHEN forced, THEN ours is back, theirs kept, and the check passes
    let synced = sync(&["--force"]);
    assert!(synced.status.success(), "{}", seen(&synced));
    assert_eq!(
        text(&synced.stdout),
        "template.yaml: rewritten\nsrc/bin/parcels-verify.rs: written\n"
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("template.yaml")).expect("read"),
        template
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("samconfig.toml")).expect("read"),
        settings
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("Cargo.lock")).expect("read"),
        lock,
        "the team's lock is theirs"
    );
    let checked = sync(&["--check"]);
    assert!(checked.status.success(), "{}", seen(&checked));
    assert_eq!(text(&checked.stdout), "");
}

#[test]
fn sync_never_deletes_a_teams_consumer() {
    // GIVEN a crate whose team added a consumer to template.yaml by hand, as
    // earlier docs said
    let dir = scratch("team-consumer").join("parcels");
    let made = new_crate("parcels", &dir);
    assert!(made.status.success(), "{}", seen(&made));
    let template = std::fs::read_to_string(dir.join("template.yaml")).expect("read");
    let theirs = template.replace(
        "\nResources:\n",
        "\nResources:\n  AuditQueue:\n    Type: AWS::SQS::Queue\n    Properties:\n      FifoQueue: true\n",
    );
    std::fs::write(dir.join("template.yaml"), &theirs).expect("write");

    // WHEN synced, THEN it refuses, shows what it would lose, writes nothing
    let refused = run(Command::new(TOOL).args(["sync", "--path"]).arg(&dir));
    assert_eq!(refused.status.code(), Some(1), "{}", seen(&refused));
    assert!(
        text(&refused.stderr).contains("-   AuditQueue:"),
        "{}",
        seen(&refused)
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("template.yaml")).expect("read"),
        theirs
    );

    // WHEN the consumer is declared instead, and synced with --force
    let manifest = dir.join("Cargo.toml");
    let cargo = std::fs::read_to_string(&manifest).expect("read");
    // Beside the process a new crate declares.
    let cargo = cargo.replacen(
        "consumers = [\n",
        "consumers = [\n  { name = \"audit\", description = \"Each parcel's audit trail.\" },\n",
        1,
    );
    std::fs::write(&manifest, cargo).expect("write");
    let synced = run(Command::new(TOOL)
        .args(["sync", "--force", "--path"])
        .arg(&dir));
    assert!(synced.status.success(), "{}", seen(&synced));

    // THEN the template holds the consumer whole, from the one definition,
    // with its own binaries, and both linters take it
    let template = std::fs::read_to_string(dir.join("template.yaml")).expect("read");
    for resource in [
        "AuditQueue:",
        "AuditDeadLetterQueue:",
        "AuditQueueSubscription:",
        "AuditTable:",
        "AuditProjectorFunction:",
        "AuditParkedTooLongAlarm:",
        "AuditNotCreatedSustainedAlarm:",
        "AuditSweepIncompleteAlarm:",
        "AuditStuckStreamsQuery:",
        "AuditProjectorWidgets:",
        "DeployAuditConsumer:",
    ] {
        assert!(template.contains(&format!("  {resource}")), "{resource}");
    }
    assert!(template.contains("        Binary: parcels-audit-projector\n"));
    for tool in ["projector", "replay", "rebuild", "verify", "inspect"] {
        let main = std::fs::read_to_string(dir.join(format!("src/bin/parcels-audit-{tool}.rs")))
            .expect("the consumer's binary");
        assert!(main.contains(&format!(
            "sequence_guard::cli::{tool}(parcels::audit::domain())"
        )));
    }
    // AND its whole system has it, with no edit: its local run too
    let system = std::fs::read_to_string(dir.join("src/system.rs")).expect("the system");
    assert!(
        system.contains(".consumer(\"audit\", crate::audit::domain())\n        .consumer(\"archiver\", crate::archiver::domain())\n}"),
        "{system}"
    );
    let checked = run(Command::new(TOOL)
        .args(["sync", "--check", "--path"])
        .arg(&dir));
    assert!(checked.status.success(), "{}", seen(&checked));
    lint(&dir);

    // AND a declaration that cannot work is refused, naming it
    let mut cargo = std::fs::read_to_string(&manifest).expect("read");
    cargo = cargo.replace("name = \"audit\"", "name = \"Audit\"");
    std::fs::write(&manifest, cargo).expect("write");
    let bad = run(Command::new(TOOL).args(["sync", "--path"]).arg(&dir));
    assert_eq!(bad.status.code(), Some(2), "{}", seen(&bad));
    assert!(
        text(&bad.stderr).contains("`Audit` cannot name a consumer"),
        "{}",
        seen(&bad)
    );
}

#[test]
fn sync_names_the_line_a_crate_made_before_lacks() {
    // GIVEN a crate made before `src/system.rs`: its lib declares no module
    let dir = scratch("before-system").join("parcels");
    let made = new_crate("parcels", &dir);
    assert!(made.status.success(), "{}", seen(&made));
    let lib = dir.join("src/lib.rs");
    let text_of = std::fs::read_to_string(&lib).expect("lib.rs");
    std::fs::write(&lib, text_of.replace("pub mod system;\n", "")).expect("write");
    std::fs::remove_file(dir.join("src/system.rs")).expect("rm");
    std::fs::remove_file(dir.join("src/bin/parcels-local.rs")).expect("rm");

    // WHEN synced, THEN the system and its binary are written, and the one
    // line left to the team is named: exit 1 until it is there
    let synced = run(Command::new(TOOL).args(["sync", "--path"]).arg(&dir));
    assert_eq!(synced.status.code(), Some(1), "{}", seen(&synced));
    assert_eq!(
        text(&synced.stdout),
        "src/system.rs: written\nsrc/bin/parcels-local.rs: written\n"
    );
    assert!(
        text(&synced.stderr).contains("src/lib.rs does not declare the module of src/system.rs")
            && text(&synced.stderr).contains("add the line `pub mod system;` there"),
        "{}",
        seen(&synced)
    );
    let checked = run(Command::new(TOOL)
        .args(["sync", "--check", "--path"])
        .arg(&dir));
    assert_eq!(checked.status.code(), Some(1), "{}", seen(&checked));

    // WHEN the line is added, THEN both pass
    std::fs::write(&lib, text_of).expect("write");
    let checked = run(Command::new(TOOL)
        .args(["sync", "--check", "--path"])
        .arg(&dir));
    assert!(checked.status.success(), "{}", seen(&checked));
}
