//! The `replay` binary, as the README's first command runs it.

use std::process::Command;

fn replay(args: &[&str]) -> (i32, String, String) {
    replay_with(args, &[])
}

fn replay_with(args: &[&str], variables: &[(&str, &str)]) -> (i32, String, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_replay"))
        .args(args)
        .env_remove("GAP_POLICY")
        .env_remove("PARK_AFTER_RECEIVES")
        .envs(variables.iter().copied())
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run replay");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn replaying_every_sample_on_the_embedded_table_tells_the_story() {
    let mut files: Vec<String> = std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/events"))
        .expect("events/")
        .filter_map(|entry| Some(format!("events/{}", entry.ok()?.file_name().to_str()?)))
        .filter(|name| name.ends_with(".json"))
        .collect();
    files.sort();
    let args: Vec<&str> = files.iter().map(String::as_str).collect();
    let (code, stdout, stderr) = replay(&args);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stdout.matches("== events/").count(), files.len());
    assert!(
        stdout.contains("gap (gap: the entity is at sequence 3, waiting for 4)"),
        "{stdout}"
    );
    assert!(
        stdout.contains("invalid (unknown event type `OrderShipped`)"),
        "{stdout}"
    );
    assert!(
        stdout.contains("order   order-42     sequence 6   totalCents 2000   status CANCELLED"),
        "{stdout}"
    );
    assert!(stdout.contains("stock   SKU-LAMP     onHand 7"), "{stdout}");
    assert!(
        stdout.contains("  parked  order-100 seq 5, 6 (waiting for 4; 2 parked on it)"),
        "{stdout}"
    );
    assert!(
        stdout.contains("  drained order-100 seq 5 OrderUpdated")
            && stdout.contains("  drained order-100 seq 6 OrderCancelled"),
        "{stdout}"
    );
    assert!(
        stdout.contains("order   order-100    sequence 6   totalCents 500    status CANCELLED"),
        "{stdout}"
    );
    assert!(
        stdout.contains("  conflict order order-100: seq 6 event "),
        "{stdout}"
    );
    // Each file ends with its batch response, as the function returns it.
    assert_eq!(
        stdout
            .matches("  response: {\"batchItemFailures\":")
            .count(),
        files.len()
    );
}

#[test]
fn bad_arguments_and_files_are_named_with_exit_code_2() {
    let (code, _, stderr) = replay(&[]);
    assert_eq!(code, 2);
    assert!(
        stderr.contains("no event files given") && stderr.contains("usage"),
        "{stderr}"
    );

    let (code, _, stderr) = replay(&["--table", "t", "events/01-order-created-and-updated.json"]);
    assert_eq!(code, 2);
    assert!(
        stderr.contains("--endpoint-url and --table go together"),
        "{stderr}"
    );

    let (code, _, stderr) = replay(&["--frobnicate"]);
    assert_eq!(code, 2);
    assert!(stderr.contains("unknown option --frobnicate"), "{stderr}");

    let (code, _, stderr) = replay(&["events/no-such-file.json"]);
    assert_eq!(code, 2);
    assert!(stderr.contains("events/no-such-file.json"), "{stderr}");

    let (code, _, stderr) = replay(&["Cargo.toml"]);
    assert_eq!(code, 2);
    assert!(stderr.contains("Cargo.toml: not an SQS event"), "{stderr}");
}

/// `replay` reads the function's variables, with the same checks.
#[test]
fn replay_reads_and_checks_the_functions_variables() {
    let parked = [
        "events/06-two-streams-one-failing.json",
        "events/10-gap-parked.json",
    ];
    let (code, stdout, stderr) = replay(&parked);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("  parked  order-100 seq 5, 6"), "{stdout}");

    let (code, stdout, stderr) = replay_with(&parked, &[("GAP_POLICY", "retry")]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        !stdout.contains("  parked "),
        "retry never parks:\n{stdout}"
    );
    assert!(
        stdout.contains("gap (gap: the entity is at sequence 3, waiting for 4)"),
        "{stdout}"
    );

    let (code, stdout, stderr) = replay_with(&parked, &[("PARK_AFTER_RECEIVES", "4")]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        !stdout.contains("  parked "),
        "third delivery, threshold 4:\n{stdout}"
    );

    for (name, value) in [("GAP_POLICY", "bogus"), ("DEADLINE_MARGIN_MS", "3600000")] {
        let (code, stdout, stderr) = replay_with(&parked, &[(name, value)]);
        assert_eq!(code, 2, "{name}={value}: {stdout}");
        assert!(stderr.contains(name) && stderr.contains(value), "{stderr}");
    }
}
