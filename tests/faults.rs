//! Faults on the real path: the runner and the DynamoDB adapter (with the
//! SDK's own retries) against DynamoDB Local behind a faulty proxy, and
//! against a DynamoDB Local that is restarted in the middle of a run. Each
//! tag's producer sends its event 2 late (after event 6), so gaps are
//! parked and drained through the faults too. Whatever happens, redelivery
//! and the guard converge to the in-order state, with nothing left parked.

mod support;

use std::time::{Duration, Instant};

use aws_lambda_events::event::sqs::SqsEvent;
use sequence_guard::EntityKey;
use sequence_guard::lambda::epoch_seconds;
use sequence_guard::runner::{Invocation, Runner, RunnerConfig};
use sequence_guard::store::Store;
use sequence_guard::store::dynamodb::{DynamoStore, connect, create_table};
use support::fault_proxy::{Fault, FaultProxy};
use support::*;

/// The producers' streams: tags with a creation and weighings (event 2
/// sent after event 6), and level adjustments on two gauges. (stream,
/// message id, body) in the order sent.
fn workload(tags: usize, events: u64) -> Vec<Vec<(String, String, String)>> {
    let mut streams = Vec::new();
    for tag in 0..tags {
        let id = format!("tag-{tag}");
        let mut stream = vec![(id.clone(), format!("{id}-m1"), tag_created(&id))];
        stream.extend((2..=events).map(|sequence| {
            (
                id.clone(),
                format!("{id}-m{sequence}"),
                tag_weighed(&id, sequence),
            )
        }));
        if stream.len() > 6 {
            let late = stream.remove(1);
            stream.insert(5, late);
        }
        streams.push(stream);
    }
    for gauge in ["G-A", "G-B"] {
        streams.push(
            (0..5)
                .map(|n| {
                    (
                        gauge.to_owned(),
                        format!("{gauge}-m{n}"),
                        level_adjusted(&format!("{gauge}-{n}"), gauge, n + 1),
                    )
                })
                .collect(),
        );
    }
    streams
}

/// Delivers the streams as a FIFO queue would, batch after batch, until every
/// message is acknowledged; `between` runs before each batch. Returns the
/// number of invocations and of parked events drained.
async fn deliver<S: Store>(
    runner: &Runner<S>,
    mut streams: Vec<Vec<(String, String, String)>>,
    mut between: impl AsyncFnMut(u32),
) -> (u32, usize) {
    let mut drained = 0;
    let mut invocations = 0;
    let mut deliveries: std::collections::HashMap<String, u32> = Default::default();
    while streams.iter().any(|stream| !stream.is_empty()) {
        invocations += 1;
        assert!(invocations < 300, "no convergence after 300 invocations");
        between(invocations).await;
        // Up to 10 messages, taking the head of each group in turn.
        let mut records = Vec::new();
        for stream in &streams {
            for (group, id, body) in stream.iter().take(4) {
                if records.len() < 10 {
                    let count = deliveries.entry(id.clone()).or_default();
                    *count += 1;
                    records.push(delivered(message(id, group, body), *count));
                }
            }
        }
        let event: SqsEvent = batch(records);
        let invocation = Invocation {
            deadline: Some(tokio::time::Instant::now().into_std() + Duration::from_secs(3)),
            now: epoch_seconds(),
        };
        let report = runner
            .run(&event, invocation)
            .await
            .expect("every record has an id");
        drained += report.drained();
        let acknowledged: Vec<&str> = report
            .messages
            .iter()
            .filter(|message| !message.outcome.is_failure())
            .map(|message| message.message_id.as_str())
            .collect();
        for stream in streams.iter_mut() {
            stream.retain(|(_, id, _)| !acknowledged.contains(&id.as_str()));
        }
    }
    (invocations, drained)
}

async fn assert_in_order_state(store: &DynamoStore, tags: usize, events: u64) {
    for tag in 0..tags {
        // Weighings increment the sequence: a double apply shows as a sequence too far.
        let id = format!("tag-{tag}");
        let state = typed::<Tag, _>(store, &id)
            .await
            .map(|tag| (tag.sequence, tag.weight));
        assert_eq!(state, Some((events, 1000 + events)), "{id}");
    }
    for gauge in ["G-A", "G-B"] {
        assert_eq!(
            store.counter(&LEVEL, gauge).await.expect("read"),
            Some(1 + 2 + 3 + 4 + 5),
            "{gauge}: each adjustment once"
        );
    }
    for tag in 0..tags {
        let key = EntityKey::of::<Tag>(format!("tag-{tag}"));
        let inspection = store.inspect(&key).await.expect("inspect");
        assert!(
            inspection.parked.is_empty() && inspection.stored.parking.sequences.is_empty(),
            "{key:?}: {inspection:?}"
        );
    }
    assert!(
        store
            .parked_entities(None, 1)
            .await
            .expect("index")
            .entities
            .is_empty(),
        "the index of parked entities is empty"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn throttling_server_errors_hangs_and_lost_answers_converge_to_the_in_order_state() {
    let local = dynamodb_local();
    let upstream = local.endpoint.trim_start_matches("http://").to_owned();
    let all = vec![
        Fault::Throttle,
        Fault::ServerError,
        Fault::Hang,
        Fault::LostAnswer,
    ];
    let proxy = FaultProxy::start(upstream, 0x5EED_F00D, 0, all).await;
    // The table is made without faults; the run goes through the proxy.
    create_table(&connect(Some(&local.endpoint)).await, "faults")
        .await
        .expect("table");
    let store = DynamoStore::new(connect(Some(&proxy.endpoint)).await, "faults");
    let runner = Runner::new(domain(), store.clone(), RunnerConfig::default());
    proxy.set_percent(35);

    let started = Instant::now();
    let (invocations, drained) = deliver(&runner, workload(6, 15), async |_| {}).await;
    proxy.set_percent(0);
    eprintln!(
        "faults: {invocations} invocations in {:?}, {drained} parked events drained; proxy: {}",
        started.elapsed(),
        proxy.counts.summary()
    );
    assert!(drained > 0, "the late events made gaps that parked");
    assert!(
        proxy.counts.faults() >= 10,
        "too few faults to prove anything: {}",
        proxy.counts.summary()
    );
    for (kind, count) in [
        ("throttled", &proxy.counts.throttled),
        ("server errors", &proxy.counts.server_errors),
        ("lost answers", &proxy.counts.lost_answers),
        ("hung", &proxy.counts.hung),
    ] {
        assert!(
            count.load(std::sync::atomic::Ordering::Relaxed) > 0,
            "no {kind}: {}",
            proxy.counts.summary()
        );
    }
    assert_in_order_state(&store, 6, 15).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dynamodb_local_restarted_mid_run_converges_to_the_in_order_state() {
    // A DynamoDB Local of its own, with its data on disk so that it survives the restart.
    let port = free_port();
    let dir = std::env::temp_dir().join(format!("sequence-guard-restart-{port}"));
    let _ = std::fs::remove_dir_all(&dir);
    let (mut child, stdin) = spawn_dynamodb_local(port, Some(&dir)).expect("DynamoDB Local");
    let mut server = Some(stdin);
    let endpoint = format!("http://127.0.0.1:{port}");
    let client = connect(Some(&endpoint)).await;
    create_table(&client, "restart").await.expect("table");
    let store = DynamoStore::new(client, "restart");
    let runner = Runner::new(domain(), store.clone(), RunnerConfig::default());

    let mut down_invocations = 0;
    let (invocations, drained) = deliver(&runner, workload(3, 15), async |invocation| {
        if invocation == 3 {
            // Stop it: the watchdog kills java once its stdin closes.
            server = None;
            let _ = child.wait();
        }
        if (3..6).contains(&invocation) {
            down_invocations += 1;
        }
        if invocation == 6 {
            let (restarted, stdin) =
                spawn_dynamodb_local(port, Some(&dir)).expect("DynamoDB Local again");
            child = restarted;
            server = Some(stdin);
        }
    })
    .await;
    eprintln!(
        "restart: {invocations} invocations, {down_invocations} of them while DynamoDB Local was down, \
         {drained} parked events drained"
    );
    assert!(invocations > 6, "the run went on past the restart");
    assert_in_order_state(&store, 3, 15).await;
    drop(server);
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&dir);
}
