//! Finding and mending a hole (docs/operate.md, the runbook of a hole) on real parts: the
//! event store filled through the producer's append on DynamoDB Local, the
//! projection made by `rebuild` or by the projector's runner on a prefix of
//! the events, the `verify` and `resend` binaries, LocalStack's SQS FIFO
//! queue, and the runner as the consumer of what `resend` sent.

mod support;

use std::collections::BTreeMap;

use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_sqs::types::MessageSystemAttributeName;
use sequence_guard::dispatcher::{deduplication_id, group_id};
use sequence_guard::producer::{Append, EventStore, NewEvent, StoredEvent};
use sequence_guard::runner::{Invocation, Runner, RunnerConfig};
use sequence_guard::store::dynamodb::{DynamoStore, connect, create_table, ensure_events_table};
use serde_json::{Value, json};
use support::localstack::{fifo_queues, localstack, sqs};
use support::*;

/// The variables the tools read, cleared so that the caller's environment
/// cannot leak into a test.
const VARIABLES: [&str; 6] = [
    "EVENTS_TABLE",
    "TABLE_NAME",
    "PERSONAL_DATA_KEY",
    "QUEUE_URL",
    "TOPIC_ARN",
    "AWS_ENDPOINT_URL_SQS",
];

/// A binary's exit code, stdout and stderr.
type Output = (i32, String, String);

/// Runs a binary with local credentials, DynamoDB at `endpoint` (when
/// given) and only the variables `env` sets: its exit code, stdout, stderr.
fn run(exe: &str, endpoint: Option<&str>, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = std::process::Command::new(exe);
    if let Some(endpoint) = endpoint {
        command.args(["--endpoint-url", endpoint]);
    }
    command
        .args(args)
        .env("AWS_ACCESS_KEY_ID", "local")
        .env("AWS_SECRET_ACCESS_KEY", "local")
        .env("AWS_REGION", "us-east-1");
    for name in VARIABLES {
        command.env_remove(name);
    }
    command.envs(env.iter().copied());
    let output = command
        .output()
        .unwrap_or_else(|err| panic!("{exe}: {err}"));
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

fn verify(args: &[&str], env: &[(&str, &str)]) -> Output {
    let endpoint = &dynamodb_local().endpoint;
    run(env!("CARGO_BIN_EXE_verify"), Some(endpoint), args, env)
}

fn resend(args: &[&str], env: &[(&str, &str)]) -> Output {
    let endpoint = &dynamodb_local().endpoint;
    run(env!("CARGO_BIN_EXE_resend"), Some(endpoint), args, env)
}

/// Each stdout line as JSON.
fn lines(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|err| panic!("{line}: {err}")))
        .collect()
}

/// Personal data, prices and amounts of the story: none of it may reach
/// the tools' output.
const DATA: [&str; 7] = [
    "Ada Lovelace",
    "ada@example.com",
    "Grace Hopper",
    "Desk Lamp",
    "98765",
    "changed mind",
    "4321",
];

fn assert_no_data(output: &str) {
    for value in DATA {
        assert!(
            !output.contains(value),
            "the output shows `{value}`:\n{output}"
        );
    }
}

/// An event store and a projection table, new.
async fn tables(name: &str) -> (EventStore, String, String) {
    let client = connect(Some(&dynamodb_local().endpoint)).await;
    let suffix = std::process::id();
    let (events_table, table) = (
        format!("repair-{name}-events-{suffix}"),
        format!("repair-{name}-projection-{suffix}"),
    );
    ensure_events_table(&client, &events_table)
        .await
        .expect("events table");
    create_table(&client, &table).await.expect("projection");
    let domain = personal_data::keyed_domain(&client, &events_table);
    let store = EventStore::new(client, events_table.clone(), domain);
    (store, events_table, table)
}

fn details(total: u64) -> Value {
    json!({"customerName": "Ada Lovelace", "email": "ada@example.com", "totalCents": total})
}

/// An order: created, then `updates` updates; `cancelled` after them.
async fn append_order(store: &EventStore, id: &str, updates: u64, cancelled: bool) {
    let mut events = vec![NewEvent::new("OrderCreated", details(100))];
    events.extend((1..=updates).map(|n| NewEvent::new("OrderUpdated", details(100 + n))));
    if cancelled {
        events.push(NewEvent::new(
            "OrderCancelled",
            json!({"reason": "changed mind"}),
        ));
    }
    store
        .append(Append {
            events,
            ..Append::one(id, NewEvent::new("x", json!({})))
        })
        .await
        .expect("order");
}

async fn append_stock(store: &EventStore, sku: &str, deltas: &[i64]) {
    for delta in deltas {
        store
            .append(Append::one(
                sku,
                NewEvent::new("InventoryAdjusted", json!({"sku": sku, "delta": delta})),
            ))
            .await
            .expect("stock");
    }
}

/// Runs the projector's runner on a batch of stored events of one stream,
/// as one SQS batch; every message must complete.
async fn project(runner: &Runner<DynamoStore>, stream: &str, events: &[StoredEvent]) {
    let messages = events
        .iter()
        .map(|event| message(&format!("{stream}:{}", event.sequence), stream, &event.body))
        .collect();
    let report = runner
        .run(&batch(messages), invocation())
        .await
        .expect("run");
    assert!(failed_ids(&report).is_empty(), "{report:?}");
}

fn invocation() -> Invocation {
    Invocation {
        deadline: None,
        now: sequence_guard::lambda::epoch_seconds(),
    }
}

fn key(pk: &str, sk: &str) -> std::collections::HashMap<String, AttributeValue> {
    [
        ("pk".to_owned(), AttributeValue::S(pk.to_owned())),
        ("sk".to_owned(), AttributeValue::S(sk.to_owned())),
    ]
    .into()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_names_a_deleted_an_altered_and_a_stray_item_and_shows_no_data() {
    // GIVEN a store of three orders, a product and a sku, rebuilt into the
    // projection: they agree.
    let (store, events_table, table) = tables("diff").await;
    append_order(&store, "order-0", 3, false).await;
    append_order(&store, "order-1", 3, false).await;
    append_order(&store, "order-2", 2, true).await;
    store
        .append(Append {
            events: vec![
                NewEvent::new(
                    "ProductCreated",
                    json!({"name": "Desk Lamp", "priceCents": 4321}),
                ),
                NewEvent::new("ProductPriceChanged", json!({"priceCents": 4400})),
            ],
            ..Append::one("product-0", NewEvent::new("x", json!({})))
        })
        .await
        .expect("product");
    append_stock(&store, "SKU-A", &[5, -2]).await;
    let local = &dynamodb_local().endpoint;
    let (code, _, stderr) = run_local(
        env!("CARGO_BIN_EXE_rebuild"),
        local,
        &["--events-table", &events_table, "--table", &table],
    );
    assert_eq!(code, 0, "{stderr}");
    let personal_data_key = personal_data::personal_data_key();
    let tables = [
        ("EVENTS_TABLE", events_table.as_str()),
        ("TABLE_NAME", table.as_str()),
        ("PERSONAL_DATA_KEY", personal_data_key.as_str()),
    ];
    let (code, stdout, stderr) = verify(&[], &tables);
    assert_eq!(
        (code, lines(&stdout)),
        (0, vec![json!({"checked": 5, "differ": 0})]),
        "{stderr}"
    );

    // WHEN one item is deleted, another altered, a stray one written, and
    // an order marked as holding parked events (the engine's, not compared).
    let client = connect(Some(local)).await;
    client
        .delete_item()
        .table_name(&table)
        .set_key(Some(key("ORDER#order-1", "STATE")))
        .send()
        .await
        .expect("delete");
    client
        .update_item()
        .table_name(&table)
        .set_key(Some(key("PRODUCT#product-0", "STATE")))
        .update_expression("SET priceCents = :price")
        .expression_attribute_values(":price", AttributeValue::N("98765".into()))
        .send()
        .await
        .expect("alter");
    client
        .update_item()
        .table_name(&table)
        .set_key(Some(key("ORDER#order-0", "STATE")))
        .update_expression("SET parked = :parked, parkedSince = :since")
        .expression_attribute_values(":parked", AttributeValue::Ns(vec!["9".into()]))
        .expression_attribute_values(":since", AttributeValue::N("1700000000".into()))
        .send()
        .await
        .expect("parked");
    let mut ghost = key("ORDER#ghost", "STATE");
    ghost.extend([
        ("sequence".to_owned(), AttributeValue::N("1".into())),
        ("lastEventId".to_owned(), AttributeValue::S("g-1".into())),
        (
            "customerName".to_owned(),
            AttributeValue::S("Grace Hopper".into()),
        ),
    ]);
    client
        .put_item()
        .table_name(&table)
        .set_item(Some(ghost))
        .send()
        .await
        .expect("stray");

    // THEN verify names exactly those, by attribute, and exits 1.
    let (code, stdout, stderr) = verify(&[], &tables);
    assert_eq!(code, 1, "{stdout}{stderr}");
    assert_eq!(
        lines(&stdout),
        [
            json!({"pk": "ORDER#ghost", "sk": "STATE", "expectedSequence": null, "foundSequence": 1,
                   "attributes": ["customerName", "lastEventId", "sequence"], "ahead": true}),
            json!({"pk": "ORDER#order-1", "sk": "STATE", "expectedSequence": 4, "foundSequence": null,
                   "attributes": ["customerName", "email", "lastEventId", "sequence", "status", "totalCents"]}),
            json!({"pk": "PRODUCT#product-0", "sk": "STATE", "expectedSequence": 2, "foundSequence": 2,
                   "attributes": ["priceCents"]}),
            json!({"checked": 6, "differ": 3, "ahead": 1}),
        ],
        "{stderr}"
    );
    assert_no_data(&format!("{stdout}{stderr}"));

    // Only the streams given: their items alone.
    let (code, stdout, stderr) = verify(&["--stream", "order-1"], &tables);
    assert_eq!(code, 1, "{stderr}");
    let found = lines(&stdout);
    assert_eq!(found.len(), 2, "{stdout}");
    assert_eq!(found[0]["pk"], "ORDER#order-1");
    assert_eq!(found[1], json!({"checked": 1, "differ": 1}));
    let (code, stdout, stderr) = verify(&["--stream", "order-0", "--stream", "SKU-A"], &tables);
    assert_eq!(
        (code, lines(&stdout)),
        (0, vec![json!({"checked": 2, "differ": 0})]),
        "parked and parkedSince are the engine's: {stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_range_lost_on_the_way_is_found_by_verify_and_mended_by_resend() {
    // GIVEN an order of six events and a sku of three, of which the
    // consumer received only a prefix: the rest was lost on the way.
    let (store, events_table, table) = tables("hole").await;
    append_order(&store, "order-7", 5, false).await;
    append_stock(&store, "SKU-B", &[5, -2, 7]).await;
    let order = store.read("order-7", 0, 100).await.expect("read");
    let stock = store.read("SKU-B", 0, 100).await.expect("read");
    assert_eq!((order.len(), stock.len()), (6, 3));
    let client = connect(Some(&dynamodb_local().endpoint)).await;
    let runner = Runner::new(
        personal_data::keyed_domain(&client, &events_table),
        DynamoStore::new(client, table.clone()),
        RunnerConfig::default(),
    );
    project(&runner, "order-7", &order[..3]).await;
    project(&runner, "SKU-B", &stock[..1]).await;
    let personal_data_key = personal_data::personal_data_key();
    let tables = [
        ("EVENTS_TABLE", events_table.as_str()),
        ("TABLE_NAME", table.as_str()),
        ("PERSONAL_DATA_KEY", personal_data_key.as_str()),
    ];

    // WHEN verify looks: it finds the hole.
    let (code, stdout, stderr) = verify(&[], &tables);
    assert_eq!(code, 1, "{stderr}");
    assert_eq!(
        lines(&stdout),
        [
            json!({"pk": "ORDER#order-7", "sk": "STATE", "expectedSequence": 6, "foundSequence": 3,
                   "attributes": ["lastEventId", "sequence", "totalCents"]}),
            json!({"pk": "SKU#SKU-B", "sk": "STOCK", "expected": 10, "found": 5,
                   "attributes": ["onHand"]}),
            json!({"checked": 2, "differ": 2}),
        ]
    );
    assert_no_data(&format!("{stdout}{stderr}"));

    // AND resend sends the ranges to the queue: the order from the event
    // the consumer has already (the guard absorbs it), the sku's 2 to 3
    // (its consumers keep dedup records 60 days: past a copy's 35-day wait).
    let sqs = sqs().await;
    let queues = fifo_queues(&sqs, &format!("repair-{}", std::process::id()), 30, 5).await;
    let sqs_env = [
        ("EVENTS_TABLE", events_table.as_str()),
        ("QUEUE_URL", queues.url.as_str()),
        ("AWS_ENDPOINT_URL_SQS", localstack().endpoint.as_str()),
        ("DEDUP_TTL_SECONDS", "5184000"),
    ];
    let (code, stdout, stderr) = resend(&["--stream", "order-7", "--from", "3"], &sqs_env);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        stdout,
        "{\"streamId\":\"order-7\",\"from\":3,\"to\":null,\"sent\":4,\"requests\":1}\n"
    );
    let (code, stdout, stderr) =
        resend(&["--stream", "SKU-B", "--from", "2", "--to", "3"], &sqs_env);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        lines(&stdout),
        [json!({"streamId": "SKU-B", "from": 2, "to": 3, "sent": 2, "requests": 1})]
    );
    assert_no_data(&format!("{stdout}{stderr}"));

    // THEN the queue holds them as the dispatcher would have sent them:
    // group, body byte for byte, in stream order, each under the
    // dispatcher's deduplication id marked as this resend's (SQS would
    // drop the dispatcher's own within five minutes); the consumer (the
    // projector's runner) applies what they bring.
    let mut received: BTreeMap<String, Vec<(String, String)>> = BTreeMap::new();
    loop {
        let messages = sqs
            .receive_message()
            .queue_url(&queues.url)
            .max_number_of_messages(10)
            .message_system_attribute_names(MessageSystemAttributeName::All)
            .wait_time_seconds(1)
            .send()
            .await
            .expect("receive")
            .messages
            .unwrap_or_default();
        if messages.is_empty() {
            break;
        }
        let mut records = Vec::new();
        for received_message in &messages {
            let attributes = received_message.attributes.clone().unwrap_or_default();
            let attribute = |name: MessageSystemAttributeName| {
                attributes
                    .get(&name)
                    .cloned()
                    .expect("a FIFO message's attribute")
            };
            let group = attribute(MessageSystemAttributeName::MessageGroupId);
            let dedup = attribute(MessageSystemAttributeName::MessageDeduplicationId);
            let body = received_message.body.clone().unwrap_or_default();
            let id = received_message.message_id.clone().unwrap_or_default();
            records.push(message(&id, &group, &body));
            // `h-resend-<the run's start>-<the dispatcher's id>`.
            let dispatchers = dedup
                .strip_prefix("h-resend-")
                .and_then(|rest| rest.split_once('-'))
                .filter(|(run, _)| run.bytes().all(|b| b.is_ascii_digit()))
                .map_or_else(
                    || format!("not a resend's: {dedup}"),
                    |(_, id)| id.to_owned(),
                );
            received.entry(group).or_default().push((dispatchers, body));
        }
        let report = runner
            .run(&batch(records), invocation())
            .await
            .expect("run");
        assert!(failed_ids(&report).is_empty(), "{report:?}");
        for received_message in messages {
            sqs.delete_message()
                .queue_url(&queues.url)
                .receipt_handle(received_message.receipt_handle.unwrap_or_default())
                .send()
                .await
                .expect("delete");
        }
    }
    let sent = |stream: &str, events: &[StoredEvent], sequenced: bool| -> Vec<(String, String)> {
        events
            .iter()
            .map(|event| {
                let sequence = sequenced.then_some(event.sequence);
                (
                    deduplication_id(stream, sequence, &event.event_id),
                    event.body.clone(),
                )
            })
            .collect()
    };
    assert_eq!(
        received,
        BTreeMap::from([
            (group_id("SKU-B"), sent("SKU-B", &stock[1..3], false)),
            (group_id("order-7"), sent("order-7", &order[2..], true)),
        ])
    );

    // AND verify agrees now.
    let (code, stdout, stderr) = verify(&[], &tables);
    assert_eq!(
        (code, lines(&stdout)),
        (0, vec![json!({"checked": 2, "differ": 0})]),
        "{stderr}"
    );

    // A range past the stream's end sends nothing and says so; a queue
    // that does not take the events names the first not taken.
    let (code, _, stderr) = resend(&["--stream", "order-7", "--from", "7"], &sqs_env);
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("stream order-7 holds no event from 7"),
        "{stderr}"
    );
    let gone = queues.url.replace(".fifo", "-gone.fifo");
    let mut gone_env = sqs_env;
    gone_env[1].1 = gone.as_str();
    let (code, stdout, stderr) = resend(&["--stream", "order-7", "--from", "2"], &gone_env);
    assert_eq!(code, 1, "{stdout}{stderr}");
    assert!(
        stderr.contains("stream order-7 sequence 2 not taken"),
        "{stderr}"
    );
    assert!(
        stderr.contains("the last answer: SendMessageBatch"),
        "the cause: {stderr}"
    );
    assert_no_data(&format!("{stdout}{stderr}"));
}

#[test]
fn bad_arguments_and_missing_variables_exit_2_naming_the_problem() {
    let queue = "http://localhost:4566/000000000000/events.fifo";
    // Nothing is read before these are refused: no server is needed.
    let endpoint = Some("http://127.0.0.1:9");
    let verify = |args: &[&str], env: &[(&str, &str)]| {
        run(env!("CARGO_BIN_EXE_verify"), endpoint, args, env)
    };
    let resend = |args: &[&str], env: &[(&str, &str)]| {
        run(env!("CARGO_BIN_EXE_resend"), endpoint, args, env)
    };
    let cases: Vec<(&str, Output, &[&str])> = vec![
        (
            "verify without TABLE_NAME",
            verify(&[], &[("EVENTS_TABLE", "events")]),
            &["TABLE_NAME"],
        ),
        (
            "verify without EVENTS_TABLE",
            verify(&[], &[("TABLE_NAME", "projection")]),
            &["EVENTS_TABLE"],
        ),
        (
            "verify with an empty stream",
            verify(
                &["--stream", ""],
                &[("EVENTS_TABLE", "e"), ("TABLE_NAME", "t")],
            ),
            &["--stream"],
        ),
        (
            "resend without a stream",
            resend(&[], &[("EVENTS_TABLE", "e"), ("QUEUE_URL", queue)]),
            &["--stream"],
        ),
        (
            "resend from after to",
            resend(
                &["--stream", "order-1", "--from", "5", "--to", "3"],
                &[("EVENTS_TABLE", "e"), ("QUEUE_URL", queue)],
            ),
            &["--from 5", "--to 3"],
        ),
        (
            "resend from sequence 0",
            resend(
                &["--stream", "order-1", "--from", "0"],
                &[("EVENTS_TABLE", "e"), ("QUEUE_URL", queue)],
            ),
            &["--from", "0"],
        ),
        (
            "resend to sequence 0",
            resend(
                &["--stream", "order-1", "--to", "0"],
                &[("EVENTS_TABLE", "e"), ("QUEUE_URL", queue)],
            ),
            &["--to", "0"],
        ),
        (
            "resend without QUEUE_URL",
            resend(&["--stream", "order-1"], &[("EVENTS_TABLE", "e")]),
            &["QUEUE_URL"],
        ),
        (
            "resend with both QUEUE_URL and TOPIC_ARN",
            resend(
                &["--stream", "order-1"],
                &[
                    ("EVENTS_TABLE", "e"),
                    ("QUEUE_URL", queue),
                    ("TOPIC_ARN", "arn:aws:sns:us-east-1:1:events.fifo"),
                ],
            ),
            &["QUEUE_URL", "TOPIC_ARN"],
        ),
        (
            "resend to a standard topic",
            resend(
                &["--stream", "order-1"],
                &[
                    ("EVENTS_TABLE", "e"),
                    ("TOPIC_ARN", "arn:aws:sns:us-east-1:1:events"),
                ],
            ),
            &["TOPIC_ARN", ".fifo"],
        ),
        (
            "resend to a standard queue",
            resend(
                &["--stream", "order-1"],
                &[
                    ("EVENTS_TABLE", "e"),
                    ("QUEUE_URL", "http://localhost:4566/0/events"),
                ],
            ),
            &["QUEUE_URL", ".fifo"],
        ),
        (
            "resend without EVENTS_TABLE",
            resend(&["--stream", "order-1"], &[("QUEUE_URL", queue)]),
            &["EVENTS_TABLE"],
        ),
    ];
    for (case, (code, stdout, stderr), named) in cases {
        assert_eq!(code, 2, "{case}: {stdout}{stderr}");
        for name in named {
            assert!(
                stderr.contains(name),
                "{case}: `{name}` not named in {stderr}"
            );
        }
    }
}
