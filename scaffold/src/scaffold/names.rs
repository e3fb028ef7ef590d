//! A domain's names, all derived from its crate's: checked to do for a
//! crate, its binaries and its stack.

use super::Error;

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
