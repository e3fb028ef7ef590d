//! `sequence-guard new` and `sequence-guard sync`: a team's crate, made from
//! nothing, builds, passes its tests, replays its samples and has a template
//! that both linters take; the bank's deployment files are this version's.
//!
//! The generated crate builds into this workspace's target directory with
//! this workspace's `Cargo.lock`: the same dependency versions and features,
//! so it costs its own crate and the links, not a second build of the AWS SDK.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");
const TOOL: &str = env!("CARGO_BIN_EXE_sequence-guard");

const BINARIES: [&str; 8] = [
    "projector",
    "dispatcher",
    "replay",
    "inspect",
    "append",
    "rebuild",
    "verify",
    "resend",
];

/// An empty directory of this test's own under cargo's temporary directory.
fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("scaffold")
        .join(name);
    if dir.exists() {
        std::fs::remove_dir_all(&dir).expect("clear the scratch directory");
    }
    std::fs::create_dir_all(&dir).expect("make the scratch directory");
    dir
}

fn run(command: &mut Command) -> Output {
    command.output().expect("start the command")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn seen(output: &Output) -> String {
    format!(
        "exit {:?}\n--- stdout\n{}\n--- stderr\n{}",
        output.status.code(),
        text(&output.stdout),
        text(&output.stderr)
    )
}

/// `sequence-guard new NAME --path DIR --sequence-guard-path <this checkout>`.
fn new_crate(name: &str, dir: &Path) -> Output {
    run(Command::new(TOOL)
        .args(["new", name, "--path"])
        .arg(dir)
        .arg("--sequence-guard-path")
        .arg(ROOT))
}

/// The pinned Python tools (cfn-lint, sam), installed once into the cache.
fn tools() -> &'static Path {
    static TOOLS: OnceLock<PathBuf> = OnceLock::new();
    TOOLS.get_or_init(|| {
        let output = run(&mut Command::new(
            Path::new(ROOT).join("scripts/python-tools.sh"),
        ));
        assert!(
            output.status.success(),
            "python-tools.sh: {}",
            seen(&output)
        );
        PathBuf::from(text(&output.stdout).trim())
    })
}

/// cfn-lint and `sam validate --lint` on the template in `dir`.
fn lint(dir: &Path) {
    let cfn_lint = run(Command::new(tools().join("cfn-lint"))
        .arg("template.yaml")
        .current_dir(dir));
    assert!(cfn_lint.status.success(), "cfn-lint: {}", seen(&cfn_lint));
    let sam = run(Command::new(tools().join("sam"))
        .args(["validate", "--lint", "--template", "template.yaml"])
        .current_dir(dir)
        .env("SAM_CLI_TELEMETRY", "0")
        .env("AWS_REGION", "us-east-1")
        .env("AWS_DEFAULT_REGION", "us-east-1"));
    assert!(sam.status.success(), "sam validate --lint: {}", seen(&sam));
}

fn cargo() -> Command {
    let mut command = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    command.env("CARGO_TARGET_DIR", Path::new(ROOT).join("target"));
    command
}

/// The resolved features of each registry package, by package id, as
/// `cargo metadata` of the workspace at `dir` unifies them.
fn features(dir: &Path) -> std::collections::BTreeMap<String, (Vec<String>, serde_json::Value)> {
    static HOST: OnceLock<String> = OnceLock::new();
    let host = HOST.get_or_init(|| {
        let rustc = run(Command::new("rustc").arg("-vV"));
        let version = text(&rustc.stdout);
        let host = version.lines().find_map(|line| line.strip_prefix("host: "));
        host.expect("rustc names its host").to_owned()
    });
    let output = run(cargo()
        .args(["metadata", "--format-version", "1", "--offline"])
        .args(["--filter-platform", host])
        .current_dir(dir));
    assert!(output.status.success(), "cargo metadata: {}", seen(&output));
    let metadata: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON");
    let packages = metadata["packages"].as_array().cloned().unwrap_or_default();
    let nodes = metadata["resolve"]["nodes"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    nodes
        .into_iter()
        .filter_map(|node| {
            let id = node["id"].as_str()?.to_owned();
            id.starts_with("registry+").then_some(())?;
            let package = packages.iter().find(|p| p["id"] == node["id"])?.clone();
            let features = node["features"].as_array()?.iter();
            let features = features
                .filter_map(|f| f.as_str().map(str::to_owned))
                .collect();
            Some((id, (features, package)))
        })
        .collect()
}

/// Cargo builds a dependency once per set of features: this workspace's
/// `cargo test` unifies features its members' dev-dependencies enable
/// (tokio's `process`, serde_dynamo's streams, ...), which the crate alone
/// would not, and every unit above tokio (the AWS SDK) would be built a
/// second time. The test's copy of the crate asks for the same features,
/// as extra dev-dependencies: it then reuses this workspace's units.
/// Until nothing is left to add: a feature added may bring in a package
/// (serde_dynamo's streams bring aws-sdk-dynamodbstreams).
fn mirror_features(dir: &Path) {
    let ours = features(Path::new(ROOT));
    for _ in 0..4 {
        if !mirror_features_once(dir, &ours) {
            return;
        }
    }
    panic!(
        "the features never settled: {}",
        dir.join("Cargo.toml").display()
    );
}

/// Whether a dependency was added.
fn mirror_features_once(
    dir: &Path,
    ours: &std::collections::BTreeMap<String, (Vec<String>, serde_json::Value)>,
) -> bool {
    let theirs = features(dir);
    let mut added = false;
    let mut extra = String::from(
        "\n# Added by tests/scaffold.rs: the features the sequence-guard workspace\n\
         # unifies, so that this crate reuses its build of each dependency.\n",
    );
    for (id, (their_features, package)) in &theirs {
        let Some((our_features, _)) = ours.get(id) else {
            continue;
        };
        if our_features == their_features {
            continue;
        }
        let declared = package["features"].as_object().cloned().unwrap_or_default();
        // Not an optional dependency's own feature: metadata lists those of
        // every platform (tokio's `windows-sys`); the features that need
        // them enable them where they apply.
        let optional: Vec<&str> = package["dependencies"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|dep| dep["optional"] == true)
            .filter_map(|dep| dep["rename"].as_str().or(dep["name"].as_str()))
            .collect();
        let named: Vec<String> = our_features
            .iter()
            .filter(|f| f.as_str() == "default" || declared.contains_key(f.as_str()))
            .filter(|f| !optional.contains(&f.as_str()))
            .map(|f| format!("{f:?}"))
            .collect();
        let name = package["name"].as_str().expect("a name");
        let version = package["version"].as_str().expect("a version");
        added = true;
        extra.push_str(&format!(
            "[dev-dependencies.{name}]\nversion = \"={version}\"\ndefault-features = false\nfeatures = [{}]\n",
            named.join(", ")
        ));
    }
    if added {
        let manifest = dir.join("Cargo.toml");
        let mut text = std::fs::read_to_string(&manifest).expect("Cargo.toml");
        text.push_str(&extra);
        std::fs::write(&manifest, text).expect("write");
    }
    added
}

#[test]
fn a_new_crate_builds_passes_its_tests_replays_its_samples_and_lints() {
    // GIVEN a crate made from nothing, on this checkout, with our lock file.
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
    // Its build starts TLS as ours does: aws-lc without jitter entropy.
    let config = std::fs::read_to_string(dir.join(".cargo/config.toml")).expect("config");
    assert!(
        config.contains("AWS_LC_SYS_NO_JITTER_ENTROPY = \"1\""),
        "{config}"
    );
    // A path dependency on this checkout, relative to the crate.
    let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).expect("Cargo.toml");
    let path = manifest
        .lines()
        .find_map(|line| line.strip_prefix("sequence-guard = { path = \""))
        .and_then(|rest| rest.split('"').next())
        .unwrap_or_else(|| panic!("no path dependency:\n{manifest}"));
    assert!(Path::new(path).is_relative(), "{path}");
    assert_eq!(
        dir.join(path).canonicalize().expect("the dependency"),
        Path::new(ROOT).canonicalize().expect("the checkout")
    );
    std::fs::copy(Path::new(ROOT).join("Cargo.lock"), dir.join("Cargo.lock")).expect("the lock");
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
        "test replay_tells_the_samples_story ... ok",
    ] {
        assert!(stdout.contains(passed), "{passed} missing:\n{stdout}");
    }

    // THEN its replay tells the samples' story, as a team runs it
    let replay = run(
        Command::new(Path::new(ROOT).join("target/debug/parcels-replay"))
            .args([
                "events/01-item-created-and-renamed.json",
                "events/02-gap-parked.json",
                "events/03-gap-closed.json",
            ])
            .current_dir(&dir)
            .env_remove("GAP_POLICY")
            .env_remove("PARK_AFTER_RECEIVES"),
    );
    assert!(replay.status.success(), "replay: {}", seen(&replay));
    let story = text(&replay.stdout);
    for line in [
        "item-1  seq -  ItemViewed   duplicate",
        "drained item-1 seq 4 ItemRenamed",
        "item    item-1       sequence 4   name \"Reading lamp\"",
        "views   item-1       views 1",
    ] {
        assert!(story.contains(line), "{line} missing:\n{story}");
    }

    // AND its template passes both linters
    lint(&dir);
}

#[test]
fn the_generated_template_is_ours_on_the_crates_binaries() {
    let dir = scratch("template").join("parcels");
    let made = new_crate("parcels", &dir);
    assert!(made.status.success(), "{}", seen(&made));
    let ours = std::fs::read_to_string(Path::new(ROOT).join("template.yaml")).expect("ours");
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
    // ... and without the worked example's second consumer: every line of
    // ours left out is in a block that names it.
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
            block.iter().any(|line| line.contains("Status")),
            "left out, not of the second consumer:\n{}",
            block.join("\n")
        );
    }
    assert!(!theirs.contains("Status"), "the second consumer is gone");
    // The stack's name is samconfig.toml's, everything else as ours.
    let ours = std::fs::read_to_string(Path::new(ROOT).join("samconfig.toml")).expect("ours");
    let theirs = std::fs::read_to_string(dir.join("samconfig.toml")).expect("theirs");
    assert_eq!(
        theirs,
        ours.replace(
            "stack_name = \"sequence-guard\"",
            "stack_name = \"parcels\""
        )
    );
    assert_ne!(theirs, ours);
    // The pinned tools are ours, byte for byte.
    for script in ["scripts/python-tools.sh", "scripts/requirements-tools.txt"] {
        assert_eq!(
            std::fs::read(dir.join(script)).expect("theirs"),
            std::fs::read(Path::new(ROOT).join(script)).expect("ours"),
            "{script}"
        );
    }
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
fn sync_restores_our_files_keeps_theirs_and_check_names_what_differs() {
    // GIVEN a crate whose template sync made, whose deploy settings were
    // edited, and which lost a binary; its template is an older one's
    let dir = scratch("sync").join("parcels");
    let made = new_crate("parcels", &dir);
    assert!(made.status.success(), "{}", seen(&made));
    let template = std::fs::read_to_string(dir.join("template.yaml")).expect("read");
    let settings = "# the team's\nversion = 0.1\n";
    std::fs::write(dir.join("samconfig.toml"), settings).expect("write");
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
    let mut cargo = std::fs::read_to_string(&manifest).expect("read");
    cargo.push_str(
        "\n[package.metadata.sequence-guard]\nconsumers = [{ name = \"audit\", description = \"Each parcel's audit trail.\" }]\n",
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
fn the_banks_deployment_files_are_this_versions_and_lint() {
    // GIVEN the bank, whose template.yaml, samconfig.toml, scripts and four
    // binaries `sequence-guard sync` wrote (and a new crate named bank)
    let bank = Path::new(ROOT).join("examples/bank");
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
