//! The samples of `events/`, run by `library-replay` on its embedded table
//! and by `library-loans-replay` through the process: the story each
//! tells, and the tables at the end.

use std::process::Command;

const SAMPLES: [&str; 3] = [
    "events/01-members-join-and-borrow.json",
    "events/02-reminded-then-fined.json",
    "events/03-member-forgotten.json",
];

fn replay(binary: &str) -> String {
    let output = Command::new(binary)
        .args(SAMPLES)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        // The function's variables, at their defaults.
        .env_remove("GAP_POLICY")
        .env_remove("PARK_AFTER_RECEIVES")
        .env_remove("MAX_PARKED_PER_STREAM")
        .env_remove("PERSONAL_DATA_KEY")
        .output()
        .expect("run replay");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    assert!(
        !stdout.contains("\"batchItemFailures\":[{"),
        "no message failed:\n{stdout}"
    );
    stdout
}

#[test]
fn replay_tells_the_samples_story() {
    let stdout = replay(env!("CARGO_BIN_EXE_library-replay"));
    for line in [
        "book-2  seq 4  FineCharged   applied",
        "ada  seq 2  PersonalDataErased  applied",
        // The table at the end: Alan's book overdue and fined, Ada forgotten,
        // each member's activity a line, its three counters on it.
        "book    book-2       sequence 4   lentTo \"alan\" overdue true title \"Solaris\"",
        "member  ada          sequence 2   email (erased) name (erased)",
        "member  alan         sequence 1   email (personal) name (personal)",
        "activity ada          onLoan 0 loans 1\n",
        "activity alan         onLoan 1 loans 1 fines 1\n",
    ] {
        assert!(stdout.contains(line), "{line} missing:\n{stdout}");
    }
}

#[test]
fn the_process_follows_each_book_and_ignores_the_members() {
    let stdout = replay(env!("CARGO_BIN_EXE_library-loans-replay"));
    for line in [
        "ada  seq 2  PersonalDataErased  ignored",
        "loan    book-1       sequence 3   state \"ON_SHELF\"",
        "loan    book-2       sequence 4   member \"alan\" state \"FINED\"",
    ] {
        assert!(stdout.contains(line), "{line} missing:\n{stdout}");
    }
}
