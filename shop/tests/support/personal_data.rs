//! The personal data key the tests run the worked example with: an order's
//! `customerName` and `email` are personal, so its event store seals them
//! and refuses them without a key, as every binary that reads them does.
//! The tests do as a team does locally: a master key of their own
//! (`PERSONAL_DATA_KEY=local:...`) wraps the subjects' keys, whose items are
//! in the events table as with KMS.

use std::sync::Arc;

use sequence_guard::Domain;
use sequence_guard::personal::{DataKey, DynamoKeys, Keyring, is_sealed};
use sequence_guard::testkit::given;
use serde_json::Value;
use shop::{Order, OrderStatus};

/// The tests' master key (32 bytes), fixed: a binary given
/// [`personal_data_key`] and a process given [`keyed_domain`] open each
/// other's keys.
pub const MASTER_KEY: &[u8; 32] = b"sequence-guard shop tests key 32";

/// The fields an order event's `data` holds sealed.
pub const FIELDS: [&str; 2] = ["customerName", "email"];

/// `PERSONAL_DATA_KEY` for a binary: `local:` and [`MASTER_KEY`] in
/// base64url without padding.
pub fn personal_data_key() -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut text = String::from("local:");
    for chunk in MASTER_KEY.chunks(3) {
        let bits = chunk.iter().enumerate().fold(0u32, |bits, (at, byte)| {
            bits | u32::from(*byte) << (16 - 8 * at)
        });
        for at in 0..=chunk.len() {
            text.push(char::from(ALPHABET[(bits >> (18 - 6 * at) & 63) as usize]));
        }
    }
    text
}

/// A keyring over the key items of `events_table`, wrapped under
/// [`MASTER_KEY`]: what a binary given [`personal_data_key`] reads with.
pub fn keyring(client: &aws_sdk_dynamodb::Client, events_table: &str) -> Arc<Keyring> {
    let master = DataKey::new(MASTER_KEY).expect("32 bytes");
    Arc::new(Keyring::new(DynamoKeys::local(
        client.clone(),
        events_table,
        master,
    )))
}

/// The worked example's domain with a keyring over `events_table`'s key
/// items: for its event store (which seals) and its consumers (which open).
pub fn keyed_domain(client: &aws_sdk_dynamodb::Client, events_table: &str) -> Domain {
    shop::domain().with_keys(keyring(client, events_table))
}

/// A stored order event's body as its producer gave it: `customerName` and
/// `email` are asserted sealed, then opened through `domain` (its keys
/// fetched as a consumer fetches them) and put back in clear. Any other
/// body is returned as it is.
pub async fn opened(domain: &Domain, body: &str) -> Value {
    let mut value: Value = serde_json::from_str(body).unwrap_or_else(|err| panic!("{err}: {body}"));
    let event_type = value["type"].as_str().unwrap_or_default();
    if !matches!(event_type, "OrderCreated" | "OrderUpdated") {
        return value;
    }
    for field in FIELDS {
        assert!(
            value["data"][field].as_str().is_some_and(is_sealed),
            "{field} is not sealed: {body}"
        );
    }
    domain
        .fetch_keys([body])
        .await
        .unwrap_or_else(|err| panic!("the keys of {body}: {err}"));
    // The order projection opens them: an update applies to the order as
    // it was at the sequence before.
    let sequence = value["sequence"].as_u64().unwrap_or_default();
    let before = (event_type == "OrderUpdated").then(|| Order {
        sequence: sequence.saturating_sub(1),
        last_event_id: String::new(),
        customer_name: String::new(),
        email: String::new(),
        total_cents: 0,
        status: OrderStatus::Open,
        cancel_reason: None,
        paid_cents: 0,
        refund_cents: 0,
    });
    let then = given(before)
        .when_body(domain, body)
        .unwrap_or_else(|err| panic!("{body} does not open: {err}"));
    let order = then.entity().unwrap_or_else(|| panic!("no order: {body}"));
    value["data"]["customerName"] = Value::from(order.customer_name.clone());
    value["data"]["email"] = Value::from(order.email.clone());
    value
}

/// The subject whose key item a stream record of the events table (as
/// Lambda delivers it) is of; `None` for any other item's. The key items
/// are in the events table, so its stream carries them too (the
/// dispatcher skips them).
pub fn key_record_subject(record: &Value) -> Option<&str> {
    let keys = &record["dynamodb"]["Keys"];
    if keys["sk"]["S"] != "KEY" {
        return None;
    }
    keys["pk"]["S"].as_str()?.strip_prefix("SUBJECT#")
}

/// `records` parted into the events' and the subjects' key items' (those
/// subjects, sorted).
pub fn part_key_records(records: Vec<Value>) -> (Vec<Value>, Vec<String>) {
    let (keys, events): (Vec<Value>, Vec<Value>) = records
        .into_iter()
        .partition(|record| key_record_subject(record).is_some());
    let mut subjects: Vec<String> = keys
        .iter()
        .filter_map(key_record_subject)
        .map(str::to_owned)
        .collect();
    subjects.sort();
    (events, subjects)
}
