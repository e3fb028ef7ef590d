//! The text of the template's parts: a file cut into its sections (`#@
//! name` lines), a block put in at a line that holds only `{{name}}` (at
//! that line's indentation), and the check that no entry of a section is
//! named twice once the parts are put together.

use super::Error;

/// `text` by section (`#@ name` lines), without the comments above the
/// first.
pub(super) fn split(text: &str) -> Vec<(&str, String)> {
    let mut sections: Vec<(&str, String)> = Vec::new();
    for line in text.lines() {
        if let Some(name) = line.strip_prefix("#@ ") {
            sections.push((name.trim(), String::new()));
        } else if let Some((_, body)) = sections.last_mut() {
            body.push_str(line);
            body.push('\n');
        }
    }
    sections
}

/// `text` with each line that holds only `{{<section>}}` replaced by
/// `block`, at that line's indentation.
pub(super) fn insert(text: &str, section: &str, block: &str) -> String {
    let marker = format!("{{{{{section}}}}}");
    let mut out = String::with_capacity(text.len() + block.len());
    for line in text.lines() {
        if line.trim() == marker {
            let depth = line.len() - line.trim_start().len();
            out.push_str(&indented(block.trim_end(), depth));
        } else {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// Each line of `text` with `depth` more spaces, and a newline after it
/// (an empty line stays empty).
pub(super) fn indented(text: &str, depth: usize) -> String {
    let pad = " ".repeat(depth);
    text.lines()
        .map(|line| {
            if line.is_empty() {
                "\n".to_owned()
            } else {
                format!("{pad}{line}\n")
            }
        })
        .collect()
}

/// Every entry of every section named once: a consumer whose name makes
/// one of the stack's names (`projection`: `ProjectionTable`) is refused.
pub(super) fn one_of_each(text: &str) -> Result<(), Error> {
    let mut seen = std::collections::BTreeSet::new();
    let mut section = "";
    for line in text.lines() {
        if !line.starts_with([' ', '#']) && line.ends_with(':') {
            section = line;
            continue;
        }
        let Some(name) = line
            .strip_prefix("  ")
            .filter(|rest| rest.starts_with(|c: char| c.is_ascii_alphabetic()))
            .and_then(|rest| rest.strip_suffix(':'))
        else {
            continue;
        };
        if !seen.insert((section, name)) {
            return Err(Error::NameTaken(name.to_owned()));
        }
    }
    Ok(())
}
