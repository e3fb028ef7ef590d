//! Our `template.yaml` and `samconfig.toml` on a crate's names: each
//! substitution found exactly as often as expected, or generation fails.

use super::second_consumer::without_second_consumer;
use super::{Error, Names, TOOLS};

const TEMPLATE: &str = include_str!("../../../../template.yaml");
const SAMCONFIG: &str = include_str!("../../../../samconfig.toml");

/// One substitution in one of our files: `pattern` found exactly `times`
/// ([`ANY`]: at least once).
pub(super) struct Substitution {
    pattern: &'static str,
    replacement: String,
    times: usize,
}

/// A substitution of text that may be found any number of times (once at least).
const ANY: usize = usize::MAX;

/// A substitution of text found exactly once.
pub(super) fn once(pattern: &'static str, replacement: String) -> Substitution {
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
                pattern: "See the runbook in docs/operate.md.",
                replacement: "See the runbook in sequence-guard's docs/operate.md.".to_owned(),
                times: ANY,
            },
        ],
    )?;
    builds_only(names, &template)?;
    Ok(template)
}

/// Every `Binary:` the template builds must be one of the crate's.
pub(super) fn builds_only(names: &Names, template: &str) -> Result<(), Error> {
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
