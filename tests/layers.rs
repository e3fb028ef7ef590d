//! The engine's layers, as the crate doc draws them (`src/lib.rs`, "#
//! Layers"), kept: every module of `src/` is in the list, and each imports
//! only modules listed before it. A reference to `crate::<module>` in code
//! (comments, doc-only imports and tests aside) to a module listed after it
//! fails this test, naming the file, the line and both modules.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The layers as the crate doc lists them: each module with its layer's
/// number, in the order listed. A layer is a numbered item of the section
/// (`3. **Reading a message**: [`envelope`] (...)`), its lines joined; its
/// modules are the names in backticks after its first colon, outside
/// parentheses (which say what each holds).
fn layers(lib: &str) -> Vec<(usize, String)> {
    let mut items: Vec<(usize, String)> = Vec::new();
    let mut inside = false;
    for line in lib.lines() {
        let Some(doc) = line.strip_prefix("//!") else {
            continue;
        };
        let doc = doc.trim();
        if doc.starts_with('#') {
            inside = doc == "# Layers";
            continue;
        }
        if !inside {
            continue;
        }
        let numbered = doc
            .split_once(". ")
            .and_then(|(number, rest)| Some((number.parse::<usize>().ok()?, rest)));
        match (numbered, items.last_mut()) {
            (Some((layer, rest)), _) => items.push((layer, rest.to_owned())),
            (None, Some((_, text))) if !doc.is_empty() => {
                text.push(' ');
                text.push_str(doc);
            }
            (None, _) => {
                // A blank line ends an item; prose after the list is not one.
                if let Some((_, text)) = items.last_mut() {
                    text.push('\n');
                }
            }
        }
    }
    let mut order = Vec::new();
    for (layer, text) in items {
        let text = text.split('\n').next().unwrap_or_default();
        let Some((_, modules)) = text.split_once(':') else {
            continue;
        };
        let mut depth = 0usize;
        let outside: String = modules
            .chars()
            .filter(|c| {
                match c {
                    '(' => depth += 1,
                    ')' => depth = depth.saturating_sub(1),
                    _ => return depth == 0,
                }
                false
            })
            .collect();
        for part in outside.split('`').skip(1).step_by(2) {
            let name = part.trim_matches(['[', ']']).to_owned();
            if !name.is_empty() && name.chars().all(|c| c.is_ascii_lowercase() || c == '_') {
                order.push((layer, name));
            }
        }
    }
    order
}

/// The top-level modules `lib.rs` declares.
fn declared(lib: &str) -> Vec<String> {
    lib.lines()
        .filter_map(|line| {
            let line = line.trim();
            let rest = line
                .strip_prefix("pub mod ")
                .or_else(|| line.strip_prefix("mod "))
                .or_else(|| line.strip_prefix("pub(crate) mod "))?;
            Some(rest.trim_end_matches(';').to_owned())
        })
        .collect()
}

/// What the crate root's `pub use` lines re-export: a name to its module.
fn root_names(lib: &str) -> BTreeMap<String, String> {
    let mut names = BTreeMap::new();
    for line in lib.lines() {
        let Some(rest) = line.trim().strip_prefix("pub use ") else {
            continue;
        };
        let rest = rest.trim_end_matches(';');
        let Some((module, items)) = rest.split_once("::") else {
            continue;
        };
        let items = items.trim_matches(['{', '}']);
        for item in items.split(',') {
            let item = item.trim().rsplit("::").next().unwrap_or_default();
            if !item.is_empty() {
                names.insert(item.to_owned(), module.to_owned());
            }
        }
    }
    names
}

fn rust_files(dir: &Path, found: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .expect("src/ is readable")
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            rust_files(&path, found);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            found.push(path);
        }
    }
}

/// The file's code as a module imports it: its tests, comments and
/// doc-only imports left out; each line with its number.
fn code_lines(text: &str) -> Vec<(usize, String)> {
    let mut lines = Vec::new();
    let mut skip_next = false;
    for (index, line) in text.lines().enumerate() {
        let trimmed = line.trim();
        if trimmed == "#[cfg(test)]" {
            // Everything after a test module (tests come last) is the tests'.
            break;
        }
        if trimmed == "#[cfg(doc)]" {
            skip_next = true;
            continue;
        }
        if skip_next {
            skip_next = false;
            continue;
        }
        let code = match trimmed.find("//") {
            Some(at) => trimmed[..at].trim_end(),
            None => trimmed,
        };
        if !code.is_empty() {
            lines.push((index + 1, code.to_owned()));
        }
    }
    lines
}

/// The crate's modules a line of code names: `crate::<module>` and the
/// root's re-exports (`crate::{Domain, ...}`, `crate::Decision`).
fn named(line: &str, roots: &BTreeMap<String, String>) -> Vec<String> {
    let mut modules = Vec::new();
    let mut rest = line;
    while let Some(at) = rest.find("crate::") {
        rest = &rest[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let end = group.find('}').unwrap_or(group.len());
            for item in group[..end].split(',') {
                let first = item.trim().split("::").next().unwrap_or_default();
                modules.extend(resolve(first, roots));
            }
            continue;
        }
        let first: String = rest
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        modules.extend(resolve(&first, roots));
    }
    modules
}

fn resolve(name: &str, roots: &BTreeMap<String, String>) -> Option<String> {
    if name.is_empty() || name == "self" {
        return None;
    }
    if name.chars().next().is_some_and(|c| c.is_ascii_uppercase()) {
        return roots.get(name).cloned();
    }
    Some(name.to_owned())
}

#[test]
fn each_module_imports_only_from_the_modules_listed_before_it() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let lib = std::fs::read_to_string(root.join("src/lib.rs")).expect("src/lib.rs");
    let order = layers(&lib);
    assert!(
        !order.is_empty(),
        "src/lib.rs has no `# Layers` section listing the modules"
    );
    let place = |module: &str| order.iter().position(|(_, name)| name == module);
    let mut problems = Vec::new();
    for module in declared(&lib) {
        if place(&module).is_none() {
            problems.push(format!(
                "the module `{module}` is in no layer: list it in src/lib.rs, `# Layers`"
            ));
        }
    }
    let roots = root_names(&lib);
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    for path in files {
        let relative = path.strip_prefix(root.join("src")).expect("under src/");
        let parts: Vec<String> = relative
            .iter()
            .map(|part| part.to_string_lossy().into_owned())
            .collect();
        if parts.len() == 1 && matches!(parts[0].as_str(), "lib.rs" | "main.rs") {
            continue;
        }
        if parts.last().is_some_and(|file| file == "tests.rs") || parts.iter().any(|p| p == "tests")
        {
            continue;
        }
        let module = parts[0].trim_end_matches(".rs").to_owned();
        let Some(from) = place(&module) else {
            continue;
        };
        let text = std::fs::read_to_string(&path).expect("readable");
        for (number, line) in code_lines(&text) {
            for target in named(&line, &roots) {
                if target == module {
                    continue;
                }
                let Some(to) = place(&target) else {
                    continue;
                };
                if to > from {
                    problems.push(format!(
                        "src/{}:{number}: `{module}` (layer {}) imports `crate::{target}` (layer {}), listed after it: a module imports only from those before it ({line})",
                        relative.display(),
                        order[from].0,
                        order[to].0,
                    ));
                }
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_check_reads_the_layers_and_names_an_import_that_breaks_one() {
    let lib = "//! # Layers\n//!\n//! 0. **Words**: `limits`, [`sqs`] (what SQS\n//!    takes, as `sqs_body`), [`digest`].\n//! 1. **Answers**: [`answer`].\n//!\n//! Prose after the list: `prose`.\n//!\n//! # Other\n//! 2. **Not**: `x`.\npub use answer::{Decision, Outbox};\n";
    let order = layers(lib);
    assert_eq!(
        order,
        [
            (0, "limits".to_owned()),
            (0, "sqs".to_owned()),
            (0, "digest".to_owned()),
            (1, "answer".to_owned())
        ]
    );
    let roots = root_names(lib);
    assert_eq!(
        named(
            "use crate::{Decision, sqs::Body}; crate::limits::text",
            &roots
        ),
        ["answer", "sqs", "limits"]
    );
    let code = code_lines(
        "use a; // crate::x\n#[cfg(doc)]\nuse crate::y;\nfn f() {}\n#[cfg(test)]\nuse crate::z;\n",
    );
    assert_eq!(
        code,
        [(1, "use a;".to_owned()), (4, "fn f() {}".to_owned())]
    );
}
