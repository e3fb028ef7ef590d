//! The samples of `events/`, run by `{{name}}-replay` on its embedded table:
//! the story each tells, and the table at the end.

use std::process::Command;

const SAMPLES: [&str; 4] = [
    "events/01-item-created-and-renamed.json",
    "events/02-gap-parked.json",
    "events/03-gap-closed.json",
    "events/04-item-archived.json",
];

#[test]
fn replay_tells_the_samples_story() {
    let output = Command::new(env!("CARGO_BIN_EXE_{{name}}-replay"))
        .args(SAMPLES)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        // The function's variables, at their defaults.
        .env_remove("GAP_POLICY")
        .env_remove("PARK_AFTER_RECEIVES")
        .env_remove("MAX_PARKED_PER_STREAM")
        .output()
        .expect("run replay");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    for line in [
        // A view sent twice is counted once.
        "item-1  seq -  ItemViewed   applied",
        "item-1  seq -  ItemViewed   duplicate",
        // The rename to 4 arrives before 3: parked, then drained.
        "parked  item-1 seq 4 (waiting for 3; 1 parked on it)",
        "drained item-1 seq 4 ItemRenamed",
        // The table at the end.
        // An item archived (as the archiver would, after 30 days).
        "item-2  seq 2  ItemArchived  applied",
        "item    item-1       sequence 4   archived false name \"Reading lamp\"",
        "item    item-2       sequence 2   archived true name \"Chair\"",
        "views   item-1       views 1",
    ] {
        assert!(stdout.contains(line), "{line} missing:\n{stdout}");
    }
    assert!(
        !stdout.contains("\"batchItemFailures\":[{"),
        "no message failed:\n{stdout}"
    );
}
