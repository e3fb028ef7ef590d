//! The benchmark's producer section: the event store's append side by side
//! with the naive producer most teams write (a counter `ADD`, then a
//! `PutItem` of the event), on DynamoDB Local.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValue};
use sequence_guard::producer::{Append, AppendError, EventStore, ExpectedSequence, NewEvent};
use sequence_guard::store::dynamodb::{connect, ensure_events_table};
use serde_json::json;

use super::fault_proxy::{Fault, FaultProxy};

fn updated(n: u64) -> NewEvent {
    NewEvent::new(
        "OrderUpdated",
        json!({"customerName": "Ada", "email": "ada@example.com", "totalCents": n}),
    )
}

async fn table(endpoint: &str, name: &str) -> Client {
    let client = connect(Some(endpoint)).await;
    if let Err(err) = ensure_events_table(&client, name).await {
        eprintln!("{name}: {err}");
        std::process::exit(1);
    }
    client
}

/// The naive producer: `ADD` the head, then put the event at the sequence it
/// answered. A caller retries the whole command when either fails.
async fn naive_append(
    client: &Client,
    table: &str,
    stream: &str,
    event_id: &str,
) -> Result<(), String> {
    let output = client
        .update_item()
        .table_name(table)
        .key("pk", AttributeValue::S(format!("STREAM#{stream}")))
        .key("sk", AttributeValue::S("HEAD".into()))
        .update_expression("ADD #s :one")
        .expression_attribute_names("#s", "sequence")
        .expression_attribute_values(":one", AttributeValue::N("1".into()))
        .return_values(ReturnValue::UpdatedNew)
        .send()
        .await
        .map_err(|err| err.to_string())?;
    let sequence: u64 = match output
        .attributes
        .as_ref()
        .and_then(|item| item.get("sequence"))
    {
        Some(AttributeValue::N(number)) => number.parse().map_err(|_| "sequence".to_owned())?,
        _ => return Err("no sequence".into()),
    };
    client
        .put_item()
        .table_name(table)
        .item("pk", AttributeValue::S(format!("STREAM#{stream}")))
        .item("sk", AttributeValue::S(format!("EVENT#{sequence:020}")))
        .item("eventId", AttributeValue::S(event_id.into()))
        .item("sequence", AttributeValue::N(sequence.to_string()))
        .send()
        .await
        .map_err(|err| err.to_string())?;
    Ok(())
}

/// Gaps (sequences up to the head with no event) and duplicates (events
/// stored more than once) in a stream, read without faults.
async fn gaps_and_duplicates(client: &Client, table: &str, stream: &str) -> (u64, u64) {
    let mut events: BTreeMap<u64, String> = BTreeMap::new();
    let mut head = 0;
    let mut start = None;
    loop {
        let Ok(output) = client
            .query()
            .table_name(table)
            .key_condition_expression("pk = :pk")
            .expression_attribute_values(":pk", AttributeValue::S(format!("STREAM#{stream}")))
            .consistent_read(true)
            .set_exclusive_start_key(start)
            .send()
            .await
        else {
            return (u64::MAX, u64::MAX);
        };
        for item in output.items.unwrap_or_default() {
            let number = |name: &str| match item.get(name) {
                Some(AttributeValue::N(n)) => n.parse::<u64>().ok(),
                _ => None,
            };
            match item.get("sk") {
                Some(AttributeValue::S(sk)) if sk == "HEAD" => {
                    head = number("sequence").unwrap_or(0)
                }
                _ => {
                    if let (Some(sequence), Some(AttributeValue::S(id))) =
                        (number("sequence"), item.get("eventId"))
                    {
                        events.insert(sequence, id.clone());
                    }
                }
            }
        }
        start = output.last_evaluated_key;
        if start.is_none() {
            break;
        }
    }
    let gaps = (1..=head)
        .filter(|sequence| !events.contains_key(sequence))
        .count() as u64;
    let distinct: HashSet<&String> = events.values().collect();
    (gaps, (events.len() - distinct.len()) as u64)
}

pub async fn print_producer(local: &str, proxied: &str) {
    println!("\n== The producer's half: appends to the event store (through the 2 ms proxy)");
    let client = table(local, "bench-events").await;
    let store = EventStore::new(connect(Some(proxied)).await, "bench-events", shop::domain());

    // Requests per append.
    let mut rows = Vec::new();
    for (label, expected, request) in [
        ("expected sequence known, no request id", true, false),
        ("expected sequence known, request id", true, true),
        ("any sequence (the head read first)", false, false),
    ] {
        let before = store.requests();
        let stream = format!("req-{}", label.len());
        for n in 0..50u64 {
            let append = Append {
                expected: if expected {
                    ExpectedSequence::Exact(n)
                } else {
                    ExpectedSequence::Any
                },
                request_id: request.then(|| format!("{stream}-{n}")),
                ..Append::one(stream.clone(), updated(n))
            };
            if let Err(err) = store.append(append).await {
                println!("{label}: failed: {err}");
            }
        }
        rows.push((label, (store.requests() - before) as f64 / 50.0));
    }
    for (label, requests) in rows {
        println!("{label:<48} {requests:.2} requests/append");
    }

    // Appends per second, 8 concurrent writers.
    let store = Arc::new(store);
    for (label, streams) in [("one hot stream", 1usize), ("100 streams", 100)] {
        let started = Instant::now();
        let writers = (0..8u64).map(|writer| {
            let store = store.clone();
            tokio::spawn(async move {
                let mut failed = 0;
                for n in 0..40u64 {
                    let stream = format!("rate-{streams}-{}", (writer * 40 + n) as usize % streams);
                    let append = Append {
                        request_id: Some(format!("rate-{streams}-{writer}-{n}")),
                        ..Append::one(stream, updated(n))
                    };
                    if store.append(append).await.is_err() {
                        failed += 1;
                    }
                }
                failed
            })
        });
        let mut failed = 0;
        for writer in futures::future::join_all(writers).await {
            failed += writer.unwrap_or(40);
        }
        let seconds = started.elapsed().as_secs_f64();
        println!(
            "{label:<48} {:.0} appends/s (320 appends, 8 writers, {failed} given up)",
            320.0 / seconds
        );
    }

    // Faults: a third of the requests throttled, failed or answered lost.
    let upstream = local.trim_start_matches("http://").to_owned();
    let proxy = FaultProxy::start(
        upstream,
        0x0BAD_5EED,
        0,
        vec![Fault::Throttle, Fault::ServerError, Fault::LostAnswer],
    )
    .await;
    let faulty = EventStore::new(
        connect(Some(&proxy.endpoint)).await,
        "bench-events",
        shop::domain(),
    );
    let naive_client = connect(Some(&proxy.endpoint)).await;
    proxy.set_percent(33);
    for n in 0..30u64 {
        let append = Append {
            request_id: Some(format!("fault-{n}")),
            ..Append::one("faults-ours", {
                let mut event = updated(n);
                event.event_id = Some(format!("fault-{n}"));
                event
            })
        };
        for _ in 0..20 {
            match faulty.append(append.clone()).await {
                Ok(_) => break,
                Err(AppendError::Store(_) | AppendError::Contention { .. }) => {}
                Err(err) => {
                    println!("fault-{n}: {err}");
                    break;
                }
            }
        }
        for _ in 0..20 {
            if naive_append(
                &naive_client,
                "bench-events",
                "faults-naive",
                &format!("fault-{n}"),
            )
            .await
            .is_ok()
            {
                break;
            }
        }
    }
    proxy.set_percent(0);
    let ours = gaps_and_duplicates(&client, "bench-events", "faults-ours").await;
    let naive = gaps_and_duplicates(&client, "bench-events", "faults-naive").await;
    println!(
        "30 appends, a third of the requests faulted ({}):",
        proxy.counts.summary()
    );
    println!(
        "  event store append (request id, retried): {} gaps, {} duplicates",
        ours.0, ours.1
    );
    println!(
        "  naive ADD then PutItem (retried):         {} gaps, {} duplicates",
        naive.0, naive.1
    );
}
