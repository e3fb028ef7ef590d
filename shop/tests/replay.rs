//! The `replay` binary, as the README's first command runs it.

mod support;

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
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
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
    let mut files: Vec<String> =
        std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../events"))
            .expect("events/")
            .filter_map(|entry| Some(format!("events/{}", entry.ok()?.file_name().to_str()?)))
            .filter(|name| name.ends_with(".json"))
            .collect();
    files.sort();
    let args: Vec<&str> = files.iter().map(String::as_str).collect();
    let (code, stdout, stderr) = replay(&args);
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.is_empty(), "its output tells it all: {stderr}");
    assert_eq!(stdout.matches("== events/").count(), files.len());
    // The runner's and the sweep's log lines, as the function logs them, on stderr.
    let (code, logged_stdout, logged) = replay_with(&args, &[("RUST_LOG", "warn")]);
    assert_eq!(code, 0, "{logged}");
    assert_eq!(logged_stdout, stdout, "the output is the same");
    assert!(
        logged.contains("WARN") && logged.contains("message failed") && logged.contains("gap"),
        "{logged}"
    );
    assert!(!logged.contains("INFO"), "{logged}");
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
    assert!(stdout.contains("sku     SKU-LAMP     onHand 7"), "{stdout}");
    // order-300's customer forgotten, under the guard: its sequence moved.
    assert!(
        stdout.contains("order-300  seq 3  PersonalDataErased  applied")
            && stdout.contains("order   order-300    sequence 3   totalCents 2500   status OPEN"),
        "{stdout}"
    );
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
    // Each SQS file ends with its batch response, as the function returns it;
    // the scheduled event is a sweep, which finds nothing parked at the end.
    assert_eq!(
        stdout
            .matches("  response: {\"batchItemFailures\":")
            .count(),
        files.len() - 1
    );
    assert!(
        stdout.contains("== events/12-scheduled-sweep.json (scheduled sweep of parked events)\n  0 entities with events parked; drained 0; oldest waiting -"),
        "{stdout}"
    );
}

#[test]
fn bad_arguments_and_files_are_named_with_exit_code_2() {
    let (code, _, stderr) = replay(&[]);
    assert_eq!(code, 2);
    assert!(
        stderr.contains("<FILE>") && stderr.contains("Usage"),
        "{stderr}"
    );

    let (code, _, stderr) = replay(&[
        "--endpoint-url",
        "http://localhost:8000",
        "events/01-order-created-and-updated.json",
    ]);
    assert_eq!(code, 2);
    assert!(stderr.contains("--table"), "{stderr}");

    let (code, _, stderr) = replay(&["--frobnicate"]);
    assert_eq!(code, 2);
    assert!(
        stderr.contains("unexpected argument '--frobnicate'"),
        "{stderr}"
    );

    let (code, _, stderr) = replay(&["events/no-such-file.json"]);
    assert_eq!(code, 2);
    assert_eq!(
        stderr.trim(),
        "replay: events/no-such-file.json: no such file"
    );

    let (code, _, stderr) = replay(&["events"]);
    assert_eq!(code, 2);
    assert_eq!(
        stderr.trim(),
        "replay: events: is a directory, not an event file"
    );

    let (code, _, stderr) = replay(&["Cargo.toml"]);
    assert_eq!(code, 2);
    assert!(
        stderr.starts_with("replay: Cargo.toml: not JSON"),
        "{stderr}"
    );

    let (code, _, stderr) = replay(&["template.yaml"]);
    assert_eq!(code, 2);
    assert!(stderr.contains("template.yaml: not JSON"), "{stderr}");
}

/// `--help` is for reading: on stdout, exit 0, every option and an example.
#[test]
fn help_is_on_stdout_with_every_option_and_examples() {
    let (code, stdout, stderr) = replay(&["--help"]);
    assert_eq!(code, 0, "{stderr}");
    for option in [
        "--table",
        "--endpoint-url",
        "--create-table",
        "Examples:",
        "replay events/*.json",
        "Exit status",
    ] {
        assert!(stdout.contains(option), "{option} missing:\n{stdout}");
    }
    let (code, stdout, _) = replay(&["--version"]);
    assert_eq!(
        (code, stdout.trim()),
        (
            0,
            // The shop's version, and the library's (both 0.2.0 here).
            format!(
                "replay {} (sequence-guard {})",
                env!("CARGO_PKG_VERSION"),
                env!("CARGO_PKG_VERSION")
            )
            .as_str()
        )
    );
}

/// A reader that goes away (`replay ... | head`) ends the tool quietly.
#[test]
fn a_closed_pipe_ends_replay_quietly() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_replay"))
        .arg("events/01-order-created-and-updated.json")
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn replay");
    drop(child.stdout.take());
    let output = child.wait_with_output().expect("wait");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(stderr.is_empty(), "{stderr}");
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

/// AWS trouble is one line that says what to do, and a non-zero exit.
#[tokio::test]
async fn table_trouble_is_one_line_with_what_to_do() {
    let sample = "events/01-order-created-and-updated.json";
    let one_line = |stderr: &str| {
        assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
        assert!(
            !stderr.contains("ServiceError") && stderr.len() < 400,
            "{stderr}"
        );
    };
    // Nothing listens there.
    let closed = format!("http://127.0.0.1:{}", support::free_port());
    let (code, _, stderr) = replay(&["--endpoint-url", &closed, "--table", "t-1", sample]);
    assert_eq!(code, 1, "{stderr}");
    one_line(&stderr);
    assert!(
        stderr.contains("cannot reach DynamoDB") && stderr.contains("dynamodb-local.sh"),
        "{stderr}"
    );

    // No such table, then created twice (the second run finds it).
    let endpoint = support::dynamodb_local().endpoint.clone();
    let table = format!("replay-{}", support::free_port());
    let (code, _, stderr) = replay(&["--endpoint-url", &endpoint, "--table", &table, sample]);
    assert_eq!(code, 1, "{stderr}");
    one_line(&stderr);
    assert!(
        stderr.contains(&format!("table `{table}` does not exist"))
            && stderr.contains("--create-table"),
        "{stderr}"
    );
    for outcome in ["applied", "duplicate"] {
        let (code, stdout, stderr) = replay(&[
            "--endpoint-url",
            &endpoint,
            "--table",
            &table,
            "--create-table",
            sample,
        ]);
        assert_eq!(code, 0, "{stderr}");
        assert_eq!(stdout.matches(outcome).count(), 3, "{stdout}");
    }

    // No credentials anywhere (and no instance metadata to ask).
    let home = std::env::temp_dir().join(format!("replay-home-{}", support::free_port()));
    let output = Command::new(env!("CARGO_BIN_EXE_replay"))
        .args(["--table", "t-1", sample])
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
        .env_clear()
        .env("HOME", &home)
        .env("AWS_REGION", "eu-west-1")
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .output()
        .expect("run replay");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    one_line(&stderr);
    assert!(
        stderr.contains("no AWS credentials") && stderr.contains("AWS_PROFILE"),
        "{stderr}"
    );
}

/// AWS's generic sample (`sam local generate-event sqs receive-message`):
/// not a FIFO record, its body not an event. It is invalid and failed, its
/// stream falls back to its message id, and the columns stay aligned beside
/// a short stream.
#[test]
fn the_generic_aws_sample_is_invalid_and_the_columns_stay_aligned() {
    let generic = r#"{"Records":[
      {"messageId":"19dd0b57-b21e-4ac1-bd88-01bbb068cb78","receiptHandle":"MessageReceiptHandle","body":"Hello from SQS!",
       "attributes":{"ApproximateReceiveCount":"1","SentTimestamp":"1523232000000","SenderId":"123456789012","ApproximateFirstReceiveTimestamp":"1523232000001"},
       "messageAttributes":{},"md5OfBody":"7b270e59b47ff90a553787216d55d91d","eventSource":"aws:sqs","eventSourceARN":"arn:aws:sqs:us-east-1:123456789012:MyQueue","awsRegion":"us-east-1"},
      {"messageId":"m-2","body":"{\"eventId\":\"e-1\",\"type\":\"OrderCreated\",\"aggregateId\":\"o-1\",\"sequence\":1,\"data\":{\"customerName\":\"C\",\"email\":\"c@example.com\",\"totalCents\":1}}",
       "attributes":{"MessageGroupId":"o-1"},"messageAttributes":{},"eventSource":"aws:sqs"}]}"#;
    let file = std::env::temp_dir().join(format!("generic-sqs-{}.json", std::process::id()));
    std::fs::write(&file, generic).expect("write");
    let (code, stdout, stderr) = replay(&[file.to_str().expect("path")]);
    assert_eq!(code, 0, "{stderr}");
    let rows: Vec<&str> = stdout
        .lines()
        .filter(|line| line.contains(" seq "))
        .collect();
    assert_eq!(rows.len(), 2, "{stdout}");
    assert!(
        rows[0].starts_with(
            "  19dd0b57-b21e-4ac1-bd88-01bbb068cb78  19dd0b57-b21e-4ac1-bd88-01bbb068cb78  seq -"
        ),
        "the stream is the message id: {stdout}"
    );
    assert!(
        rows[0].contains("invalid (the body is not JSON"),
        "{stdout}"
    );
    let column = |row: &str, word: &str| row.find(word).expect(word);
    assert_eq!(column(rows[0], "seq "), column(rows[1], "seq "), "{stdout}");
    assert_eq!(
        column(rows[0], "invalid"),
        column(rows[1], "applied"),
        "{stdout}"
    );
    assert!(
        stdout.contains("19dd0b57-b21e-4ac1-bd88-01bbb068cb78\"}]}"),
        "failed: {stdout}"
    );
    let _ = std::fs::remove_file(file);
}

/// A record without a messageId fails the invocation as a whole (on Lambda
/// the batch is retried): replay says so and exits 1.
#[test]
fn a_failed_invocation_exits_1() {
    let event =
        r#"{"Records":[{"body":"{}","attributes":{"MessageGroupId":"g"},"messageAttributes":{}}]}"#;
    let file = std::env::temp_dir().join(format!("no-message-id-{}.json", std::process::id()));
    std::fs::write(&file, event).expect("write");
    let (code, stdout, stderr) = replay(&[file.to_str().expect("path")]);
    let _ = std::fs::remove_file(&file);
    assert_eq!(code, 1, "{stdout}{stderr}");
    assert!(
        stdout.contains("invocation failed") && stdout.contains("messageId"),
        "{stdout}"
    );
    assert!(stderr.contains("1 message was not done"), "{stderr}");
}

/// Bare event bodies (one JSON object, or JSON lines) are wrapped as the
/// SQS records Lambda would deliver, ten to a batch, in order.
#[test]
fn bare_event_bodies_are_replayed_as_sqs_records() {
    let dir = std::env::temp_dir().join(format!("replay-bodies-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let body = |sequence: u64| {
        let event_type = if sequence == 1 {
            "OrderCreated"
        } else {
            "OrderUpdated"
        };
        format!(
            r#"{{"eventId":"e-{sequence}","type":"{event_type}","aggregateId":"o-1","sequence":{sequence},"data":{{"customerName":"C","email":"c@example.com","totalCents":{sequence}}}}}"#
        )
    };
    // Twelve events, 7 missing: two batches, the gap failing its stream's rest.
    let lines: Vec<String> = (1..=13).filter(|n| *n != 7).map(body).collect();
    let jsonl = dir.join("orders.jsonl");
    std::fs::write(&jsonl, lines.join("\n") + "\n\n").expect("write");
    let single = dir.join("one.json");
    std::fs::write(&single, format!("{}\n", body(7))).expect("write");
    let (jsonl, single) = (jsonl.display().to_string(), single.display().to_string());

    let (code, stdout, stderr) = replay(&[&jsonl]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains(", batch 1 (10 messages)") && stdout.contains(", batch 2 (2 messages)"),
        "{stdout}"
    );
    assert!(
        stdout.contains("body-7   o-1  seq 8 ")
            && stdout.contains("gap (gap: the entity is at sequence 6, waiting for 7)"),
        "{stdout}"
    );
    assert!(
        stdout.contains("order   o-1          sequence 6 "),
        "{stdout}"
    );

    // The missing one alone, then the rest again: applied in order.
    let (code, stdout, stderr) = replay(&[&jsonl, &single, &jsonl]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains("order   o-1          sequence 13 "),
        "{stdout}"
    );

    let bad = dir.join("bad.jsonl");
    std::fs::write(&bad, format!("{}\n[1]\n", body(1))).expect("write");
    let (code, _, stderr) = replay(&[&bad.display().to_string()]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("line 2 is not a JSON object"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// An unsequenced event a consumer ignores (the status view and
/// `InventoryAdjusted`) is shown in its stream: the SQS record's group;
/// its `aggregateId` when its body has one; and, as a bare body that names
/// none, `-`, never its message id.
#[test]
fn an_ignored_unsequenced_event_is_shown_in_its_stream_not_its_message_id() {
    let status_replay = |args: &[&str]| {
        let output = Command::new(env!("CARGO_BIN_EXE_status-replay"))
            .args(args)
            .env_remove("GAP_POLICY")
            .env_remove("PARK_AFTER_RECEIVES")
            .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
            .output()
            .expect("run status-replay");
        assert_eq!(
            output.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout).into_owned()
    };
    let stdout = status_replay(&["events/09-inventory.json"]);
    assert!(
        stdout.contains(
            "  88daf401-6b40-43ef-a54b-0c4e010c4759  SKU-LAMP  seq -  InventoryAdjusted  ignored"
        ),
        "{stdout}"
    );

    let dir = std::env::temp_dir().join(format!("replay-ignored-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let bodies = dir.join("inventory.jsonl");
    std::fs::write(
        &bodies,
        concat!(
            r#"{"eventId":"i-1","type":"InventoryAdjusted","data":{"sku":"SKU-LAMP","delta":10}}"#,
            "\n",
            r#"{"eventId":"i-2","type":"InventoryAdjusted","aggregateId":"SKU-DESK","data":{"sku":"SKU-DESK","delta":5}}"#,
            "\n"
        ),
    )
    .expect("write");
    let stdout = status_replay(&[bodies.to_str().expect("path")]);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        stdout.contains("  body-1  -         seq -  InventoryAdjusted  ignored"),
        "{stdout}"
    );
    assert!(
        stdout.contains("  body-2  SKU-DESK  seq -  InventoryAdjusted  ignored"),
        "{stdout}"
    );
    assert!(!stdout.contains("body-1  body-1"), "{stdout}");
}
