//! The bank on DynamoDB Local, through sequence-guard's runner: its sample
//! events tell a story with a creation, the guard, a deduplicated fee, a
//! parked gap drained when the missing deposit lands, a snapshot that
//! arrives before the events it covers, and bodies of both versions of
//! `AccountOpened` and `AccountSnapshot` (version 1 in euros).

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};

use aws_lambda_events::event::sqs::SqsEvent;
use aws_sdk_dynamodb::types::AttributeValue;
use bank::{Account, FEES};
use sequence_guard::EntityKey;
use sequence_guard::runner::{BatchReport, Invocation, Outcome, Runner, RunnerConfig};
use sequence_guard::store::Store;
use sequence_guard::store::dynamodb::{DynamoStore, connect, create_table};
use sequence_guard::testing::DynamoLocal;

use Outcome::{Applied, Duplicate, Parked};

static LOCAL: OnceLock<DynamoLocal> = OnceLock::new();
static TABLES: AtomicU32 = AtomicU32::new(0);

async fn fresh_table() -> DynamoStore {
    let local = LOCAL
        .get_or_init(|| DynamoLocal::start().unwrap_or_else(|err| panic!("DynamoDB Local: {err}")));
    let client = connect(Some(&local.endpoint)).await;
    let name = format!(
        "bank{}-{}",
        std::process::id(),
        TABLES.fetch_add(1, Ordering::Relaxed)
    );
    create_table(&client, &name).await.expect("create table");
    DynamoStore::new(client, name)
}

fn sample(json: &str) -> SqsEvent {
    serde_json::from_str(json).expect("a sample SQS event")
}

async fn run(runner: &Runner<DynamoStore>, json: &str) -> BatchReport {
    let invocation = Invocation {
        deadline: None,
        // The real clock: DynamoDB Local expires dedup records past their TTL.
        now: sequence_guard::lambda::epoch_seconds(),
    };
    runner.run(&sample(json), invocation).await.expect("run")
}

fn outcomes(report: &BatchReport) -> Vec<Outcome> {
    report
        .messages
        .iter()
        .map(|message| message.outcome)
        .collect()
}

async fn account(store: &DynamoStore, id: &str) -> Option<Account> {
    let key = EntityKey::of::<Account>(id);
    let mut loaded = store
        .load(std::slice::from_ref(&key), &[])
        .await
        .expect("load");
    loaded.entities.remove(&key).map(|entity| {
        entity
            .expect("readable")
            .get::<Account>()
            .cloned()
            .expect("an account")
    })
}

/// The item as DynamoDB holds it, attribute by attribute.
async fn item(store: &DynamoStore, pk: &str, sk: &str) -> Vec<(String, AttributeValue)> {
    let output = store
        .client()
        .get_item()
        .table_name(store.table())
        .key("pk", AttributeValue::S(pk.into()))
        .key("sk", AttributeValue::S(sk.into()))
        .consistent_read(true)
        .send()
        .await
        .expect("get item");
    let mut attributes: Vec<(String, AttributeValue)> =
        output.item.unwrap_or_default().into_iter().collect();
    attributes.sort_by(|a, b| a.0.cmp(&b.0));
    attributes
}

fn n(number: i64) -> AttributeValue {
    AttributeValue::N(number.to_string())
}

fn s(text: &str) -> AttributeValue {
    AttributeValue::S(text.into())
}

#[tokio::test]
async fn the_bank_story_on_dynamodb_local() {
    let store = fresh_table().await;
    let runner = Runner::new(bank::domain(), store.clone(), RunnerConfig::default());

    // Opened, deposited, withdrawn; a fee charged, and the same fee resent.
    let report = run(
        &runner,
        include_str!("../events/01-accounts-opened-and-moved.json"),
    )
    .await;
    assert_eq!(
        outcomes(&report),
        [Applied, Applied, Applied, Applied, Applied, Duplicate]
    );
    assert_eq!(
        item(&store, "ACCOUNT#acct-1", "STATE").await,
        [
            ("balanceCents".to_owned(), n(75_000)),
            ("currency".to_owned(), s("EUR")),
            ("lastEventId".to_owned(), s("acct-1-3")),
            ("owner".to_owned(), s("Ada Lovelace")),
            ("pk".to_owned(), s("ACCOUNT#acct-1")),
            ("sequence".to_owned(), n(3)),
            ("sk".to_owned(), s("STATE")),
        ],
        "the item is the struct as serde_dynamo writes it, under the account's key"
    );
    assert_eq!(
        item(&store, "ACCOUNT#acct-1/fees", "FEES").await,
        [
            ("chargedCents".to_owned(), n(500)),
            ("pk".to_owned(), s("ACCOUNT#acct-1/fees")),
            ("sk".to_owned(), s("FEES")),
        ],
        "the fee counted once, on the account's fees: a stream of their own"
    );
    assert_eq!(
        store.counter(&FEES, "acct-1/fees").await.expect("read"),
        Some(500)
    );

    // A deposit ahead of its turn, delivered a third time: parked.
    let report = run(&runner, include_str!("../events/02-gap-parked.json")).await;
    assert_eq!(outcomes(&report), [Parked]);
    let inspection = store
        .inspect(&EntityKey::of::<Account>("acct-2"))
        .await
        .expect("inspect");
    assert_eq!(
        inspection
            .parked
            .iter()
            .map(|parked| parked.sequence)
            .collect::<Vec<_>>(),
        [3]
    );

    // The missing deposit lands: applied, and the parked one drained after it.
    let report = run(&runner, include_str!("../events/03-gap-closed.json")).await;
    assert_eq!(outcomes(&report), [Applied]);
    assert_eq!(report.drained(), 1);
    let acct_2 = account(&store, "acct-2").await.expect("acct-2");
    assert_eq!((acct_2.sequence, acct_2.balance_cents), (3, 5_000));
    let inspection = store
        .inspect(&EntityKey::of::<Account>("acct-2"))
        .await
        .expect("inspect");
    assert!(inspection.parked.is_empty());
    assert!(inspection.stored.parking.sequences.is_empty());

    // A snapshot at 5 before anything else: applied (it is complete); the
    // events it covers, and an older snapshot, are duplicates; the next
    // event applies on top of it. Nothing is parked.
    let report = run(
        &runner,
        include_str!("../events/04-snapshot-out-of-order.json"),
    )
    .await;
    assert_eq!(
        outcomes(&report),
        [Applied, Duplicate, Duplicate, Duplicate, Applied]
    );
    assert!(report.parking.is_empty(), "{:?}", report.parking);
    let acct_3 = account(&store, "acct-3").await.expect("acct-3");
    assert_eq!(
        (acct_3.sequence, acct_3.balance_cents, acct_3.owner.as_str()),
        (6, 60_000, "Grace Hopper")
    );
    assert_eq!(acct_3.last_event_id, "acct-3-6");

    // Version 2 bodies (and a version 1 one) side by side: each account in
    // its currency, the version 1 one in euros.
    let report = run(&runner, include_str!("../events/05-version-2.json")).await;
    assert_eq!(outcomes(&report), [Applied, Applied, Applied, Applied]);
    let currency = |account: Option<Account>| account.map(|account| account.currency);
    assert_eq!(
        currency(account(&store, "acct-3").await).as_deref(),
        Some("EUR")
    );
    assert_eq!(
        currency(account(&store, "acct-4").await).as_deref(),
        Some("GBP")
    );
    assert_eq!(
        currency(account(&store, "acct-5").await).as_deref(),
        Some("CHF")
    );
    assert_eq!(
        currency(account(&store, "acct-6").await).as_deref(),
        Some("EUR")
    );
}

/// The whole story again: everything already applied is a duplicate, and
/// nothing moves (the fee is not charged twice).
#[tokio::test]
async fn redelivering_every_sample_changes_nothing() {
    let store = fresh_table().await;
    let runner = Runner::new(bank::domain(), store.clone(), RunnerConfig::default());
    let samples = [
        include_str!("../events/01-accounts-opened-and-moved.json"),
        include_str!("../events/02-gap-parked.json"),
        include_str!("../events/03-gap-closed.json"),
        include_str!("../events/04-snapshot-out-of-order.json"),
        include_str!("../events/05-version-2.json"),
    ];
    for sample in samples {
        run(&runner, sample).await;
    }
    let before = (
        account(&store, "acct-1").await,
        account(&store, "acct-2").await,
        account(&store, "acct-3").await,
        store.counter(&FEES, "acct-1/fees").await.expect("read"),
    );
    for sample in samples {
        let report = run(&runner, sample).await;
        assert!(
            report
                .messages
                .iter()
                .all(|message| message.outcome == Duplicate),
            "{:?}",
            outcomes(&report)
        );
    }
    let after = (
        account(&store, "acct-1").await,
        account(&store, "acct-2").await,
        account(&store, "acct-3").await,
        store.counter(&FEES, "acct-1/fees").await.expect("read"),
    );
    assert_eq!(before, after);
}
