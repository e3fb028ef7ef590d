//! The walk-through (docs/guide.md) cannot drift: every Rust block of its
//! sections "Bring your own events" and "Change an event's shape" is
//! compiled as a doctest of the bank (`examples/bank/`), and is an excerpt of
//! the bank's code, which the suite builds and tests. Each block's shown
//! lines (trimmed; blank and comment-only lines, trailing comments and the
//! doctest's hidden `# ` lines aside) must stand, in order, in one of the
//! bank's files.

use std::path::Path;

const SECTIONS: [&str; 2] = ["## Bring your own events", "## Change an event's shape"];

/// A line as compared: trimmed, its trailing `// ...` comment cut.
fn code(line: &str) -> Option<String> {
    let line = match line.find("  //").or_else(|| line.find(" // ")) {
        Some(at) => &line[..at],
        None => line,
    };
    let line = line.trim();
    let hidden = line == "#" || line.starts_with("# ");
    (!line.is_empty() && !line.starts_with("//") && !hidden).then(|| line.to_owned())
}

/// The Rust blocks of a section of the walk-through.
fn blocks(readme: &str, heading: &str) -> Vec<Vec<String>> {
    let start = readme
        .find(heading)
        .unwrap_or_else(|| panic!("docs/guide.md has no section {heading}"));
    let rest = &readme[start + heading.len()..];
    let section = &rest[..rest.find("\n## ").unwrap_or(rest.len())];
    let mut blocks = Vec::new();
    let mut current: Option<Vec<String>> = None;
    for line in section.lines() {
        match (&mut current, line.trim_start()) {
            (None, fence) if fence.starts_with("```rust") => current = Some(Vec::new()),
            (Some(_), "```") => blocks.extend(current.take()),
            (Some(block), line) => block.extend(code(line)),
            (None, _) => {}
        }
    }
    blocks
}

/// The bank's source files, each as its code lines.
fn sources() -> Vec<(String, Vec<String>)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/bank");
    let mut files = Vec::new();
    let mut dirs = vec![root.join("src"), root.join("tests")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("a directory of the bank") {
            let path = entry.expect("an entry").path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|ext| ext == "rs") {
                let text = std::fs::read_to_string(&path).expect("a source file");
                files.push((
                    path.display().to_string(),
                    text.lines().filter_map(code).collect(),
                ));
            }
        }
    }
    files
}

/// Whether `block` stands in `file`, in order (lines between may be left out).
fn stands_in(block: &[String], file: &[String]) -> bool {
    let mut lines = file.iter();
    block.iter().all(|wanted| lines.any(|line| line == wanted))
}

#[test]
fn the_walk_through_is_an_excerpt_of_the_bank_which_compiles() {
    let guide = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/guide.md");
    let readme = std::fs::read_to_string(guide).expect("docs/guide.md");
    let sources = sources();
    let mut checked = 0;
    for heading in SECTIONS {
        for block in blocks(&readme, heading) {
            assert!(
                sources.iter().any(|(_, file)| stands_in(&block, file)),
                "a Rust block of docs/guide.md's {heading:?} is not in the bank's code \
                 (examples/bank/src, examples/bank/tests); the block's code lines:\n{}",
                block.join("\n")
            );
            checked += 1;
        }
    }
    assert!(checked >= 6, "the walk-through's blocks: {checked}");
}

#[test]
fn a_block_the_bank_does_not_hold_is_caught() {
    let file: Vec<String> = ["fn a() {", "let x = 1;", "}"]
        .iter()
        .map(|line| (*line).to_owned())
        .collect();
    let holds = |lines: &[&str]| {
        let block: Vec<String> = lines.iter().map(|line| (*line).to_owned()).collect();
        stands_in(&block, &file)
    };
    assert!(holds(&["fn a() {", "}"]));
    assert!(!holds(&["let x = 1;", "fn a() {"]), "out of order");
    assert!(!holds(&["let x = 2;"]));
    assert_eq!(code("    x += 1; // a note"), Some("x += 1;".to_owned()));
    assert_eq!(code("    // a comment"), None);
}

/// The docs' generated tables cannot drift from the benchmark's files:
/// each region between `<!-- figures:NAME begin -->` and
/// `<!-- figures:NAME end -->` in the README and `docs/*.md` holds exactly
/// `docs/figures/NAME.md` (`scripts/bench --splice` writes them so).
#[test]
fn the_docs_figures_are_their_generated_files() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut docs = vec![root.join("README.md")];
    let entries = std::fs::read_dir(root.join("docs")).expect("docs/");
    docs.extend(entries.filter_map(|entry| {
        let path = entry.ok()?.path();
        (path.extension()? == "md").then_some(path)
    }));
    let mut regions = 0;
    for doc in &docs {
        let text = std::fs::read_to_string(doc).expect("a doc");
        for (name, region) in figure_regions(&text) {
            let file = root.join("docs/figures").join(format!("{name}.md"));
            let generated = std::fs::read_to_string(&file)
                .unwrap_or_else(|err| panic!("{}: {}: {err}", doc.display(), file.display()));
            assert!(
                region == generated,
                "{}: the figures {name} differ from docs/figures/{name}.md: \
                 run scripts/bench --splice",
                doc.display()
            );
            regions += 1;
        }
    }
    assert!(
        regions >= 2,
        "the README and docs/performance.md include generated tables"
    );
}

/// Each marked region of `doc`: its name and what it holds (from the line
/// after its begin marker to its end marker).
fn figure_regions(doc: &str) -> Vec<(String, String)> {
    let mut regions = Vec::new();
    let mut rest = doc;
    while let Some(at) = rest.find("\n<!-- figures:") {
        let after = &rest[at + "\n<!-- figures:".len()..];
        let Some((name, tail)) = after.split_once(" begin -->\n") else {
            panic!(
                "a figures marker that is not `<!-- figures:NAME begin -->`: {}",
                after.lines().next().unwrap_or_default()
            );
        };
        let end = format!("<!-- figures:{name} end -->");
        let length = tail
            .find(&end)
            .unwrap_or_else(|| panic!("figures {name}: no `{end}`"));
        regions.push((name.to_owned(), tail[..length].to_owned()));
        rest = &tail[length + end.len()..];
    }
    regions
}

#[test]
fn each_marked_region_is_read_whole_and_in_order() {
    let doc = "a\n<!-- figures:cost begin -->\n| x |\n<!-- figures:cost end -->\nb\n\
               <!-- figures:cpu begin -->\n<!-- figures:cpu end -->\n`<!-- figures:NAME -->`\n";
    let regions = figure_regions(doc);
    let expected = [("cost", "| x |\n"), ("cpu", "")]
        .map(|(name, region)| (name.to_owned(), region.to_owned()));
    assert_eq!(regions, expected);
    assert!(figure_regions("no markers").is_empty());
}

#[test]
fn the_engines_attributes_are_all_listed_in_the_reference() {
    let doc = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/domain-reference.md"),
    )
    .expect("docs/domain-reference.md");
    let heading = "## Entities: the engine's attributes";
    let start = doc.find(heading).expect("the section");
    let rest = &doc[start + heading.len()..];
    let section = &rest[..rest.find("\n## ").unwrap_or(rest.len())];
    let rows: Vec<&str> = section
        .lines()
        .filter(|line| line.starts_with("| `"))
        .collect();
    for attribute in sequence_guard::entity::ENGINE_ATTRIBUTES {
        assert!(
            rows.iter()
                .any(|row| row.contains(&format!("`{attribute}`"))),
            "docs/domain-reference.md does not list `{attribute}` among the engine's attributes"
        );
    }
    let guide =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/guide.md"))
            .expect("docs/guide.md");
    let at = guide
        .find("attribute names are the engine's")
        .expect("the guide's list");
    let list = &guide[at..at + 300];
    for attribute in sequence_guard::entity::ENGINE_ATTRIBUTES {
        assert!(
            list.contains(&format!("`{attribute}`")),
            "docs/guide.md's list lacks `{attribute}`"
        );
    }
}
