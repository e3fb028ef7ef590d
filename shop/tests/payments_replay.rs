//! `payments-replay`: the process run on the embedded store, which is also
//! its event store: what it would append is printed at the sequence the
//! input's streams leave for it, each deadline set is listed, and a
//! DynamoDB table is refused (a process's replay appends nowhere).

use std::process::Command;

fn replay(args: &[&str]) -> (i32, String, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_payments-replay"))
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
        .args(args)
        .output()
        .expect("payments-replay runs");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn the_samples_leave_one_refund_to_append_after_the_streams_events_and_one_deadline() {
    let (code, out, err) = replay(&[
        "events/01-order-created-and-updated.json",
        "events/13-payment-received.json",
        "events/14-refund-requested.json",
    ]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(
        out.contains("payment order-300    sequence 2   state PAID"),
        "{out}"
    );
    assert!(
        out.contains("payment order-400    sequence 4   state CANCELLED"),
        "{out}"
    );
    // order-42 awaits payment: its deadline is listed.
    assert!(out.contains("due     payment order-42: at "), "{out}");
    // The refund of order-400's late payment, right after the three events
    // the input held of its stream when the payment was handled (the next
    // file holds a refund at that sequence: the one the process asked for,
    // as the event store would have sent it).
    let appended: Vec<&str> = out
        .lines()
        .skip_while(|line| !line.starts_with("Would append"))
        .skip(1)
        .collect();
    assert_eq!(appended.len(), 1, "{out}");
    assert!(
        appended[0].contains("order-400    seq 4   RefundRequested"),
        "{}",
        appended[0]
    );
    assert!(
        appended[0].contains("\"amountCents\":1800"),
        "{}",
        appended[0]
    );
}

#[test]
fn a_table_is_refused_with_the_reason() {
    let (code, out, err) = replay(&["--table", "payments", "events/13-payment-received.json"]);
    assert_eq!(code, 2, "{out}\n{err}");
    assert!(err.contains("drop --table"), "{err}");
    assert!(out.is_empty(), "{out}");
}

#[test]
fn a_scheduled_event_at_a_later_time_fires_the_deadlines_due_by_then() {
    // GIVEN order-42 created (a deadline of now + the window), and a
    // scheduled event two days from now.
    let later = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .as_secs()
        + 2 * 86_400;
    let time = aws_sdk_dynamodb::primitives::DateTime::from_secs(later as i64)
        .fmt(aws_sdk_dynamodb::primitives::DateTimeFormat::DateTime)
        .expect("a date");
    let dir = std::env::temp_dir().join(format!("payments-replay-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let sweep = dir.join("sweep.json");
    std::fs::write(
        &sweep,
        format!(r#"{{"source": "aws.events", "detail-type": "Scheduled Event", "time": "{time}", "detail": {{}}}}"#),
    )
    .expect("write");

    // WHEN it is replayed after the order.
    let (code, out, err) = replay(&[
        "events/01-order-created-and-updated.json",
        sweep.to_str().expect("a path"),
    ]);

    // THEN the sweep ran at the event's time: order-42's deadline fired,
    // and its cancel is what the process would append.
    assert_eq!(code, 0, "{out}\n{err}");
    let appended: Vec<&str> = out
        .lines()
        .skip_while(|line| !line.starts_with("Would append"))
        .skip(1)
        .collect();
    assert_eq!(appended.len(), 1, "{out}");
    assert!(
        appended[0].contains("order-42") && appended[0].contains("OrderCancelled"),
        "{out}"
    );
    assert!(!out.contains("due     payment order-42"), "{out}");

    // AND a time that is not one is refused, naming it.
    std::fs::write(&sweep, r#"{"source": "aws.events", "time": "tomorrow"}"#).expect("write");
    let (code, _, err) = replay(&[sweep.to_str().expect("a path")]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("`time`") && err.contains("tomorrow"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}
