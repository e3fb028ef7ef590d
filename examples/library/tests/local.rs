//! `library-local` on `local/overdue.txt`: the library's whole system (its
//! event store, the projector, the process `loans`) run from the script on
//! one machine, in memory and on DynamoDB Local. The loan returned in time
//! gets no reminder; the one returned within the grace, a reminder and no
//! fine; the one never returned, a reminder and a fine; every consumer
//! applies what `loans` appended; the forgotten member's name and email
//! are erased, her activity kept.

use std::collections::HashMap;
use std::process::Command;

use aws_sdk_dynamodb::types::AttributeValue;
use sequence_guard::store::dynamodb::connect;
use sequence_guard::testing::DynamoLocal;

const SCRIPT: &str = "local/overdue.txt";

fn local(args: &[&str]) -> (i32, String, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_library-local"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(args)
        .env_remove("PERSONAL_DATA_KEY")
        .env("AWS_ACCESS_KEY_ID", "local")
        .env("AWS_SECRET_ACCESS_KEY", "local")
        .env("AWS_REGION", "us-east-1")
        .output()
        .expect("run library-local");
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
    // The first sweep (day 15) fired the two loans not back; the second
    // (day 23), Grace's grace. Nothing else was due.
    let sweeps: Vec<&str> = out.split("> sweep\n").skip(1).collect();
    assert_eq!(sweeps.len(), 2, "{out}");
    assert!(
        sweeps[0].starts_with("  loans      deadlines: fired 2, moved 0, failed 0\n"),
        "{out}"
    );
    assert!(
        sweeps[1].starts_with("  loans      deadlines: fired 1, moved 0, failed 0\n"),
        "{out}"
    );
    // Exactly three appends by the process: no reminder for book-1
    // (returned in time), no fine for book-2 (returned within the grace).
    let mut appended = lines(out, "loans      appended");
    appended.sort_unstable();
    assert_eq!(
        appended,
        [
            "loans      appended book-2 seq 3 ReminderSent",
            "loans      appended book-3 seq 3 ReminderSent",
            "loans      appended book-3 seq 4 FineCharged",
        ],
        "{out}"
    );
    // Every consumer was given each, and applied it.
    for consumer in ["projector", "loans"] {
        for event in [
            "book-2 seq 3 ReminderSent",
            "book-3 seq 3 ReminderSent",
            "book-3 seq 4 FineCharged",
        ] {
            let line = format!("{consumer:<10} {event} applied");
            assert_eq!(lines(out, &line).len(), 1, "{line}\n{out}");
        }
    }
    // Grace forgotten: her stream told, the projector's member erased.
    assert!(
        out.contains("  erased    grace: key deleted true; told grace seq 2\n"),
        "{out}"
    );
    assert_eq!(
        lines(out, "projector  grace seq 2 PersonalDataErased applied").len(),
        1,
        "{out}"
    );
    assert!(
        !out.contains("refused") && !out.contains("failed ("),
        "{out}"
    );
    // The tables at the end.
    for row in [
        "book     book-1       sequence 3   overdue false title \"Dune\"",
        "book     book-2       sequence 4   overdue false title \"Solaris\"",
        "book     book-3       sequence 4   lentTo \"grace\" overdue true title \"Neuromancer\"",
        "member   ada          sequence 1   email (personal) name (personal)",
        "member   grace        sequence 2   email (erased) name (erased)",
        "activity ada          onLoan 0 loans 1",
        "activity alan         onLoan 0 loans 1",
        "activity grace        onLoan 1 loans 1 fines 1",
        "loan     book-1       sequence 3   state \"ON_SHELF\"",
        "loan     book-2       sequence 4   state \"ON_SHELF\"",
        "loan     book-3       sequence 4   member \"grace\" state \"FINED\"",
    ] {
        assert_eq!(lines(out, row), [row], "{out}");
    }
    // Nothing left pending: no deadline in any table.
    assert!(lines(out, "due at").is_empty(), "{out}");
}

#[test]
fn the_script_runs_the_whole_library_in_memory() {
    let (code, out, err) = local(&[SCRIPT]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert_the_story(&out);
    // The run the guide and the README show is this one, line for line
    // (the lines they leave out aside).
    let root = env!("CARGO_MANIFEST_DIR");
    for (doc, heading) in [
        ("../../docs/guide.md", "## The lending library, end to end"),
        ("README.md", "## Run it on one machine"),
    ] {
        let text = std::fs::read_to_string(format!("{root}/{doc}")).expect(doc);
        let shown = shown(&text, heading);
        assert!(shown.len() > 10, "{doc}: {shown:?}");
        let mut printed = out.lines().map(str::trim);
        for line in &shown {
            // An event's id is the run's own: `(...)` stands for it.
            let start = line.split(" (...)").next().unwrap_or(line);
            assert!(
                printed.any(|printed| printed.starts_with(start)),
                "{doc} shows `{line}`, which the run does not print (in this order):\n{out}"
            );
        }
    }
}

/// The lines of the first `text` block after `heading` in `doc`, trimmed,
/// but those that stand for lines left out (`...`).
fn shown(doc: &str, heading: &str) -> Vec<String> {
    let section = doc
        .split_once(heading)
        .unwrap_or_else(|| panic!("no section {heading}"))
        .1;
    let block = section
        .split_once("```text\n")
        .and_then(|(_, rest)| rest.split_once("```"))
        .unwrap_or_else(|| panic!("no text block under {heading}"))
        .0;
    block
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && *line != "...")
        .map(str::to_owned)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_script_runs_the_whole_library_on_dynamodb_local() {
    let dynamodb = DynamoLocal::start().expect("DynamoDB Local");
    let prefix = format!("library-{}", std::process::id());
    let (code, out, err) = local(&[
        SCRIPT,
        "--endpoint-url",
        &dynamodb.endpoint,
        "--prefix",
        &prefix,
    ]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert_the_story(&out);

    // The tables are the deployed functions' own.
    let client = connect(Some(&dynamodb.endpoint)).await;
    let item = |table: &str, pk: &str, sk: &str| {
        let request = client
            .get_item()
            .table_name(format!("{prefix}-{table}"))
            .key("pk", AttributeValue::S(pk.to_owned()))
            .key("sk", AttributeValue::S(sk.to_owned()))
            .consistent_read(true);
        async move {
            request
                .send()
                .await
                .expect("get an item")
                .item
                .unwrap_or_default()
        }
    };
    let text = |item: &HashMap<String, AttributeValue>, name: &str| {
        item.get(name)
            .and_then(|value| value.as_s().ok())
            .cloned()
            .unwrap_or_else(|| panic!("no text {name}: {item:?}"))
    };
    let number = |item: &HashMap<String, AttributeValue>, name: &str| {
        item.get(name)
            .and_then(|value| value.as_n().ok())
            .cloned()
            .unwrap_or_else(|| panic!("no number {name}: {item:?}"))
    };
    // The event store holds the fine as `loans` appended it.
    let fine = item("events", "STREAM#book-3", "EVENT#00000000000000000004").await;
    assert_eq!(text(&fine, "type"), "FineCharged", "{fine:?}");
    assert!(
        text(&fine, "body").contains("\"amountCents\":500"),
        "{fine:?}"
    );
    // Grace's activity: the fine counted, beside her loans.
    let activity = item("projector", "MEMBER#grace", "ACTIVITY").await;
    for (counter, value) in [("onLoan", "1"), ("loans", "1"), ("fines", "1")] {
        assert_eq!(number(&activity, counter), value, "{activity:?}");
    }
    // Grace forgotten: her name and email erased in the projection, her key
    // gone from the event store; Ada's kept (sealed in the store, open here).
    let grace = item("projector", "MEMBER#grace", "STATE").await;
    assert_eq!(text(&grace, "name"), "(erased)", "{grace:?}");
    assert_eq!(text(&grace, "email"), "(erased)", "{grace:?}");
    let ada = item("projector", "MEMBER#ada", "STATE").await;
    assert_eq!(text(&ada, "name"), "Ada Lovelace", "{ada:?}");
    let key = item("events", "SUBJECT#grace", "KEY").await;
    assert!(
        !key.contains_key("wrappedKey") && key.contains_key("erasedAt"),
        "{key:?}"
    );
    // `loans`' own table: the fined loan, no deadline left.
    let loan = item("loans", "LOAN#book-3", "STATE").await;
    assert_eq!(text(&loan, "state"), "FINED", "{loan:?}");
    assert!(!loan.contains_key("dueAt"), "{loan:?}");
}
