//! One run of a workload through one pipeline: its queues and consumers
//! made, its producers, dispatcher and consumers started, and what each
//! measured gathered into [`Figures`].

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use sequence_guard::dispatcher::{SnsTopic, SqsQueue};
use sequence_guard::producer::{Append, EventStore, ExpectedSequence, NewEvent};
use sequence_guard::store::dynamodb::{connect, ensure_events_table};
use serde_json::json;

use crate::consumer::{Reads, consumer, lane};
use crate::dispatcher::{Wiring, dispatcher};
use crate::drain::Filled;
use crate::faults::Faults;
use crate::figures::{Consumed, Figures, HOT_STREAM, Shared, time_of};
use crate::keys::keyed;
use crate::queues::{fifo_queue, fifo_topic, in_queue, sns_client, sqs_client};
use crate::{Args, Pipeline, meter};

pub fn event(sequence: u64) -> NewEvent {
    let data = json!({ "customerName": "Ada", "email": "ada@example.com", "totalCents": sequence });
    NewEvent::new(
        if sequence == 1 {
            "OrderCreated"
        } else {
            "OrderUpdated"
        },
        data,
    )
}

/// One workload: `streams` orders of `per_stream` events each, appended by
/// `producers` producers while the dispatcher and `consumers` tasks per
/// consumer run; or, with `filled`, that event store drained.
pub struct Case<'a> {
    pub streams: usize,
    pub per_stream: u64,
    pub producers: usize,
    pub consumers: usize,
    pub filled: Option<&'a Filled>,
    /// Each batch of change records handed to the dispatcher out of order
    /// (`dispatcher.rs`).
    pub reordered: bool,
    /// Events of one more stream, the hot order ([`HOT_STREAM`]), appended
    /// by a producer of its own beside the others.
    pub hot: u64,
    /// What fails, the same for every consumer (`faults.rs`).
    pub faults: Option<Faults>,
    /// The consumers read a gap's events from the event store (the
    /// runner's fill, as the projector with `EVENT_STORE_TABLE`); without,
    /// a gap waits for its events, retried and then parked, as before.
    pub fill: bool,
}

impl<'a> Case<'a> {
    /// `filled` drained by the drain workload's consumers, no producer.
    pub fn drain(args: &Args, filled: &'a Filled) -> Self {
        Case {
            streams: 0,
            per_stream: 0,
            producers: 0,
            consumers: args.drain_consumers,
            filled: Some(filled),
            reordered: false,
            hot: 0,
            faults: None,
            fill: true,
        }
    }
}

/// The faults' dice: every consumer of a run draws from the same seed.
const SEED: u64 = 0x5e90_e5ce;

/// One run of `case` through the pipeline `mode`.
pub async fn run(args: &Args, mode: Pipeline, name: &str, case: &Case<'_>) -> Figures {
    let dynamodb = connect(Some(&args.endpoint_url)).await;
    let producer_meter = meter::Meter::default();
    let events_table = match case.filled {
        Some(filled) => filled.table.clone(),
        None => format!("{name}-events"),
    };
    if case.filled.is_none()
        && let Err(err) = ensure_events_table(&dynamodb, &events_table).await
    {
        eprintln!("{events_table}: {err}");
        std::process::exit(1);
    }
    let sqs = sqs_client(&args.sqs_endpoint);
    let queue_url = fifo_queue(&sqs, name).await;
    let mut lanes = vec![
        lane(
            &dynamodb,
            "shop",
            format!("{name}-projection"),
            queue_url.clone(),
            shop::domain(),
            Reads {
                table: &events_table,
                wrapping: &args.keys,
                fill: case.fill,
            },
            case.faults.map(|faults| (faults, SEED)),
        )
        .await,
    ];
    if mode == Pipeline::Fanout {
        let status_url = fifo_queue(&sqs, &format!("{name}-status")).await;
        lanes.push(
            lane(
                &dynamodb,
                "status",
                format!("{name}-status"),
                status_url,
                shop::status::domain(),
                Reads {
                    table: &events_table,
                    wrapping: &args.keys,
                    fill: case.fill,
                },
                case.faults.map(|faults| (faults, SEED)),
            )
            .await,
        );
    }
    let started = Instant::now();
    let (total, appended) = match case.filled {
        Some(filled) => (
            filled.keys.len(),
            filled
                .keys
                .iter()
                .map(|key| (key.clone(), started))
                .collect(),
        ),
        None => (
            case.streams * case.per_stream as usize + case.hot as usize,
            HashMap::new(),
        ),
    };
    let shared = Arc::new(Shared::new(appended));
    // An order's name and email are sealed: the producers have their keys
    // (the key items in the event store's table, metered with the appends).
    let producer_client = producer_meter.wrap(&dynamodb);
    let domain = keyed(shop::domain(), &producer_client, &events_table, &args.keys);
    let store = EventStore::new(producer_client, events_table.clone(), domain.clone());
    let mut tasks = Vec::new();
    let producers = if case.filled.is_some() {
        0
    } else {
        case.producers
    };
    let hot_producer = (case.hot > 0 && case.filled.is_none()).then_some(producers);
    for producer in (0..producers).chain(hot_producer) {
        let (store, shared) = (store.clone(), shared.clone());
        let (mine, per_stream): (Vec<String>, u64) = if producer == producers {
            (vec![HOT_STREAM.to_owned()], case.hot)
        } else {
            let mine = (0..case.streams)
                .filter(|stream| stream % producers == producer)
                .map(|stream| format!("order-{stream}"))
                .collect();
            (mine, case.per_stream)
        };
        tasks.push(tokio::spawn(async move {
            for sequence in 1..=per_stream {
                for stream in &mine {
                    let append = Append {
                        expected: ExpectedSequence::Exact(sequence - 1),
                        ..Append::one(stream.clone(), event(sequence))
                    };
                    if store.append(append).await.is_ok()
                        && let Ok(mut appended) = shared.appended.lock()
                    {
                        appended.insert((stream.clone(), sequence), Instant::now());
                    }
                }
            }
        }));
    }
    let wiring = Wiring {
        endpoint: args.endpoint_url.clone(),
        table: events_table.clone(),
        queue: (),
        sqs: sqs.clone(),
        queue_url: queue_url.clone(),
        domain: domain.clone(),
        shared: shared.clone(),
        total,
        reordered: case.reordered,
    };
    if mode == Pipeline::Fanout {
        let urls: Vec<&str> = lanes.iter().map(|lane| lane.queue_url.as_str()).collect();
        let sns = sns_client(&args.sqs_endpoint);
        let topic_arn = fifo_topic(&sns, &sqs, &format!("{name}-events"), &urls).await;
        let topic = SnsTopic::new(sns, topic_arn, sqs.clone(), queue_url.clone());
        tasks.push(tokio::spawn(dispatcher(mode, wiring.to(topic))));
    } else {
        let queue = SqsQueue::new(sqs.clone(), queue_url.clone(), queue_url.clone());
        tasks.push(tokio::spawn(dispatcher(mode, wiring.to(queue))));
    }
    for lane in &lanes {
        for _ in 0..case.consumers {
            tasks.push(tokio::spawn(consumer(
                mode,
                sqs.clone(),
                lane.clone(),
                shared.clone(),
                total,
            )));
        }
    }
    for task in tasks {
        let _ = tokio::time::timeout(Duration::from_secs(300), task).await;
    }
    let mut consumed = Vec::new();
    for lane in &lanes {
        let tally = &lane.tally;
        let mut latencies = tally
            .latencies
            .lock()
            .map(|all| all.clone())
            .unwrap_or_default();
        latencies.sort();
        let last = tally.last_projected.lock().ok().and_then(|last| *last);
        consumed.push(Consumed {
            name: lane.name,
            projected: tally.projected.load(Ordering::Relaxed),
            seconds: last.map_or(f64::NAN, |last| (last - started).as_secs_f64()),
            latencies,
            deliveries: tally.receipts.load(Ordering::Relaxed)
                + in_queue(&sqs, &lane.queue_url).await,
            invocations: tally.invocations.load(Ordering::Relaxed),
            receives: tally.receives.load(Ordering::Relaxed),
            deletes: tally.deletes.load(Ordering::Relaxed),
            busy: time_of(&tally.busy),
            receiving: time_of(&tally.receiving),
            deleting: time_of(&tally.deleting),
            usage: lane.meter.usage(),
            kms: lane.keys.as_ref().map_or(0, |keys| keys.kms_requests()),
            hot: tally.hot.lock().map(|hot| hot.clone()).unwrap_or_default(),
        });
    }
    let all_sent = shared
        .all_sent
        .lock()
        .ok()
        .and_then(|at| *at)
        .map_or(f64::NAN, |at| (at - started).as_secs_f64());
    Figures {
        appended: shared.appended.lock().map(|all| all.len()).unwrap_or(0),
        requests: shared.requests.load(Ordering::Relaxed),
        consumers: consumed,
        producer: match case.filled {
            Some(filled) => filled.usage,
            None => producer_meter.usage(),
        },
        producer_kms: match case.filled {
            Some(filled) => filled.kms,
            None => store.domain().keys().map_or(0, |keys| keys.kms_requests()),
        },
        batches: shared.batches.load(Ordering::Relaxed),
        dispatch_busy: time_of(&shared.dispatch_busy),
        get_records: shared
            .get_records
            .lock()
            .map(|polled| *polled)
            .unwrap_or_default(),
        all_sent,
    }
}
