//! The payments process as a third consumer of the fan-out, on real parts:
//! the producers' appends on DynamoDB Local, the event store's stream read
//! as Lambda's mapping does (`support::streams`), the `dispatcher` binary
//! publishing to LocalStack's SNS FIFO topic, and three SQS FIFO queues
//! subscribed to it (raw delivery): the `projector` (orders), the
//! `status-projector`, and `payments-process`, whose appends go through the
//! event store's stream and the dispatcher to every consumer, itself too.
//!
//! Everything runs at once, as on AWS: the mapping of the stream, each
//! queue's poller, and the schedule, which invokes the process's sweep in
//! environments of its own (so that deadlines race the deliveries, and
//! sweeps one another). The process's DynamoDB requests go through faulty
//! proxies, and its environments are killed mid-batch and mid-sweep and
//! started again.
//!
//! Thirty orders with a window of two seconds: paid at once, paid late
//! (racing the deadline), cancelled before or after a payment, never paid,
//! paid in part while a cancel races the deadline; events published to the
//! topic a second time. Once quiet: every order ends paid (and not
//! cancelled by the process) or cancelled, each needed refund requested
//! once, every stream gapless with unique event ids, and each consumer's
//! table equal to the fold of the event store through its domain.

mod support;

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use sequence_guard::Domain;
use sequence_guard::producer::EventStore;
use sequence_guard::runner::RunnerConfig;
use sequence_guard::store::dynamodb::{DynamoStore, connect, create_table, ensure_events_table};
use shop::OrderStatus;
use shop::payments::{Payment, PaymentState};
use support::fault_proxy::{Fault, FaultProxy};
use support::function::{Function, start_binary, start_with};
use support::localstack::{Poller, bodies, fifo_queues, fifo_topic, sns, sqs, subscribe_raw};
use support::process::{
    Fold, ProcessFunction, Seen, Step, Task, consume, consume_killing, customer, deadlines_left,
    dispatch, dispatch_to_topic, fold, fold_into_table, publish_again, schedule,
};
use support::rng::Rng;
use support::runtime_api::RuntimeApi;
use support::*;

const ORDERS: u64 = 30;
const WINDOW_SECONDS: u64 = 2;
const TOTAL: u64 = 1000;

/// A consumer: its table (the kinds of its items), its domain and its
/// runner's configuration (for the fold), its queues.
struct Projection {
    name: &'static str,
    table: String,
    kinds: &'static [&'static str],
    domain: Domain,
    config: RunnerConfig,
    queue_url: String,
    dlq_url: String,
}

/// Order `n`'s story after its creation (total 1000 cents). The late
/// payments spread from well before the deadline (two seconds after the
/// process sees the order, fired by the next sweep) to well after it.
fn story(n: u64, rng: &mut Rng) -> Vec<(u64, Step)> {
    let late = 1500 + 2000 * (n / 6);
    let mut steps = match n % 6 {
        // Paid in full at once.
        0 => vec![(150, Step::Pay(TOTAL))],
        // The total changes, then paid late, racing the deadline.
        1 => vec![(100, Step::Update(1200)), (late, Step::Pay(1200))],
        // Cancelled, then paid: refunded.
        2 => vec![(300, Step::Cancel), (900, Step::Pay(TOTAL))],
        // Paid, then cancelled, early or late: refunded.
        3 => vec![
            (200, Step::Pay(TOTAL)),
            (800 + rng.below(2200), Step::Cancel),
        ],
        // Never paid: cancelled by its deadline.
        4 => vec![],
        // Paid in part, the rest late; perhaps a cancel races the deadline.
        _ => {
            let mut steps = vec![(200, Step::Pay(400)), (late + 500, Step::Pay(600))];
            if rng.chance(50) {
                steps.push((1500 + rng.below(8000), Step::Cancel));
            }
            steps
        }
    };
    if n % 4 == 1 {
        steps.push((3800, Step::Publish));
    }
    steps.sort_by_key(|(at, _)| *at);
    steps
}

/// The pipeline's parts.
struct Pipeline {
    name: String,
    client: aws_sdk_dynamodb::Client,
    events: EventStore,
    sqs: aws_sdk_sqs::Client,
    sns: aws_sdk_sns::Client,
    topic: String,
    failure_url: String,
    /// Orders, status, payments.
    projections: Vec<Projection>,
    /// In front of the process's DynamoDB: its queue's environment, its
    /// schedule's.
    proxies: Vec<Arc<FaultProxy>>,
}

/// The mappings, running.
struct Running {
    stop: Arc<AtomicBool>,
    /// Records the stream's mapping sent, messages the queues' received.
    sent: Arc<AtomicU64>,
    received: Arc<AtomicU64>,
    dispatching: Task<Function>,
    orders: Task<(Function, Seen)>,
    status: Task<(Function, Seen)>,
    process: Task<(ProcessFunction, Seen)>,
    sweeps: Vec<Task<(ProcessFunction, Seen)>>,
}

/// Creates every part, and starts every mapping.
async fn start() -> (Pipeline, Running) {
    let local = dynamodb_local();
    let client = connect(Some(&local.endpoint)).await;
    let name = format!("fp-{}", std::process::id());
    let events_table = format!("{name}-events");
    ensure_events_table(&client, &events_table)
        .await
        .expect("events table");
    let (sqs, sns) = (sqs().await, sns().await);
    let topic = fifo_topic(&sns, &format!("{name}-events")).await;
    let failure_url = sqs
        .create_queue()
        .queue_name(format!("{name}-dispatch-failures"))
        .send()
        .await
        .expect("failure queue")
        .queue_url
        .expect("failure queue url");
    let mut projections = Vec::new();
    let mut pollers = Vec::new();
    for consumer in ["orders", "status", "payments"] {
        let table = format!("{name}-{consumer}");
        create_table(&client, &table).await.expect("table");
        // Visibility 2 s: a failed batch comes back quickly; 50 receives:
        // nothing reaches the dead-letter queue while a gap waits.
        let queues = fifo_queues(&sqs, &format!("{name}-{consumer}"), 2, 50).await;
        subscribe_raw(&sns, &topic, &queues.arn).await;
        let (domain, kinds, config): (Domain, &'static [&'static str], _) = match consumer {
            // The shop opens its orders' personal data with the subjects'
            // keys; the status consumer and the process read none.
            "orders" => (
                personal_data::keyed_domain(&client, &events_table),
                &["ORDER#"],
                RunnerConfig::default(),
            ),
            "status" => (
                shop::status::domain(),
                &["STATUS#"],
                RunnerConfig::default(),
            ),
            // The fold of the process appends nothing: the store holds it.
            _ => (
                shop::payments::domain(),
                &["PAYMENT#"],
                RunnerConfig {
                    appends: false,
                    ..RunnerConfig::default()
                },
            ),
        };
        pollers.push(Poller {
            sqs: sqs.clone(),
            queue_url: queues.url.clone(),
            queue_arn: queues.arn,
            api: RuntimeApi::start().await,
        });
        projections.push(Projection {
            name: consumer,
            table,
            kinds,
            domain,
            config,
            queue_url: queues.url,
            dlq_url: queues.dlq_url,
        });
    }
    let orders_function = start_with(
        &pollers[0].api,
        Some(&projections[0].table),
        &[
            ("EVENT_STORE_TABLE", &events_table),
            ("PERSONAL_DATA_KEY", &personal_data::personal_data_key()),
        ],
    );
    let status_function = start_binary(
        env!("CARGO_BIN_EXE_status-projector"),
        &pollers[1].api,
        &[
            ("TABLE_NAME", &projections[1].table),
            ("METRICS_SERVICE", "status-test"),
        ],
    );
    // The process: one environment for its queue, three for its schedule
    // (a sweep slowed down by the faults' backoff overlaps the next, as on
    // Lambda), the queue's and the schedule's behind a faulty proxy each
    // (throttles, 500s, and answers lost after the write took effect), a
    // little slow, as over a network.
    let upstream = local.endpoint.trim_start_matches("http://").to_owned();
    let mut proxies = Vec::new();
    for seed in [34, 43] {
        let faults = vec![Fault::Throttle, Fault::ServerError, Fault::LostAnswer];
        let latency = Duration::from_millis(5);
        let proxy = FaultProxy::start_with_latency(upstream.clone(), seed, 10, faults, latency);
        proxies.push(Arc::new(proxy.await));
    }
    let mut functions = Vec::new();
    for (proxy, service) in [(0, "payments-test"), (1, "payments-sweep-test")]
        .into_iter()
        .chain([(1, "payments-sweep-test"); 2])
    {
        let table = &projections[2].table;
        let proxy = proxies[proxy].clone();
        let function = ProcessFunction::start(proxy, table, &events_table, WINDOW_SECONDS, service);
        functions.push(function.await);
    }
    let (source, dispatcher) = dispatch_to_topic(&events_table, &topic, &sqs, &failure_url).await;

    let stop = Arc::new(AtomicBool::new(false));
    let (sent, received) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let queue_function = functions.remove(0);
    // Each schedule's environment sweeps every 700 ms after its last sweep,
    // a third of the way after the one before; the first is killed
    // mid-way through its 3rd and 7th sweep, the second through its 5th.
    let kills: [&'static [u64]; 3] = [&[3, 7], &[5], &[]];
    let sweeps = functions
        .into_iter()
        .zip(kills)
        .enumerate()
        .map(|(n, (function, kills))| {
            let offset = Duration::from_millis(233 * n as u64);
            schedule(function, kills, offset, stop.clone())
        })
        .collect();
    let mut payments = pollers.pop().expect("the process's poller");
    payments.api = queue_function.api.clone();
    let status = pollers.pop().expect("the status poller");
    let orders = pollers.pop().expect("the orders poller");
    let running = Running {
        dispatching: dispatch(source, dispatcher, stop.clone(), sent.clone()),
        orders: consume(orders, orders_function, stop.clone(), received.clone()),
        status: consume(status, status_function, stop.clone(), received.clone()),
        // Killed after two DynamoDB requests of its 3rd, 9th and 16th batch.
        process: consume_killing(
            payments,
            queue_function,
            &[3, 9, 16],
            stop.clone(),
            received.clone(),
        ),
        sweeps,
        stop,
        sent,
        received,
    };
    let pipeline = Pipeline {
        events: EventStore::new(
            client.clone(),
            events_table.clone(),
            personal_data::keyed_domain(&client, &events_table),
        ),
        name,
        client,
        sqs,
        sns,
        topic,
        failure_url,
        projections,
        proxies,
    };
    (pipeline, running)
}

/// The customers, an order every 120 ms, and then a second publish of
/// every fifth order; how many events were published again.
async fn produce(p: &Pipeline, orders: &[String]) -> u64 {
    let published = Arc::new(AtomicU64::new(0));
    let mut rng = Rng(0x0034_5EED);
    let mut customers = Vec::new();
    for (n, order) in orders.iter().enumerate() {
        let steps = story(n as u64, &mut rng);
        let (events, sns, topic) = (p.events.clone(), p.sns.clone(), p.topic.clone());
        let (order, published) = (order.clone(), published.clone());
        customers.push(tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(120 * n as u64)).await;
            customer(events, sns, topic, order, TOTAL, steps, published).await;
        }));
    }
    for customer in customers {
        customer.await.expect("a customer");
    }
    for order in orders.iter().step_by(5) {
        let count = publish_again(&p.events, &p.sns, &p.topic, order, 2).await;
        published.fetch_add(count, Ordering::Relaxed);
    }
    published.load(Ordering::Relaxed)
}

/// Waits until nothing is in any queue, no deadline is left, and nothing
/// was stored, sent or received for three checks a second apart.
async fn wait_until_quiet(p: &Pipeline, running: &Running, orders: &[String], started: Instant) {
    let watch = RuntimeApi::start().await;
    let queues: Vec<Poller> = p
        .projections
        .iter()
        .map(|projection| Poller {
            sqs: p.sqs.clone(),
            queue_url: projection.queue_url.clone(),
            queue_arn: String::new(),
            api: watch.clone(),
        })
        .collect();
    let (mut last, mut quiet, mut left) = (None, 0, (0, 0));
    while quiet < 3 {
        assert!(
            started.elapsed() < Duration::from_secs(150),
            "the pipeline did not go quiet: {} messages in the queues, {} deadlines left",
            left.0,
            left.1
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
        let mut waiting = 0;
        for queue in &queues {
            waiting += queue.in_queue().await;
        }
        let mut stored = 0;
        for order in orders {
            stored += p.events.read(order, 0, 10_000).await.expect("read").len();
        }
        let due = deadlines_left(&p.projections[2].table).await;
        let now = (
            stored,
            running.sent.load(Ordering::Relaxed),
            running.received.load(Ordering::Relaxed),
        );
        let still = waiting == 0 && due == 0 && last == Some(now);
        quiet = if still { quiet + 1 } else { 0 };
        (last, left) = (Some(now), (waiting, due));
    }
}

/// Checks each order's stream, and each consumer's item of it against the
/// stream; the folds, and every stored body, stream by stream.
async fn check_orders(p: &Pipeline, orders: &[String]) -> (Vec<Fold>, Vec<(String, String)>) {
    let (mut ids, mut all, mut folds) = (HashSet::new(), Vec::new(), Vec::new());
    let at = |projection: &Projection| DynamoStore::new(p.client.clone(), projection.table.clone());
    for order in orders {
        let stored = p.events.read(order, 0, 10_000).await.expect("read");
        for (index, event) in stored.iter().enumerate() {
            assert_eq!(event.sequence, index as u64 + 1, "{order}: gapless");
            let id = &event.event_id;
            assert!(ids.insert(id.clone()), "{id}: appended twice");
            all.push((order.clone(), event.body.clone()));
        }
        let fold = fold(order, &stored);
        let types: Vec<&str> = stored
            .iter()
            .map(|event| event.event_type.as_str())
            .collect();
        // What the process appended, and only that, under its request ids.
        let appended = stored
            .iter()
            .filter(|event| event.event_id.starts_with("process-payments-"))
            .count() as u64;
        let asked = fold.refunds.len() as u64 + fold.cancels_by_deadline;
        assert_eq!(appended, asked, "{order}: the process's appends: {types:?}");
        let cancelled = fold.cancels > 0;
        if cancelled {
            // Each payment that needs it requested back once: those after
            // the cancel one by one, those before it as one sum.
            let mut wanted = fold.payments_after_cancel.clone();
            if fold.paid_before_cancel > 0 {
                wanted.push(fold.paid_before_cancel);
            }
            let mut refunds = fold.refunds.clone();
            wanted.sort_unstable();
            refunds.sort_unstable();
            assert_eq!(refunds, wanted, "{order}: each refund once: {types:?}");
        } else {
            assert!(
                fold.paid >= fold.total,
                "{order}: not paid, not cancelled: {types:?}"
            );
            assert!(
                fold.refunds.is_empty(),
                "{order}: refunded, not cancelled: {types:?}"
            );
        }
        let length = stored.len() as u64;
        let status = if cancelled {
            OrderStatus::Cancelled
        } else {
            OrderStatus::Open
        };
        let refunded: u64 = fold.refunds.iter().sum();
        let item = typed::<shop::Order, _>(&at(&p.projections[0]), order).await;
        let item = item.expect("an order");
        assert_eq!(
            (
                item.sequence,
                item.paid_cents,
                item.refund_cents,
                item.status
            ),
            (length, fold.paid, refunded, status),
            "{order}: the order projection: {types:?}"
        );
        let item = typed::<shop::status::Status, _>(&at(&p.projections[1]), order).await;
        let item = item.expect("a status");
        assert_eq!(
            (item.sequence, item.status),
            (length, status),
            "{order}: its status"
        );
        let state = if cancelled {
            PaymentState::Cancelled
        } else {
            PaymentState::Paid
        };
        let item = typed::<Payment, _>(&at(&p.projections[2]), order).await;
        let item = item.expect("a payment");
        assert_eq!(
            (item.sequence, item.state, item.paid_cents),
            (length, state, fold.paid),
            "{order}: the process's state: {types:?}"
        );
        folds.push(fold);
    }
    (folds, all)
}

/// Each consumer's table is the fold of the store through its domain,
/// attribute by attribute; nothing dead-lettered or given up.
async fn check_tables(p: &Pipeline, all: &[(String, String)], orders: usize, outputs: [String; 3]) {
    let endpoint = &dynamodb_local().endpoint;
    for (projection, output) in p.projections.iter().zip(outputs) {
        let name = projection.name;
        let folded = fold_into_table(&p.name, &projection.domain, &projection.config, all).await;
        let live = items_of(endpoint, &projection.table, projection.kinds).await;
        let fold = items_of(endpoint, &folded, projection.kinds).await;
        assert_eq!(live.len(), orders, "{name}: an item per order");
        assert_eq!(
            live, fold,
            "{name}: the fold of the store; its function:\n{output}"
        );
        let dead = bodies(&p.sqs, &projection.dlq_url).await;
        assert!(dead.is_empty(), "{name}: dead letters {dead:?}");
    }
    let failures = bodies(&p.sqs, &p.failure_url).await;
    assert!(failures.is_empty(), "nothing given up: {failures:?}");
}

fn per_invocation(seen: &Seen) -> f64 {
    seen.busy.as_secs_f64() * 1000.0 / seen.invocations.max(1) as f64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_payments_process_on_the_fanout_ends_each_order_paid_or_cancelled_and_refunded_once() {
    let started = Instant::now();
    let (p, running) = start().await;
    let ready = started.elapsed();
    let orders: Vec<String> = (0..ORDERS)
        .map(|n| format!("{}-order-{n:02}", p.name))
        .collect();
    let published = produce(&p, &orders).await;
    let produced = started.elapsed();
    wait_until_quiet(&p, &running, &orders, started).await;
    let quiet = started.elapsed();
    running.stop.store(true, Ordering::Relaxed);
    let dispatcher = running.dispatching.await.expect("the stream's mapping");
    let (orders_function, orders_seen) = running.orders.await.expect("orders");
    let (status_function, status_seen) = running.status.await.expect("status");
    let (process_function, process_seen) = running.process.await.expect("process");
    let mut sweep_output = String::new();
    let mut sweep_seen = Seen::default();
    for sweep in running.sweeps {
        let (function, seen) = sweep.await.expect("schedule");
        sweep_output.push_str(&function.output());
        sweep_seen.add(&seen);
    }

    let (folds, all) = check_orders(&p, &orders).await;
    let outputs = [
        orders_function.output(),
        status_function.output(),
        format!("{}{sweep_output}", process_function.output()),
    ];
    check_tables(&p, &all, orders.len(), outputs.clone()).await;
    assert_eq!(
        deadlines_left(&p.projections[2].table).await,
        0,
        "no deadline left"
    );

    let sum = |of: fn(&Fold) -> u64| folds.iter().map(of).sum::<u64>();
    let refunds = sum(|fold| fold.refunds.len() as u64);
    let by_deadline = sum(|fold| fold.cancels_by_deadline);
    let cancelled = sum(|fold| u64::from(fold.cancels > 0));
    // The late payers (orders 1 and 5 of each six): paid before their
    // deadline fired, or after (the order cancelled by it, and refunded).
    let late: Vec<&Fold> = (1..ORDERS)
        .step_by(6)
        .chain((5..ORDERS).step_by(6))
        .map(|n| &folds[n as usize])
        .collect();
    let late_lost = late
        .iter()
        .filter(|fold| fold.cancels_by_deadline > 0)
        .count();
    let metric = |name: &str| metric_sum(&outputs[2], name);
    let faults: u64 = p.proxies.iter().map(|proxy| proxy.counts.faults()).sum();
    println!(
        "{ORDERS} orders, window {WINDOW_SECONDS} s: ready {:.1} s, produced {:.1} s, quiet {:.1} s\n\
         events stored {}, records dispatched {} ({} dispatched), published again {}\n\
         deliveries: orders {}, status {}, payments {} ({} batches, {} failed, {:.0} ms each); sweeps {} ({} failed, {:.0} ms each)\n\
         orders paid {}, cancelled {} ({} by their deadline); refunds requested {}; \
         late payers {}, {} of them after their deadline\n\
         process: applied {}, duplicate {}; deadlines fired {}, moved {}, failed {}\n\
         killed mid-invocation: queue {}, schedule {}; DynamoDB faults {}: {} | {}",
        ready.as_secs_f64(),
        produced.as_secs_f64(),
        quiet.as_secs_f64(),
        all.len(),
        running.sent.load(Ordering::Relaxed),
        metric_sum(&dispatcher.output(), "Dispatched"),
        published,
        orders_seen.deliveries,
        status_seen.deliveries,
        process_seen.deliveries,
        process_seen.invocations,
        process_seen.failed_invocations,
        per_invocation(&process_seen),
        sweep_seen.invocations,
        sweep_seen.failed_invocations,
        per_invocation(&sweep_seen),
        ORDERS - cancelled,
        cancelled,
        by_deadline,
        refunds,
        late.len(),
        late_lost,
        metric("Applied"),
        metric("Duplicate"),
        metric("DeadlinesFired"),
        metric("DeadlinesMoved"),
        metric("DeadlinesFailed"),
        process_seen.killed_mid_invocation,
        sweep_seen.killed_mid_invocation,
        faults,
        p.proxies[0].counts.summary(),
        p.proxies[1].counts.summary(),
    );
    // The run went through what it claims to.
    assert!(
        by_deadline > 0 && cancelled < ORDERS,
        "paid, and cancelled by a deadline"
    );
    assert!(refunds > 0, "refunds were requested");
    assert!(
        process_seen.killed_mid_invocation > 0,
        "the process was killed mid-batch"
    );
    assert!(faults > 0, "faults were injected");
    assert!(metric("Duplicate") > 0.0, "the process absorbed duplicates");
}
