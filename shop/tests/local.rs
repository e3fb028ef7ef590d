//! `local`: the shop's whole system (its event store, the orders and status
//! projectors, the payments process) run from a script on one machine, in
//! memory and on DynamoDB Local: an order paid in time ends paid, one never
//! paid is cancelled by the process at its deadline (and every consumer
//! sees the cancel), one cancelled after a part payment gets one refund,
//! and an erased subject's data is gone from every table. A script or a
//! command that cannot work is named.

mod support;

use std::collections::HashMap;
use std::process::Command;

use aws_sdk_dynamodb::types::AttributeValue;
use sequence_guard::store::dynamodb::connect;
use support::*;

const SCRIPT: &str = "shop/local/payments.txt";

fn local(args: &[&str], variables: &[(&str, &str)]) -> (i32, String, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_local"))
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
        .args(args)
        .env_remove("PERSONAL_DATA_KEY")
        .env_remove("PAYMENT_WINDOW_SECONDS")
        .envs(variables.iter().copied())
        .output()
        .expect("local runs");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// The lines of the output that start (after their indent) with `start`.
fn lines<'a>(out: &'a str, start: &str) -> Vec<&'a str> {
    out.lines()
        .map(str::trim)
        .filter(|line| line.starts_with(start))
        .collect()
}

/// What the script's run must have done, wherever it ran.
fn assert_the_story(out: &str) {
    // The process appended exactly two events: order-3's refund of the part
    // paid, and order-2's cancel at its deadline (at the sweep after the
    // window), none for order-1 (paid in time).
    let appended = lines(out, "payments   appended");
    assert_eq!(
        appended,
        [
            "payments   appended order-3 seq 4 RefundRequested",
            "payments   appended order-2 seq 2 OrderCancelled",
        ],
        "{out}"
    );
    let sweep = out.split("> sweep\n").nth(1).expect("the sweep ran");
    assert!(
        sweep.starts_with("  payments   deadlines: fired 1, moved 0, failed 0\n"),
        "{out}"
    );
    // Every consumer was given each appended event, and applied it.
    for consumer in ["orders", "status", "payments"] {
        for event in [
            "order-3 seq 4 RefundRequested",
            "order-2 seq 2 OrderCancelled",
        ] {
            let line = format!("{consumer:<10} {event} applied");
            assert_eq!(lines(out, &line).len(), 1, "{line}\n{out}");
        }
    }
    assert!(
        !out.contains("failed (") && !out.contains("refused"),
        "{out}"
    );
    // The tables at the end.
    for (row, then) in [
        ("order    order-2      sequence 2", "status CANCELLED"),
        ("order    order-3      sequence 4", "refundCents 1000"),
        (
            "status   order-2      sequence 2",
            "\"payment not received\"",
        ),
        ("payment  order-1      sequence 3", "state PAID"),
        ("payment  order-2      sequence 2", "state CANCELLED"),
        ("payment  order-3      sequence 4", "state CANCELLED"),
    ] {
        let found = lines(out, row);
        assert!(
            found.len() == 1 && found[0].contains(then),
            "{row} … {then}\n{out}"
        );
    }
}

#[test]
fn the_script_runs_the_whole_shop_in_memory() {
    let (code, out, err) = local(&[SCRIPT], &[]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert_the_story(&out);
    assert!(
        out.contains("erased    order-1: key deleted true; told order-1 seq 3"),
        "{out}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_script_runs_the_whole_shop_on_dynamodb_local() {
    let endpoint = dynamodb_local().endpoint.clone();
    let prefix = format!("local-{}", std::process::id());
    let (code, out, err) = local(
        &[SCRIPT, "--endpoint-url", &endpoint, "--prefix", &prefix],
        &[],
    );
    assert_eq!(code, 0, "{out}\n{err}");
    assert_the_story(&out);

    // The tables are the deployed functions' own: the event store holds
    // order-2's cancel as the process appended it, and order-1's customer
    // is gone from the orders table (its key deleted from the store's).
    let client = connect(Some(&endpoint)).await;
    let item = |table: String, pk: &str, sk: &str| {
        let client = client.clone();
        let (pk, sk) = (pk.to_owned(), sk.to_owned());
        async move {
            client
                .get_item()
                .table_name(table)
                .key("pk", AttributeValue::S(pk))
                .key("sk", AttributeValue::S(sk))
                .send()
                .await
                .expect("get")
                .item
                .unwrap_or_default()
        }
    };
    let cancel: HashMap<String, AttributeValue> = item(
        format!("{prefix}-events"),
        "STREAM#order-2",
        "EVENT#00000000000000000002",
    )
    .await;
    assert_eq!(
        cancel
            .get("type")
            .and_then(|v| v.as_s().ok())
            .map(String::as_str),
        Some("OrderCancelled"),
        "{cancel:?}"
    );
    let order = item(format!("{prefix}-orders"), "ORDER#order-1", "STATE").await;
    assert_eq!(
        order
            .get("customerName")
            .and_then(|v| v.as_s().ok())
            .map(String::as_str),
        Some("(erased)"),
        "{order:?}"
    );
    let key = item(format!("{prefix}-events"), "SUBJECT#order-1", "KEY").await;
    assert!(
        !key.contains_key("wrappedKey") && key.contains_key("erasedAt"),
        "{key:?}"
    );

    // AND a second run on the same tables finds its streams taken: each
    // creation is refused (the exit status says so), nothing is lost.
    let (code, out, _) = local(
        &[SCRIPT, "--endpoint-url", &endpoint, "--prefix", &prefix],
        &[],
    );
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("refused   order-1 OrderCreated"), "{out}");
}

#[test]
fn a_script_or_a_key_that_cannot_work_is_named() {
    let dir = std::env::temp_dir().join(format!("shop-local-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let script = dir.join("bad.txt");
    let path = script.to_str().expect("a path");

    // A line that is no command: named, nothing run.
    std::fs::write(
        &script,
        "clock 1800000000\nappend order-9 OrderCreated {oops}\n",
    )
    .expect("write");
    let (code, out, err) = local(&[path], &[]);
    assert_eq!(code, 2, "{out}\n{err}");
    assert!(out.is_empty(), "{out}");
    assert!(err.contains("line 2: the data is not JSON"), "{err}");

    // An append the store refuses (an update of a stream never created),
    // and a type no consumer knows: each named, the exit status 1.
    std::fs::write(
        &script,
        "append order-9 OrderUpdated {\"totalCents\": 5}\nappend order-9 OrderShipped {}\n",
    )
    .expect("write");
    let (code, out, err) = local(&[path], &[]);
    assert_eq!(code, 1, "{out}\n{err}");
    assert_eq!(lines(&out, "refused   order-9").len(), 2, "{out}");
    assert!(err.contains("2 refused or failed"), "{err}");

    // A KMS key in memory: refused with the way out.
    std::fs::write(&script, "show\n").expect("write");
    let (code, _, err) = local(&[path], &[("PERSONAL_DATA_KEY", "alias/shop")]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("needs --endpoint-url"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_documented_command_makes_a_local_key_a_run_takes() {
    // The command docs/personal-data.md gives, run as a reader would.
    let doc = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../docs/personal-data.md"
    ))
    .expect("docs/personal-data.md");
    let command = doc
        .lines()
        .map(str::trim)
        .find(|line| line.starts_with("export PERSONAL_DATA_KEY=\"local:"))
        .expect("the command");
    let output = Command::new("sh")
        .args([
            "-c",
            &format!("{command}; printf %s \"$PERSONAL_DATA_KEY\""),
        ])
        .output()
        .expect("sh runs");
    let key = String::from_utf8(output.stdout).expect("text");
    assert!(key.starts_with("local:") && key.len() == 6 + 43, "{key}");

    // `local` seals with it: the whole script runs.
    let (code, out, err) = local(&[SCRIPT], &[("PERSONAL_DATA_KEY", &key)]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert_the_story(&out);

    // One byte short: refused before anything runs, naming the form.
    let (code, out, err) = local(&[SCRIPT], &[("PERSONAL_DATA_KEY", &key[..key.len() - 2])]);
    assert_eq!(code, 2, "{out}\n{err}");
    assert!(err.contains("must hold 32 bytes in base64url"), "{err}");
}
