//! The `inspect` binary, the operator's look at one aggregate and at every
//! entity with events parked, on DynamoDB Local.

mod support;

use std::process::Command;

use sequence_guard::runner::{Invocation, Runner, RunnerConfig};
use support::*;

fn inspect(args: &[&str]) -> (i32, String, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_inspect"))
        .args(args)
        .env_remove("AWS_ENDPOINT_URL")
        .env_remove("AWS_ENDPOINT_URL_DYNAMODB")
        .env_remove("TABLE_NAME")
        .output()
        .expect("run inspect");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[tokio::test]
async fn inspect_shows_the_state_the_parked_events_and_the_conflicts() {
    let store = fresh_table().await;
    let runner = Runner::new(shop::domain(), store.clone(), RunnerConfig::default());
    let (story, closing_sample) = samples::until_the_gap_closes();
    let run = |json: &'static str| {
        let runner = &runner;
        async move {
            let invocation = Invocation {
                deadline: None,
                now: sequence_guard::lambda::epoch_seconds(),
            };
            runner.run(&sample(json), invocation).await.expect("run");
        }
    };
    for (_, json) in story {
        run(json).await;
    }
    let endpoint = dynamodb_local().endpoint.clone();
    let at = [
        "--endpoint-url",
        endpoint.as_str(),
        "--table",
        store.table(),
    ];
    let with = |more: &[&'static str]| -> Vec<&str> {
        at.iter().copied().chain(more.iter().copied()).collect()
    };

    let (code, stdout, stderr) = inspect(&with(&["order", "order-100"]));
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.starts_with("order order-100\n  sequence 3 (last event "),
        "{stdout}"
    );
    assert!(
        stdout.contains("  waiting for 4; 2 parked, parked for "),
        "{stdout}"
    );
    assert!(stdout.contains("    seq 5 OrderUpdated event "), "{stdout}");
    assert!(
        stdout.contains("    seq 6 OrderCancelled event "),
        "{stdout}"
    );
    assert!(stdout.contains("  no conflicts"), "{stdout}");
    assert!(stdout.contains("  status OPEN\n"), "as stored: {stdout}");
    assert!(!stdout.contains("bob@example.com"), "no bodies: {stdout}");

    let (code, stdout, _) = inspect(&with(&["--parked"]));
    assert_eq!(code, 0);
    assert!(
        stdout.starts_with("1 entity with events parked\n"),
        "{stdout}"
    );
    assert!(
        stdout.contains("  order order-100: waiting for 4, 2 parked, for "),
        "{stdout}"
    );

    run(closing_sample).await;
    let (code, stdout, _) = inspect(&with(&["order", "order-100"]));
    assert_eq!(code, 0);
    assert!(stdout.contains("  sequence 6 (last event "), "{stdout}");
    assert!(stdout.contains("  nothing parked"), "{stdout}");
    assert!(
        stdout.contains("  1 conflict\n    seq 6 event "),
        "{stdout}"
    );
    let (_, stdout, _) = inspect(&with(&["--parked"]));
    assert!(
        stdout.starts_with("0 entities with events parked\n"),
        "{stdout}"
    );

    let (code, stdout, _) = inspect(&with(&["product", "no-such-product"]));
    assert_eq!(code, 0);
    assert!(
        stdout.contains("  not created\n  nothing parked\n  no conflicts"),
        "{stdout}"
    );
}

#[test]
fn bad_arguments_are_named_with_exit_code_2() {
    for (args, expected) in [
        (&["order", "order-1"][..], "--table <NAME>"),
        (&["--table", "t-1"][..], "<KIND>"),
        (
            &["--table", "t-1", "widget", "w-1"][..],
            "invalid value 'widget'",
        ),
        (
            &["--table", "t-1", "--frobnicate"][..],
            "unexpected argument '--frobnicate'",
        ),
        (
            &["--table", "t-1", "--parked", "order", "o"][..],
            "cannot be used with",
        ),
        (&["--table"][..], "a value is required for '--table <NAME>'"),
    ] {
        let (code, _, stderr) = inspect(args);
        assert_eq!(code, 2, "{args:?}");
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
    }
    let (code, stdout, _) = inspect(&["--help"]);
    assert_eq!(code, 0);
    for option in ["--table", "--endpoint-url", "--parked", "sku", "Examples"] {
        assert!(stdout.contains(option), "{option}: {stdout}");
    }
}

#[test]
fn an_unreachable_table_is_one_line_with_exit_code_1() {
    let port = free_port();
    let endpoint = format!("http://127.0.0.1:{port}");
    let (code, _, stderr) = inspect(&[
        "--endpoint-url",
        &endpoint,
        "--table",
        "nowhere",
        "order",
        "o",
    ]);
    assert_eq!(code, 1, "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(stderr.contains("cannot reach DynamoDB"), "{stderr}");
}

/// The stock of a sku, and a table that does not exist.
#[tokio::test]
async fn inspect_shows_stock_and_names_a_missing_table() {
    let store = fresh_table().await;
    let runner = Runner::new(shop::domain(), store.clone(), RunnerConfig::default());
    let invocation = Invocation {
        deadline: None,
        now: sequence_guard::lambda::epoch_seconds(),
    };
    runner
        .run(&sample(samples::INVENTORY), invocation)
        .await
        .expect("run");
    let endpoint = dynamodb_local().endpoint.clone();
    let (code, stdout, stderr) = inspect(&[
        "--endpoint-url",
        &endpoint,
        "--table",
        store.table(),
        "sku",
        "SKU-LAMP",
    ]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stdout, "sku SKU-LAMP\n  onHand 7\n");
    let (code, _, stderr) = inspect(&[
        "--endpoint-url",
        &endpoint,
        "--table",
        "no-such-table",
        "--parked",
    ]);
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("table `no-such-table` does not exist"),
        "{stderr}"
    );
}
