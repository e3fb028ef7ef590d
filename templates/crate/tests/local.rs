//! `{{name}}-local` on `local/archiver.txt`: the whole system (the event
//! store, the projector, the archiver) on one machine, in memory. The item
//! not renamed for 30 days is archived by the archiver at the sweep, and
//! every consumer applies it; the item renamed since is not.

use std::process::Command;

/// The lines of the output that start (after their indent) with `start`.
fn lines<'a>(out: &'a str, start: &str) -> Vec<&'a str> {
    out.lines()
        .map(str::trim)
        .filter(|line| line.starts_with(start))
        .collect()
}

#[test]
fn the_archiver_archives_the_item_not_renamed_for_30_days_end_to_end() {
    let output = Command::new(env!("CARGO_BIN_EXE_{{name}}-local"))
        .arg("local/archiver.txt")
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env_remove("PERSONAL_DATA_KEY")
        .output()
        .expect("run the local binary");
    let out = String::from_utf8_lossy(&output.stdout);
    let err = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{out}\n{err}");

    // The sweep fired one deadline: item-1's. The archiver appended one
    // event, ItemArchived to item-1's stream, and both consumers applied it.
    let sweep = out.split("> sweep\n").nth(1).expect("the sweep ran");
    assert!(
        sweep.starts_with("  archiver   deadlines: fired 1, moved 0, failed 0\n"),
        "{out}"
    );
    assert_eq!(
        lines(&out, "archiver   appended"),
        ["archiver   appended item-1 seq 2 ItemArchived"],
        "{out}"
    );
    for consumer in ["projector", "archiver"] {
        let line = format!("{consumer:<10} item-1 seq 2 ItemArchived applied");
        assert_eq!(lines(&out, &line).len(), 1, "{line}\n{out}");
    }

    // The tables at the end: item-1 archived, item-2 not (its deadline 30
    // days after its rename).
    for (row, then) in [
        ("item     item-1       sequence 2", "archived true"),
        ("item     item-2       sequence 2", "archived false"),
        ("archival item-1       sequence 2", "\"ARCHIVED\""),
        ("archival item-2       sequence 2", "\"ACTIVE\""),
    ] {
        let found = lines(&out, row);
        assert!(
            found.len() == 1 && found[0].contains(then),
            "{row} … {then}\n{out}"
        );
    }
    assert_eq!(lines(&out, "due at"), ["due at 1804320000"], "{out}");
}
