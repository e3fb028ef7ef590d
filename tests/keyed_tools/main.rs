//! The tools on several counters kept on one item: a member's numbers in
//! the lending library of `tests/keyed_projections` (`onLoan` and `loans`
//! on `MEMBER#<id>` / `ACTIVITY`, and `recalls` on an item of its own), run
//! as binaries on DynamoDB Local (started here). `verify` compares every
//! counter of an item, a line for each that differs; `inspect` shows each.
//!
//! No test harness (`harness = false` in Cargo.toml): a tool reads its
//! arguments from its process, so this binary is also the library's tools.
//! Started with `LIBRARY_TOOL=rebuild` (or `verify`, `inspect`) it is that
//! tool; otherwise it runs the stories below (those whose name contains an
//! argument, when given any), each starting itself as the tools.

#[path = "../keyed_projections/library.rs"]
mod library;

use std::future::Future;
use std::os::unix::process::CommandExt;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::process::{Command, ExitCode};

use aws_sdk_dynamodb::types::AttributeValue;
use sequence_guard::cli;
use sequence_guard::producer::{Append, EventStore, NewEvent};
use sequence_guard::store::dynamodb::{connect, create_table, ensure_events_table};
use sequence_guard::testing::DynamoLocal;
use serde_json::{Value, json};

/// The variable that makes this binary one of the library's tools.
const TOOL: &str = "LIBRARY_TOOL";

fn main() -> ExitCode {
    match std::env::var(TOOL).as_deref() {
        Ok("rebuild") => return cli::rebuild(library::domain()),
        Ok("verify") => return cli::verify(library::domain()),
        Ok("inspect") => return cli::inspect(library::domain()),
        Ok(other) => {
            eprintln!("{TOOL}={other}: rebuild, verify or inspect");
            return ExitCode::from(2);
        }
        Err(_) => {}
    }
    let stories: [(&str, Story); 3] = [
        ("verify_compares_every_counter_of_an_item", |endpoint| {
            Box::pin(verify_compares_every_counter_of_an_item(endpoint))
        }),
        (
            "verify_names_each_counter_of_an_item_that_differs",
            |endpoint| Box::pin(verify_names_each_counter_of_an_item_that_differs(endpoint)),
        ),
        ("inspect_shows_every_counter_of_an_item", |endpoint| {
            Box::pin(inspect_shows_every_counter_of_an_item(endpoint))
        }),
    ];
    let args = Arguments::read();
    if args.list || args.ignored {
        // None is ignored.
        if !args.ignored {
            for (name, _) in &stories {
                println!("{name}: test");
            }
        }
        return ExitCode::SUCCESS;
    }
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    let local =
        DynamoLocal::start().unwrap_or_else(|err| panic!("DynamoDB Local could not start: {err}"));
    let mut failed = Vec::new();
    for (name, story) in stories {
        if !args.only.is_empty() && !args.only.iter().any(|part| name.contains(part.as_str())) {
            continue;
        }
        let endpoint = local.endpoint.clone();
        let result = std::panic::catch_unwind(AssertUnwindSafe(|| {
            runtime.block_on(story(endpoint));
        }));
        match result {
            Ok(()) => println!("test {name} ... ok"),
            Err(_) => {
                println!("test {name} ... FAILED");
                failed.push(name);
            }
        }
    }
    if failed.is_empty() {
        ExitCode::SUCCESS
    } else {
        println!("failures: {}", failed.join(", "));
        ExitCode::FAILURE
    }
}

/// What the test runner's arguments ask, as far as these stories go: the
/// stories to run (those whose name contains one of the names given; all
/// when none), or their list. The runner's other options are ignored.
struct Arguments {
    only: Vec<String>,
    list: bool,
    ignored: bool,
}

impl Arguments {
    fn read() -> Arguments {
        // The runner's options that take a value as the next argument.
        const VALUED: [&str; 6] = [
            "--test-threads",
            "--skip",
            "--format",
            "--color",
            "--logfile",
            "-Z",
        ];
        let mut args = Arguments {
            only: Vec::new(),
            list: false,
            ignored: false,
        };
        let mut arguments = std::env::args().skip(1);
        while let Some(arg) = arguments.next() {
            match arg.as_str() {
                "--list" => args.list = true,
                "--ignored" => args.ignored = true,
                valued if VALUED.contains(&valued) => {
                    arguments.next();
                }
                option if option.starts_with('-') => {}
                name => args.only.push(name.to_owned()),
            }
        }
        args
    }
}

/// A story, given DynamoDB Local's endpoint.
type Story = fn(String) -> Pin<Box<dyn Future<Output = ()>>>;

/// A library on DynamoDB Local: its event store and its projection.
struct Library {
    endpoint: String,
    client: aws_sdk_dynamodb::Client,
    events: EventStore,
    table: String,
}

impl Library {
    /// New tables named after `name`.
    async fn new(endpoint: String, name: &str) -> Library {
        let client = connect(Some(&endpoint)).await;
        let events_table = format!("{name}-events-{}", std::process::id());
        let table = format!("{name}-{}", std::process::id());
        ensure_events_table(&client, &events_table)
            .await
            .expect("events table");
        create_table(&client, &table).await.expect("table");
        let events = EventStore::new(client.clone(), events_table, library::domain());
        Library {
            endpoint,
            client,
            events,
            table,
        }
    }

    /// Appends one event of `book`'s stream.
    async fn append(&self, book: &str, event_type: &str, data: Value) {
        self.events
            .append(Append::one(book, NewEvent::new(event_type, data)))
            .await
            .unwrap_or_else(|err| panic!("{book} {event_type}: {err}"));
    }

    /// Three books: ada borrows b1 (and returns it, and borrows it again)
    /// and b2, bob borrows b3, and b3 is recalled from both. Ada: `onLoan`
    /// 2, `loans` 3, `recalls` 1; bob: 1, 1, 1.
    async fn lend(&self) {
        for book in ["b1", "b2", "b3"] {
            self.append(book, "BookAdded", json!({})).await;
        }
        let ada = json!({"member": "ada"});
        self.append("b1", "BookLent", ada.clone()).await;
        self.append("b1", "BookReturned", ada.clone()).await;
        self.append("b1", "BookLent", ada.clone()).await;
        self.append("b2", "BookLent", ada).await;
        self.append("b3", "BookLent", json!({"member": "bob"}))
            .await;
        self.append("b3", "BookRecalled", json!({"members": ["ada", "bob"]}))
            .await;
    }

    /// Runs this binary as the library's `tool`, on these tables, with
    /// local credentials and no other variable of the caller's: its exit
    /// code, stdout and stderr.
    fn tool(&self, tool: &str, args: &[&str]) -> (i32, String, String) {
        let exe = std::env::current_exe().expect("this binary");
        let output = Command::new(exe)
            .arg0(tool)
            .env(TOOL, tool)
            .args(["--endpoint-url", &self.endpoint])
            .args(args)
            .env("AWS_ACCESS_KEY_ID", "local")
            .env("AWS_SECRET_ACCESS_KEY", "local")
            .env("AWS_REGION", "us-east-1")
            .env("EVENTS_TABLE", self.events.table())
            .env("TABLE_NAME", &self.table)
            .env_remove("PERSONAL_DATA_KEY")
            .env_remove("RUST_LOG")
            .output()
            .unwrap_or_else(|err| panic!("{tool}: {err}"));
        (
            output.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&output.stdout).into_owned(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    }

    /// The store projected into the table by the library's `rebuild`.
    fn rebuild(&self) {
        let (code, stdout, stderr) = self.tool("rebuild", &["--table", &self.table]);
        assert_eq!(code, 0, "{stdout}{stderr}");
    }

    /// `verify`'s exit code, its lines as JSON, and its stderr.
    fn verify(&self) -> (i32, Vec<Value>, String) {
        let (code, stdout, stderr) = self.tool("verify", &[]);
        let lines = stdout
            .lines()
            .map(|line| serde_json::from_str(line).unwrap_or_else(|err| panic!("{line}: {err}")))
            .collect();
        (code, lines, stderr)
    }

    /// Adds `delta` to `attribute` of a member's item, by hand.
    async fn add(&self, member: &str, sort_key: &str, attribute: &str, delta: i64) {
        self.client
            .update_item()
            .table_name(&self.table)
            .key("pk", AttributeValue::S(format!("MEMBER#{member}")))
            .key("sk", AttributeValue::S(sort_key.to_owned()))
            .update_expression("ADD #counter :delta")
            .expression_attribute_names("#counter", attribute)
            .expression_attribute_values(":delta", AttributeValue::N(delta.to_string()))
            .send()
            .await
            .expect("update");
    }
}

/// GIVEN a member's two counters on one item, projected as the store says,
/// WHEN verify compares, THEN every counter of the item agrees.
async fn verify_compares_every_counter_of_an_item(endpoint: String) {
    let library = Library::new(endpoint, "agree").await;
    library.lend().await;
    library.rebuild();

    let (code, lines, stderr) = library.verify();

    // Three books, four counters on the members' ACTIVITY items, two on
    // their RECALLS items.
    assert_eq!(lines, [json!({"checked": 9, "differ": 0})], "{stderr}");
    assert_eq!(code, 0, "{stderr}");
}

/// GIVEN the members' items changed by hand, WHEN verify compares, THEN
/// each counter that differs has its line, with its values: what a mend
/// adds.
async fn verify_names_each_counter_of_an_item_that_differs(endpoint: String) {
    let library = Library::new(endpoint, "differ").await;
    library.lend().await;
    library.rebuild();
    // Ada's item: both counters off; bob's: one.
    library.add("ada", "ACTIVITY", "loans", -1).await;
    library.add("ada", "ACTIVITY", "onLoan", 4).await;
    library.add("bob", "ACTIVITY", "loans", 2).await;

    let (code, lines, stderr) = library.verify();

    assert_eq!(
        lines,
        [
            json!({"pk": "MEMBER#ada", "sk": "ACTIVITY", "expected": 3, "found": 2, "attributes": ["loans"]}),
            json!({"pk": "MEMBER#ada", "sk": "ACTIVITY", "expected": 2, "found": 6, "attributes": ["onLoan"]}),
            json!({"pk": "MEMBER#bob", "sk": "ACTIVITY", "expected": 1, "found": 3, "attributes": ["loans"]}),
            json!({"checked": 9, "differ": 3}),
        ],
        "{stderr}"
    );
    assert_eq!(code, 1, "{stderr}");
}

/// GIVEN a member's counters, WHEN inspect looks at the member's
/// activity, THEN it shows each counter of the item; and the recalls, on
/// an item of their own, under their own name.
async fn inspect_shows_every_counter_of_an_item(endpoint: String) {
    let library = Library::new(endpoint, "inspect").await;
    library.lend().await;
    library.rebuild();
    let table = library.table.clone();

    let (code, stdout, stderr) = library.tool("inspect", &["--table", &table, "activity", "ada"]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stdout, "activity ada\n  onLoan 2\n  loans 3\n");

    let (code, stdout, stderr) = library.tool("inspect", &["--table", &table, "recalls", "ada"]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stdout, "recalls ada\n  recalls 1\n");

    let (code, stdout, stderr) = library.tool("inspect", &["--table", &table, "activity", "carol"]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stdout, "activity carol\n  no addition applied yet\n");

    // `--help` names each item once.
    let (code, stdout, _) = library.tool("inspect", &["--help"]);
    assert_eq!(code, 0);
    assert!(
        stdout.contains("KIND: one of book, activity, recalls\n"),
        "{stdout}"
    );
}
