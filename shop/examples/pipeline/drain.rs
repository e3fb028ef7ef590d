//! The drain workload's event store, filled before any pipeline starts, and
//! the warm-up that drains a third of it through each pipeline unmeasured.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use sequence_guard::producer::{Append, EventStore, ExpectedSequence};
use sequence_guard::store::dynamodb::{connect, ensure_events_table};

use crate::keys::keyed;
use crate::run::{Case, event, run};
use crate::{Args, meter};

/// An event store filled before its pipeline starts.
pub struct Filled {
    pub table: String,
    /// (stream, sequence) of every event in it.
    pub keys: Vec<(String, u64)>,
    /// What filling it cost (our `append`, one event each, its key
    /// items' requests and units included).
    pub usage: meter::Usage,
    /// The fill's KMS requests.
    pub kms: u64,
}

/// Fills `table`: `streams` orders of `per_stream` events each (seven
/// writers), and one hot order of `hot` events (one writer, in order), each
/// event one `append` at its expected sequence.
pub async fn fill(args: &Args, table: &str, streams: usize, per_stream: u64, hot: u64) -> Filled {
    let meter = meter::Meter::default();
    let dynamodb = meter.wrap(&connect(Some(&args.endpoint_url)).await);
    if let Err(err) = ensure_events_table(&dynamodb, table).await {
        eprintln!("{table}: {err}");
        std::process::exit(1);
    }
    let domain = keyed(shop::domain(), &dynamodb, table, &args.keys);
    let store = EventStore::new(dynamodb, table, domain);
    let keys = Arc::new(Mutex::new(Vec::new()));
    let writers = 7;
    let mut tasks = Vec::new();
    for writer in 0..=writers {
        let (store, keys) = (store.clone(), keys.clone());
        let mine: Vec<(String, u64)> = if writer == 0 {
            vec![("order-hot".to_owned(), hot)]
        } else {
            (0..streams)
                .filter(|stream| stream % writers == writer - 1)
                .map(|stream| (format!("order-{stream}"), per_stream))
                .collect()
        };
        tasks.push(tokio::spawn(async move {
            let most = mine.iter().map(|(_, events)| *events).max().unwrap_or(0);
            for sequence in 1..=most {
                for (stream, events) in &mine {
                    if sequence > *events {
                        continue;
                    }
                    let append = Append {
                        expected: ExpectedSequence::Exact(sequence - 1),
                        ..Append::one(stream.clone(), event(sequence))
                    };
                    if store.append(append).await.is_ok()
                        && let Ok(mut keys) = keys.lock()
                    {
                        keys.push((stream.clone(), sequence));
                    }
                }
            }
        }));
    }
    for task in tasks {
        let _ = task.await;
    }
    let keys = keys.lock().map(|keys| keys.clone()).unwrap_or_default();
    Filled {
        table: table.to_owned(),
        keys,
        usage: meter.usage(),
        kms: store.domain().keys().map_or(0, |keys| keys.kms_requests()),
    }
}

/// Drains a third of the drain workload (a store of its own) through each
/// pipeline in turn, kept nowhere, so that every measured workload finds
/// DynamoDB Local and LocalStack warm. Without it the first pipeline paid
/// for DynamoDB Local compiling its own code (a JVM starts interpreted) and
/// the ones after it did not: the same build read 4.3 to 4.9 times the
/// naive pipeline when ours ran first and 6.1 when it ran second.
pub async fn warm_up(args: &Args) {
    let began = Instant::now();
    let filled = fill(
        args,
        "drain-warm-events",
        args.drain_streams / 3,
        args.drain_per_stream,
        args.drain_hot / 3,
    )
    .await;
    let case = Case::drain(args, &filled);
    for &mode in &args.pipelines {
        run(args, mode, &format!("pipeline-warm-{}", mode.tag()), &case).await;
    }
    println!(
        "warmed DynamoDB Local and LocalStack first: each pipeline drained {} events of a store of its own, not kept ({:.1} s)",
        filled.keys.len(),
        began.elapsed().as_secs_f64()
    );
}
