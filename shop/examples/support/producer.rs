//! The benchmark's producer section: the event store's append side by side
//! with the naive producer most teams write (a counter `ADD`, then a
//! `PutItem` of the event), on DynamoDB Local.
//!
//! This file prints the requests per append and what faults leave in a
//! stream; the rest is in `producer/`: `naive.rs` (the naive producer, the
//! check for gaps and duplicates), `contention.rs` (concurrent writers),
//! `units.rs` (capacity units per append) and `head_layout.rs` (today's
//! layout, measured beside the event store's).
//!
//! An order's `customerName` and `email` are personal (`shop::domain()`):
//! every store here has a keyring over the real key items in its table
//! (`../support/keys.rs`, wrapped under a local master key), so that each
//! append pays its key item's read as a producer does; the figures name
//! those requests apart.

use aws_sdk_dynamodb::Client;
use sequence_guard::producer::{Append, AppendError, EventStore, ExpectedSequence, NewEvent};
use sequence_guard::store::dynamodb::{connect, ensure_events_table};
use serde_json::json;

use super::fault_proxy::{Fault, FaultProxy};
use crate::figure_files::Tables;
use crate::keys::{Wrapping, keyed};
use crate::meter::Meter;

#[path = "producer/contention.rs"]
mod contention;
#[path = "producer/head_layout.rs"]
mod head_layout;
#[path = "producer/naive.rs"]
mod naive;
#[path = "producer/units.rs"]
mod units;

use contention::print_contention;
use naive::{gaps_and_duplicates, naive_append};
use units::print_units;

/// An order's event as the benchmark appends it: a creation, since any
/// append may be its stream's first (an update cannot open a stream); the
/// store minds no other type, and costs the same.
fn updated(n: u64) -> NewEvent {
    NewEvent::new(
        "OrderCreated",
        json!({"customerName": "Ada", "email": "ada@example.com", "totalCents": n}),
    )
}

/// An event store of the shop on `client`'s table `table`, with a keyring
/// over the key items in that table, read through `keys` (a metered
/// client: what the keys cost).
pub fn keyed_store(client: Client, table: &str, keys: &Client) -> EventStore {
    let domain = keyed(shop::domain(), keys, table, &Wrapping::Local);
    EventStore::new(client, table, domain)
}

async fn table(endpoint: &str, name: &str) -> Client {
    let client = connect(Some(endpoint)).await;
    if let Err(err) = ensure_events_table(&client, name).await {
        eprintln!("{name}: {err}");
        std::process::exit(1);
    }
    client
}

pub async fn print_producer(local: &str, proxied: &str, tables: &mut Tables) {
    println!("\n== The producer's half: appends to the event store (through the 2 ms proxy)");
    let client = table(local, "bench-events").await;
    let proxied_client = connect(Some(proxied)).await;
    let keys = Meter::default();
    let store = keyed_store(
        proxied_client.clone(),
        "bench-events",
        &keys.wrap(&proxied_client),
    );

    // Requests per append.
    let mut rows = Vec::new();
    for (label, expected, request) in [
        ("expected sequence known, no request id", true, false),
        ("expected sequence known, request id", true, true),
        ("any sequence (the last event read first)", false, false),
    ] {
        let (before, keys_before) = (store.requests(), keys.usage().requests);
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
        rows.push((
            label,
            (store.requests() - before) as f64 / 50.0,
            (keys.usage().requests - keys_before) as f64 / 50.0,
        ));
    }
    for (label, requests, key_requests) in rows {
        println!(
            "{label:<48} {requests:.2} requests/append (and {key_requests:.2} of the key item)"
        );
    }

    print_units(client.clone(), tables).await;

    // One hot stream: one writer (one transaction at a time: the limit),
    // then 8 and 32 concurrent writers; and 8 writers on 100 streams.
    print_contention(proxied, tables).await;

    // Faults: a third of the requests throttled, failed or answered lost.
    let upstream = local.trim_start_matches("http://").to_owned();
    let proxy = FaultProxy::start(
        upstream,
        0x0BAD_5EED,
        0,
        vec![Fault::Throttle, Fault::ServerError, Fault::LostAnswer],
    )
    .await;
    let faulty_client = connect(Some(&proxy.endpoint)).await;
    let faulty = keyed_store(faulty_client.clone(), "bench-events", &faulty_client);
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
                Err(
                    AppendError::Store(_) | AppendError::Contention { .. } | AppendError::Keys(_),
                ) => {}
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
