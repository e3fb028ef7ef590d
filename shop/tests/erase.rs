//! The `erase` binary on DynamoDB Local, with the tests' local key: the
//! subject is the id exactly as given (no trimming: `order-9 ` is not
//! `order-9`), an id no stream id could be is refused (exit 2, nothing
//! written), and an id that never had a key is said so, marked erased all
//! the same (a later append of personal data for it refused).

mod support;

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::AttributeValue;
use sequence_guard::store::dynamodb::{connect, ensure_events_table};
use serde_json::{Value, json};
use support::*;

const APPEND: &str = env!("CARGO_BIN_EXE_append");
const ERASE: &str = env!("CARGO_BIN_EXE_erase");

/// An events table of its own on DynamoDB Local.
async fn events_table(name: &str) -> (Client, String) {
    let client = connect(Some(&dynamodb_local().endpoint)).await;
    let table = format!("erase-{name}-{}", std::process::id());
    ensure_events_table(&client, &table)
        .await
        .expect("events table");
    (client, table)
}

fn run(exe: &str, table: &str, args: &[&str]) -> (i32, String, String) {
    let mut all = vec!["--table", table];
    all.extend_from_slice(args);
    run_local(exe, &dynamodb_local().endpoint, &all)
}

fn created(name: &str) -> String {
    json!({"customerName": name, "email": "someone@example.com", "totalCents": 100}).to_string()
}

/// Appends an order with personal data with the `append` binary.
fn append_order(table: &str, order: &str) -> (i32, String, String) {
    run(
        APPEND,
        table,
        &[
            "--stream",
            order,
            "--type",
            "OrderCreated",
            "--data",
            &created("Ada"),
        ],
    )
}

fn json_line(stdout: &str) -> Value {
    serde_json::from_str(stdout.trim()).unwrap_or_else(|err| panic!("{err}: {stdout:?}"))
}

/// The subject's key item, as stored (`None`: there is none).
async fn key_item(
    client: &Client,
    table: &str,
    subject: &str,
) -> Option<std::collections::HashMap<String, AttributeValue>> {
    client
        .get_item()
        .table_name(table)
        .key("pk", AttributeValue::S(format!("SUBJECT#{subject}")))
        .key("sk", AttributeValue::S("KEY".into()))
        .consistent_read(true)
        .send()
        .await
        .expect("GetItem")
        .item
}

/// How many items the table holds.
async fn items(client: &Client, table: &str) -> usize {
    let scan = client.scan().table_name(table).send().await.expect("Scan");
    scan.items.unwrap_or_default().len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subject_with_a_space_is_not_the_subject_without_it() {
    // GIVEN order-9, whose customer's data is sealed with its key.
    let (client, table) = events_table("space").await;
    let (code, stdout, stderr) = append_order(&table, "order-9");
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(key_item(&client, &table, "order-9").await.is_some());

    // WHEN `order-9 ` (a trailing space) is erased.
    let (code, stdout, stderr) = run(ERASE, &table, &["--subject", "order-9 "]);

    // THEN that id, as given, is the one erased: it never had a key, which
    // the answer says; order-9's key is untouched and still seals.
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert_eq!(
        json_line(&stdout),
        json!({"subject": "order-9 ", "subjectKnown": false, "keyDeleted": false,
               "streamsTold": [], "alreadyDone": false})
    );
    assert!(
        stderr.contains(r#"the subject "order-9 " had no key in this event store"#),
        "{stderr}"
    );
    let kept = key_item(&client, &table, "order-9").await.expect("kept");
    assert!(kept.contains_key("wrappedKey"), "{:?}", kept.keys());
    let (code, stdout, stderr) = run(
        APPEND,
        &table,
        &[
            "--stream",
            "order-9",
            "--type",
            "OrderUpdated",
            "--data",
            &created("Ada Lovelace"),
        ],
    );
    assert_eq!(code, 0, "order-9 is not erased: {stdout}{stderr}");
    // The same goes for a leading space, and for the id itself.
    let (code, stdout, stderr) = run(ERASE, &table, &["--subject", " order-9"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert_eq!(json_line(&stdout)["subject"], " order-9");
    assert!(
        key_item(&client, &table, "order-9")
            .await
            .is_some_and(|item| item.contains_key("wrappedKey"))
    );
    let (code, stdout, stderr) = run(ERASE, &table, &["--subject", "order-9"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert_eq!(
        json_line(&stdout),
        json!({"subject": "order-9", "subjectKnown": true, "keyDeleted": true,
               "streamsTold": [{"stream": "order-9", "sequence": 3}], "alreadyDone": false})
    );
    assert!(stderr.is_empty(), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_id_no_stream_id_could_be_is_refused_and_nothing_is_written() {
    let (client, table) = events_table("bad-ids").await;
    let long = "x".repeat(257);
    let cases: [(&str, &str); 5] = [
        ("", "must be 1 to 256 characters, got 0"),
        (&long, "must be 1 to 256 characters, got more than 256"),
        (
            "order-\u{FFFE}",
            "holds U+FFFE, a character SQS does not carry",
        ),
        ("order-\u{FFFF}", "holds U+FFFF"),
        ("order-\u{1}", "holds U+0001"),
    ];
    for (subject, says) in cases {
        let (code, stdout, stderr) = run(ERASE, &table, &["--subject", subject]);
        assert_eq!(code, 2, "{subject:?}: {stdout}{stderr}");
        assert!(stdout.is_empty(), "{subject:?}: {stdout}");
        assert!(
            stderr.contains("--subject") && stderr.contains(says),
            "{subject:?}: {stderr}"
        );
        // What append refuses as a stream, for the same reason.
        let (code, _, stderr) = append_order(&table, subject);
        assert_eq!(code, 2, "append {subject:?}: {stderr}");
    }
    assert_eq!(items(&client, &table).await, 0, "nothing written");

    // The longest id, and a blank one, are ids a stream can have.
    let longest = "y".repeat(256);
    for subject in [longest.as_str(), " "] {
        let (code, stdout, stderr) = run(ERASE, &table, &["--subject", subject]);
        assert_eq!(code, 0, "{subject:?}: {stdout}{stderr}");
        assert_eq!(json_line(&stdout)["subject"], subject);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_id_that_never_had_a_key_is_said_so_and_its_later_personal_data_refused() {
    let (client, table) = events_table("unknown").await;

    // WHEN order-7, which never had an event, is erased.
    let (code, stdout, stderr) = run(ERASE, &table, &["--subject", "order-7"]);

    // THEN it says so plainly, and marks the id erased.
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert_eq!(
        json_line(&stdout),
        json!({"subject": "order-7", "subjectKnown": false, "keyDeleted": false,
               "streamsTold": [], "alreadyDone": false})
    );
    for says in [
        r#"the subject "order-7" had no key in this event store"#,
        "exactly as given",
        r#"an append of personal data for "order-7" is refused from now on"#,
    ] {
        assert!(stderr.contains(says), "{says}: {stderr}");
    }
    let item = key_item(&client, &table, "order-7")
        .await
        .expect("an erased item");
    assert!(!item.contains_key("wrappedKey"), "{:?}", item.keys());

    // AND a later append of personal data for it is refused, naming it.
    let (code, stdout, stderr) = append_order(&table, "order-7");
    assert_eq!(code, 2, "{stdout}{stderr}");
    assert!(stderr.contains("`order-7` is erased"), "{stderr}");

    // AND again: 0, nothing more to do.
    let (code, stdout, stderr) = run(ERASE, &table, &["--subject", "order-7"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert_eq!(
        json_line(&stdout),
        json!({"subject": "order-7", "subjectKnown": true, "keyDeleted": false,
               "streamsTold": [], "alreadyDone": true})
    );
    assert!(stderr.is_empty(), "{stderr}");
}
