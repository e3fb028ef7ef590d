//! The files of a domain's crate: what `new` writes, and what `sync` keeps.
//!
//! Deployment files are derived from sequence-guard's own, included at
//! compile time: `template.yaml` and `samconfig.toml` with the names of the
//! crate's binaries and stack substituted (each substitution must match
//! exactly as often as expected, or generation fails: a change to our
//! template that a substitution no longer fits is found by the tests, not
//! by a team), `scripts/python-tools.sh` and its pinned requirements as they
//! are. The domain to start from, its samples, its `Cargo.toml` and its
//! build script are the files of `templates/crate/`.

use std::path::{Component, Path, PathBuf};

/// Every binary of a domain, a one-line `main` each (`sequence_guard::cli`).
pub const TOOLS: [&str; 8] = [
    "projector",
    "dispatcher",
    "replay",
    "inspect",
    "append",
    "rebuild",
    "verify",
    "resend",
];

const TEMPLATE: &str = include_str!("../../../template.yaml");
const SAMCONFIG: &str = include_str!("../../../samconfig.toml");
const PYTHON_TOOLS: &str = include_str!("../../../scripts/python-tools.sh");
const REQUIREMENTS: &str = include_str!("../../../scripts/requirements-tools.txt");

const CARGO_TOML: &str = include_str!("../../../templates/crate/Cargo.toml.in");
const README: &str = include_str!("../../../templates/crate/README.md");
const GITIGNORE: &str = include_str!("../../../templates/crate/gitignore");
const LIB: &str = include_str!("../../../templates/crate/src/lib.rs");
const BIN: &str = include_str!("../../../templates/crate/bin.rs.in");
const REPLAY_TEST: &str = include_str!("../../../templates/crate/tests/replay.rs");
const BUILD_LAMBDA: &str = include_str!("../../../templates/crate/scripts/build-lambda");
const SAMPLES: [(&str, &str); 3] = [
    (
        "events/01-item-created-and-renamed.json",
        include_str!("../../../templates/crate/events/01-item-created-and-renamed.json"),
    ),
    (
        "events/02-gap-parked.json",
        include_str!("../../../templates/crate/events/02-gap-parked.json"),
    ),
    (
        "events/03-gap-closed.json",
        include_str!("../../../templates/crate/events/03-gap-closed.json"),
    ),
];

/// Rust's keywords and the crates every build has: not a crate's name.
const RESERVED: [&str; 57] = [
    "abstract",
    "alloc",
    "as",
    "async",
    "await",
    "become",
    "box",
    "break",
    "const",
    "continue",
    "core",
    "crate",
    "do",
    "dyn",
    "else",
    "enum",
    "extern",
    "false",
    "final",
    "fn",
    "for",
    "gen",
    "if",
    "impl",
    "in",
    "let",
    "loop",
    "macro",
    "match",
    "mod",
    "move",
    "mut",
    "override",
    "priv",
    "proc_macro",
    "pub",
    "ref",
    "return",
    "self",
    "sequence_guard",
    "static",
    "std",
    "struct",
    "super",
    "test",
    "trait",
    "true",
    "try",
    "type",
    "typeof",
    "unsafe",
    "unsized",
    "use",
    "virtual",
    "where",
    "while",
    "yield",
];

/// The longest name: the stack's names must fit AWS's limits (a function
/// `<stack>-dispatcher` at most 64 characters, a queue
/// `<stack>-events-dlq.fifo` at most 80).
pub const MAX_NAME: usize = 40;

/// What went wrong, naming the input.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "`{0}` cannot name a domain: use 1 to {MAX_NAME} lower-case letters, digits and `-`, starting with a letter (it names the crate, its binaries and its stack)"
    )]
    BadName(String),
    #[error("`{0}` cannot name a domain: it is a Rust keyword or a crate every build has")]
    ReservedName(String),
    #[error(
        "sequence-guard's {file} no longer fits the generator: `{pattern}` found {found} times, expected {expected}"
    )]
    Drifted {
        file: &'static str,
        pattern: &'static str,
        found: usize,
        expected: usize,
    },
    #[error(
        "sequence-guard's template.yaml builds `{0}`, which is not one of a domain's binaries ({TOOLS:?}): the generator needs a substitution for it"
    )]
    UnknownBinary(String),
    #[error(
        "{0} is not a checkout of sequence-guard (no Cargo.toml naming the package `sequence-guard`)"
    )]
    NotSequenceGuard(PathBuf),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// The names of a domain, all derived from its crate's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Names {
    /// The package (`parcels`): the stack, and the prefix of every binary.
    pub package: String,
    /// The library, as Rust code names it (`parcels`, `parcel_service`).
    pub library: String,
}

impl Names {
    /// The names of a new domain: `name` must do for a crate and a stack.
    pub fn new(name: &str) -> Result<Self, Error> {
        let bytes = name.as_bytes();
        let well_formed = (1..=MAX_NAME).contains(&bytes.len())
            && bytes[0].is_ascii_lowercase()
            && !name.ends_with('-')
            && bytes
                .iter()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-');
        if !well_formed {
            return Err(Error::BadName(name.to_owned()));
        }
        let library = name.replace('-', "_");
        if RESERVED.contains(&library.as_str()) {
            return Err(Error::ReservedName(name.to_owned()));
        }
        Ok(Names {
            package: name.to_owned(),
            library,
        })
    }

    /// The names of an existing crate (`sync`): its package and library,
    /// as cargo reports them; the package must do for a stack.
    pub fn of_crate(package: &str, library: &str) -> Result<Self, Error> {
        let names = Names::new(package)?;
        Ok(Names {
            library: library.to_owned(),
            ..names
        })
    }

    /// The binary that runs `tool` (`parcels-projector`).
    pub fn binary(&self, tool: &str) -> String {
        format!("{}-{tool}", self.package)
    }
}

/// Where the crate takes sequence-guard from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Dependency {
    /// From crates.io, at this version requirement.
    Version(String),
    /// A checkout, as a path relative to the crate (or absolute).
    Path(PathBuf),
    /// A git repository.
    Git(String),
}

impl Dependency {
    /// A checkout at `checkout`, named from the crate at `root` (relative
    /// when both share a parent). Both must exist.
    pub fn checkout(checkout: &Path, root: &Path) -> Result<Self, Error> {
        let checkout = canonical(checkout)?;
        let manifest = checkout.join("Cargo.toml");
        let text = std::fs::read_to_string(&manifest)
            .map_err(|_| Error::NotSequenceGuard(checkout.clone()))?;
        if !text.contains("name = \"sequence-guard\"") {
            return Err(Error::NotSequenceGuard(checkout));
        }
        let root = canonical(root)?;
        Ok(Dependency::Path(
            relative(&root, &checkout).unwrap_or(checkout),
        ))
    }

    /// The `[dependencies]` line, with `features` (`test-support` for tests).
    fn line(&self, features: &[&str]) -> String {
        let source = match self {
            Dependency::Version(version) => format!("version = {}", toml_string(version)),
            Dependency::Path(path) => format!("path = {}", toml_string(&path.to_string_lossy())),
            Dependency::Git(url) => format!("git = {}", toml_string(url)),
        };
        if features.is_empty() {
            if let Dependency::Version(version) = self {
                return format!("sequence-guard = {}", toml_string(version));
            }
            return format!("sequence-guard = {{ {source} }}");
        }
        let features: Vec<String> = features.iter().map(|f| toml_string(f)).collect();
        format!(
            "sequence-guard = {{ {source}, features = [{}] }}",
            features.join(", ")
        )
    }
}

/// Whether `sync` rewrites a file, or only writes it when it is missing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kept {
    /// sequence-guard's: rewritten by `sync`, compared by `sync --check`.
    Ours,
    /// The team's once written (deploy settings that `sam deploy --guided`
    /// saves, a binary they may extend): written only when missing.
    Theirs,
}

/// One file of the crate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct File {
    /// Relative to the crate's root.
    pub path: PathBuf,
    pub contents: String,
    pub executable: bool,
    pub kept: Kept,
}

impl File {
    fn new(path: impl Into<PathBuf>, contents: String, kept: Kept) -> Self {
        File {
            path: path.into(),
            contents,
            executable: false,
            kept,
        }
    }

    fn executable(self) -> Self {
        File {
            executable: true,
            ..self
        }
    }
}

/// Every file of a new crate: the domain to start from, its samples and
/// manifest, and the deployment files of [`deployment`].
pub fn new_crate(names: &Names, dependency: &Dependency) -> Result<Vec<File>, Error> {
    let fill = |text: &str| fill(text, names);
    let mut files = vec![
        File::new(
            "Cargo.toml",
            fill(CARGO_TOML)
                .replace("{{dependency}}", &dependency.line(&[]))
                .replace("{{test_dependency}}", &dependency.line(&["test-support"])),
            Kept::Theirs,
        ),
        File::new("README.md", fill(README), Kept::Theirs),
        File::new(".gitignore", fill(GITIGNORE), Kept::Theirs),
        File::new("src/lib.rs", fill(LIB), Kept::Theirs),
        File::new("tests/replay.rs", fill(REPLAY_TEST), Kept::Theirs),
    ];
    for (path, sample) in SAMPLES {
        files.push(File::new(path, fill(sample), Kept::Theirs));
    }
    files.extend(deployment(names)?);
    Ok(files)
}

/// What deploys a domain, for any crate: the SAM template and its
/// `samconfig.toml`, the build script and the pinned tools, and a binary
/// per tool.
pub fn deployment(names: &Names) -> Result<Vec<File>, Error> {
    let mut files = vec![
        File::new("template.yaml", template(names)?, Kept::Ours),
        File::new("samconfig.toml", samconfig(names)?, Kept::Theirs),
        File::new(
            "scripts/build-lambda",
            fill(BUILD_LAMBDA, names),
            Kept::Ours,
        )
        .executable(),
        File::new(
            "scripts/python-tools.sh",
            PYTHON_TOOLS.to_owned(),
            Kept::Ours,
        )
        .executable(),
        File::new(
            "scripts/requirements-tools.txt",
            REQUIREMENTS.to_owned(),
            Kept::Ours,
        ),
    ];
    for tool in TOOLS {
        files.push(File::new(
            format!("src/bin/{}.rs", names.binary(tool)),
            fill(&BIN.replace("{{tool}}", tool), names),
            Kept::Theirs,
        ));
    }
    Ok(files)
}

/// One substitution in one of our files: `pattern` found exactly `times`
/// ([`ANY`]: at least once).
struct Substitution {
    pattern: &'static str,
    replacement: String,
    times: usize,
}

/// A substitution of text that may be found any number of times (once at least).
const ANY: usize = usize::MAX;

fn once(pattern: &'static str, replacement: String) -> Substitution {
    Substitution {
        pattern,
        replacement,
        times: 1,
    }
}

/// Our `template.yaml`, on the crate's binaries. Everything else (the
/// stack's resource names come from `${AWS::StackName}`) stays as it is;
/// each substitution stays within its line.
pub fn template(names: &Names) -> Result<String, Error> {
    let package = &names.package;
    let template = substitute(
        "template.yaml",
        &without_second_consumer(TEMPLATE)?,
        &[
            once(
                "        Binary: projector\n",
                format!("        Binary: {}\n", names.binary("projector")),
            ),
            once(
                "        Binary: dispatcher\n",
                format!("        Binary: {}\n", names.binary("dispatcher")),
            ),
            once(
                "  sequence-guard: projects ordered domain events",
                format!("  {package}, on sequence-guard: projects ordered domain events"),
            ),
            // What names the shop's stock, said of any domain's counters.
            once(
                "(MessageGroupId = aggregateId or sku)",
                "(MessageGroupId = aggregateId, or a counter's id)".to_owned(),
            ),
            once(
                "or a stock level leaving the 64-bit range",
                "or a counter leaving the 64-bit range".to_owned(),
            ),
            once(
                "                # stock; parking and draining)",
                "                # counter; parking and draining)".to_owned(),
            ),
            // The runbooks are sequence-guard's, not the crate's README.
            Substitution {
                pattern: "See the runbook in the README.",
                replacement: "See the runbook in sequence-guard's README.".to_owned(),
                times: ANY,
            },
        ],
    )?;
    builds_only(names, &template)?;
    Ok(template)
}

/// The condition of the worked example's second consumer (the shop's
/// `status-projector`), which a domain's crate does not have.
const SECOND_CONSUMER: &str = "WithStatusConsumer";

/// The parameter that deploys it.
const SWITCH: &str = "DeployStatusConsumer";

/// Our template without the shop's second consumer: every entry of
/// `Parameters`, `Conditions`, `Rules`, `Resources` and `Outputs` that
/// names [`SECOND_CONSUMER`] (its parameter, its condition, the rule that
/// guards it, the resources and outputs under it) with the comments above
/// it, the dashboard's widgets of it, and a section left empty. Whatever
/// of it remains is an error, as is finding none of it.
fn without_second_consumer(template: &str) -> Result<String, Error> {
    let drifted = |pattern: &'static str, found, expected| Error::Drifted {
        file: "template.yaml",
        pattern,
        found,
        expected,
    };
    // The dashboard's widgets of it first: a `!Sub` variable, and its use.
    let uses = template.matches("${StatusWidgets}").count();
    if uses != 1 {
        return Err(drifted("${StatusWidgets}", uses, 1));
    }
    let template = template.replace("${StatusWidgets}", "");
    let lines: Vec<&str> = template.lines().collect();
    let mut removed = vec![false; lines.len()];
    let widgets = lines
        .iter()
        .position(|line| line.trim_start().starts_with("StatusWidgets: !If"))
        .ok_or_else(|| drifted("StatusWidgets: !If", 0, 1))?;
    let (first, last) = block(&lines, widgets);
    removed[first..last].iter_mut().for_each(|r| *r = true);
    // Then every entry of a section that names it, and a section left empty.
    let sections: Vec<usize> = (0..lines.len())
        .filter(|&i| !lines[i].is_empty() && indent(lines[i]) == 0 && !lines[i].starts_with('#'))
        .collect();
    for (n, &header) in sections.iter().enumerate() {
        let end = sections.get(n + 1).copied().unwrap_or(lines.len());
        let name = lines[header].trim_end_matches(':');
        if !["Parameters", "Conditions", "Rules", "Resources", "Outputs"].contains(&name) {
            continue;
        }
        let mut kept = 0;
        let mut at = header + 1;
        while at < end {
            let line = lines[at];
            // A comment belongs to the entry below it.
            if line.trim().is_empty() || indent(line) != 2 || line.trim_start().starts_with('#') {
                at += 1;
                continue;
            }
            let (first, last) = block(&lines, at);
            let of_it =
                lines[first..last]
                    .iter()
                    .zip(&removed[first..last])
                    .any(|(line, removed)| {
                        !removed && (line.contains(SECOND_CONSUMER) || line.contains(SWITCH))
                    });
            if of_it {
                removed[first..last].iter_mut().for_each(|r| *r = true);
            } else {
                kept += 1;
            }
            at = last.max(at + 1);
        }
        if kept == 0 {
            removed[header..end].iter_mut().for_each(|r| *r = true);
        }
    }
    let mut kept: Vec<&str> = Vec::with_capacity(lines.len());
    for (line, removed) in lines.iter().zip(&removed) {
        // Of the blank lines around what was removed, one is kept.
        let repeated = line.trim().is_empty() && kept.last().is_some_and(|l| l.trim().is_empty());
        if !removed && !repeated {
            kept.push(line);
        }
    }
    let mut text = kept.join("\n");
    text.push('\n');
    for rest in [
        SECOND_CONSUMER,
        "DeployStatusConsumer",
        "StatusWidgets",
        "status-projector",
    ] {
        let found = text.matches(rest).count();
        if found > 0 {
            return Err(drifted(rest_name(rest), found, 0));
        }
    }
    Ok(text)
}

/// The pattern, as a `'static` name for [`Error::Drifted`].
fn rest_name(rest: &str) -> &'static str {
    match rest {
        SECOND_CONSUMER => SECOND_CONSUMER,
        SWITCH => SWITCH,
        "StatusWidgets" => "StatusWidgets",
        _ => "status-projector",
    }
}

fn indent(line: &str) -> usize {
    line.len() - line.trim_start().len()
}

/// The YAML entry whose key is at line `at`: from the comments just above
/// it (at its indentation) to its last line, the blank lines after it left out.
fn block(lines: &[&str], at: usize) -> (usize, usize) {
    let depth = indent(lines[at]);
    let mut first = at;
    while first > 0
        && indent(lines[first - 1]) == depth
        && lines[first - 1].trim_start().starts_with('#')
    {
        first -= 1;
    }
    let mut last = at + 1;
    while last < lines.len() && (lines[last].trim().is_empty() || indent(lines[last]) > depth) {
        last += 1;
    }
    while last > at + 1 && lines[last - 1].trim().is_empty() {
        last -= 1;
    }
    (first, last)
}

/// Every `Binary:` the template builds must be one of the crate's.
fn builds_only(names: &Names, template: &str) -> Result<(), Error> {
    let built = template
        .lines()
        .filter_map(|line| line.trim_start().strip_prefix("Binary:"))
        .map(str::trim);
    for binary in built {
        if !TOOLS.iter().any(|tool| names.binary(tool) == binary) {
            return Err(Error::UnknownBinary(binary.to_owned()));
        }
    }
    Ok(())
}

/// Our `samconfig.toml`, on the crate's stack.
pub fn samconfig(names: &Names) -> Result<String, Error> {
    substitute(
        "samconfig.toml",
        SAMCONFIG,
        &[once(
            "stack_name = \"sequence-guard\"\n",
            format!("stack_name = \"{}\"\n", names.package),
        )],
    )
}

fn substitute(
    file: &'static str,
    text: &str,
    substitutions: &[Substitution],
) -> Result<String, Error> {
    let mut text = text.to_owned();
    for substitution in substitutions {
        let found = text.matches(substitution.pattern).count();
        let fits = match substitution.times {
            ANY => found > 0,
            times => found == times,
        };
        if !fits {
            return Err(Error::Drifted {
                file,
                pattern: substitution.pattern,
                found,
                expected: substitution.times,
            });
        }
        text = text.replace(substitution.pattern, &substitution.replacement);
    }
    Ok(text)
}

/// A template of `templates/crate/` on the crate's names.
fn fill(text: &str, names: &Names) -> String {
    text.replace("{{name}}", &names.package)
        .replace("{{crate}}", &names.library)
}

/// A TOML basic string.
fn toml_string(text: &str) -> String {
    let mut quoted = String::with_capacity(text.len() + 2);
    quoted.push('"');
    for c in text.chars() {
        match c {
            '"' => quoted.push_str("\\\""),
            '\\' => quoted.push_str("\\\\"),
            c if c.is_control() => quoted.push_str(&format!("\\u{:04X}", u32::from(c))),
            c => quoted.push(c),
        }
    }
    quoted.push('"');
    quoted
}

fn canonical(path: &Path) -> Result<PathBuf, Error> {
    path.canonicalize().map_err(|source| Error::Io {
        path: path.to_owned(),
        source,
    })
}

/// `to` as seen from `from` (both absolute and canonical), `None` when they
/// share nothing but the root.
fn relative(from: &Path, to: &Path) -> Option<PathBuf> {
    let from: Vec<Component> = from.components().collect();
    let to: Vec<Component> = to.components().collect();
    let shared = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
    if shared <= 1 {
        return None;
    }
    let mut path = PathBuf::new();
    for _ in shared..from.len() {
        path.push("..");
    }
    for component in &to[shared..] {
        path.push(component);
    }
    if path.as_os_str().is_empty() {
        path.push(".");
    }
    Some(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_must_do_for_a_crate_and_a_stack() {
        for good in ["parcels", "parcel-service", "p2", "a"] {
            assert!(Names::new(good).is_ok(), "{good}");
        }
        for bad in [
            "",
            "Parcels",
            "2parcels",
            "parcel_service",
            "parcels-",
            "-p",
            "a b",
            "ä",
        ] {
            assert!(matches!(Names::new(bad), Err(Error::BadName(_))), "{bad}");
        }
        assert!(Names::new(&"a".repeat(MAX_NAME)).is_ok());
        assert!(Names::new(&"a".repeat(MAX_NAME + 1)).is_err());
        for reserved in ["test", "self", "sequence-guard", "std"] {
            assert!(
                matches!(Names::new(reserved), Err(Error::ReservedName(_))),
                "{reserved}"
            );
        }
    }

    #[test]
    fn the_names_derive_from_the_crate() {
        let names = Names::new("parcel-service").expect("a good name");
        assert_eq!(names.library, "parcel_service");
        assert_eq!(names.binary("projector"), "parcel-service-projector");
    }

    #[test]
    fn our_files_fit_every_substitution() {
        let names = Names::new("parcels").expect("a good name");
        let template = template(&names).expect("the template");
        assert!(template.contains("        Binary: parcels-projector\n"));
        assert!(template.contains("        Binary: parcels-dispatcher\n"));
        assert!(!template.contains("Status"), "without the second consumer");
        let samconfig = samconfig(&names).expect("samconfig.toml");
        assert!(samconfig.contains("stack_name = \"parcels\"\n"));
    }

    #[test]
    fn a_substitution_that_no_longer_fits_is_an_error() {
        let err = substitute(
            "template.yaml",
            "Binary: x",
            &[once("Binary: projector", "y".into())],
        )
        .expect_err("drifted");
        assert_eq!(
            err.to_string(),
            "sequence-guard's template.yaml no longer fits the generator: `Binary: projector` found 0 times, expected 1"
        );
    }

    #[test]
    fn a_binary_the_crate_lacks_is_an_error() {
        let names = Names::new("parcels").expect("a good name");
        let template = "        Binary: parcels-projector\n        Binary: status-projector\n";
        let err = builds_only(&names, template).expect_err("unknown");
        assert!(
            matches!(err, Error::UnknownBinary(ref b) if b == "status-projector"),
            "{err}"
        );
        assert!(builds_only(&names, "        Binary: parcels-dispatcher\n").is_ok());
    }

    #[test]
    fn every_placeholder_is_filled() {
        let names = Names::new("parcels").expect("a good name");
        let dependency = Dependency::Version("0.2.0".into());
        for file in new_crate(&names, &dependency).expect("the files") {
            assert!(
                !file.contents.contains("{{"),
                "{}: a placeholder left",
                file.path.display()
            );
        }
    }

    #[test]
    fn the_dependency_lines() {
        let version = Dependency::Version("0.2.0".into());
        assert_eq!(version.line(&[]), r#"sequence-guard = "0.2.0""#);
        assert_eq!(
            version.line(&["test-support"]),
            r#"sequence-guard = { version = "0.2.0", features = ["test-support"] }"#
        );
        let path = Dependency::Path("../sequence-guard".into());
        assert_eq!(
            path.line(&[]),
            r#"sequence-guard = { path = "../sequence-guard" }"#
        );
        let git = Dependency::Git("https://example.com/a\"b".into());
        assert_eq!(
            git.line(&["test-support"]),
            r#"sequence-guard = { git = "https://example.com/a\"b", features = ["test-support"] }"#
        );
    }

    #[test]
    fn relative_paths() {
        let rel = |a: &str, b: &str| relative(Path::new(a), Path::new(b));
        assert_eq!(rel("/w/parcels", "/w/main"), Some(PathBuf::from("../main")));
        assert_eq!(
            rel("/w/main/target/tmp/x", "/w/main"),
            Some(PathBuf::from("../../.."))
        );
        assert_eq!(
            rel("/w/main", "/w/main/vendor/sg"),
            Some(PathBuf::from("vendor/sg"))
        );
        assert_eq!(rel("/w", "/w"), Some(PathBuf::from(".")));
        assert_eq!(rel("/tmp/x", "/w/main"), None);
    }
}
