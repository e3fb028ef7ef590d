//! `sequence-guard new`: a crate made from nothing, with its process and our
//! lock, builds, passes its tests, replays its samples, is as `sync` keeps it
//! and lints; without its process, its template is ours on its binaries; it is
//! a git repository unless in one; a bad name or a directory in use is refused.

use super::*;

#[test]
fn a_new_crate_builds_passes_its_tests_replays_its_samples_and_lints() {
    // GIVEN a crate made from nothing, with no flag (so on the checkout the
    // command was built from: this one), with our lock file.
    let dir = scratch("new").join("parcels");
    let made = new_crate("parcels", &dir);
    assert!(made.status.success(), "{}", seen(&made));
    assert!(text(&made.stdout).contains("cargo run --bin parcels-replay -- events/*.json"));
    for binary in BINARIES {
        let path = dir.join(format!("src/bin/parcels-{binary}.rs"));
        let main = std::fs::read_to_string(&path).expect("a binary per tool");
        assert!(
            main.contains(&format!("sequence_guard::cli::{binary}(parcels::domain())")),
            "{main}"
        );
    }
    // Its process's, on its module's domain: the function runs the projector.
    for (binary, tool) in ARCHIVER_BINARIES {
        let path = dir.join(format!("src/bin/parcels-archiver-{binary}.rs"));
        let main = std::fs::read_to_string(&path).expect("a binary per tool of the process");
        assert!(
            main.contains(&format!(
                "sequence_guard::cli::{tool}(parcels::archiver::domain())"
            )),
            "{main}"
        );
    }
    // Its build starts TLS as ours does: aws-lc without jitter entropy.
    let config = std::fs::read_to_string(dir.join(".cargo/config.toml")).expect("config");
    assert!(
        config.contains("AWS_LC_SYS_NO_JITTER_ENTROPY = \"1\""),
        "{config}"
    );
    // A path dependency on this checkout, relative to the crate.
    let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).expect("Cargo.toml");
    let path = path_dependency(&manifest);
    assert!(Path::new(path).is_relative(), "{path}");
    assert_eq!(
        dir.join(path).canonicalize().expect("the dependency"),
        root().canonicalize().expect("the checkout")
    );
    // Our lock, the versions we test: resolved, it keeps each the crate
    // uses, drops the rest and adds the crate itself.
    let ours = std::fs::read_to_string(root().join("Cargo.lock")).expect("our lock");
    let lock = std::fs::read_to_string(dir.join("Cargo.lock")).expect("a lock");
    assert!(lock == ours, "the crate's Cargo.lock is not ours");
    let resolved = run(cargo()
        .args(["metadata", "--format-version", "1", "--offline"])
        .args(["--filter-platform", host()])
        .current_dir(&dir));
    assert!(
        resolved.status.success(),
        "cargo metadata: {}",
        seen(&resolved)
    );
    let resolved = std::fs::read_to_string(dir.join("Cargo.lock")).expect("the lock");
    let (ours, lock) = (locked(&ours), locked(&resolved));
    let added: Vec<_> = lock.difference(&ours).collect();
    let parcels = ("parcels".to_owned(), "0.1.0".to_owned(), String::new());
    assert_eq!(added, [&parcels], "versions not ours");
    assert!(lock.len() > 100, "{} packages", lock.len());
    for unused in [
        "shop",
        "bank",
        "library",
        "sequence-guard-scaffold",
        "proptest",
    ] {
        assert!(lock.iter().all(|(name, ..)| name != unused), "{unused}");
    }
    mirror_features(&dir);

    // WHEN it is formatted, built and tested (its handlers through the test
    // kit, its samples through its replay binary) in our target directory
    let fmt = run(cargo().args(["fmt", "--check"]).current_dir(&dir));
    assert!(fmt.status.success(), "cargo fmt --check: {}", seen(&fmt));
    let started = std::time::Instant::now();
    let test = run(cargo().args(["test", "--offline"]).current_dir(&dir));
    eprintln!(
        "cargo test of the generated crate: {:.1?}",
        started.elapsed()
    );
    assert!(test.status.success(), "cargo test: {}", seen(&test));
    let stdout = text(&test.stdout);
    for passed in [
        "test tests::a_creation_creates_the_item_at_its_sequence_once ... ok",
        "test tests::the_guard_answers_duplicate_gap_and_not_created ... ok",
        "test tests::a_view_adds_one_to_the_items_views ... ok",
        "test tests::every_sample_body_is_read_by_the_domain ... ok",
        "test tests::an_archive_marks_the_item_archived_through_the_guard ... ok",
        "test archiver::tests::the_process_is_well_declared ... ok",
        "test archiver::tests::the_deadline_archives_an_active_item_at_the_sequence_seen ... ok",
        "test replay_tells_the_samples_story ... ok",
        "test the_archiver_follows_each_item_and_keeps_a_deadline_while_active ... ok",
        "test system::tests::the_system_is_whole ... ok",
        "test the_archiver_archives_the_item_not_renamed_for_30_days_end_to_end ... ok",
    ] {
        assert!(stdout.contains(passed), "{passed} missing:\n{stdout}");
    }

    // THEN its replay tells the samples' story, as a team runs it
    let replay = run(Command::new(root().join("target/debug/parcels-replay"))
        .args([
            "events/01-item-created-and-renamed.json",
            "events/02-gap-parked.json",
            "events/03-gap-closed.json",
            "events/04-item-archived.json",
        ])
        .current_dir(&dir)
        .env_remove("GAP_POLICY")
        .env_remove("PARK_AFTER_RECEIVES"));
    assert!(replay.status.success(), "replay: {}", seen(&replay));
    let story = text(&replay.stdout);
    for line in [
        "item-1  seq -  ItemViewed   duplicate",
        "drained item-1 seq 4 ItemRenamed",
        "item    item-1       sequence 4   archived false name \"Reading lamp\"",
        "item    item-2       sequence 2   archived true name \"Chair\"",
        "views   item-1       views 1",
    ] {
        assert!(story.contains(line), "{line} missing:\n{story}");
    }

    // AND its whole system runs on one machine with the one command its
    // README gives: the archiver archives the item not renamed
    let local = run(Command::new(root().join("target/debug/parcels-local"))
        .arg("local/archiver.txt")
        .current_dir(&dir)
        .env_remove("PERSONAL_DATA_KEY"));
    assert!(local.status.success(), "local: {}", seen(&local));
    let run_text = text(&local.stdout);
    for line in [
        "  archiver   appended item-1 seq 2 ItemArchived\n",
        "  projector  item-1 seq 2 ItemArchived applied\n",
        "    item     item-1       sequence 2   archived true name \"Lamp\"\n",
    ] {
        assert!(run_text.contains(line), "{line} missing:\n{run_text}");
    }
    let readme = std::fs::read_to_string(dir.join("README.md")).expect("README");
    assert!(readme.contains("cargo run --bin parcels-local -- local/archiver.txt"));
    // What its README and our guide show of the run is what it prints
    let guide = std::fs::read_to_string(root().join("docs/guide.md")).expect("the guide");
    for (doc, text_of, heading) in [
        ("README.md", &readme, "## The whole system on one machine"),
        ("docs/guide.md", &guide, "## Start your own domain"),
    ] {
        let mut printed = run_text.lines().map(str::trim);
        for line in shown(text_of, heading) {
            assert!(
                printed.any(|printed| printed == line),
                "{doc} shows `{line}`, which the run does not print (in this order):\n{run_text}"
            );
        }
    }

    // AND it is as `sync` keeps it: its process, declared in Cargo.toml,
    // rendered whole in its template
    let checked = run(Command::new(TOOL)
        .args(["sync", "--check", "--path"])
        .arg(&dir));
    assert!(checked.status.success(), "sync --check: {}", seen(&checked));
    assert_eq!(text(&checked.stdout), "");
    let template = std::fs::read_to_string(dir.join("template.yaml")).expect("template");
    for resource in [
        "ArchiverQueue:",
        "ArchiverTable:",
        "ArchiverProjectorFunction:",
        "ArchiverDeadlinePeriod:",
        "DeployArchiverConsumer:",
    ] {
        assert!(template.contains(&format!("  {resource}")), "{resource}");
    }
    assert!(template.contains("        Binary: parcels-archiver-process\n"));

    // AND its template passes both linters
    lint(&dir);
}

/// The lines of the first `text` block after `heading` in `doc`, trimmed,
/// but the command (`$ ...`) and those that stand for lines left out.
fn shown(doc: &str, heading: &str) -> Vec<String> {
    let section = doc
        .split_once(heading)
        .unwrap_or_else(|| panic!("no section {heading}"))
        .1;
    let block = section
        .split_once("```text\n")
        .and_then(|(_, rest)| rest.split_once("```"))
        .unwrap_or_else(|| panic!("no text block under {heading}"))
        .0;
    let lines: Vec<String> = block
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && *line != "..." && !line.starts_with("$ "))
        .map(str::to_owned)
        .collect();
    assert!(lines.len() >= 4, "{heading}: {lines:?}");
    lines
}

/// The process's binaries, and the tool each runs.
const ARCHIVER_BINARIES: [(&str, &str); 5] = [
    ("process", "projector"),
    ("replay", "replay"),
    ("rebuild", "rebuild"),
    ("verify", "verify"),
    ("inspect", "inspect"),
];

/// Removes the crate's process as its README says: its module, tests,
/// binaries and script, its `mod` line and its entry in Cargo.toml; then
/// `sync`, which takes it out of the system too.
fn remove_the_archiver(dir: &Path) {
    for file in [
        "src/archiver.rs",
        "tests/archiver.rs",
        "local/archiver.txt",
        "tests/local.rs",
    ] {
        std::fs::remove_file(dir.join(file)).expect(file);
    }
    for (binary, _) in ARCHIVER_BINARIES {
        std::fs::remove_file(dir.join(format!("src/bin/parcels-archiver-{binary}.rs")))
            .expect("a binary of the process");
    }
    let edit = |file: &str, line: &str| {
        let path = dir.join(file);
        let text = std::fs::read_to_string(&path).expect(file);
        let kept: Vec<&str> = text.lines().filter(|l| !l.contains(line)).collect();
        assert_eq!(kept.len() + 1, text.lines().count(), "{file}: {line}");
        std::fs::write(&path, kept.join("\n") + "\n").expect(file);
    };
    edit("src/lib.rs", "pub mod archiver;");
    edit("Cargo.toml", "{ name = \"archiver\"");
    let synced = run(Command::new(TOOL).args(["sync", "--path"]).arg(dir));
    assert!(synced.status.success(), "sync: {}", seen(&synced));
    assert_eq!(
        text(&synced.stdout),
        "template.yaml: rewritten\nsrc/system.rs: rewritten\n"
    );
    let system = std::fs::read_to_string(dir.join("src/system.rs")).expect("the system");
    assert!(!system.contains("archiver"), "{system}");
}

#[test]
fn the_generated_template_is_ours_on_the_crates_binaries() {
    let dir = scratch("template").join("parcels");
    let made = new_crate("parcels", &dir);
    assert!(made.status.success(), "{}", seen(&made));
    // Without the process it shows (ours has the shop's, `payments`).
    remove_the_archiver(&dir);
    let ours = std::fs::read_to_string(root().join("template.yaml")).expect("ours");
    let theirs = std::fs::read_to_string(dir.join("template.yaml")).expect("theirs");
    // Ours, line for line, but for these substitutions ...
    let substitutions = [
        ("Binary: projector", "Binary: parcels-projector"),
        ("Binary: dispatcher", "Binary: parcels-dispatcher"),
        (
            "  sequence-guard: projects",
            "  parcels, on sequence-guard: projects",
        ),
        (
            "the runbook in docs/operate.md",
            "the runbook in sequence-guard's docs/operate.md",
        ),
        ("${StatusProjectorWidgets}", ""),
        ("${PaymentsProjectorWidgets}", ""),
    ];
    // Under sync's header, which holds the hash of the rest.
    assert!(theirs.starts_with("# Made by `sequence-guard sync`"));
    let theirs: String = theirs
        .lines()
        .skip(4)
        .map(|line| format!("{line}\n"))
        .collect();
    let substituted = |line: &str| {
        substitutions
            .iter()
            .fold(line.to_owned(), |line, (a, b)| line.replace(a, b))
    };
    // ... and without the worked example's further consumers: every line of
    // ours left out is in a block that names one.
    let mut ours_lines = ours.lines();
    let mut left_out: Vec<Vec<&str>> = vec![Vec::new()];
    let mut changed = 0;
    for line in theirs.lines() {
        loop {
            let Some(our_line) = ours_lines.next() else {
                panic!("not in ours, in this order: {line}");
            };
            if our_line == line || substituted(our_line) == line {
                changed += usize::from(our_line != line);
                left_out.push(Vec::new());
                break;
            }
            left_out.last_mut().expect("a block").push(our_line);
        }
    }
    left_out.last_mut().expect("a block").extend(ours_lines);
    assert!(changed >= 5, "{changed} lines substituted");
    for block in left_out
        .iter()
        .filter(|b| b.iter().any(|l| !l.trim().is_empty()))
    {
        assert!(
            block
                .iter()
                .any(|line| line.contains("Status") || line.contains("Payment")),
            "left out, not of a further consumer:\n{}",
            block.join("\n")
        );
    }
    assert!(!theirs.contains("Status"), "the second consumer is gone");
    assert!(!theirs.contains("Payment"), "the process is gone");
    // samconfig.toml (as new wrote it: it is the team's) is ours on the
    // stack's name, its parameters those of its template: ours, but the
    // worked example's consumers', and its process's.
    let ours = std::fs::read_to_string(root().join("samconfig.toml")).expect("ours");
    let theirs = std::fs::read_to_string(dir.join("samconfig.toml")).expect("theirs");
    let is_parameter = |line: &&str| line.starts_with("  \"");
    let settings = |text: &str| -> Vec<String> {
        let lines = text.lines().filter(|line| !is_parameter(line));
        lines.map(str::to_owned).collect()
    };
    let named = ours.replace("\"sequence-guard\"", "\"parcels\"");
    assert_eq!(settings(&theirs), settings(&named));
    assert_ne!(theirs, ours);
    let parameters = |text: &str, not: &[&str]| -> Vec<String> {
        let lines = text.lines().filter(is_parameter);
        let kept = lines.filter(|line| !not.iter().any(|word| line.contains(word)));
        kept.map(str::to_owned).collect()
    };
    assert_eq!(
        parameters(&theirs, &["Archiver"]),
        parameters(&ours, &["Status", "Payment"])
    );
    assert!(
        theirs.contains("  \"DeployArchiverConsumer=false\",\n"),
        "{theirs}"
    );
    // The pinned tools and the check of the bootstraps are ours, byte for byte.
    for script in [
        "scripts/python-tools.sh",
        "scripts/requirements-tools.txt",
        "scripts/check-bootstraps",
    ] {
        assert_eq!(
            std::fs::read(dir.join(script)).expect("theirs"),
            std::fs::read(root().join(script)).expect("ours"),
            "{script}"
        );
    }
}

#[test]
fn new_depends_on_the_checkout_it_was_built_from_unless_told_another() {
    let dir = scratch("dependency");
    let manifest = |crate_dir: &Path| {
        std::fs::read_to_string(crate_dir.join("Cargo.toml")).expect("Cargo.toml")
    };
    let checkout = root().canonicalize().expect("the checkout");
    // WITHOUT a flag: this checkout, the one the command was built from,
    // for the crate and for its tests
    let made = new_crate("parcels", &dir.join("parcels"));
    assert!(made.status.success(), "{}", seen(&made));
    let text_of = manifest(&dir.join("parcels"));
    let path = path_dependency(&text_of);
    assert_eq!(
        dir.join("parcels").join(path).canonicalize().ok(),
        Some(checkout.clone()),
        "{text_of}"
    );
    assert!(
        text_of.contains(&format!(
            "sequence-guard = {{ path = \"{path}\", features = [\"test-support\"] }}"
        )),
        "{text_of}"
    );
    assert!(
        text(&made.stdout).contains(&format!("on the sequence-guard checkout at {path}\n")),
        "{}",
        seen(&made)
    );
    assert_eq!(text(&made.stderr), "", "no warning");
    // WITH --sequence-guard-path: that checkout, relative to the crate
    let told = run(Command::new(TOOL)
        .args(["new", "parcels", "--path"])
        .arg(dir.join("told"))
        .arg("--sequence-guard-path")
        .arg(root().join("scaffold/..")));
    assert!(told.status.success(), "{}", seen(&told));
    assert_eq!(path_dependency(&manifest(&dir.join("told"))), path);
    // WITH --sequence-guard-git: that repository
    let git = run(Command::new(TOOL)
        .args(["new", "parcels", "--path"])
        .arg(dir.join("git"))
        .args(["--sequence-guard-git", "https://example.com/sequence-guard"]));
    assert!(git.status.success(), "{}", seen(&git));
    assert!(
        manifest(&dir.join("git"))
            .contains("sequence-guard = { git = \"https://example.com/sequence-guard\" }\n"),
        "{}",
        manifest(&dir.join("git"))
    );
}

#[test]
fn new_refuses_a_bad_name_and_a_directory_in_use() {
    let dir = scratch("refusals");
    for bad in [
        "Parcels",
        "parcel_service",
        "2parcels",
        "test",
        "sequence-guard",
    ] {
        let refused = run(Command::new(TOOL)
            .args(["new", bad, "--path"])
            .arg(dir.join("x")));
        assert_eq!(refused.status.code(), Some(2), "{bad}: {}", seen(&refused));
        assert!(text(&refused.stderr).contains(&format!("`{bad}` cannot name a domain")));
    }
    let used = dir.join("used");
    std::fs::create_dir_all(&used).expect("mkdir");
    std::fs::write(used.join("notes.txt"), "mine").expect("write");
    let refused = new_crate("parcels", &used);
    assert_eq!(refused.status.code(), Some(2), "{}", seen(&refused));
    assert!(text(&refused.stderr).contains("exists and is not empty"));
    assert_eq!(
        std::fs::read_dir(&used).expect("ls").count(),
        1,
        "nothing written"
    );
    let not_ours = run(Command::new(TOOL)
        .args(["new", "parcels", "--path"])
        .arg(dir.join("elsewhere"))
        .arg("--sequence-guard-path")
        .arg(&used));
    assert_eq!(not_ours.status.code(), Some(2), "{}", seen(&not_ours));
    assert!(text(&not_ours.stderr).contains("is not a checkout of sequence-guard"));
}

#[test]
fn new_makes_a_git_repository_unless_in_one_or_without_git() {
    let dir = scratch("git");
    // WITHOUT git on the PATH: said, and the crate written all the same
    let alone = run(Command::new(TOOL)
        .args(["new", "parcels", "--path"])
        .arg(dir.join("without"))
        .env("PATH", dir.join("nothing-here")));
    assert!(alone.status.success(), "{}", seen(&alone));
    assert!(
        text(&alone.stderr).contains("git is not on the PATH"),
        "{}",
        seen(&alone)
    );
    assert!(dir.join("without/Cargo.lock").is_file());
    assert!(!dir.join("without/.git").exists());
    if Command::new("git").arg("--version").output().is_err() {
        return;
    }
    // WITH git, where no repository tracks it (our target/ is ignored): its own
    let made = new_crate("parcels", &dir.join("parcels"));
    assert!(made.status.success(), "{}", seen(&made));
    assert!(
        text(&made.stdout).contains(", a git repository\n"),
        "{}",
        seen(&made)
    );
    let top = run(Command::new("git")
        .args(["rev-parse", "--show-toplevel"])
        .current_dir(dir.join("parcels")));
    assert_eq!(
        Path::new(text(&top.stdout).trim()).canonicalize().ok(),
        dir.join("parcels").canonicalize().ok(),
        "{}",
        seen(&top)
    );
    // Inside a team's repository: not a second one
    let team = dir.join("team");
    std::fs::create_dir_all(&team).expect("mkdir");
    let init = run(Command::new("git")
        .args(["init", "--quiet"])
        .current_dir(&team));
    assert!(init.status.success(), "{}", seen(&init));
    let inside = new_crate("parcels", &team.join("parcels"));
    assert!(inside.status.success(), "{}", seen(&inside));
    assert!(!team.join("parcels/.git").exists());
    assert!(
        text(&inside.stderr).contains("is in the git repository"),
        "{}",
        seen(&inside)
    );
    assert!(!text(&inside.stdout).contains("git repository"));
}
