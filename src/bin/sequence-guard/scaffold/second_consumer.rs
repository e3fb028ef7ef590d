//! Our template without the worked example's second consumer (the shop's
//! `status-projector`), which a domain's crate does not have: found by the
//! YAML's indentation, each entry with the comments above it.

use std::ops::Range;

use super::Error;

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
pub(super) fn without_second_consumer(template: &str) -> Result<String, Error> {
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
    remove_entries(&lines, &mut removed);
    let text = kept(&lines, &removed);
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

/// Our template no longer fits: `pattern` found `found` times, not
/// `expected`.
fn drifted(pattern: &'static str, found: usize, expected: usize) -> Error {
    Error::Drifted {
        file: "template.yaml",
        pattern,
        found,
        expected,
    }
}

/// Marks, in each section that can hold it, every entry that names the
/// second consumer (and is not marked already), and the whole section
/// when none of its entries is left.
fn remove_entries(lines: &[&str], removed: &mut [bool]) {
    let sections: Vec<usize> = (0..lines.len())
        .filter(|&i| !lines[i].is_empty() && indent(lines[i]) == 0 && !lines[i].starts_with('#'))
        .collect();
    for (n, &header) in sections.iter().enumerate() {
        let end = sections.get(n + 1).copied().unwrap_or(lines.len());
        let name = lines[header].trim_end_matches(':');
        if !["Parameters", "Conditions", "Rules", "Resources", "Outputs"].contains(&name) {
            continue;
        }
        if remove_in_section(lines, removed, header + 1..end) == 0 {
            removed[header..end].iter_mut().for_each(|r| *r = true);
        }
    }
}

/// Marks the entries of one section's body (`within`) that name the second
/// consumer; answers how many entries it keeps.
fn remove_in_section(lines: &[&str], removed: &mut [bool], within: Range<usize>) -> usize {
    let mut kept = 0;
    let mut at = within.start;
    while at < within.end {
        let line = lines[at];
        // A comment belongs to the entry below it.
        if line.trim().is_empty() || indent(line) != 2 || line.trim_start().starts_with('#') {
            at += 1;
            continue;
        }
        let (first, last) = block(lines, at);
        let of_it = lines[first..last]
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
    kept
}

/// The lines not marked, one blank line kept of those around what was
/// removed.
fn kept(lines: &[&str], removed: &[bool]) -> String {
    let mut kept: Vec<&str> = Vec::with_capacity(lines.len());
    for (line, removed) in lines.iter().zip(removed) {
        let repeated = line.trim().is_empty() && kept.last().is_some_and(|l| l.trim().is_empty());
        if !removed && !repeated {
            kept.push(line);
        }
    }
    let mut text = kept.join("\n");
    text.push('\n');
    text
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

/// How many spaces a line starts with.
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
