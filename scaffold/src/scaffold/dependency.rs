//! Where the crate takes sequence-guard from, and its `[dependencies]`
//! line.

use std::path::{Component, Path, PathBuf};

use super::Error;

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
