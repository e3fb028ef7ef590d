//! What the black-box tests share: DynamoDB Local, started once per test
//! binary on an ephemeral port, a local Lambda Runtime API, and sample events
//! read at compile time.
#![allow(dead_code)] // each test binary uses part of this

use std::collections::BTreeMap;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};

pub mod fault_proxy;
pub mod function;
pub mod live;
pub mod localstack;
pub mod personal_data;
pub mod process;
pub mod rng;
pub mod runtime_api;
pub mod streams;

use aws_lambda_events::event::sqs::{SqsEvent, SqsMessage};
use aws_sdk_dynamodb::types::AttributeValue;
use sequence_guard::runner::{BatchReport, Outcome};
use sequence_guard::store::dynamodb::{DynamoStore, connect, create_table};

pub use sequence_guard::testing::{DynamoLocal, free_port};

static LOCAL: OnceLock<DynamoLocal> = OnceLock::new();
static TABLES: AtomicU32 = AtomicU32::new(0);

/// The shared DynamoDB Local of this test binary, started on first use.
pub fn dynamodb_local() -> &'static DynamoLocal {
    LOCAL.get_or_init(|| {
        DynamoLocal::start().unwrap_or_else(|err| panic!("DynamoDB Local could not start: {err}"))
    })
}

/// Starts DynamoDB Local on `port` (in memory, or with its data in `dir`) and
/// waits until it listens. It runs until the returned stdin is dropped.
pub fn spawn_dynamodb_local(
    port: u16,
    dir: Option<&std::path::Path>,
) -> Result<(std::process::Child, std::process::ChildStdin), String> {
    sequence_guard::testing::spawn_dynamodb_local(port, dir)
}

/// A new, empty table on DynamoDB Local, with the contract's key schema.
pub async fn fresh_table() -> DynamoStore {
    let local = dynamodb_local();
    let client = connect(Some(&local.endpoint)).await;
    let name = format!(
        "t{}-{}",
        std::process::id(),
        TABLES.fetch_add(1, Ordering::Relaxed)
    );
    create_table(&client, &name).await.expect("create table");
    DynamoStore::new(client, name)
}

/// One entity as stored now (`None`: there is none).
pub async fn entity<S: sequence_guard::store::Store>(
    store: &S,
    key: sequence_guard::EntityKey,
) -> Option<sequence_guard::AnyEntity> {
    let mut loaded = store
        .load(std::slice::from_ref(&key), &[])
        .await
        .expect("load")
        .entities;
    loaded.remove(&key).map(|entity| entity.expect("readable"))
}

/// The `T` `id` as stored now (`None`: there is none).
pub async fn typed<T: sequence_guard::Entity, S: sequence_guard::store::Store>(
    store: &S,
    id: &str,
) -> Option<T> {
    entity(store, sequence_guard::EntityKey::of::<T>(id))
        .await
        .map(|entity| entity.get::<T>().cloned().expect("of its kind"))
}

/// A product's sequence and price as stored now.
pub async fn product_state<S: sequence_guard::store::Store>(store: &S, id: &str) -> (u64, u64) {
    match typed::<shop::Product, _>(store, id).await {
        Some(product) => (product.sequence, product.price_cents),
        None => panic!("{id}: no product"),
    }
}

/// The outcome of each message of a report, in batch order.
pub fn outcomes(report: &BatchReport) -> Vec<Outcome> {
    report
        .messages
        .iter()
        .map(|message| message.outcome)
        .collect()
}

/// The message ids a report's batch response lists as failed.
pub fn failed_ids(report: &BatchReport) -> Vec<String> {
    report
        .response()
        .batch_item_failures
        .into_iter()
        .map(|failure| failure.item_identifier)
        .collect()
}

/// A sample event of `events/`, as Lambda delivers it.
pub fn sample(json: &str) -> SqsEvent {
    serde_json::from_str(json).expect("a sample event is an SQS event")
}

pub mod samples {
    pub const ORDER_CREATED_AND_UPDATED: &str =
        include_str!("../../../events/01-order-created-and-updated.json");
    pub const SAME_BATCH_REDELIVERED: &str =
        include_str!("../../../events/02-same-batch-redelivered.json");
    pub const GAP: &str = include_str!("../../../events/03-gap.json");
    pub const GAP_FILLED: &str = include_str!("../../../events/04-gap-filled.json");
    pub const UPDATE_BEFORE_CREATE: &str =
        include_str!("../../../events/05-update-before-create.json");
    pub const TWO_STREAMS_ONE_FAILING: &str =
        include_str!("../../../events/06-two-streams-one-failing.json");
    pub const UNREADABLE_AND_INVALID: &str =
        include_str!("../../../events/07-unreadable-and-invalid.json");
    pub const PRODUCT_PRICES: &str = include_str!("../../../events/08-product-prices.json");
    pub const INVENTORY: &str = include_str!("../../../events/09-inventory.json");
    pub const GAP_PARKED: &str = include_str!("../../../events/10-gap-parked.json");
    pub const GAP_CLOSED: &str = include_str!("../../../events/11-gap-closed.json");
    pub const PAYMENT_RECEIVED: &str = include_str!("../../../events/13-payment-received.json");
    pub const REFUND_REQUESTED: &str = include_str!("../../../events/14-refund-requested.json");
    pub const PERSONAL_DATA_ERASED: &str =
        include_str!("../../../events/15-personal-data-erased.json");

    /// Every SQS sample, in the order of the story (`12-scheduled-sweep.json`
    /// is the schedule's event, not an SQS batch).
    pub const ALL: [(&str, &str); 14] = [
        (
            "01-order-created-and-updated.json",
            ORDER_CREATED_AND_UPDATED,
        ),
        ("02-same-batch-redelivered.json", SAME_BATCH_REDELIVERED),
        ("03-gap.json", GAP),
        ("04-gap-filled.json", GAP_FILLED),
        ("05-update-before-create.json", UPDATE_BEFORE_CREATE),
        ("06-two-streams-one-failing.json", TWO_STREAMS_ONE_FAILING),
        ("07-unreadable-and-invalid.json", UNREADABLE_AND_INVALID),
        ("08-product-prices.json", PRODUCT_PRICES),
        ("09-inventory.json", INVENTORY),
        ("10-gap-parked.json", GAP_PARKED),
        ("11-gap-closed.json", GAP_CLOSED),
        ("13-payment-received.json", PAYMENT_RECEIVED),
        ("14-refund-requested.json", REFUND_REQUESTED),
        ("15-personal-data-erased.json", PERSONAL_DATA_ERASED),
    ];

    /// The samples before `11-gap-closed.json`, which closes the gap that
    /// `10-gap-parked.json` parks, and that one.
    pub fn until_the_gap_closes() -> (&'static [(&'static str, &'static str)], &'static str) {
        (&ALL[..10], GAP_CLOSED)
    }
}

/// An SQS FIFO record as Lambda delivers it, for a body made up in a test.
pub fn message(message_id: &str, group: &str, body: &str) -> SqsMessage {
    let mut message = SqsMessage::default();
    message.message_id = Some(message_id.to_owned());
    message.body = Some(body.to_owned());
    message
        .attributes
        .insert("MessageGroupId".to_owned(), group.to_owned());
    message
        .attributes
        .insert("ApproximateReceiveCount".to_owned(), "1".to_owned());
    message.event_source = Some("aws:sqs".to_owned());
    message
}

/// The same message, as delivered for the `count`th time.
pub fn delivered(mut message: SqsMessage, count: u32) -> SqsMessage {
    message
        .attributes
        .insert("ApproximateReceiveCount".to_owned(), count.to_string());
    message
}

pub fn batch(messages: Vec<SqsMessage>) -> SqsEvent {
    let mut event = SqsEvent::default();
    event.records = messages;
    event
}

/// A sequenced event body.
pub fn body(
    event_type: &str,
    aggregate_id: &str,
    sequence: u64,
    data: serde_json::Value,
) -> String {
    serde_json::json!({
        "eventId": format!("{aggregate_id}-{sequence}-{event_type}"),
        "type": event_type,
        "aggregateId": aggregate_id,
        "sequence": sequence,
        "data": data,
    })
    .to_string()
}

/// An order event with its own event id (the other helpers derive it).
pub fn order_event(event_type: &str, order: &str, sequence: u64, event_id: &str) -> String {
    serde_json::json!({
        "eventId": event_id,
        "type": event_type,
        "aggregateId": order,
        "sequence": sequence,
        "data": if event_type == "OrderCancelled" {
            serde_json::json!({ "reason": format!("reason {sequence}") })
        } else {
            serde_json::json!({
                "customerName": "Ada Lovelace",
                "email": "ada@example.com",
                "totalCents": 100 * sequence,
            })
        },
    })
    .to_string()
}

pub fn price_changed(product: &str, sequence: u64) -> String {
    body(
        "ProductPriceChanged",
        product,
        sequence,
        serde_json::json!({ "priceCents": 1000 + sequence }),
    )
}

pub fn product_created(product: &str) -> String {
    body(
        "ProductCreated",
        product,
        1,
        serde_json::json!({ "name": "Lamp", "priceCents": 1000 }),
    )
}

pub fn inventory_adjusted(event_id: &str, sku: &str, delta: i64) -> String {
    serde_json::json!({ "eventId": event_id, "type": "InventoryAdjusted", "data": { "sku": sku, "delta": delta } })
        .to_string()
}

/// `verify` on DynamoDB Local with these tables and `args`, and no other
/// variable of the caller's: its exit code, stdout as JSON lines, stderr.
pub fn verify_lines(
    events_table: &str,
    table: &str,
    args: &[&str],
) -> (i32, Vec<serde_json::Value>, String) {
    let key = personal_data::personal_data_key();
    verify_lines_with_key(events_table, table, args, Some(&key))
}

/// [`verify_lines`] with `PERSONAL_DATA_KEY` set to `key`, or unset.
pub fn verify_lines_with_key(
    events_table: &str,
    table: &str,
    args: &[&str],
    key: Option<&str>,
) -> (i32, Vec<serde_json::Value>, String) {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_verify"));
    command
        .args(["--endpoint-url", &dynamodb_local().endpoint])
        .args(args)
        .env("AWS_ACCESS_KEY_ID", "local")
        .env("AWS_SECRET_ACCESS_KEY", "local")
        .env("AWS_REGION", "us-east-1")
        .env("EVENTS_TABLE", events_table)
        .env("TABLE_NAME", table)
        .env_remove("PERSONAL_DATA_KEY");
    if let Some(key) = key {
        command.env("PERSONAL_DATA_KEY", key);
    }
    let output = command.output().expect("verify");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let lines = stdout
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|err| panic!("{line}: {err}")))
        .collect();
    (
        output.status.code().unwrap_or(-1),
        lines,
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// Runs a binary of the worked example on DynamoDB Local at `endpoint`,
/// with local credentials and the tests' personal data key: its exit code,
/// stdout and stderr.
pub fn run_local(exe: &str, endpoint: &str, args: &[&str]) -> (i32, String, String) {
    let output = std::process::Command::new(exe)
        .args(["--endpoint-url", endpoint])
        .args(args)
        .env("AWS_ACCESS_KEY_ID", "local")
        .env("AWS_SECRET_ACCESS_KEY", "local")
        .env("AWS_REGION", "us-east-1")
        .env("PERSONAL_DATA_KEY", personal_data::personal_data_key())
        .output()
        .unwrap_or_else(|err| panic!("{exe}: {err}"));
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// The projection's items (entities and counters), attribute by attribute.
pub async fn projection(endpoint: &str, table: &str) -> BTreeMap<(String, String), String> {
    items_of(endpoint, table, &["ORDER#", "PRODUCT#", "SKU#"]).await
}

/// A table's items whose pk starts with one of `kinds`, attribute by
/// attribute.
pub async fn items_of(
    endpoint: &str,
    table: &str,
    kinds: &[&str],
) -> BTreeMap<(String, String), String> {
    let client = connect(Some(endpoint)).await;
    let mut items = BTreeMap::new();
    let mut start = None;
    loop {
        let output = client
            .scan()
            .table_name(table)
            .consistent_read(true)
            .set_exclusive_start_key(start)
            .send()
            .await
            .expect("scan");
        for item in output.items.unwrap_or_default() {
            let text = |name: &str| match item.get(name) {
                Some(AttributeValue::S(text)) => text.clone(),
                _ => String::new(),
            };
            let (pk, sk) = (text("pk"), text("sk"));
            if kinds.iter().any(|kind| pk.starts_with(kind)) {
                let mut attributes: Vec<String> = item
                    .iter()
                    .map(|(name, value)| format!("{name}={value:?}"))
                    .collect();
                attributes.sort();
                items.insert((pk, sk), attributes.join(" "));
            }
        }
        start = output.last_evaluated_key;
        if start.is_none() {
            return items;
        }
    }
}

/// The sum of metric `name` over the EMF documents in a function's output.
pub fn metric_sum(output: &str, name: &str) -> f64 {
    output
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|document| document.get("_aws").is_some())
        .filter_map(|document| document.get(name).and_then(serde_json::Value::as_f64))
        .sum()
}
