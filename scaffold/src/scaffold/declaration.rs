//! A further consumer as a crate declares it in its `Cargo.toml`
//! (`[package.metadata.sequence-guard] consumers = [...]`), checked: its
//! name, description, switch, whether it is a process, and the variables of
//! its function that the stack's parameters set.

use super::Error;

/// The longest name of a further consumer: its function is named
/// `<stack>-<name>-projector`, at most 64 characters with the stack's.
pub const MAX_CONSUMER_NAME: usize = 12;

/// A further consumer of the event store, as a crate declares it: its name
/// (`status`: binaries `<crate>-status-projector`, ..., resources
/// `Status...`), what it projects, whether it is deployed by default,
/// whether it is a process, and its own variables.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerDeclaration {
    pub name: String,
    pub description: String,
    pub deployed: bool,
    /// A process: its handlers append events to the event store and set
    /// deadlines. Its function's binary is `<crate>-<name>-process`; the
    /// function keeps a consumer's names (`<stack>-<name>-projector`, its
    /// log group's), so that turning a consumer into a process updates it
    /// in place. It gets the table's index of due deadlines, the event
    /// store's name and rights, and a parameter for its sweep's period
    /// (the deadlines' precision).
    pub process: bool,
    /// Variables its function is given, each from a parameter of the stack.
    pub environment: Vec<Variable>,
}

/// A variable of a further consumer's function, set from a parameter of
/// the stack: `PAYMENT_WINDOW_SECONDS` from `PaymentWindowSeconds`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Variable {
    pub name: String,
    pub description: String,
    pub default: String,
    /// Bounds: the parameter is a `Number` within them. Neither: a `String`.
    pub min: Option<i64>,
    pub max: Option<i64>,
}

/// A variable as `Cargo.toml` declares it: `{ name = "PAYMENT_WINDOW_SECONDS",
/// description = "...", default = "900", min = 1, max = 604800 }`.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeclaredVariable {
    pub name: String,
    pub description: String,
    pub default: DeclaredDefault,
    #[serde(default)]
    pub min: Option<i64>,
    #[serde(default)]
    pub max: Option<i64>,
}

/// A default, as text or as a number.
#[derive(Debug, serde::Deserialize)]
#[serde(untagged)]
pub enum DeclaredDefault {
    Text(String),
    Number(i64),
}

/// Names a further consumer cannot take: the first consumer's and the
/// producer's resources have them.
const RESERVED: [&str; 5] = ["events", "projector", "dispatcher", "producer", "dispatch"];

/// Variables the consumer's definition sets that the engine does not read
/// as configuration: the runtime's, and a process's event store.
const SET_BY_THE_STACK: [&str; 2] = ["GLIBC_TUNABLES", "EVENT_STORE_TABLE"];

/// sequence-guard's `src/config/mod.rs`, whose `VARIABLES` lists the variables
/// the engine reads as configuration. This command does not link the
/// library (it would bring the AWS SDK): it reads that one list from there.
const CONFIG: &str = include_str!("../../../src/config/mod.rs");

/// The start of the list in [`CONFIG`], up to its length.
const LIST: &str = "pub const VARIABLES: [&str; ";

/// The variables the engine reads as configuration (`TABLE_NAME`, ...):
/// the names in `src/config/mod.rs`'s `VARIABLES`, as many as its type says.
pub(super) fn read_by_the_engine() -> Result<Vec<&'static str>, Error> {
    listed(CONFIG)
}

/// The names of the list [`LIST`] starts in `config`.
pub(super) fn listed(config: &str) -> Result<Vec<&str>, Error> {
    let drifted = |pattern, found, expected| Error::Drifted {
        file: "src/config/mod.rs",
        pattern,
        found,
        expected,
    };
    let found = config.matches(LIST).count();
    let (Some((_, rest)), 1) = (config.split_once(LIST), found) else {
        return Err(drifted(LIST, found, 1));
    };
    let list = rest
        .split_once("] = [")
        .and_then(|(length, rest)| Some((length.parse::<usize>().ok()?, rest.split_once("];")?.0)));
    let Some((length, list)) = list else {
        return Err(drifted("VARIABLES: [&str; <length>] = [...];", 0, 1));
    };
    // Each name between quotes: the odd pieces of the list split at `"`.
    let names: Vec<&str> = list.split('"').skip(1).step_by(2).collect();
    if names.len() != length {
        return Err(drifted("a quoted name in VARIABLES", names.len(), length));
    }
    Ok(names)
}

impl ConsumerDeclaration {
    /// A declaration, its name checked: lower-case letters, digits and `-`,
    /// starting with a letter, at most [`MAX_CONSUMER_NAME`], not a name the
    /// first consumer or the producer has. Not a process, no variables.
    pub fn new(name: &str, description: &str, deployed: bool) -> Result<Self, Error> {
        let fits = !name.is_empty()
            && name.len() <= MAX_CONSUMER_NAME
            && name.starts_with(|c: char| c.is_ascii_lowercase())
            && !name.ends_with('-')
            && !name.contains("--")
            && name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
        if !fits {
            return Err(Error::BadConsumer(name.to_owned()));
        }
        if RESERVED.contains(&name) {
            return Err(Error::ReservedConsumer(name.to_owned()));
        }
        let description =
            one_line(description).ok_or_else(|| Error::BadConsumerDescription(name.to_owned()))?;
        Ok(ConsumerDeclaration {
            name: name.to_owned(),
            description,
            deployed,
            process: false,
            environment: Vec::new(),
        })
    }

    /// The declaration as a process (or not), with its variables, each
    /// checked: a name of upper-case letters, digits and single `_`, not one
    /// the stack or the engine sets, nor Lambda's; a one-line description; a
    /// default within the bounds, if any.
    pub fn with(mut self, process: bool, declared: Vec<DeclaredVariable>) -> Result<Self, Error> {
        self.process = process;
        self.environment = Vec::with_capacity(declared.len());
        for variable in declared {
            let variable = self.variable(variable)?;
            if self
                .environment
                .iter()
                .any(|seen| seen.name == variable.name)
            {
                return Err(self.bad_variable(&variable.name, "it is declared twice"));
            }
            self.environment.push(variable);
        }
        Ok(self)
    }

    fn variable(&self, declared: DeclaredVariable) -> Result<Variable, Error> {
        let name = declared.name;
        let bad = |reason| Err(self.bad_variable(&name, reason));
        let well_formed = name.len() <= 64
            && name.starts_with(|c: char| c.is_ascii_uppercase())
            && !name.ends_with('_')
            && !name.contains("__")
            && name
                .chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_');
        if !well_formed {
            return bad(
                "use 1 to 64 upper-case letters, digits and single `_`, starting with a letter",
            );
        }
        if name.starts_with("AWS_") || name.starts_with("LAMBDA_") {
            return bad("Lambda reserves the names that start with AWS_ and LAMBDA_");
        }
        if SET_BY_THE_STACK.contains(&name.as_str()) || read_by_the_engine()?.contains(&&*name) {
            return bad("sequence-guard sets it, or reads it itself");
        }
        let Some(description) = one_line(&declared.description) else {
            return bad("its description must be one line of text, without `\"` or `\\`");
        };
        let (min, max) = (declared.min, declared.max);
        let default = match declared.default {
            DeclaredDefault::Text(text) => text,
            DeclaredDefault::Number(number) => number.to_string(),
        };
        if min.is_some() || max.is_some() {
            let Ok(number) = default.trim().parse::<i64>() else {
                return bad("with min or max, its default must be a whole number");
            };
            if min.is_some_and(|min| number < min) || max.is_some_and(|max| number > max) {
                return bad("its default is outside min..max");
            }
            return Ok(Variable {
                name: name.clone(),
                description,
                default: number.to_string(),
                min,
                max,
            });
        }
        if default.contains(['"', '\n', '\\']) {
            return bad("its default must be one line of text, without `\"` or `\\`");
        }
        Ok(Variable {
            name: name.clone(),
            description,
            default,
            min,
            max,
        })
    }

    fn bad_variable(&self, variable: &str, reason: &'static str) -> Error {
        Error::BadVariable {
            consumer: self.name.clone(),
            variable: variable.to_owned(),
            reason,
        }
    }

    /// `status` → `Status`, `order-audit` → `OrderAudit`: its resources' prefix.
    pub(super) fn id(&self) -> String {
        camel(self.name.split('-'))
    }

    /// `order-audit` → `order_audit`: the module of the crate whose
    /// `domain()` the consumer's binaries run.
    pub fn module(&self) -> String {
        self.name.replace('-', "_")
    }

    /// Its Lambda function's binary, after `<crate>-<name>-`: `process` for
    /// a process, else `projector`. The function is `<stack>-<name>-projector`
    /// either way.
    pub fn lambda_binary(&self) -> &'static str {
        if self.process { "process" } else { "projector" }
    }
}

impl Variable {
    /// `PAYMENT_WINDOW_SECONDS` → `PaymentWindowSeconds`: its parameter.
    pub fn parameter(&self) -> String {
        camel(self.name.split('_').map(str::to_ascii_lowercase))
    }
}

/// Each part with its first letter upper-case, joined.
fn camel<S: AsRef<str>>(parts: impl Iterator<Item = S>) -> String {
    parts
        .map(|part| {
            let mut chars = part.as_ref().chars();
            chars.next().map_or_else(String::new, |first| {
                first.to_ascii_uppercase().to_string() + chars.as_str()
            })
        })
        .collect()
}

/// `text` trimmed, if it is one non-empty line without `"` or `\`.
fn one_line(text: &str) -> Option<String> {
    let text = text.trim();
    (!text.is_empty() && !text.contains(['"', '\n', '\\'])).then(|| text.to_owned())
}
