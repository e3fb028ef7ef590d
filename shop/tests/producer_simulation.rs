//! The property simulation of the producer, on DynamoDB Local: random appends
//! to a few streams (expected sequence exact or any, request ids reused as a
//! retried command reuses them), callers that crash mid-append (the call
//! dropped after 0 to 3 ms, its transaction in flight) and then retry with
//! the same request id. Invariants: every stream holds 1..n with no gap, each
//! request id's event is stored exactly once, and every answer names the
//! event stored at its sequence. `PRODUCER_CASES` sets the number of cases
//! (default 10).

mod support;

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use sequence_guard::producer::{Append, AppendError, EventStore, ExpectedSequence, NewEvent};
use sequence_guard::store::dynamodb::{connect, ensure_events_table};
use serde_json::json;
use support::*;

#[derive(Debug, Clone)]
struct Op {
    stream: u8,
    request: u8,
    exact: bool,
    crash_after_ms: Option<u64>,
}

fn op() -> impl Strategy<Value = Op> {
    (
        0..3u8,
        0..12u8,
        any::<bool>(),
        prop::option::weighted(0.3, 0..4u64),
    )
        .prop_map(|(stream, request, exact, crash_after_ms)| Op {
            stream,
            request,
            exact,
            crash_after_ms,
        })
}

#[test]
fn appends_with_retries_and_crashes_keep_streams_gapless_and_requests_once() {
    let cases = std::env::var("PRODUCER_CASES")
        .ok()
        .and_then(|cases| cases.parse().ok())
        .unwrap_or(10);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let local = dynamodb_local();
    let client = runtime.block_on(connect(Some(&local.endpoint)));
    let case = std::sync::atomic::AtomicU32::new(0);
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    let result = runner.run(&prop::collection::vec(op(), 5..30), |ops| {
        let table = format!(
            "producer-sim-{}-{}",
            std::process::id(),
            case.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        );
        runtime
            .block_on(ensure_events_table(&client, &table))
            .map_err(|err| TestCaseError::fail(err.to_string()))?;
        // Keyed over the case's table: a crash may drop a subject's
        // key being made, and the retry finds it or makes it.
        let domain = personal_data::keyed_domain(&client, &table);
        let store = EventStore::new(client.clone(), table, domain);
        // request -> (stream, sequence, event id), as answered.
        let mut answers: HashMap<u8, (String, u64, String)> = HashMap::new();
        for op in &ops {
            let stream = format!("order-{}", op.stream);
            // A creation: any op may be its stream's first, and an update
            // cannot open a stream; the store minds no other type.
            let mut event = NewEvent::new(
                "OrderCreated",
                json!({"customerName": "Ada", "email": "ada@example.com", "totalCents": op.request}),
            );
            event.event_id = Some(format!("request-{}", op.request));
            let mut append = Append {
                request_id: Some(format!("request-{}", op.request)),
                ..Append::one(stream.clone(), event)
            };
            if op.exact {
                let head = runtime
                    .block_on(store.last_sequence(&stream))
                    .map_err(|err| TestCaseError::fail(err.to_string()))?;
                append.expected = ExpectedSequence::Exact(head);
            }
            if let Some(ms) = op.crash_after_ms {
                // The caller crashes: its call is dropped, the transaction
                // perhaps already sent.
                let _ = runtime.block_on(async {
                    tokio::time::timeout(Duration::from_millis(ms), store.append(append.clone()))
                        .await
                });
            }
            // It (or its successor) runs the command again, wherever the
            // stream stands now.
            append.expected = ExpectedSequence::Any;
            let appended = loop {
                match runtime.block_on(store.append(append.clone())) {
                    Ok(appended) => break appended,
                    Err(AppendError::Store(_) | AppendError::Contention { .. }) => continue,
                    Err(err) => return Err(TestCaseError::fail(err.to_string())),
                }
            };
            let answer = (
                appended.stream_id.clone(),
                appended.sequence,
                appended.event_id.clone(),
            );
            if let Some(first) = answers.get(&op.request) {
                prop_assert_eq!(first, &answer, "a request answers as the first time");
                prop_assert!(appended.duplicate_request);
            }
            answers.insert(op.request, answer);
        }
        // The store: per stream 1..n, each request's event once, where its
        // answer says.
        let mut stored: BTreeMap<(String, u64), String> = BTreeMap::new();
        for stream in 0..3 {
            let stream = format!("order-{stream}");
            let events = runtime
                .block_on(store.read(&stream, 0, 1000))
                .map_err(|err| TestCaseError::fail(err.to_string()))?;
            let sequences: Vec<u64> = events.iter().map(|event| event.sequence).collect();
            prop_assert_eq!(&sequences, &(1..=events.len() as u64).collect::<Vec<_>>());
            let last = runtime
                .block_on(store.last_sequence(&stream))
                .map_err(|err| TestCaseError::fail(err.to_string()))?;
            prop_assert_eq!(last, events.len() as u64, "the last sequence is the last event's");
            for event in events {
                stored.insert((stream.clone(), event.sequence), event.event_id);
            }
        }
        prop_assert_eq!(stored.len(), answers.len(), "one event per request id");
        for (stream, sequence, event_id) in answers.values() {
            prop_assert_eq!(stored.get(&(stream.clone(), *sequence)), Some(event_id));
        }
        Ok(())
    });
    if let Err(err) = result {
        panic!("{err}");
    }
}
