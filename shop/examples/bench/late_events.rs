//! (e): producers that send an event late, behind the next batch, through a
//! simulated FIFO queue that redelivers failed messages: requests and
//! deliveries per event with parking, and what `GAP_POLICY=retry` leaves in
//! the dead-letter queue instead.

use aws_lambda_events::event::sqs::SqsMessage;
use sequence_guard::EntityKey;
use sequence_guard::runner::{GapPolicy, Invocation, Outcome, Runner, RunnerConfig};
use sequence_guard::store::Store;
use sequence_guard::store::dynamodb::{DynamoStore, connect, create_table};

use crate::figure_files::{Figure, Tables};
use crate::workloads::{batch, message, order_event};

/// What (e) cost.
#[derive(Debug, Default)]
struct Shuffled {
    events: usize,
    deliveries: usize,
    requests: u64,
    invocations: usize,
    parked: usize,
    drained: usize,
    dead_lettered: usize,
    applied_in_order: usize,
}

/// (e): `streams` orders of `events` events each, each producer sending
/// event 2 late, after event 15 (1, 3, 4, ..., 15, 2, 16, ...),
/// through a FIFO queue simulated here: batches of up to 10 messages from the
/// heads of the groups, completed messages deleted, failed ones delivered
/// again, and moved to the dead-letter queue after `max_receive_count`
/// deliveries.
async fn shuffled(
    endpoint: &str,
    via: &str,
    table: &str,
    policy: GapPolicy,
    streams: usize,
    events: u64,
    max_receive_count: u32,
) -> Shuffled {
    let client = connect(Some(endpoint)).await;
    if let Err(err) = create_table(&client, table).await {
        eprintln!("cannot create table {table}: {err}");
        std::process::exit(1);
    }
    let store = DynamoStore::new(connect(Some(via)).await, table);
    let runner = Runner::new(
        shop::domain(),
        &store,
        RunnerConfig {
            gap_policy: policy,
            ..RunnerConfig::default()
        },
    );
    // Each group: (message id, order, body, deliveries so far), in send order.
    let mut groups: Vec<std::collections::VecDeque<(String, String, u32)>> = (0..streams)
        .map(|stream| {
            let order = format!("order-e{stream}");
            // Event 2 held back by its producer and sent after event 15.
            let mut sequences: Vec<u64> = (1..=events).filter(|&sequence| sequence != 2).collect();
            let late = sequences.len().min(14);
            sequences.insert(late, 2);
            sequences
                .into_iter()
                .map(|sequence| {
                    (
                        format!("{order}-{sequence}"),
                        order_event(&order, sequence),
                        0,
                    )
                })
                .collect()
        })
        .collect();
    let mut figures = Shuffled {
        events: streams * events as usize,
        ..Shuffled::default()
    };
    let before = store.requests();
    while groups.iter().any(|group| !group.is_empty()) {
        // A poll: one batch per group with messages, up to 10 from its head.
        for (index, group) in groups.iter_mut().enumerate() {
            if group.is_empty() {
                continue;
            }
            let order = format!("order-e{index}");
            let picked: Vec<SqsMessage> = group
                .iter_mut()
                .take(10)
                .map(|(id, body, received)| {
                    *received += 1;
                    let mut message = message(id.clone(), &order, body.clone());
                    message
                        .attributes
                        .insert("ApproximateReceiveCount".into(), received.to_string());
                    message
                })
                .collect();
            figures.deliveries += picked.len();
            figures.invocations += 1;
            let invocation = Invocation {
                deadline: None,
                now: sequence_guard::lambda::epoch_seconds(),
            };
            let Ok(report) = runner.run(&batch(picked), invocation).await else {
                continue;
            };
            figures.parked += report.count(Outcome::Parked);
            figures.drained += report.drained();
            for message in &report.messages {
                let position = group
                    .iter()
                    .position(|(id, _, _)| *id == message.message_id);
                let Some(position) = position else { continue };
                if !message.outcome.is_failure() {
                    group.remove(position);
                } else if group[position].2 >= max_receive_count {
                    group.remove(position);
                    figures.dead_lettered += 1;
                }
            }
        }
    }
    figures.requests = store.requests() - before;
    for stream in 0..streams {
        let key = EntityKey::of::<shop::Order>(format!("order-e{stream}"));
        if let Ok(loaded) = store.load(std::slice::from_ref(&key), &[]).await
            && let Some(Ok(entity)) = loaded.entities.get(&key)
        {
            figures.applied_in_order += entity.sequence() as usize;
        }
    }
    figures
}

/// The lines of (e), with parking and with `GAP_POLICY=retry`, on DynamoDB
/// Local reached through `via` (the latency proxy).
pub async fn print_late_events(endpoint: &str, via: &str, tables: &mut Tables) {
    println!(
        "\n== (e) 20 orders x 20 events, each producer sending event 2 after 15 (1, 3, ..., 15, 2, 16, ...),"
    );
    println!("   through a simulated FIFO queue: failed messages come back, maxReceiveCount 5");
    tables.start(
        "late-events",
        "Gaps that heal: 20 orders of 20 events, each producer sending event 2 after event 15, \
         through a simulated FIFO queue (maxReceiveCount 5)",
        "scripts/bench",
        "GAP_POLICY",
        &[
            "requests an event",
            "deliveries an event",
            "events applied in order",
            "in the dead-letter queue",
        ],
    );
    for (policy, name) in [(GapPolicy::Park, "park"), (GapPolicy::Retry, "retry")] {
        let figures = shuffled(
            endpoint,
            via,
            &format!("bench-shuffled-{name}"),
            policy,
            20,
            20,
            5,
        )
        .await;
        println!(
            "GAP_POLICY={name:<5}: {:.2} requests/event, {:.2} deliveries/event, {} invocations, \
             {} parked, {} drained, {} of {} events applied in order, {} in the dead-letter queue",
            figures.requests as f64 / figures.events as f64,
            figures.deliveries as f64 / figures.events as f64,
            figures.invocations,
            figures.parked,
            figures.drained,
            figures.applied_in_order,
            figures.events,
            figures.dead_lettered
        );
        let events = figures.events as f64;
        for (column, value, decimals) in [
            ("requests an event", figures.requests as f64 / events, 2),
            ("deliveries an event", figures.deliveries as f64 / events, 2),
            (
                "events applied in order",
                figures.applied_in_order as f64,
                0,
            ),
            ("in the dead-letter queue", figures.dead_lettered as f64, 0),
        ] {
            tables.record(
                "late-events",
                Figure::cell(&format!("`{name}`"), column, value, decimals, ""),
            );
        }
    }
}
