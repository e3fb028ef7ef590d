//! Expected sequences and bad inputs refused without a write, with the
//! binary's exit codes; an append of a known sequence is one request; an
//! exact sequence read first refuses as the transaction does.

use super::*;

#[tokio::test]
async fn expected_sequences_and_bad_inputs_write_nothing() {
    let local = dynamodb_local();
    let store = fresh_store(&local.endpoint).await;
    store
        .append(Append::one("order-1", created(1)))
        .await
        .expect("created");
    let before = items(&store, &local.endpoint).await;
    let mut stale = Append::one("order-1", updated(2));
    stale.expected = ExpectedSequence::Exact(0);
    assert_eq!(
        store.append(stale).await,
        Err(AppendError::ExpectedSequence {
            expected: 0,
            current: 1
        })
    );
    let mut ahead = Append::one("order-1", updated(2));
    ahead.expected = ExpectedSequence::Exact(5);
    assert_eq!(
        store.append(ahead).await,
        Err(AppendError::ExpectedSequence {
            expected: 5,
            current: 1
        })
    );
    let invalid = |append: Append| async {
        match store.append(append).await {
            Err(AppendError::Invalid { reason, .. }) => reason.to_string(),
            other => panic!("{other:?}"),
        }
    };
    assert_eq!(
        invalid(Append::one(
            "order-1",
            NewEvent::new("OrderShipped", json!({}))
        ))
        .await,
        "unknown event type `OrderShipped`"
    );
    assert_eq!(
        invalid(Append::one(
            "order-1",
            NewEvent::new(
                "OrderUpdated",
                json!({"customerName": "Ada", "totalCents": 1})
            )
        ))
        .await,
        "missing field `data.email`"
    );
    assert_eq!(
        invalid(Append::one(
            "order-1",
            NewEvent::new("OrderCancelled", json!({"reason": "x".repeat(1025)}))
        ))
        .await,
        "field `data.reason` must be 0 to 1024 characters, got more than 1024"
    );
    assert_eq!(
        invalid(Append::one(
            "SKU-A",
            NewEvent::new("InventoryAdjusted", json!({"sku": "SKU-B", "delta": 1}))
        ))
        .await,
        "field `data.sku` names the stream `SKU-B`, not `SKU-A`"
    );
    assert_eq!(
        invalid(Append::one("", created(1))).await,
        "field `stream` must not be empty"
    );
    // U+FFFF passes JSON as it is, and SQS refuses it: never stored.
    assert_eq!(
        invalid(Append::one(
            "order-1",
            NewEvent::new(
                "OrderUpdated",
                json!({"customerName": "Ada\u{FFFF}", "email": "ada@example.com", "totalCents": 1})
            )
        ))
        .await,
        "field `data.customerName` holds U+FFFF, a character SQS does not carry"
    );
    let too_many = Append {
        events: (0..101).map(updated).collect(),
        ..Append::one("order-1", updated(0))
    };
    assert!(matches!(
        store.append(too_many).await,
        Err(AppendError::Refused(reason)) if reason.contains("a transaction holds 100")
    ));
    let twice = Append {
        events: vec![
            NewEvent {
                event_id: Some("same".into()),
                ..updated(2)
            },
            NewEvent {
                event_id: Some("same".into()),
                ..updated(3)
            },
        ],
        ..Append::one("order-1", updated(0))
    };
    assert_eq!(
        invalid(twice).await,
        "field `eventId` `same` is given to two events of this append"
    );
    let mut at_the_end = Append::one("order-1", updated(2));
    at_the_end.expected = ExpectedSequence::Exact(i64::MAX as u64);
    assert!(matches!(
        store.append(at_the_end).await,
        Err(AppendError::Refused(reason)) if reason.contains("sequences end at 2^63-1")
    ));
    assert_eq!(
        items(&store, &local.endpoint).await,
        before,
        "nothing written"
    );

    // The binary: the exit codes of the contract.
    let table = store.table().to_owned();
    let run = |args: &[&str]| append_binary(&local.endpoint, &table, args);
    let (code, _, stderr) = run(&[
        "--stream",
        "order-1",
        "--type",
        "OrderUpdated",
        "--data",
        r#"{"customerName":"Ada","email":"ada@example.com","totalCents":2}"#,
        "--expected-sequence",
        "0",
    ]);
    assert_eq!(code, 3, "{stderr}");
    assert!(
        stderr.contains("the stream is at sequence 1, not 0"),
        "{stderr}"
    );
    for (args, named) in [
        (
            &["--stream", "o", "--type", "OrderShipped", "--data", "{}"][..],
            "unknown event type `OrderShipped`",
        ),
        (
            &[
                "--stream",
                "o",
                "--type",
                "OrderUpdated",
                "--data",
                r#"{"email":"a"}"#,
            ][..],
            "data.customerName",
        ),
        (
            &[
                "--stream",
                "SKU-A",
                "--type",
                "InventoryAdjusted",
                "--data",
                r#"{"sku":"SKU-B","delta":1}"#,
            ][..],
            "data.sku",
        ),
        (
            &["--stream", "o", "--type", "OrderCreated", "--data", "[1]"][..],
            "--data must be a JSON object",
        ),
        (
            &["--stream", "o", "--type", "OrderCreated", "--data", "{"][..],
            "--data is not JSON",
        ),
    ] {
        let (code, stdout, stderr) = run(args);
        assert_eq!(code, 2, "{args:?}: {stderr}");
        assert!(stderr.contains(named), "{args:?}: {stderr}");
        assert!(stdout.is_empty(), "{stdout}");
    }
    assert_eq!(
        items(&store, &local.endpoint).await,
        before,
        "nothing written"
    );
    let output = Command::new(env!("CARGO_BIN_EXE_append"))
        .args(["--stream", "o", "--type", "OrderCreated", "--data", "{}"])
        .env_remove("EVENTS_TABLE")
        .output()
        .expect("run");
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("EVENTS_TABLE is not set"));
}

/// `append` with a known sequence is one request: the table is looked at
/// only when the append fails (and then a missing table is named). An
/// append of personal data adds its subject's key item: read, and written
/// the first time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_append_of_a_known_sequence_is_one_request() {
    use std::sync::atomic::Ordering;

    let local = dynamodb_local();
    let upstream = local.endpoint.trim_start_matches("http://").to_owned();
    let proxy = FaultProxy::start(upstream, 1, 0, vec![]).await;
    let table = fresh_store(&local.endpoint).await.table().to_owned();
    let forwarded = || proxy.counts.forwarded.load(Ordering::Relaxed);
    let before = forwarded();
    let (code, stdout, stderr) = append_binary(
        &proxy.endpoint,
        &table,
        &[
            "--stream",
            "lamp",
            "--type",
            "ProductCreated",
            "--data",
            r#"{"name":"Lamp","priceCents":1000}"#,
            "--expected-sequence",
            "0",
        ],
    );
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains(r#""sequence":1"#), "{stdout}");
    assert_eq!(
        forwarded() - before,
        1,
        "one TransactWriteItems, no DescribeTable"
    );

    let data = r#"{"customerName":"Ada","email":"ada@example.com","totalCents":1}"#;
    for (event_type, expected, requests, why) in [
        (
            "OrderCreated",
            "0",
            3,
            "the key item read and written, one TransactWriteItems, no DescribeTable",
        ),
        (
            "OrderUpdated",
            "1",
            2,
            "the key item read, one TransactWriteItems, no DescribeTable",
        ),
    ] {
        let before = forwarded();
        let (code, stdout, stderr) = append_binary(
            &proxy.endpoint,
            &table,
            &[
                "--stream",
                "o-1",
                "--type",
                event_type,
                "--data",
                data,
                "--expected-sequence",
                expected,
            ],
        );
        assert_eq!(code, 0, "{stderr}");
        assert!(stdout.contains(r#""streamId":"o-1""#), "{stdout}");
        assert_eq!(forwarded() - before, requests, "{event_type}: {why}");
    }

    let (code, _, stderr) = append_binary(
        &proxy.endpoint,
        "no-such-table",
        &[
            "--stream",
            "lamp",
            "--type",
            "ProductCreated",
            "--data",
            r#"{"name":"Lamp","priceCents":1000}"#,
        ],
    );
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("table `no-such-table` does not exist"),
        "{stderr}"
    );
}

/// `ExactCheck::ReadFirst`: an exact sequence read first, then one
/// conditional put; a stale or ahead sequence refused without a write.
#[tokio::test]
async fn an_exact_sequence_read_first_appends_and_refuses_as_in_the_transaction() {
    let local = dynamodb_local();
    let store = fresh_store(&local.endpoint)
        .await
        .with_exact_check(sequence_guard::producer::ExactCheck::ReadFirst);
    for at in 0..3 {
        let append = Append {
            expected: ExpectedSequence::Exact(at),
            ..Append::one("order-r", if at == 0 { created(at) } else { updated(at) })
        };
        assert_eq!(store.append(append).await.expect("append").sequence, at + 1);
    }
    let before = items(&store, &local.endpoint).await;
    for expected in [1, 7] {
        let append = Append {
            expected: ExpectedSequence::Exact(expected),
            ..Append::one("order-r", updated(9))
        };
        assert_eq!(
            store.append(append).await,
            Err(AppendError::ExpectedSequence {
                expected,
                current: 3
            })
        );
    }
    assert_eq!(
        items(&store, &local.endpoint).await,
        before,
        "nothing written"
    );
    let requests = store.requests();
    let append = Append {
        expected: ExpectedSequence::Exact(3),
        ..Append::one("order-r", updated(4))
    };
    store.append(append).await.expect("append");
    assert_eq!(store.requests() - requests, 2, "a Query, then a PutItem");
}

/// A store that wrote (or read) event `n` appends after it with one
/// conditional put, 1 write unit, no read and no check, exact or not; a
/// stream moved on by another writer is found by that put, and refused as
/// an exact append should be, or appended after as any other.
#[tokio::test]
async fn after_an_event_it_saw_a_store_appends_with_one_put_of_one_unit() {
    let local = dynamodb_local();
    let store = fresh_store(&local.endpoint).await;
    let append = |expected, event| Append {
        expected,
        ..Append::one("order-k", event)
    };
    store
        .append(append(ExpectedSequence::Exact(0), created(1)))
        .await
        .expect("created");
    for (expected, sequence) in [
        (ExpectedSequence::Exact(1), 2),
        (ExpectedSequence::Any, 3),
        (ExpectedSequence::Exact(3), 4),
    ] {
        let (requests, consumed) = (store.requests(), store.consumed());
        let appended = store
            .append(append(expected, updated(sequence)))
            .await
            .expect("appended");
        assert_eq!(appended.sequence, sequence);
        assert_eq!(store.requests() - requests, 1, "{expected:?}: one PutItem");
        let used = store.consumed().since(&consumed);
        assert_eq!(
            (used.by_rules.write, used.by_rules.read),
            (1.0, 0.0),
            "{expected:?}"
        );
        assert_eq!(
            used.reported.write, 1.0,
            "{expected:?}: as DynamoDB reports it"
        );
    }
    // Another writer moves the stream on: the first store's knowledge is
    // behind, and its put finds it.
    let other = EventStore::new(
        store.client().clone(),
        store.table().to_owned(),
        personal_data::keyed_domain(store.client(), store.table()),
    );
    other
        .append(append(ExpectedSequence::Any, updated(5)))
        .await
        .expect("the other writer's");
    assert_eq!(
        store
            .append(append(ExpectedSequence::Exact(4), updated(6)))
            .await,
        Err(AppendError::ExpectedSequence {
            expected: 4,
            current: 5
        })
    );
    let appended = store
        .append(append(ExpectedSequence::Any, updated(6)))
        .await
        .expect("after the other's");
    assert_eq!(appended.sequence, 6);
    let sequences: Vec<u64> = events(&store, "order-k")
        .await
        .iter()
        .map(|event| event.sequence)
        .collect();
    assert_eq!(sequences, [1, 2, 3, 4, 5, 6], "gapless");
}
