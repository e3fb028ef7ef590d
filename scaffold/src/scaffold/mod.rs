//! The files of a domain's crate: what `new` writes, and what `sync` keeps.
//!
//! Deployment files are derived from sequence-guard's own, included at
//! compile time: `template.yaml` rendered from `templates/stack/` for the
//! crate's binaries, stack and further consumers (one definition of a
//! consumer, rendered for each: [`stack`]), `samconfig.toml` from
//! `templates/samconfig.toml` with the stack's name and every parameter of
//! that template ([`samconfig`]) (each substitution must match exactly as
//! often as expected, or generation fails: a change to our files that a
//! substitution no longer fits is found by the tests, not by a team),
//! `scripts/python-tools.sh`, its pinned requirements and
//! `scripts/check-bootstraps` as they are. The crate's whole system
//! (`src/system.rs`: its event store and every consumer, from
//! `templates/crate/system.rs.in`) is rendered for its declared consumers.
//! The domain to start from, its samples, its local script, its
//! `Cargo.toml` and its build script are the files of `templates/crate/`.

use std::path::PathBuf;

mod compute;
mod declaration;
mod dependency;
mod names;
#[cfg(test)]
mod process_tests;
pub mod samconfig;
mod sections;
pub mod stack;
mod template;
#[cfg(test)]
mod tests;

pub use declaration::{ConsumerDeclaration, DeclaredVariable, MAX_CONSUMER_NAME};
pub use dependency::{Dependency, built_from};
pub use names::{MAX_NAME, Names};
use samconfig::samconfig;
pub use template::made_by_sync;
use template::template;

/// Every binary of a domain, a one-line `main` each (`sequence_guard::cli`).
pub const TOOLS: [&str; 9] = [
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

/// The binaries of each further consumer: `<crate>-<consumer>-<tool>`, on
/// `<crate>::<consumer>::domain()`; a process's `projector` is named
/// `<crate>-<consumer>-process` (its Lambda function keeps a consumer's
/// name, `<stack>-<consumer>-projector`).
pub const CONSUMER_TOOLS: [&str; 5] = ["projector", "replay", "rebuild", "verify", "inspect"];

const PYTHON_TOOLS: &str = include_str!("../../../scripts/python-tools.sh");
const CHECK_BOOTSTRAPS: &str = include_str!("../../../scripts/check-bootstraps");
const REQUIREMENTS: &str = include_str!("../../../scripts/requirements-tools.txt");

const CARGO_TOML: &str = include_str!("../../../templates/crate/Cargo.toml.in");
const README: &str = include_str!("../../../templates/crate/README.md");
const GITIGNORE: &str = include_str!("../../../templates/crate/gitignore");
const LIB: &str = include_str!("../../../templates/crate/src/lib.rs");
const ARCHIVER: &str = include_str!("../../../templates/crate/src/archiver.rs");
const BIN: &str = include_str!("../../../templates/crate/bin.rs.in");
const REPLAY_TEST: &str = include_str!("../../../templates/crate/tests/replay.rs");
const ARCHIVER_TEST: &str = include_str!("../../../templates/crate/tests/archiver.rs");
const LOCAL_TEST: &str = include_str!("../../../templates/crate/tests/local.rs");
const LOCAL_SCRIPT: &str = include_str!("../../../templates/crate/local/archiver.txt");
const SYSTEM: &str = include_str!("../../../templates/crate/system.rs.in");
const LOCAL_BIN: &str = include_str!("../../../templates/crate/local.rs.in");
const BUILD_LAMBDA: &str = include_str!("../../../templates/crate/scripts/build-lambda");
const CARGO_CONFIG: &str = include_str!("../../../templates/crate/cargo-config.toml");
/// sequence-guard's own lock: a new crate's first build takes the versions
/// sequence-guard was tested with, not the newest of each. Cargo drops the
/// packages the crate does not use and adds the crate; every other version
/// stays as locked (`tests/scaffold/new.rs` checks it).
const CARGO_LOCK: &str = include_str!("../../../Cargo.lock");
const SAMPLES: [(&str, &str); 4] = [
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
    (
        "events/04-item-archived.json",
        include_str!("../../../templates/crate/events/04-item-archived.json"),
    ),
];

/// The process a new crate shows (`src/archiver.rs`), as its `Cargo.toml`
/// declares it; `sync` reads the same declaration from there.
pub(crate) fn archiver() -> Result<ConsumerDeclaration, Error> {
    ConsumerDeclaration::new(
        "archiver",
        "Archives an item not renamed for 30 days.",
        false,
    )?
    .with(true, Vec::new())
}

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
        "`{0}` cannot name a consumer: use 1 to {MAX_CONSUMER_NAME} lower-case letters, digits and single `-`, starting with a letter (it names its binaries, queues and alarms)"
    )]
    BadConsumer(String),
    #[error(
        "`{0}` cannot name a further consumer: the first consumer's or the producer's resources have it"
    )]
    ReservedConsumer(String),
    #[error("consumer `{0}`: its description must be one line of text, without `\"` or `\\`")]
    BadConsumerDescription(String),
    #[error("consumer `{0}` is declared twice")]
    RepeatedConsumer(String),
    #[error(
        "a consumer's name (or a variable's) makes `{0}`, a name the template already has: choose another name"
    )]
    NameTaken(String),
    #[error("consumer `{consumer}`, variable `{variable}`: {reason}")]
    BadVariable {
        consumer: String,
        variable: String,
        reason: &'static str,
    },
    #[error(
        "sequence-guard's template.yaml builds `{0}`, which is not one of a domain's binaries ({TOOLS:?}): the generator needs a substitution for it"
    )]
    UnknownBinary(String),
    #[error(
        "{0} is not a checkout of sequence-guard (no Cargo.toml naming the package `sequence-guard`)"
    )]
    NotSequenceGuard(PathBuf),
    #[error(
        "sequence-guard's template.yaml no longer fits the generator of samconfig.toml: its parameters, at `{0}`"
    )]
    Parameters(String),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
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

/// Every file of a new crate: the domain to start from and its process,
/// their samples, manifest and lock, and the deployment files of
/// [`deployment`] (`sync` writes only those).
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
        File::new("Cargo.lock", CARGO_LOCK.to_owned(), Kept::Theirs),
        File::new("README.md", fill(README), Kept::Theirs),
        File::new(".gitignore", fill(GITIGNORE), Kept::Theirs),
        File::new("src/lib.rs", fill(LIB), Kept::Theirs),
        File::new("src/archiver.rs", fill(ARCHIVER), Kept::Theirs),
        File::new("tests/replay.rs", fill(REPLAY_TEST), Kept::Theirs),
        File::new("tests/archiver.rs", fill(ARCHIVER_TEST), Kept::Theirs),
        File::new("tests/local.rs", fill(LOCAL_TEST), Kept::Theirs),
        File::new("local/archiver.txt", fill(LOCAL_SCRIPT), Kept::Theirs),
    ];
    for (path, sample) in SAMPLES {
        files.push(File::new(path, fill(sample), Kept::Theirs));
    }
    files.extend(deployment(names, &[archiver()?])?);
    Ok(files)
}

/// What deploys a domain, for any crate: the SAM template and its
/// `samconfig.toml`, the build script and the pinned tools, the build's
/// `.cargo/config.toml`, the whole system (`src/system.rs`) and its `local`
/// binary, a binary per tool, and a binary per tool of each further
/// consumer.
pub fn deployment(names: &Names, further: &[ConsumerDeclaration]) -> Result<Vec<File>, Error> {
    let template = template(names, further)?;
    let samconfig = samconfig(&names.package, &template)?;
    let mut files = vec![
        File::new("template.yaml", template, Kept::Ours),
        File::new("samconfig.toml", samconfig, Kept::Theirs),
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
            "scripts/check-bootstraps",
            CHECK_BOOTSTRAPS.to_owned(),
            Kept::Ours,
        )
        .executable(),
        File::new(
            "scripts/requirements-tools.txt",
            REQUIREMENTS.to_owned(),
            Kept::Ours,
        ),
        // The build's settings for a fast cold start through TLS; a team may
        // add its own beside them.
        File::new(".cargo/config.toml", CARGO_CONFIG.to_owned(), Kept::Theirs),
        // The whole system, from the declared consumers: rewritten, so that
        // a consumer declared in Cargo.toml is in it after the next sync.
        File::new(SYSTEM_PATH, system(names, further), Kept::Ours),
        File::new(
            format!("src/bin/{}.rs", names.binary("local")),
            fill(LOCAL_BIN, names),
            Kept::Theirs,
        ),
    ];
    for tool in TOOLS {
        files.push(File::new(
            format!("src/bin/{}.rs", names.binary(tool)),
            fill(&BIN.replace("{{tool}}", tool), names),
            Kept::Theirs,
        ));
    }
    for consumer in further {
        let domain = format!("{{{{crate}}}}::{}::domain()", consumer.module());
        for tool in CONSUMER_TOOLS {
            let named = if tool == "projector" {
                consumer.lambda_binary()
            } else {
                tool
            };
            let binary = names.binary(&format!("{}-{named}", consumer.name));
            let text = BIN
                .replace("{{name}}-{{tool}}", &binary)
                .replace("{{tool}}", tool)
                .replace("{{crate}}::domain()", &domain);
            files.push(File::new(
                format!("src/bin/{binary}.rs"),
                fill(&text, names),
                Kept::Theirs,
            ));
        }
    }
    Ok(files)
}

/// Where `sync` writes the crate's whole system; the library declares the
/// module (`pub mod system;`).
pub const SYSTEM_PATH: &str = "src/system.rs";

/// `src/system.rs`: the event store of `crate::domain()` and every
/// consumer as the template names it, the first (`projector`) and each
/// further one on `crate::<module>::domain()`, as its binaries run it.
fn system(names: &Names, further: &[ConsumerDeclaration]) -> String {
    let first = ".consumer(\"projector\", crate::domain())";
    let chain = if further.is_empty() {
        // One line, as rustfmt writes a chain this short.
        format!("    System::new(crate::domain()){first}\n")
    } else {
        let mut chain = format!("    System::new(crate::domain())\n        {first}\n");
        for consumer in further {
            chain.push_str(&format!(
                "        .consumer(\"{}\", crate::{}::domain())\n",
                consumer.name,
                consumer.module()
            ));
        }
        chain
    };
    fill(SYSTEM, names).replace("{{system}}", &chain)
}

/// Whether the library's source (`lib`, its text) declares the module
/// `system` (`pub mod system;`, or `mod system;`).
pub fn declares_system(lib: &str) -> bool {
    lib.lines().any(|line| {
        let line = line.trim_start();
        // Any visibility: `pub`, `pub(crate)`, ...
        let line = match line.strip_prefix("pub") {
            Some(rest) if rest.starts_with('(') => rest.split_once(')').map_or("", |(_, r)| r),
            Some(rest) => rest,
            None => line,
        };
        let line = line.trim_start();
        line.starts_with("mod system;") || line.starts_with("mod system {")
    })
}

/// A template of `templates/crate/` on the crate's names.
fn fill(text: &str, names: &Names) -> String {
    text.replace("{{name}}", &names.package)
        .replace("{{crate}}", &names.library)
}
