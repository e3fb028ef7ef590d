//! The dispatcher alone on a backlog: full batches of 100 stream records,
//! to a queue or to the topic, counted in requests per event.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use sequence_guard::dispatcher::{Queue, Settings, dispatch};
use sequence_guard::producer::{Append, EventStore};
use sequence_guard::store::dynamodb::{connect, ensure_events_table};

use crate::Args;
use crate::keys::keyed;
use crate::run::event;
use crate::stream::read_stream;

/// The dispatcher alone on a backlog: 1,000 events on 100 streams appended
/// to `table` first, then sent to `queue` (a queue or the topic) in stream
/// batches of 100 records.
pub async fn backlog<Q: Queue>(args: &Args, table: &str, queue: Q) -> (usize, u64) {
    let dynamodb = connect(Some(&args.endpoint_url)).await;
    if let Err(err) = ensure_events_table(&dynamodb, table).await {
        eprintln!("{table}: {err}");
        std::process::exit(1);
    }
    // An order's name and email are sealed: the producer has its keys,
    // whose items in `table` the dispatcher reads past.
    let domain = keyed(shop::domain(), &dynamodb, table, &args.keys);
    let store = EventStore::new(dynamodb, table, domain.clone());
    for sequence in 1..=10 {
        for stream in 0..100 {
            let _ = store
                .append(Append::one(format!("order-{stream}"), event(sequence)))
                .await;
        }
    }
    let sent = AtomicUsize::new(0);
    let requests = AtomicU64::new(0);
    read_stream(
        &args.endpoint_url,
        table,
        100,
        || sent.load(Ordering::Relaxed) >= 1_000,
        |records| {
            let (queue, domain, sent, requests) = (&queue, &domain, &sent, &requests);
            async move {
                let outcome = dispatch(&records, domain, queue, Settings::default(), None).await;
                sent.fetch_add(outcome.dispatched, Ordering::Relaxed);
                requests.fetch_add(outcome.requests, Ordering::Relaxed);
            }
        },
    )
    .await;
    (
        sent.load(Ordering::Relaxed),
        requests.load(Ordering::Relaxed),
    )
}
