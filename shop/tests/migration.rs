//! Switching the producer on over a projection that was fed directly
//! (docs/event-store.md), on DynamoDB Local: a store that restarts a
//! projected stream at 1 is counted as duplicates by the guard, in silence;
//! `verify` names it (the projection is ahead of the store, then its history
//! is not the store's), and a store that continues the projection's
//! sequences (the history imported first, with its event ids) agrees.

mod support;

use sequence_guard::producer::{Append, EventStore, ExpectedSequence, NewEvent};
use sequence_guard::runner::{Invocation, Outcome, Runner, RunnerConfig};
use sequence_guard::store::dynamodb::{DynamoStore, connect, create_table, ensure_events_table};
use serde_json::{Value, json};
use support::*;

/// The bodies through the projector's runner as one batch of `stream`: the
/// outcomes.
async fn project(runner: &Runner<DynamoStore>, stream: &str, bodies: &[String]) -> Vec<Outcome> {
    let messages = bodies
        .iter()
        .enumerate()
        .map(|(index, body)| message(&format!("{stream}:{index}"), stream, body))
        .collect();
    let invocation = Invocation {
        deadline: None,
        now: sequence_guard::lambda::epoch_seconds(),
    };
    let report = runner.run(&batch(messages), invocation).await.expect("run");
    outcomes(&report)
}

/// An order's event of the story: created, then updated.
fn order_event_data(sequence: u64) -> (&'static str, Value) {
    let event_type = if sequence == 1 {
        "OrderCreated"
    } else {
        "OrderUpdated"
    };
    let data = json!({"customerName": "Ada Lovelace", "email": "ada@example.com", "totalCents": 100 * sequence});
    (event_type, data)
}

/// Appends the order's events `from..=to` at their sequences, with these
/// event ids (none: made up).
async fn append_order(store: &EventStore, order: &str, from: u64, to: u64, ids: Option<&str>) {
    for sequence in from..=to {
        let (event_type, data) = order_event_data(sequence);
        let mut event = NewEvent::new(event_type, data);
        event.event_id = ids.map(|prefix| format!("{prefix}-{sequence}"));
        store
            .append(Append {
                expected: ExpectedSequence::Exact(sequence - 1),
                ..Append::one(order, event)
            })
            .await
            .expect("append");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_that_restarts_a_projected_stream_is_named_by_verify() {
    // GIVEN a projection fed directly: order-1 and order-2 at sequence 5,
    // by events the store never held.
    let client = connect(Some(&dynamodb_local().endpoint)).await;
    let suffix = std::process::id();
    let (events_table, table) = (
        format!("migration-events-{suffix}"),
        format!("migration-projection-{suffix}"),
    );
    ensure_events_table(&client, &events_table)
        .await
        .expect("events");
    create_table(&client, &table).await.expect("table");
    let store = EventStore::new(
        client.clone(),
        events_table.clone(),
        personal_data::keyed_domain(&client, &events_table),
    );
    let runner = Runner::new(
        personal_data::keyed_domain(&client, &events_table),
        DynamoStore::new(client, table.clone()),
        RunnerConfig::default(),
    );
    for order in ["order-1", "order-2"] {
        let bodies: Vec<String> = (1..=5)
            .map(|sequence| {
                let (event_type, _) = order_event_data(sequence);
                order_event(
                    event_type,
                    order,
                    sequence,
                    &format!("direct-{order}-{sequence}"),
                )
            })
            .collect();
        assert!(
            project(&runner, order, &bodies)
                .await
                .iter()
                .all(|o| *o == Outcome::Applied)
        );
    }

    // WHEN the producer is switched on: order-1's stream restarts at 1 with
    // three events, which the consumer counts as duplicates, in silence;
    // order-2's history is imported first (its event ids), then continued.
    append_order(&store, "order-1", 1, 3, None).await;
    let stored: Vec<String> = store
        .read("order-1", 0, 100)
        .await
        .expect("read")
        .into_iter()
        .map(|event| event.body)
        .collect();
    assert_eq!(
        project(&runner, "order-1", &stored).await,
        [Outcome::Duplicate; 3],
        "the guard takes the restarted stream for duplicates"
    );
    append_order(&store, "order-2", 1, 5, Some("direct-order-2")).await;
    append_order(&store, "order-2", 6, 6, None).await;
    let sixth = store.read("order-2", 5, 1).await.expect("read");
    assert_eq!(
        project(&runner, "order-2", &[sixth[0].body.clone()]).await,
        [Outcome::Applied]
    );

    // THEN verify names order-1 as ahead of the store, and exits 1; the
    // order whose history was imported agrees.
    let (code, lines, stderr) = verify_lines(&events_table, &table, &[]);
    assert_eq!(code, 1, "{stderr}");
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert_eq!(lines[0]["pk"], "ORDER#order-1");
    assert_eq!(
        (
            &lines[0]["expectedSequence"],
            &lines[0]["foundSequence"],
            &lines[0]["ahead"]
        ),
        (&json!(3), &json!(5), &json!(true)),
        "{lines:?}"
    );
    assert_eq!(lines[1], json!({"checked": 2, "differ": 1, "ahead": 1}));
    assert!(
        stderr.contains("ahead of the event store on 1 stream(s): order-1"),
        "{stderr}"
    );

    // AND when the store reaches the projection's sequence, the history is
    // named as not the store's: diverged at the same sequence.
    append_order(&store, "order-1", 4, 5, None).await;
    let (code, lines, stderr) = verify_lines(&events_table, &table, &[]);
    assert_eq!(code, 1, "{stderr}");
    assert_eq!(
        (
            &lines[0]["pk"],
            &lines[0]["expectedSequence"],
            &lines[0]["foundSequence"]
        ),
        (&json!("ORDER#order-1"), &json!(5), &json!(5)),
        "{lines:?}"
    );
    assert_eq!(lines[0]["diverged"], json!(true), "{lines:?}");
    assert_eq!(lines[1], json!({"checked": 2, "differ": 1, "diverged": 1}));
    assert!(
        stderr.contains("not the store's at its sequence on 1 stream(s): order-1"),
        "{stderr}"
    );

    // AND past it, with the consumer behind: still diverged (the store's
    // event 5 is not the projection's).
    append_order(&store, "order-1", 6, 6, None).await;
    let (code, lines, stderr) = verify_lines(&events_table, &table, &[]);
    assert_eq!(code, 1, "{stderr}");
    assert_eq!(
        (
            &lines[0]["expectedSequence"],
            &lines[0]["foundSequence"],
            &lines[0]["diverged"]
        ),
        (&json!(6), &json!(5), &json!(true)),
        "{lines:?}"
    );
}

/// A stream's first event must make its entity: an update appended to a
/// stream the store has no event of (a producer switched on over a
/// projection it did not feed, sending the next update of an order the
/// projection already holds) is refused, naming the type, before anything
/// is written; the consumers would otherwise wait for its creation for
/// ever, or take it for a duplicate.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_update_cannot_open_a_stream() {
    let client = connect(Some(&dynamodb_local().endpoint)).await;
    let events_table = format!("migration-open-{}", std::process::id());
    ensure_events_table(&client, &events_table)
        .await
        .expect("events");
    let domain = personal_data::keyed_domain(&client, &events_table);
    let store = EventStore::new(client, events_table.clone(), domain);
    let updated = || NewEvent::new("OrderUpdated", order_event_data(2).1);
    for expected in [ExpectedSequence::Any, ExpectedSequence::Exact(0)] {
        let refused = store
            .append(Append {
                expected,
                ..Append::one("order-9", updated())
            })
            .await
            .expect_err("an update cannot open a stream");
        let text = refused.to_string();
        assert!(
            text.contains("type")
                && text.contains("OrderUpdated cannot be the first event of the stream `order-9`"),
            "{text}"
        );
    }
    assert!(store.read("order-9", 0, 10).await.expect("read").is_empty());
    let (code, _, stderr) = run_local(
        env!("CARGO_BIN_EXE_append"),
        &dynamodb_local().endpoint,
        &[
            "--table",
            &events_table,
            "--stream",
            "order-9",
            "--type",
            "OrderUpdated",
            "--data",
            r#"{"customerName":"A","email":"a@example.com","totalCents":1}"#,
        ],
    );
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("cannot be the first event"), "{stderr}");
    // A creation opens it, a counter's event opens its own, and then the
    // update follows.
    append_order(&store, "order-9", 1, 2, None).await;
    store
        .append(Append::one(
            "SKU-9",
            NewEvent::new(
                "InventoryAdjusted",
                serde_json::json!({"sku": "SKU-9", "delta": 3}),
            ),
        ))
        .await
        .expect("a counter's stream opens with any of its events");
}
