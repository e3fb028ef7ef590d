//! `sequence-guard new` and `sequence-guard sync`: a team's crate, made from
//! nothing, builds, passes its tests, replays its samples and has a template
//! that both linters take; the bank's deployment files are this version's.
//!
//! The generated crate builds into this workspace's target directory with
//! this workspace's `Cargo.lock`: the same dependency versions and features,
//! so it costs its own crate and the links, not a second build of the AWS SDK.
//!
//! Here: the helpers the topics share.

mod bank;
mod lambda;
mod new;
mod sync;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

const TOOL: &str = env!("CARGO_BIN_EXE_sequence-guard");

const BINARIES: [&str; 9] = [
    "projector",
    "dispatcher",
    "replay",
    "inspect",
    "append",
    "rebuild",
    "verify",
    "resend",
    "erase",
];

/// The checkout of sequence-guard: the workspace this package is in.
fn root() -> &'static Path {
    let package = Path::new(env!("CARGO_MANIFEST_DIR"));
    package.parent().expect("scaffold/ is in the checkout")
}

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

/// `sequence-guard new NAME --path DIR`, as a team types it: on the
/// checkout the command was built from, this one.
fn new_crate(name: &str, dir: &Path) -> Output {
    run(Command::new(TOOL).args(["new", name, "--path"]).arg(dir))
}

/// The `path` of the crate's dependency on sequence-guard in `manifest`,
/// or a panic showing the manifest.
fn path_dependency(manifest: &str) -> &str {
    manifest
        .lines()
        .find_map(|line| line.strip_prefix("sequence-guard = { path = \""))
        .and_then(|rest| rest.split('"').next())
        .unwrap_or_else(|| panic!("no path dependency:\n{manifest}"))
}

/// The pinned Python tools (cfn-lint, sam), installed once into the cache.
fn tools() -> &'static Path {
    static TOOLS: OnceLock<PathBuf> = OnceLock::new();
    TOOLS.get_or_init(|| {
        let output = run(&mut Command::new(root().join("scripts/python-tools.sh")));
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

/// The packages a `Cargo.lock` holds: the name, version and source
/// (empty for a path) of each.
fn locked(lock: &str) -> std::collections::BTreeSet<(String, String, String)> {
    let field = |block: &str, key: &str| {
        let found = block.lines().find_map(|line| line.strip_prefix(key));
        found.unwrap_or_default().trim_matches('"').to_owned()
    };
    lock.split("[[package]]")
        .skip(1)
        .map(|block| {
            let name = field(block, "name = ");
            (name, field(block, "version = "), field(block, "source = "))
        })
        .collect()
}

fn cargo() -> Command {
    let mut command = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    command.env("CARGO_TARGET_DIR", root().join("target"));
    command
}

/// The platform rustc builds for here: `cargo metadata --offline` filtered
/// to it needs only the packages a build here downloaded (another
/// platform's, such as Android's, may never have been).
fn host() -> &'static str {
    static HOST: OnceLock<String> = OnceLock::new();
    HOST.get_or_init(|| {
        let rustc = run(Command::new("rustc").arg("-vV"));
        let version = text(&rustc.stdout);
        let host = version.lines().find_map(|line| line.strip_prefix("host: "));
        host.expect("rustc names its host").to_owned()
    })
}

/// The resolved features of each registry package, by package id, as
/// `cargo metadata` of the workspace at `dir` unifies them.
fn features(dir: &Path) -> std::collections::BTreeMap<String, (Vec<String>, serde_json::Value)> {
    let output = run(cargo()
        .args(["metadata", "--format-version", "1", "--offline"])
        .args(["--filter-platform", host()])
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
    let ours = features(root());
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
        "\n# Added by tests/scaffold/main.rs: the features the sequence-guard workspace\n\
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
