//! The bank's move to version 2 of `AccountOpened` and `AccountSnapshot`
//! (their `data` gained `currency`), on DynamoDB Local: an event store
//! written by the bank before the change (version-1 bodies, as its producer
//! appended them) is counted, rebuilt and projected by the bank after it;
//! and a consumer still at version 1 refuses a version-2 body, naming it,
//! and holds only that body's stream.

use std::process::Command;
use std::sync::OnceLock;

use aws_lambda_events::event::sqs::{SqsEvent, SqsMessage};
use aws_sdk_dynamodb::types::AttributeValue;
use sequence_guard::producer::{Append, EventStore, NewEvent};
use sequence_guard::runner::{BatchReport, Invocation, Outcome, Runner, RunnerConfig};
use sequence_guard::store::dynamodb::{DynamoStore, connect, create_table, ensure_events_table};
use sequence_guard::testing::DynamoLocal;
use serde_json::json;

use Outcome::{Applied, Invalid, Skipped};

static LOCAL: OnceLock<DynamoLocal> = OnceLock::new();

fn endpoint() -> &'static str {
    &LOCAL
        .get_or_init(|| DynamoLocal::start().unwrap_or_else(|err| panic!("DynamoDB Local: {err}")))
        .endpoint
}

/// The bank as it was before version 2: its events, account and handlers,
/// as that build of the producer and of the consumer had them.
mod before {
    use sequence_guard::{Decision, Domain, Entity, Events, Handling, Sequenced};
    use serde::{Deserialize, Serialize};

    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct Account {
        pub sequence: u64,
        pub last_event_id: String,
        pub owner: String,
        pub balance_cents: i64,
    }

    impl Entity for Account {
        const KIND: &'static str = "ACCOUNT";
        fn sequence(&self) -> u64 {
            self.sequence
        }
        fn last_event_id(&self) -> &str {
            &self.last_event_id
        }
    }

    #[derive(Debug, Deserialize)]
    pub struct Opening {
        owner: String,
    }

    #[derive(Debug, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct Snapshot {
        owner: String,
        balance_cents: i64,
    }

    #[derive(Debug, Deserialize)]
    #[serde(tag = "type", content = "data")]
    pub enum BankEvent {
        AccountOpened(Opening),
        MoneyDeposited(bank::Amount),
        MoneyWithdrawn(bank::Amount),
        AccountSnapshot(Snapshot),
        FeeCharged(bank::Fee),
    }

    fn opened(account: &mut Option<Account>, event: &Sequenced<Opening>) -> Decision {
        if account.is_some() {
            return Decision::Duplicate;
        }
        *account = Some(Account {
            sequence: event.sequence,
            last_event_id: event.event_id.clone(),
            owner: event.data.owner.clone(),
            balance_cents: 0,
        });
        Decision::Applied
    }

    fn moved(sign: i64) -> impl Fn(&mut Option<Account>, &Sequenced<bank::Amount>) -> Decision {
        move |account, event| {
            let Some(account) = account else {
                return Decision::NotCreated;
            };
            if account.sequence != event.sequence - 1 {
                return if account.sequence >= event.sequence {
                    Decision::Duplicate
                } else {
                    Decision::Gap
                };
            }
            account.balance_cents += sign * event.data.amount_cents as i64;
            account.sequence = event.sequence;
            account.last_event_id.clone_from(&event.event_id);
            Decision::Applied
        }
    }

    fn snapshot(event: &Sequenced<Snapshot>) -> Account {
        Account {
            sequence: event.sequence,
            last_event_id: event.event_id.clone(),
            owner: event.data.owner.clone(),
            balance_cents: event.data.balance_cents,
        }
    }

    impl Events for BankEvent {
        fn handling(self) -> Handling {
            match self {
                BankEvent::AccountOpened(data) => Handling::sequenced(data, opened),
                BankEvent::MoneyDeposited(data) => Handling::sequenced(data, moved(1)),
                BankEvent::MoneyWithdrawn(data) => Handling::sequenced(data, moved(-1)),
                BankEvent::AccountSnapshot(data) => Handling::snapshot(data, snapshot),
                BankEvent::FeeCharged(fee) => bank::on_fee_charged(fee),
            }
        }
        // No versions: every type at version 1.
    }

    pub fn domain() -> Domain {
        Domain::new::<BankEvent>()
            .entity::<Account>()
            .counter(&bank::FEES)
    }
}

fn name(what: &str) -> String {
    format!("bank-versions-{what}-{}", std::process::id())
}

fn rebuild(args: &[&str]) -> (i32, String, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_bank-rebuild"))
        .args(args)
        .args(["--endpoint-url", endpoint()])
        .env_remove("EVENTS_TABLE")
        .env("AWS_ACCESS_KEY_ID", "local")
        .env("AWS_SECRET_ACCESS_KEY", "local")
        .env("AWS_REGION", "us-east-1")
        .output()
        .expect("run bank-rebuild");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// The account item's attributes the change is about, as DynamoDB holds them.
async fn account(
    client: &aws_sdk_dynamodb::Client,
    table: &str,
    id: &str,
) -> Option<(String, String, i64)> {
    let item = client
        .get_item()
        .table_name(table)
        .key("pk", AttributeValue::S(format!("ACCOUNT#{id}")))
        .key("sk", AttributeValue::S("STATE".into()))
        .consistent_read(true)
        .send()
        .await
        .expect("get item")
        .item?;
    let text = |name: &str| item.get(name).and_then(|value| value.as_s().ok()).cloned();
    let balance = item
        .get("balanceCents")
        .and_then(|value| value.as_n().ok())
        .and_then(|n| n.parse().ok());
    Some((text("owner")?, text("currency")?, balance?))
}

fn message(id: String, group: &str, body: String) -> SqsMessage {
    let mut message = SqsMessage::default();
    message.message_id = Some(id);
    message.body = Some(body);
    message
        .attributes
        .insert("MessageGroupId".to_owned(), group.to_owned());
    message
}

async fn run<S: sequence_guard::store::Store>(runner: &Runner<S>, batch: &SqsEvent) -> BatchReport {
    let invocation = Invocation {
        deadline: None,
        now: sequence_guard::lambda::epoch_seconds(),
    };
    runner.run(batch, invocation).await.expect("run")
}

#[tokio::test]
async fn a_store_of_version_1_bodies_is_counted_rebuilt_and_projected_after_the_upgrade() {
    let client = connect(Some(endpoint())).await;
    let events_table = name("events");
    ensure_events_table(&client, &events_table)
        .await
        .expect("events table");

    // GIVEN an event store the bank's producer filled before version 2.
    let old = EventStore::new(client.clone(), events_table.clone(), before::domain());
    let appended = |stream: &str, events: Vec<NewEvent>| Append {
        events,
        ..Append::one(stream, NewEvent::new("x", json!({})))
    };
    let mut opened = NewEvent::new("AccountOpened", json!({"owner": "Ada Lovelace"}));
    opened.event_id = Some("acct-1-1".into());
    old.append(appended(
        "acct-1",
        vec![
            opened,
            NewEvent::new("MoneyDeposited", json!({"amountCents": 1500})),
        ],
    ))
    .await
    .expect("old append");
    old.append(appended(
        "acct-2",
        vec![NewEvent::new(
            "AccountSnapshot",
            json!({"owner": "Grace Hopper", "balanceCents": 700}),
        )],
    ))
    .await
    .expect("old append");
    let stored = old.read("acct-1", 0, 10).await.expect("read");
    assert_eq!(
        stored[0].body,
        r#"{"eventId":"acct-1-1","type":"AccountOpened","aggregateId":"acct-1","sequence":1,"data":{"owner":"Ada Lovelace"}}"#,
        "a version-1 body, as every body was before versions"
    );

    // AND, after the upgrade, the bank's producer appends version 2.
    let new = EventStore::new(client.clone(), events_table.clone(), bank::domain());
    let mut opened = NewEvent::new(
        "AccountOpened",
        json!({"owner": "Ada Byron", "currency": "GBP"}),
    );
    opened.event_id = Some("acct-3-1".into());
    new.append(appended("acct-3", vec![opened]))
        .await
        .expect("new append");
    let stored = new.read("acct-3", 0, 10).await.expect("read");
    assert_eq!(
        stored[0].body,
        r#"{"eventId":"acct-3-1","type":"AccountOpened","aggregateId":"acct-3","sequence":1,"version":2,"data":{"currency":"GBP","owner":"Ada Byron"}}"#
    );

    // WHEN the operator asks which versions the store holds
    let (code, stdout, stderr) = rebuild(&["--events-table", &events_table, "--versions"]);
    // THEN each type and version is counted, with the version this build writes.
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        stdout.lines().collect::<Vec<_>>(),
        [
            r#"{"current":2,"events":1,"type":"AccountOpened","version":1}"#,
            r#"{"current":2,"events":1,"type":"AccountOpened","version":2}"#,
            r#"{"current":2,"events":1,"type":"AccountSnapshot","version":1}"#,
            r#"{"current":1,"events":1,"type":"MoneyDeposited","version":1}"#,
            r#"{"events":4,"streams":3}"#,
        ]
    );

    // WHEN the store is rebuilt into a fresh table by the upgraded bank
    let rebuilt = name("rebuilt");
    let (code, stdout, stderr) = rebuild(&[
        "--events-table",
        &events_table,
        "--table",
        &rebuilt,
        "--create-table",
    ]);
    assert_eq!(code, 0, "{stderr}\n{stdout}");
    assert!(
        stdout.contains("rebuilt 3 streams, 4 events; 0 not done"),
        "{stdout}"
    );
    // THEN the version-1 accounts are in euros, the version-2 one in its currency.
    let expected = [
        ("acct-1", Some(("Ada Lovelace".into(), "EUR".into(), 1500))),
        ("acct-2", Some(("Grace Hopper".into(), "EUR".into(), 700))),
        ("acct-3", Some(("Ada Byron".into(), "GBP".into(), 0))),
    ];
    for (id, expected) in &expected {
        assert_eq!(&account(&client, &rebuilt, id).await, expected, "{id}");
    }

    // AND the live path (the stored bodies as the dispatcher sends them, to
    // the upgraded projector) projects the same.
    let live = name("live");
    create_table(&client, &live).await.expect("live table");
    let runner = Runner::new(
        bank::domain(),
        DynamoStore::new(client.clone(), live.clone()),
        RunnerConfig::default(),
    );
    let mut batch = SqsEvent::default();
    for stream in ["acct-1", "acct-2", "acct-3"] {
        for event in new.read(stream, 0, 10).await.expect("read") {
            // The upgraded dispatcher's check takes the version-1 bodies
            // (upcast) and sends them byte for byte.
            let pk = format!("STREAM#{stream}");
            let sk = format!("EVENT#{:020}", event.sequence);
            let record = json!({
                "eventID": "1", "eventName": "INSERT", "eventSource": "aws:dynamodb",
                "eventVersion": "1.1", "awsRegion": "",
                "dynamodb": {
                    "Keys": { "pk": { "S": pk }, "sk": { "S": sk } },
                    "NewImage": {
                        "pk": { "S": pk }, "sk": { "S": sk },
                        "eventId": { "S": event.event_id }, "type": { "S": event.event_type },
                        "sequence": { "N": event.sequence.to_string() },
                        "body": { "S": event.body }, "appendedAt": { "N": "1" },
                    },
                    "SequenceNumber": event.sequence.to_string(),
                    "SizeBytes": event.body.len(),
                    "StreamViewType": "NEW_IMAGE",
                },
            });
            match sequence_guard::dispatcher::read(&record, &bank::domain()) {
                sequence_guard::dispatcher::Read::Send(outgoing) => {
                    assert_eq!(outgoing.body, event.body, "{stream} {}", event.sequence);
                }
                other => panic!("{stream} {}: sent, not {other:?}", event.sequence),
            }
            batch.records.push(message(
                format!("{stream}:{}", event.sequence),
                stream,
                event.body,
            ));
        }
    }
    let report = run(&runner, &batch).await;
    let outcomes: Vec<Outcome> = report.messages.iter().map(|m| m.outcome).collect();
    assert_eq!(outcomes, [Applied, Applied, Applied, Applied]);
    for (id, expected) in &expected {
        assert_eq!(&account(&client, &live, id).await, expected, "{id}");
    }
}

#[tokio::test]
async fn a_consumer_at_version_1_refuses_version_2_and_holds_only_its_stream() {
    let client = connect(Some(endpoint())).await;
    let table = name("old-consumer");
    create_table(&client, &table).await.expect("table");
    let runner = Runner::new(
        before::domain(),
        DynamoStore::new(client.clone(), table.clone()),
        RunnerConfig::default(),
    );
    // The sample of the upgrade: acct-4 opened at version 2 and a deposit on
    // it, a version-2 snapshot of acct-5, and acct-6 opened at version 1.
    let batch: SqsEvent =
        serde_json::from_str(include_str!("../events/05-version-2.json")).expect("sample");
    let report = run(&runner, &batch).await;
    let seen: Vec<(&str, Outcome, Option<&str>)> = report
        .messages
        .iter()
        .map(|m| (m.stream.as_str(), m.outcome, m.reason.as_deref()))
        .collect();
    assert_eq!(
        seen[0],
        (
            "acct-4",
            Invalid,
            Some(
                "field `version` names AccountOpened version 2, newer than this consumer knows (1)"
            )
        )
    );
    assert_eq!(
        (seen[1].0, seen[1].1),
        ("acct-4", Skipped),
        "the rest of the stream waits"
    );
    assert_eq!(
        seen[2],
        (
            "acct-5",
            Invalid,
            Some(
                "field `version` names AccountSnapshot version 2, newer than this consumer knows (1)"
            )
        )
    );
    assert_eq!(
        (seen[3].0, seen[3].1, seen[3].2),
        ("acct-6", Applied, None),
        "another stream goes on"
    );
    let failed: Vec<String> = report
        .response()
        .batch_item_failures
        .into_iter()
        .map(|failure| failure.item_identifier)
        .collect();
    let ids: Vec<String> = batch
        .records
        .iter()
        .filter_map(|record| record.message_id.clone())
        .collect();
    assert_eq!(failed, ids[..3]);
    let item = client
        .get_item()
        .table_name(&table)
        .key("pk", AttributeValue::S("ACCOUNT#acct-6".into()))
        .key("sk", AttributeValue::S("STATE".into()))
        .consistent_read(true)
        .send()
        .await
        .expect("get")
        .item;
    assert!(
        item.is_some_and(
            |item| item.get("owner") == Some(&AttributeValue::S("Edsger Dijkstra".into()))
        ),
        "acct-6 applied"
    );
    for id in ["acct-4", "acct-5"] {
        let item = client
            .get_item()
            .table_name(&table)
            .key("pk", AttributeValue::S(format!("ACCOUNT#{id}")))
            .key("sk", AttributeValue::S("STATE".into()))
            .consistent_read(true)
            .send()
            .await
            .expect("get")
            .item;
        assert_eq!(item, None, "{id}: nothing written");
    }
}
