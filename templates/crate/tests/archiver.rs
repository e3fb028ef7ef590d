//! The samples of `events/`, run by `{{name}}-archiver-replay`: the process
//! follows each item's stream, and keeps a deadline while the item is active.

use std::process::Command;

const SAMPLES: [&str; 4] = [
    "events/01-item-created-and-renamed.json",
    "events/02-gap-parked.json",
    "events/03-gap-closed.json",
    "events/04-item-archived.json",
];

#[test]
fn the_archiver_follows_each_item_and_keeps_a_deadline_while_active() {
    let earliest = now() + {{crate}}::archiver::ARCHIVE_AFTER_SECONDS;
    let output = Command::new(env!("CARGO_BIN_EXE_{{name}}-archiver-replay"))
        .args(SAMPLES)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env_remove("GAP_POLICY")
        .env_remove("PARK_AFTER_RECEIVES")
        .env_remove("MAX_PARKED_PER_STREAM")
        .output()
        .expect("run the archiver's replay");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    for line in [
        // It follows the item's stream through the guard, as the projector does.
        "item-1  seq 4  ItemRenamed  parked",
        "drained item-1 seq 4 ItemRenamed",
        "item-1  seq -  ItemViewed   ignored",
        // Its states at the end: item-2 was archived by hand.
        "archival item-1       sequence 4   state \"ACTIVE\"",
        "archival item-2       sequence 2   state \"ARCHIVED\"",
    ] {
        assert!(stdout.contains(line), "{line} missing:\n{stdout}");
    }
    // The active item's deadline: 30 days after its last rename; the
    // archived one has none.
    let due: u64 = stdout
        .lines()
        .find_map(|line| line.strip_prefix("  due     archival item-1: at "))
        .and_then(|rest| rest.split(' ').next())
        .and_then(|at| at.parse().ok())
        .unwrap_or_else(|| panic!("no deadline for item-1:\n{stdout}"));
    let latest = now() + {{crate}}::archiver::ARCHIVE_AFTER_SECONDS;
    assert!(
        (earliest..=latest).contains(&due),
        "{due} not 30 days after the replay:\n{stdout}"
    );
    assert!(!stdout.contains("archival item-2:"), "{stdout}");
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_secs())
}
