//! Where the crate takes sequence-guard from, and its `[dependencies]`
//! line.

use std::path::{Component, Path, PathBuf};

use super::Error;

/// The checkout of sequence-guard this command was built from: the parent
/// of `scaffold/` when cargo compiled it. `cargo install --path scaffold`
/// builds it in a checkout, `cargo install --git` in cargo's own checkout of
/// the repository (under `~/.cargo/git/checkouts/`); both stay on disk.
pub fn built_from() -> PathBuf {
    let package = Path::new(env!("CARGO_MANIFEST_DIR"));
    package.parent().unwrap_or(package).to_owned()
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
    /// What a crate takes when `new` is given no source: `source`, the
    /// checkout this command was built from ([`built_from`]), while it is
    /// one; else sequence-guard `version` from crates.io, and why, for the
    /// team to read.
    pub fn from_source(source: &Path, root: &Path, version: &str) -> (Self, Option<String>) {
        match Dependency::checkout(source, root) {
            Ok(dependency) => (dependency, None),
            Err(err) => {
                let why = match err {
                    Error::Io { source: io, .. } => format!("{}: {io}", source.display()),
                    err => err.to_string(),
                };
                let note = format!(
                    "the sequence-guard this command was built from is not there ({why}): the crate depends on sequence-guard {version} from crates.io instead; if that release is not published, make the crate again with --sequence-guard-path <a checkout> or --sequence-guard-git <its URL>, or install the command again from a checkout"
                );
                (Dependency::Version(version.to_owned()), Some(note))
            }
        }
    }

    /// Where the crate takes sequence-guard from, in a few words.
    pub fn describe(&self) -> String {
        match self {
            Dependency::Version(version) => format!("sequence-guard {version} from crates.io"),
            Dependency::Path(path) => format!("the sequence-guard checkout at {}", path.display()),
            Dependency::Git(url) => format!("sequence-guard from {url}"),
        }
    }

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
    pub(super) fn line(&self, features: &[&str]) -> String {
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

/// `path` made absolute and canonical, or the error naming it.
fn canonical(path: &Path) -> Result<PathBuf, Error> {
    path.canonicalize().map_err(|source| Error::Io {
        path: path.to_owned(),
        source,
    })
}

/// `to` as seen from `from` (both absolute and canonical), `None` when they
/// share nothing but the root.
pub(super) fn relative(from: &Path, to: &Path) -> Option<PathBuf> {
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
