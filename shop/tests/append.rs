//! The producer's half on DynamoDB Local: the event store's append (the events,
//! the request record and the caller's writes, all or nothing), checked with the
//! consumer's declarations; the `append` binary; appenders racing on a few
//! streams; requests repeated, also after lost answers and from a new
//! process; faults between the caller and the table.

mod support;

use std::collections::{BTreeMap, HashSet};
use std::process::Command;
use std::sync::Arc;

use aws_sdk_dynamodb::types::{AttributeValue, Put, TransactWriteItem};
use sequence_guard::producer::{
    Append, AppendError, EventStore, ExpectedSequence, NewEvent, StoredEvent,
};
use sequence_guard::store::dynamodb::{connect, ensure_events_table};
use serde_json::{Value, json};
use support::fault_proxy::{Fault, FaultProxy};
use support::*;

async fn fresh_store(endpoint: &str) -> EventStore {
    let client = connect(Some(endpoint)).await;
    let name = format!(
        "events-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos())
    );
    ensure_events_table(&client, &name)
        .await
        .expect("events table");
    EventStore::new(client, name, shop::domain())
}

fn created(total_cents: u64) -> NewEvent {
    NewEvent::new(
        "OrderCreated",
        json!({"customerName": "Ada", "email": "ada@example.com", "totalCents": total_cents}),
    )
}

/// An update: never a stream's first event (the producer refuses it); the
/// racing tests append creations, whose place in a stream the store does
/// not mind.
fn updated(total_cents: u64) -> NewEvent {
    NewEvent::new(
        "OrderUpdated",
        json!({"customerName": "Ada", "email": "ada@example.com", "totalCents": total_cents}),
    )
}

async fn events(store: &EventStore, stream: &str) -> Vec<StoredEvent> {
    let mut all = Vec::new();
    loop {
        let after = all.last().map_or(0, |event: &StoredEvent| event.sequence);
        let page = store.read(stream, after, 100).await.expect("read");
        if page.is_empty() {
            return all;
        }
        all.extend(page);
    }
}

/// Every item of the table, as (pk, sk) -> attributes.
async fn items(store: &EventStore, endpoint: &str) -> BTreeMap<(String, String), Value> {
    let client = connect(Some(endpoint)).await;
    let output = client
        .scan()
        .table_name(store.table())
        .consistent_read(true)
        .send()
        .await
        .expect("scan");
    output
        .items
        .unwrap_or_default()
        .into_iter()
        .map(|item| {
            let text = |name: &str| match item.get(name) {
                Some(AttributeValue::S(text)) => text.clone(),
                _ => String::new(),
            };
            let attributes: serde_json::Map<String, Value> = item
                .iter()
                .filter(|(name, _)| *name != "pk" && *name != "sk")
                .map(|(name, value)| {
                    let value = match value {
                        AttributeValue::S(text) => json!(text),
                        AttributeValue::N(number) => json!(number),
                        other => json!(format!("{other:?}")),
                    };
                    (name.clone(), value)
                })
                .collect();
            ((text("pk"), text("sk")), Value::Object(attributes))
        })
        .collect()
}

/// Each stream holds 1..n with no gap, and its last sequence is n.
async fn assert_contiguous(store: &EventStore, stream: &str) -> Vec<StoredEvent> {
    let stored = events(store, stream).await;
    let sequences: Vec<u64> = stored.iter().map(|event| event.sequence).collect();
    assert_eq!(
        sequences,
        (1..=stored.len() as u64).collect::<Vec<_>>(),
        "{stream}"
    );
    assert_eq!(
        store.last_sequence(stream).await.expect("last sequence"),
        stored.len() as u64
    );
    for event in &stored {
        let body: Value = serde_json::from_str(&event.body).expect("a JSON body");
        if event.event_type != "InventoryAdjusted" {
            assert_eq!(body["sequence"], json!(event.sequence), "{stream}");
        }
        shop::domain()
            .parse(&event.body)
            .expect("the consumer takes it");
    }
    stored
}

#[tokio::test]
async fn an_append_writes_the_event_and_the_request_and_no_head() {
    let local = dynamodb_local();
    let store = fresh_store(&local.endpoint).await;
    let mut append = Append::one("order-42", created(1250));
    append.expected = ExpectedSequence::Exact(0);
    append.request_id = Some("req-1".into());
    let appended = store.append(append).await.expect("append");
    assert_eq!(
        (
            appended.stream_id.as_str(),
            appended.sequence,
            appended.duplicate_request
        ),
        ("order-42", 1, false)
    );
    assert_eq!(
        serde_json::to_value(&appended).expect("json"),
        json!({"streamId": "order-42", "sequence": 1, "eventId": appended.event_id, "duplicateRequest": false})
    );
    let items = items(&store, &local.endpoint).await;
    let keys: Vec<(&str, &str)> = items
        .keys()
        .map(|(pk, sk)| (pk.as_str(), sk.as_str()))
        .collect();
    assert_eq!(
        keys,
        [
            ("REQUEST#req-1", "REQUEST"),
            ("STREAM#order-42", "EVENT#00000000000000000001"),
        ]
    );
    let event = &items[&(
        "STREAM#order-42".into(),
        "EVENT#00000000000000000001".into(),
    )];
    assert_eq!(event["type"], "OrderCreated");
    assert_eq!(event["eventId"], json!(appended.event_id));
    assert_eq!(event["sequence"], "1");
    let body: Value = serde_json::from_str(event["body"].as_str().expect("body")).expect("json");
    assert_eq!(
        body,
        json!({"eventId": appended.event_id, "type": "OrderCreated", "aggregateId": "order-42", "sequence": 1,
               "data": {"customerName": "Ada", "email": "ada@example.com", "totalCents": 1250}})
    );
    let request = &items[&("REQUEST#req-1".into(), "REQUEST".into())];
    assert_eq!(request["streamId"], "order-42");
    assert_eq!(request["sequence"], "1");
    assert_eq!(request["eventId"], json!(appended.event_id));
    assert!(request["expiresAt"].as_str().is_some(), "{request}");
}

#[tokio::test]
async fn a_request_repeated_appends_once_and_answers_as_the_first() {
    let local = dynamodb_local();
    let store = fresh_store(&local.endpoint).await;
    let append = Append {
        request_id: Some("req-twice".into()),
        ..Append::one("order-7", created(1))
    };
    let first = store.append(append.clone()).await.expect("first");
    let mut again = append.clone();
    // The retried command may carry a new event id: the request id decides.
    again.events = vec![created(999)];
    let second = store.append(again).await.expect("second");
    assert!(second.duplicate_request);
    assert_eq!(
        (second.sequence, second.event_id.as_str()),
        (first.sequence, first.event_id.as_str())
    );
    assert_eq!(assert_contiguous(&store, "order-7").await.len(), 1);
    // With the expected sequence of the first call (the stream has moved since).
    let exact = Append {
        expected: ExpectedSequence::Exact(0),
        ..append.clone()
    };
    let third = store.append(exact).await.expect("third");
    assert!(third.duplicate_request);
    assert_eq!(third.event_id, first.event_id);
    // From another process: the binary, with the same request id.
    let output = append_binary(
        &local.endpoint,
        store.table(),
        &[
            "--stream",
            "order-7",
            "--type",
            "OrderUpdated",
            "--data",
            r#"{"customerName":"Ada","email":"ada@example.com","totalCents":5}"#,
            "--request-id",
            "req-twice",
        ],
    );
    assert_eq!(output.0, 0, "{}", output.2);
    let answer: Value = serde_json::from_str(output.1.trim()).expect("one JSON line");
    assert_eq!(
        answer,
        json!({"streamId": "order-7", "sequence": 1, "eventId": first.event_id, "duplicateRequest": true})
    );
    assert_eq!(assert_contiguous(&store, "order-7").await.len(), 1);
    // The binary twice, as the README's first append, expected sequence 0.
    let args = [
        "--stream",
        "order-8",
        "--type",
        "OrderCreated",
        "--data",
        r#"{"customerName":"Ada","email":"ada@example.com","totalCents":5}"#,
        "--request-id",
        "create-order-8",
        "--expected-sequence",
        "0",
    ];
    let (code, first, stderr) = append_binary(&local.endpoint, store.table(), &args);
    assert_eq!(code, 0, "{stderr}");
    let (code, again, stderr) = append_binary(&local.endpoint, store.table(), &args);
    assert_eq!(code, 0, "{stderr}");
    let (first, again): (Value, Value) = (
        serde_json::from_str(first.trim()).expect("json"),
        serde_json::from_str(again.trim()).expect("json"),
    );
    assert_eq!(
        (again["eventId"].clone(), again["duplicateRequest"].clone()),
        (first["eventId"].clone(), json!(true))
    );
    assert_eq!(assert_contiguous(&store, "order-8").await.len(), 1);
}

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

#[tokio::test]
async fn several_events_and_the_callers_own_write_go_in_one_transaction() {
    let local = dynamodb_local();
    let store = fresh_store(&local.endpoint).await;
    let business = |condition: Option<&str>| {
        let mut put = Put::builder()
            .table_name(store.table())
            .item("pk", AttributeValue::S("CUSTOMER#ada".into()))
            .item("sk", AttributeValue::S("ORDERS".into()))
            .item("count", AttributeValue::N("1".into()));
        if let Some(condition) = condition {
            put = put.condition_expression(condition);
        }
        TransactWriteItem::builder()
            .put(put.build().expect("put"))
            .build()
    };
    let failing = Append {
        events: vec![created(1), updated(2)],
        writes: vec![business(Some("attribute_exists(pk)"))],
        ..Append::one("order-9", created(1))
    };
    assert_eq!(
        store.append(failing).await,
        Err(AppendError::Condition { index: 0 })
    );
    assert!(
        items(&store, &local.endpoint).await.is_empty(),
        "all or nothing"
    );
    let append = Append {
        events: vec![created(1), updated(2), updated(3)],
        writes: vec![business(None)],
        ..Append::one("order-9", created(1))
    };
    let appended = store.append(append).await.expect("append");
    assert_eq!((appended.first_sequence, appended.sequence), (1, 3));
    assert_eq!(assert_contiguous(&store, "order-9").await.len(), 3);
    assert!(
        items(&store, &local.endpoint)
            .await
            .contains_key(&("CUSTOMER#ada".into(), "ORDERS".into()))
    );
}

/// Many appenders on a few streams, each appending wherever the stream
/// stands: every stream ends at 1..n, no gap, no duplicate, and every
/// answer names its own event.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_appenders_leave_no_gap_and_no_duplicate() {
    let local = dynamodb_local();
    let store = Arc::new(fresh_store(&local.endpoint).await);
    let writers = (0..8).map(|writer| {
        // A store each, as in processes of their own: they race.
        let store = own_store(&store);
        tokio::spawn(async move {
            let mut answers = Vec::new();
            for n in 0..6 {
                let stream = format!("order-{}", n % 3);
                let mut event = created(writer * 100 + n);
                event.event_id = Some(format!("w{writer}-{n}"));
                let append = Append {
                    request_id: Some(format!("w{writer}-{n}")),
                    ..Append::one(stream.clone(), event)
                };
                let appended = store.append(append).await.expect("append");
                answers.push((stream, appended.sequence, appended.event_id));
            }
            answers
        })
    });
    let mut answers = Vec::new();
    for writer in futures::future::join_all(writers).await {
        answers.extend(writer.expect("writer"));
    }
    let mut seen = HashSet::new();
    for stream in ["order-0", "order-1", "order-2"] {
        let stored = assert_contiguous(&store, stream).await;
        assert_eq!(stored.len(), 16, "{stream}");
        for event in stored {
            assert!(
                seen.insert(event.event_id.clone()),
                "{} twice",
                event.event_id
            );
            assert!(
                answers.contains(&(stream.to_owned(), event.sequence, event.event_id.clone())),
                "{stream} {} {}",
                event.sequence,
                event.event_id
            );
        }
    }
    assert_eq!(seen.len(), 48);
}

/// Throttling, 500s and answers lost after the write, between the appender
/// and the table: a caller retrying each failed request with its request id
/// ends with each request appended exactly once, without a gap.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn faults_leave_no_gap_and_no_duplicate() {
    let local = dynamodb_local();
    let upstream = local.endpoint.trim_start_matches("http://").to_owned();
    let proxy = FaultProxy::start(
        upstream,
        0x00A1_1CE5,
        0,
        vec![Fault::Throttle, Fault::ServerError, Fault::LostAnswer],
    )
    .await;
    let table = fresh_store(&local.endpoint).await.table().to_owned();
    let store = EventStore::new(connect(Some(&proxy.endpoint)).await, table, shop::domain());
    proxy.set_percent(33);
    let mut requests = 0;
    for n in 0..30u64 {
        let stream = format!("order-{}", n % 3);
        let mut event = created(n);
        event.event_id = Some(format!("event-{n}"));
        let append = Append {
            request_id: Some(format!("request-{n}")),
            ..Append::one(stream, event)
        };
        let mut tries = 0;
        loop {
            tries += 1;
            requests += 1;
            match store.append(append.clone()).await {
                Ok(_) => break,
                Err(AppendError::Store(_) | AppendError::Contention { .. }) if tries < 20 => {}
                Err(err) => panic!("request-{n}: {err}"),
            }
        }
    }
    proxy.set_percent(0);
    eprintln!("{requests} calls; proxy: {}", proxy.counts.summary());
    assert!(
        proxy
            .counts
            .lost_answers
            .load(std::sync::atomic::Ordering::Relaxed)
            > 0
            && proxy.counts.faults() >= 10,
        "too few faults to prove anything: {}",
        proxy.counts.summary()
    );
    let mut ids = Vec::new();
    for stream in ["order-0", "order-1", "order-2"] {
        for event in assert_contiguous(&store, stream).await {
            ids.push(event.event_id);
        }
    }
    ids.sort();
    let mut expected: Vec<String> = (0..30).map(|n| format!("event-{n}")).collect();
    expected.sort();
    assert_eq!(ids, expected, "each request appended exactly once");
}

fn append_binary(endpoint: &str, table: &str, args: &[&str]) -> (i32, String, String) {
    let mut all = vec!["--table", table];
    all.extend_from_slice(args);
    run_local(env!("CARGO_BIN_EXE_append"), endpoint, &all)
}

/// `append` with a known sequence is one request: the table is looked at
/// only when the append fails (and then a missing table is named).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_append_of_a_known_sequence_is_one_request() {
    use std::sync::atomic::Ordering;

    let local = dynamodb_local();
    let upstream = local.endpoint.trim_start_matches("http://").to_owned();
    let proxy = FaultProxy::start(upstream, 1, 0, vec![]).await;
    let table = fresh_store(&local.endpoint).await.table().to_owned();
    let data = r#"{"customerName":"Ada","email":"ada@example.com","totalCents":1}"#;
    let forwarded = || proxy.counts.forwarded.load(Ordering::Relaxed);
    let before = forwarded();
    let (code, stdout, stderr) = append_binary(
        &proxy.endpoint,
        &table,
        &[
            "--stream",
            "o-1",
            "--type",
            "OrderCreated",
            "--data",
            data,
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

    let (code, _, stderr) = append_binary(
        &proxy.endpoint,
        "no-such-table",
        &["--stream", "o-1", "--type", "OrderCreated", "--data", data],
    );
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("table `no-such-table` does not exist"),
        "{stderr}"
    );
}

/// A store of its own on the same table (its own turns: it races the
/// others, as another process would).
fn own_store(store: &EventStore) -> EventStore {
    EventStore::new(
        store.client().clone(),
        store.table().to_owned(),
        shop::domain(),
    )
}

/// Eight and thirty-two writers on one stream, each appending wherever it
/// stands, half of them sharing a store (taking turns), half with a store
/// each (racing): none gives up (the retry budget, not a count of tries),
/// and the stream ends at 1..n.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writers_on_one_hot_stream_never_give_up() {
    let local = dynamodb_local();
    let store = Arc::new(fresh_store(&local.endpoint).await);
    for (writers, each) in [(8u64, 10u64), (32, 3)] {
        let stream = format!("hot-{writers}");
        let tasks = (0..writers).map(|writer| {
            let store = if writer % 2 == 0 {
                store.clone()
            } else {
                Arc::new(own_store(&store))
            };
            let stream = stream.clone();
            tokio::spawn(async move {
                let mut outcomes = Vec::new();
                for n in 0..each {
                    let append = Append::one(stream.clone(), created(writer * 100 + n));
                    outcomes.push(store.append(append).await.map(|appended| appended.sequence));
                }
                outcomes
            })
        });
        let mut sequences = Vec::new();
        for writer in futures::future::join_all(tasks).await {
            for outcome in writer.expect("writer") {
                sequences.push(outcome.expect("no append gives up"));
            }
        }
        sequences.sort();
        assert_eq!(sequences, (1..=writers * each).collect::<Vec<_>>());
        assert_eq!(
            assert_contiguous(&store, &stream).await.len() as u64,
            writers * each
        );
    }
}

/// Answers lost after the write, and 500s, without a request id: the
/// store's own retries never append an event twice, and every answer names
/// the event stored at its sequence.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_outcomes_without_a_request_id_append_once() {
    let local = dynamodb_local();
    let upstream = local.endpoint.trim_start_matches("http://").to_owned();
    let proxy = FaultProxy::start(
        upstream,
        0x5EED_0001,
        0,
        vec![Fault::LostAnswer, Fault::ServerError],
    )
    .await;
    let table = fresh_store(&local.endpoint).await.table().to_owned();
    let store = EventStore::new(connect(Some(&proxy.endpoint)).await, table, shop::domain());
    proxy.set_percent(40);
    let mut answers = Vec::new();
    for n in 0..24u64 {
        let mut event = created(n);
        event.event_id = Some(format!("event-{n}"));
        let mut append = Append::one(format!("order-{}", n % 2), event);
        if n % 3 == 0 {
            // Two events in one transaction.
            let mut second = created(n);
            second.event_id = Some(format!("event-{n}-b"));
            append.events.push(second);
        }
        if let Ok(appended) = store.append(append).await {
            answers.push(appended);
        }
    }
    proxy.set_percent(0);
    assert!(
        proxy
            .counts
            .lost_answers
            .load(std::sync::atomic::Ordering::Relaxed)
            > 0,
        "no answer lost: {}",
        proxy.counts.summary()
    );
    let mut ids = HashSet::new();
    for stream in ["order-0", "order-1"] {
        let stored = assert_contiguous(&store, stream).await;
        for event in &stored {
            assert!(
                ids.insert(event.event_id.clone()),
                "{} twice",
                event.event_id
            );
        }
        for answer in answers.iter().filter(|answer| answer.stream_id == stream) {
            let at = &stored[answer.sequence as usize - 1];
            assert_eq!(at.event_id, answer.event_id, "{stream} {}", answer.sequence);
        }
    }
    assert!(answers.len() >= 12, "{} of 24 answered", answers.len());
}

/// A table an earlier release wrote (a HEAD item per stream, updated with
/// its events): the store appends after the last event, ignores the heads,
/// and lists the old streams with the new. A producer of that release
/// beside this one is refused on a stream this one appended to: never a gap,
/// never a duplicate.
#[tokio::test]
async fn a_table_of_the_head_layout_is_read_and_appended_and_an_old_producer_is_refused() {
    let local = dynamodb_local();
    let store = fresh_store(&local.endpoint).await;
    let client = connect(Some(&local.endpoint)).await;
    let old_append = |stream: &str, at: u64| {
        let head = aws_sdk_dynamodb::types::Update::builder()
            .table_name(store.table())
            .key("pk", AttributeValue::S(format!("STREAM#{stream}")))
            .key("sk", AttributeValue::S("HEAD".into()))
            .update_expression("SET #s = :last")
            .condition_expression(if at == 0 {
                "attribute_not_exists(#s)"
            } else {
                "#s = :at"
            })
            .expression_attribute_names("#s", "sequence")
            .set_expression_attribute_values(Some(
                [(":last".to_owned(), AttributeValue::N((at + 1).to_string()))]
                    .into_iter()
                    .chain((at > 0).then(|| (":at".to_owned(), AttributeValue::N(at.to_string()))))
                    .collect(),
            ))
            .build()
            .expect("update");
        let id = format!("old-{stream}-{}", at + 1);
        let body = json!({"eventId": id, "type": "OrderUpdated", "aggregateId": stream, "sequence": at + 1,
            "data": {"customerName": "Ada", "email": "ada@example.com", "totalCents": 1}});
        let event = Put::builder()
            .table_name(store.table())
            .item("pk", AttributeValue::S(format!("STREAM#{stream}")))
            .item("sk", AttributeValue::S(format!("EVENT#{:020}", at + 1)))
            .item("eventId", AttributeValue::S(id))
            .item("type", AttributeValue::S("OrderUpdated".into()))
            .item("sequence", AttributeValue::N((at + 1).to_string()))
            .item("body", AttributeValue::S(body.to_string()))
            .item("appendedAt", AttributeValue::N("1".into()))
            .condition_expression("attribute_not_exists(pk)")
            .build()
            .expect("put");
        client
            .transact_write_items()
            .transact_items(TransactWriteItem::builder().update(head).build())
            .transact_items(TransactWriteItem::builder().put(event).build())
            .send()
    };
    for at in 0..2 {
        old_append("order-old", at).await.expect("the old layout");
    }
    assert_eq!(store.last_sequence("order-old").await.expect("last"), 2);
    let appended = store
        .append(Append::one("order-old", updated(3)))
        .await
        .expect("after the old events");
    assert_eq!(appended.sequence, 3);
    let exact = Append {
        expected: ExpectedSequence::Exact(3),
        ..Append::one("order-old", updated(4))
    };
    assert_eq!(store.append(exact).await.expect("exact").sequence, 4);
    let mut stale = Append::one("order-old", updated(5));
    stale.expected = ExpectedSequence::Exact(2);
    assert_eq!(
        store.append(stale).await,
        Err(AppendError::ExpectedSequence {
            expected: 2,
            current: 4
        })
    );
    // The old producer: its head says 2, its event 3 is taken.
    assert!(old_append("order-old", 2).await.is_err(), "refused");
    // On a stream of this release (no head): event 1 is taken.
    store
        .append(Append::one("order-new", created(1)))
        .await
        .expect("new");
    assert!(old_append("order-new", 0).await.is_err(), "refused");
    assert_eq!(assert_contiguous(&store, "order-old").await.len(), 4);
    assert_eq!(assert_contiguous(&store, "order-new").await.len(), 1);
    let (mut streams, next) = store.streams(None).await.expect("streams");
    streams.sort();
    assert_eq!(
        (streams, next),
        (vec!["order-new".to_owned(), "order-old".to_owned()], None)
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
