//! The bank's own binaries, sequence-guard's `cli` on the bank's domain:
//! `bank-replay` on the embedded table and on DynamoDB Local,
//! `bank-inspect` on what it wrote, and `bank-projector` outside Lambda.

use std::process::Command;

use sequence_guard::testing::DynamoLocal;

const SAMPLES: [&str; 5] = [
    "events/01-accounts-opened-and-moved.json",
    "events/02-gap-parked.json",
    "events/03-gap-closed.json",
    "events/04-snapshot-out-of-order.json",
    "events/05-version-2.json",
];

fn run(exe: &str, args: &[&str]) -> (i32, String, String) {
    let output = Command::new(exe)
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env_remove("TABLE_NAME")
        .env("AWS_ACCESS_KEY_ID", "local")
        .env("AWS_SECRET_ACCESS_KEY", "local")
        .env("AWS_REGION", "us-east-1")
        .output()
        .expect("run");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn bank_replay_tells_the_story_on_the_embedded_table() {
    let (code, stdout, stderr) = run(env!("CARGO_BIN_EXE_bank-replay"), &SAMPLES);
    assert_eq!(code, 0, "{stderr}");
    for line in [
        "acct-1/fees  seq -  FeeCharged      duplicate",
        "parked  acct-2 seq 3 (waiting for 2; 1 parked on it)",
        "drained acct-2 seq 3 MoneyDeposited",
        "acct-3  seq 5  AccountSnapshot  applied",
        // Version 1 bodies, upcast: in euros; each account as its summary.
        "account acct-1       sequence 3   Ada Lovelace: 75000 EUR cents",
        "account acct-3       sequence 6   Grace Hopper: 60000 EUR cents",
        "fees    acct-1/fees  chargedCents 500",
        // Version 2 bodies, and a version 1 one among them.
        "account acct-4       sequence 2   Ada Byron: 30000 GBP cents",
        "account acct-5       sequence 4   Alan Turing: 12000 CHF cents",
        "account acct-6       sequence 1   Edsger Dijkstra: 0 EUR cents",
    ] {
        assert!(stdout.contains(line), "{line} missing:\n{stdout}");
    }
}

#[test]
fn bank_inspect_reads_what_bank_replay_wrote_on_dynamodb_local() {
    let local = DynamoLocal::start().expect("DynamoDB Local");
    let table = format!("bank-cli-{}", std::process::id());
    let on_table = ["--endpoint-url", &local.endpoint, "--table", &table];
    let mut args = on_table.to_vec();
    args.push("--create-table");
    args.extend(SAMPLES);
    let (code, stdout, stderr) = run(env!("CARGO_BIN_EXE_bank-replay"), &args);
    assert_eq!(code, 0, "{stderr}\n{stdout}");

    let inspect = |what: &[&str]| {
        let mut args = on_table.to_vec();
        args.extend(what);
        run(env!("CARGO_BIN_EXE_bank-inspect"), &args)
    };
    let (code, stdout, stderr) = inspect(&["account", "acct-3"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.starts_with("account acct-3\n  sequence 6 (last event acct-3-6)\n"),
        "{stdout}"
    );
    assert!(stdout.contains("nothing parked"), "{stdout}");
    assert!(
        stdout.contains("\n  Grace Hopper: 60000 EUR cents\n"),
        "{stdout}"
    );
    let (code, stdout, stderr) = inspect(&["fees", "acct-1/fees"]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stdout, "fees acct-1/fees\n  chargedCents 500\n");
    let (code, stdout, _) = inspect(&["--parked"]);
    assert_eq!(code, 0);
    assert!(
        stdout.starts_with("0 entities with events parked"),
        "{stdout}"
    );
    let (code, _, stderr) = inspect(&["order", "order-42"]);
    assert_eq!(code, 2, "the bank has no orders");
    assert!(
        stderr.contains("invalid value 'order'") && stderr.contains("account, fees"),
        "{stderr}"
    );
}

#[test]
fn bank_projector_outside_lambda_says_what_it_is() {
    let (code, _, stderr) = run(env!("CARGO_BIN_EXE_bank-projector"), &[]);
    assert_eq!(code, 2);
    assert!(
        stderr.starts_with("bank-projector is a Lambda function"),
        "{stderr}"
    );
}

#[test]
fn bank_erase_says_the_bank_declares_no_personal_data_and_refuses_bad_arguments() {
    let erase = env!("CARGO_BIN_EXE_bank-erase");
    let (code, _, stderr) = run(erase, &["--table", "events", "--subject", "acct-1"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("declares no personal data: there is nothing to erase"),
        "{stderr}"
    );
    let (code, _, stderr) = run(erase, &["--table", "events", "--subject", ""]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("is no id a stream can have: it must be 1 to 256 characters"),
        "{stderr}"
    );
    let (code, _, stderr) = run(erase, &["--table", "events"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("--subject"), "{stderr}");
}
