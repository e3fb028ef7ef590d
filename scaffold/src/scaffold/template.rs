//! Our `template.yaml` on a crate's names: the stack rendered for its
//! consumers ([`stack`](super::stack)), each substitution found exactly as
//! often as expected, or generation fails; and the header that tells
//! `sync` whether a team edited the file it made.

use sha2::{Digest, Sha256};

use super::ConsumerDeclaration;
use super::stack;
use super::{Error, Names, TOOLS};

/// The first line of every template `sync` makes; the next names the hash
/// of what follows them.
const HEADER: &str = "# Made by `sequence-guard sync` from sequence-guard's templates and this crate's\n\
# [package.metadata.sequence-guard] consumers: a change made here by hand is refused\n\
# by the next sync. Declare a consumer there; keep other resources in a stack of your own.\n";

/// The line after [`HEADER`] that holds the hash of the rest.
const HASH: &str = "# sha256 of what follows: ";

/// One substitution in one of our files: `pattern` found exactly `times`
/// ([`ANY`]: at least once).
pub(super) struct Substitution {
    pattern: &'static str,
    replacement: String,
    times: usize,
}

/// A substitution of text that may be found any number of times (once at least).
const ANY: usize = usize::MAX;

impl Substitution {
    /// A substitution of text found exactly `times`.
    pub(super) fn times(pattern: &'static str, replacement: String, times: usize) -> Self {
        Substitution {
            pattern,
            replacement,
            times,
        }
    }
}

/// A substitution of text found exactly once.
pub(super) fn once(pattern: &'static str, replacement: String) -> Substitution {
    Substitution {
        pattern,
        replacement,
        times: 1,
    }
}

/// Our `template.yaml`, made for the crate: its binaries, its further
/// consumers, its description; under the header that `sync` reads back.
pub fn template(names: &Names, further: &[ConsumerDeclaration]) -> Result<String, Error> {
    let package = &names.package;
    let template = substitute(
        "template.yaml",
        &stack::render(names, further)?,
        &[
            once(
                "  sequence-guard: projects ordered domain events",
                format!("  {package}, on sequence-guard: projects ordered domain events"),
            ),
            // The runbooks are sequence-guard's, not the crate's README.
            Substitution {
                pattern: "See the runbook in docs/operate.md.",
                replacement: "See the runbook in sequence-guard's docs/operate.md.".to_owned(),
                times: ANY,
            },
            Substitution {
                pattern: "see the runbook in docs/operate.md.",
                replacement: "see the runbook in sequence-guard's docs/operate.md.".to_owned(),
                times: ANY,
            },
        ],
    )?;
    builds_only(names, further, &template)?;
    Ok(with_header(&template))
}

/// `body` under the header, with its hash.
fn with_header(body: &str) -> String {
    format!("{HEADER}{HASH}{}\n{body}", digest(body))
}

/// The hex SHA-256 of `text`.
fn digest(text: &str) -> String {
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

/// Whether `found` (a crate's `template.yaml`) is as a `sync` made it: its
/// header's hash is that of the rest. A file without the header (an
/// earlier release's, or written by hand) is not.
pub fn made_by_sync(found: &str) -> bool {
    let Some(rest) = found.strip_prefix(HEADER) else {
        return false;
    };
    let Some((line, body)) = rest.split_once('\n') else {
        return false;
    };
    line.strip_prefix(HASH) == Some(digest(body).as_str())
}

/// Every `Binary:` the template builds must be one of the crate's.
pub(super) fn builds_only(
    names: &Names,
    further: &[ConsumerDeclaration],
    template: &str,
) -> Result<(), Error> {
    let built = template
        .lines()
        .filter_map(|line| line.trim_start().strip_prefix("Binary:"))
        .map(str::trim);
    for binary in built {
        let ours = TOOLS.iter().any(|tool| names.binary(tool) == binary);
        let theirs = further.iter().any(|consumer| {
            names.binary(&format!("{}-{}", consumer.name, consumer.lambda_binary())) == binary
        });
        if !ours && !theirs {
            return Err(Error::UnknownBinary(binary.to_owned()));
        }
    }
    Ok(())
}

/// `text` (our `file`) with every substitution made, each found as often
/// as it expects.
pub(super) fn substitute(
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
