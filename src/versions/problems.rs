//! A declaration's mistakes, each named with its fix: a type the events
//! enum does not have, a version declared twice or at 0, an upcast that is
//! doubled, out of range or missing.

use std::collections::BTreeSet;

use super::Versions;

/// The mistakes in `versions` for a domain whose events enum has `types`,
/// one line each with its fix: what [`Domain::check`](crate::Domain::check) reports.
pub fn problems(versions: &Versions, types: &[&str]) -> Vec<String> {
    let mut problems = Vec::new();
    let known = |name: &str| types.contains(&name);
    let mut unknown: Vec<&str> = Vec::new();
    let mut unknown_type = |name: &'static str, problems: &mut Vec<String>| {
        if !known(name) && !unknown.contains(&name) {
            unknown.push(name);
            problems.push(format!(
                "versions are declared for `{name}`, a type the events enum does not have (it has {}): name the type as the envelope's `type` does",
                types.join(", ")
            ));
        }
    };
    for (index, &(name, version)) in versions.currents.iter().enumerate() {
        unknown_type(name, &mut problems);
        if versions.currents[..index]
            .iter()
            .any(|(seen, _)| *seen == name)
        {
            problems.push(format!(
                "the current version of {name} is declared twice: declare it once, in Versions::current"
            ));
        }
        if version == 0 {
            problems.push(format!(
                "{name} is declared at version 0: versions start at 1"
            ));
        }
    }
    let mut upcasts = BTreeSet::new();
    for &(name, from, _) in &versions.upcasts {
        unknown_type(name, &mut problems);
        let current = current_of(versions, name);
        if !upcasts.insert((name, from)) {
            problems.push(format!(
                "two upcasts of {name} from version {from}: keep one"
            ));
        }
        if from == 0 || from >= current {
            problems.push(format!(
                "an upcast of {name} from version {from}, whose current version is {current}: an upcast goes from a version below the current one to the next (declare the current version with Versions::current)"
            ));
        }
    }
    for (index, &(name, current)) in versions.currents.iter().enumerate() {
        if !known(name)
            || versions.currents[..index]
                .iter()
                .any(|(seen, _)| *seen == name)
        {
            continue; // named above
        }
        let missing: Vec<String> = (1..current)
            .filter(|from| !upcasts.contains(&(name, *from)))
            .map(|from| from.to_string())
            .collect();
        if !missing.is_empty() {
            problems.push(format!(
                "{name} is at version {current} and has no upcast from version {}: add .upcast(\"{name}\", {}, ...) for each, from that version's data to the next's",
                missing.join(", "),
                missing[0]
            ));
        }
    }
    problems
}

/// The current version `versions` declares for `name` (the first, if
/// declared twice), 1 when none.
fn current_of(versions: &Versions, name: &str) -> u16 {
    versions
        .currents
        .iter()
        .find(|(seen, _)| *seen == name)
        .map_or(1, |(_, version)| *version)
}
