//! The bank's producer on DynamoDB Local: a fee goes on the account's fees
//! stream, never on the account's own (a stream is one kind's), and a
//! withdrawal is decided by the bank's rule before anything is appended,
//! at the sequence the decision was made on.

use std::sync::OnceLock;

use bank::{Account, fee_stream, withdrawal};
use sequence_guard::producer::{Append, AppendError, EventStore, NewEvent};
use sequence_guard::store::dynamodb::{connect, ensure_events_table};
use sequence_guard::testing::DynamoLocal;
use serde_json::json;

static LOCAL: OnceLock<DynamoLocal> = OnceLock::new();

async fn event_store(what: &str) -> EventStore {
    let local = LOCAL
        .get_or_init(|| DynamoLocal::start().unwrap_or_else(|err| panic!("DynamoDB Local: {err}")));
    let client = connect(Some(&local.endpoint)).await;
    let table = format!("bank-producer-{what}-{}", std::process::id());
    ensure_events_table(&client, &table)
        .await
        .expect("events table");
    EventStore::new(client, table, bank::domain())
}

/// `acct-1` opened with `owner`, as its first event.
async fn open(store: &EventStore, owner: &str) {
    let opened = NewEvent::new("AccountOpened", json!({"owner": owner, "currency": "EUR"}));
    store
        .append(Append::one("acct-1", opened))
        .await
        .expect("opened");
}

#[tokio::test]
async fn a_fee_goes_on_the_accounts_fees_stream_and_is_refused_on_the_account() {
    let store = event_store("fees").await;
    open(&store, "Ada").await;
    let fee = || {
        NewEvent::new(
            "FeeCharged",
            json!({"accountId": "acct-1", "feeCents": 500}),
        )
    };

    // On the account's own stream: refused, nothing written. (Were the
    // fees counted under the account's own id, `append` would refuse them
    // all the same: a stream is one kind's, the account's or the fees'.)
    let refused = store
        .append(Append::one("acct-1", fee()))
        .await
        .expect_err("a fee on the account's stream");
    assert_eq!(
        refused.to_string(),
        "event 0: field `data` names the stream `acct-1/fees`, not `acct-1`"
    );
    assert_eq!(store.read("acct-1", 0, 10).await.expect("read").len(), 1);

    // On the fees' stream: appended, at its own sequence 1.
    let appended = store
        .append(Append::one(fee_stream("acct-1"), fee()))
        .await
        .expect("a fee on its own stream");
    assert_eq!(
        (appended.stream_id.as_str(), appended.sequence),
        ("acct-1/fees", 1)
    );
}

#[tokio::test]
async fn a_withdrawal_is_decided_before_the_append_and_written_only_at_its_sequence() {
    let store = event_store("withdrawals").await;
    open(&store, "Ada").await;
    let deposit = NewEvent::new("MoneyDeposited", json!({"amountCents": 100}));
    store
        .append(Append::one("acct-1", deposit))
        .await
        .expect("deposit");
    // The account as the producer read it: at sequence 2, 100 cents.
    let account = Account {
        sequence: 2,
        last_event_id: "acct-1-2".into(),
        owner: "Ada".into(),
        currency: "EUR".into(),
        balance_cents: 100,
    };

    // More than the balance: refused by the bank's rule, nothing appended.
    assert_eq!(
        withdrawal(&account, "acct-1", 150).err(),
        Some("the balance does not cover the withdrawal")
    );
    assert_eq!(store.read("acct-1", 0, 10).await.expect("read").len(), 2);

    // Covered: appended at 3.
    let appended = store
        .append(withdrawal(&account, "acct-1", 60).expect("covered"))
        .await
        .expect("appended");
    assert_eq!(appended.sequence, 3);

    // Decided again on the same reading, now stale: nothing written, and
    // the error says where the stream stands (read again, decide again).
    let stale = store
        .append(withdrawal(&account, "acct-1", 40).expect("covered by the stale balance"))
        .await
        .expect_err("the stream moved");
    assert!(
        matches!(
            stale,
            AppendError::ExpectedSequence {
                expected: 2,
                current: 3
            }
        ),
        "{stale}"
    );
    assert_eq!(store.read("acct-1", 0, 10).await.expect("read").len(), 3);
}
