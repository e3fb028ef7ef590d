//! The DynamoDB adapter: the contract's item layout and the conditional writes.
//!
//! | item   | pk                    | sk                     |
//! | ------ | --------------------- | ---------------------- |
//! | order  | `ORDER#<aggregateId>` | `STATE`                |
//! | product| `PRODUCT#<aggregateId>` | `STATE`              |
//! | stock  | `SKU#<sku>`           | `STOCK`                |
//! | dedup  | `MESSAGE#<eventId>`   | `HANDLER#<handler>`    |

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::error::{DisplayErrorContext, SdkError};
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::{
    AttributeDefinition, AttributeValue, BillingMode, KeySchemaElement, KeyType, KeysAndAttributes,
    Put, ReturnValuesOnConditionCheckFailure, ScalarAttributeType, TimeToLiveSpecification,
    TransactWriteItem, Update,
};
use serde::{Deserialize, Serialize};
use serde_dynamo::aws_sdk_dynamodb_1::{from_item, to_item};

use super::{Adjusted, DedupKey, Loaded, Saved, Store, StoreError};
use crate::domain::{Entity, EntityKey, Order, OrderStatus, Product, StockAdjustment};

type Item = HashMap<String, AttributeValue>;

/// The TTL attribute of deduplication records.
pub const TTL_ATTRIBUTE: &str = "expiresAt";
/// BatchGetItem takes at most 100 keys a request.
const BATCH_GET_LIMIT: usize = 100;
/// How often unprocessed keys of a BatchGetItem are asked for again.
const UNPROCESSED_RETRIES: u32 = 5;

/// The IAM actions a DynamoDB operation of this adapter needs: a
/// transaction is authorised by the actions it contains (a `Put` of the dedup
/// record and an `Update` of the stock).
pub fn iam_actions(operation: &str) -> &'static [&'static str] {
    match operation {
        "BatchGetItem" => &["dynamodb:BatchGetItem"],
        "UpdateItem" => &["dynamodb:UpdateItem"],
        "TransactWriteItems" => &["dynamodb:PutItem", "dynamodb:UpdateItem"],
        "GetItem" => &["dynamodb:GetItem"],
        _ => &[],
    }
}

/// The table, through the AWS SDK. Cheap to clone; counts its requests.
#[derive(Debug, Clone)]
pub struct DynamoStore {
    client: Client,
    table: String,
    requests: Arc<AtomicU64>,
    operations: Arc<Mutex<BTreeSet<&'static str>>>,
}

impl DynamoStore {
    pub fn new(client: Client, table: impl Into<String>) -> Self {
        DynamoStore {
            client,
            table: table.into(),
            requests: Arc::new(AtomicU64::new(0)),
            operations: Arc::default(),
        }
    }

    fn count(&self, operation: &'static str) {
        self.requests.fetch_add(1, Ordering::Relaxed);
        self.operations
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(operation);
    }

    /// The DynamoDB operations called so far (see [`iam_actions`]).
    pub fn operations(&self) -> BTreeSet<&'static str> {
        self.operations
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    pub fn client(&self) -> &Client {
        &self.client
    }

    pub fn table(&self) -> &str {
        &self.table
    }
}

fn request_error<E, R>(operation: &'static str, err: &SdkError<E, R>) -> StoreError
where
    E: std::error::Error + 'static,
    R: std::fmt::Debug,
{
    StoreError::Request {
        operation,
        message: DisplayErrorContext(err).to_string(),
    }
}

fn build_error(operation: &'static str, err: impl std::fmt::Display) -> StoreError {
    StoreError::Request {
        operation,
        message: err.to_string(),
    }
}

// ---- item layout -------------------------------------------------------------

const ORDER_PREFIX: &str = "ORDER#";
const DEDUP_PREFIX: &str = "MESSAGE#";
const HANDLER_PREFIX: &str = "HANDLER#";
const PRODUCT_PREFIX: &str = "PRODUCT#";
const STATE: &str = "STATE";

fn entity_pk(key: &EntityKey) -> String {
    match key {
        EntityKey::Order(id) => format!("{ORDER_PREFIX}{id}"),
        EntityKey::Product(id) => format!("{PRODUCT_PREFIX}{id}"),
    }
}

fn stock_key(sku: &str) -> Item {
    HashMap::from([
        ("pk".to_owned(), AttributeValue::S(format!("SKU#{sku}"))),
        ("sk".to_owned(), AttributeValue::S("STOCK".to_owned())),
    ])
}

fn dedup_key(key: &DedupKey) -> Item {
    HashMap::from([
        (
            "pk".to_owned(),
            AttributeValue::S(format!("{DEDUP_PREFIX}{}", key.event_id)),
        ),
        (
            "sk".to_owned(),
            AttributeValue::S(format!("{HANDLER_PREFIX}{}", key.handler)),
        ),
    ])
}

/// A key item as text, to sort and deduplicate keys.
fn key_text(key: &Item) -> (String, String) {
    let part = |name: &str| match key.get(name) {
        Some(AttributeValue::S(text)) => text.clone(),
        _ => String::new(),
    };
    (part("pk"), part("sk"))
}

fn key_item(key: &EntityKey) -> Item {
    HashMap::from([
        ("pk".to_owned(), AttributeValue::S(entity_pk(key))),
        ("sk".to_owned(), AttributeValue::S(STATE.to_owned())),
    ])
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct OrderItem {
    pk: String,
    sk: String,
    sequence: u64,
    last_event_id: String,
    customer_name: String,
    email: String,
    total_cents: u64,
    status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    cancel_reason: Option<String>,
}

/// Attributes an item may lack; a save removes them when the entity has none.
const OPTIONAL_ATTRIBUTES: [&str; 1] = ["cancelReason"];

#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ProductItem {
    pk: String,
    sk: String,
    sequence: u64,
    last_event_id: String,
    name: String,
    price_cents: u64,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct DedupItem {
    pk: String,
    sk: String,
    handled_at: u64,
    expires_at: u64,
}

fn entity_to_item(entity: &Entity) -> Result<Item, StoreError> {
    let pk = entity_pk(&entity.key());
    let item = match entity {
        Entity::Order(order) => to_item(OrderItem {
            pk,
            sk: STATE.to_owned(),
            sequence: order.sequence,
            last_event_id: order.last_event_id.clone(),
            customer_name: order.customer_name.clone(),
            email: order.email.clone(),
            total_cents: order.total_cents,
            status: match order.status {
                OrderStatus::Open => "OPEN",
                OrderStatus::Cancelled => "CANCELLED",
            }
            .to_owned(),
            cancel_reason: order.cancel_reason.clone(),
        }),
        Entity::Product(product) => to_item(ProductItem {
            pk,
            sk: STATE.to_owned(),
            sequence: product.sequence,
            last_event_id: product.last_event_id.clone(),
            name: product.name.clone(),
            price_cents: product.price_cents,
        }),
    };
    item.map_err(|err| build_error("serialize entity", err))
}

/// Reads an entity item; `Ok(None)` for an item that is not an entity.
fn entity_from_item(item: Item) -> Result<Option<Entity>, StoreError> {
    let pk = match item.get("pk") {
        Some(AttributeValue::S(pk)) => pk.clone(),
        _ => return Ok(None),
    };
    let corrupt = |err: serde_dynamo::Error| StoreError::Corrupt {
        key: pk.clone(),
        message: err.to_string(),
    };
    if let Some(id) = pk.strip_prefix(ORDER_PREFIX) {
        let order: OrderItem = from_item(item).map_err(corrupt)?;
        let status = match order.status.as_str() {
            "OPEN" => OrderStatus::Open,
            "CANCELLED" => OrderStatus::Cancelled,
            other => {
                return Err(StoreError::Corrupt {
                    key: pk.clone(),
                    message: format!("unknown status `{other}`"),
                });
            }
        };
        return Ok(Some(Entity::Order(Order {
            id: id.to_owned(),
            sequence: order.sequence,
            last_event_id: order.last_event_id,
            customer_name: order.customer_name,
            email: order.email,
            total_cents: order.total_cents,
            status,
            cancel_reason: order.cancel_reason,
        })));
    }
    if let Some(id) = pk.strip_prefix(PRODUCT_PREFIX) {
        let product: ProductItem = from_item(item).map_err(corrupt)?;
        return Ok(Some(Entity::Product(Product {
            id: id.to_owned(),
            sequence: product.sequence,
            last_event_id: product.last_event_id,
            name: product.name,
            price_cents: product.price_cents,
        })));
    }
    Ok(None)
}

fn key_of_pk(pk: &str) -> Option<EntityKey> {
    if let Some(id) = pk.strip_prefix(ORDER_PREFIX) {
        return Some(EntityKey::Order(id.to_owned()));
    }
    pk.strip_prefix(PRODUCT_PREFIX)
        .map(|id| EntityKey::Product(id.to_owned()))
}

/// `SET #a0 = :v0, ...` over every attribute but the key, `REMOVE` for the
/// optional attributes the entity lacks.
fn update_expression(item: Item) -> (String, Item, HashMap<String, String>) {
    let mut names = HashMap::new();
    let mut values = HashMap::new();
    let mut sets = Vec::new();
    let mut attributes: Vec<(String, AttributeValue)> = item
        .into_iter()
        .filter(|(name, _)| name != "pk" && name != "sk")
        .collect();
    attributes.sort_by(|a, b| a.0.cmp(&b.0));
    for (index, (name, value)) in attributes.into_iter().enumerate() {
        sets.push(format!("#a{index} = :v{index}"));
        names.insert(format!("#a{index}"), name);
        values.insert(format!(":v{index}"), value);
    }
    let mut expression = format!("SET {}", sets.join(", "));
    let absent: Vec<&str> = OPTIONAL_ATTRIBUTES
        .into_iter()
        .filter(|name| !names.values().any(|present| present == name))
        .collect();
    let mut removed = Vec::new();
    for (index, name) in absent.into_iter().enumerate() {
        names.insert(format!("#r{index}"), name.to_owned());
        removed.push(format!("#r{index}"));
    }
    if !removed.is_empty() {
        expression.push_str(&format!(" REMOVE {}", removed.join(", ")));
    }
    (expression, values, names)
}

impl Store for DynamoStore {
    async fn load(&self, keys: &[EntityKey], dedup: &[DedupKey]) -> Result<Loaded, StoreError> {
        let mut unique: Vec<Item> = keys
            .iter()
            .map(key_item)
            .chain(dedup.iter().map(dedup_key))
            .collect();
        unique.sort_by_key(key_text);
        unique.dedup_by(|a, b| key_text(a) == key_text(b));
        let mut loaded = Loaded::default();
        for chunk in unique.chunks(BATCH_GET_LIMIT) {
            let mut pending = KeysAndAttributes::builder()
                .set_keys(Some(chunk.to_vec()))
                .consistent_read(true)
                .build()
                .map_err(|err| build_error("BatchGetItem", err))?;
            for attempt in 0..=UNPROCESSED_RETRIES {
                self.count("BatchGetItem");
                let output = self
                    .client
                    .batch_get_item()
                    .request_items(&self.table, pending)
                    .send()
                    .await
                    .map_err(|err| request_error("BatchGetItem", &err))?;
                for item in output
                    .responses
                    .and_then(|mut tables| tables.remove(&self.table))
                    .unwrap_or_default()
                {
                    let pk = match item.get("pk") {
                        Some(AttributeValue::S(pk)) => pk.clone(),
                        _ => continue,
                    };
                    if let Some(event_id) = pk.strip_prefix(DEDUP_PREFIX) {
                        let handler = match item.get("sk") {
                            Some(AttributeValue::S(sk)) => sk.strip_prefix(HANDLER_PREFIX),
                            _ => None,
                        };
                        // Only the handlers asked for (they are 'static names).
                        if let Some(asked) = dedup
                            .iter()
                            .find(|key| key.event_id == event_id && Some(key.handler) == handler)
                        {
                            loaded.handled.insert(asked.clone());
                        }
                        continue;
                    }
                    let Some(key) = key_of_pk(&pk) else { continue };
                    match entity_from_item(item) {
                        Ok(Some(entity)) => loaded.entities.insert(key, Ok(entity)),
                        Ok(None) => None,
                        Err(err) => loaded.entities.insert(key, Err(err)),
                    };
                }
                match output
                    .unprocessed_keys
                    .and_then(|mut tables| tables.remove(&self.table))
                {
                    Some(rest) if !rest.keys.is_empty() => {
                        if attempt == UNPROCESSED_RETRIES {
                            return Err(StoreError::Request {
                                operation: "BatchGetItem",
                                message: format!(
                                    "{} keys still unprocessed after retries",
                                    rest.keys.len()
                                ),
                            });
                        }
                        tokio::time::sleep(Duration::from_millis(20 << attempt)).await;
                        pending = rest;
                    }
                    _ => break,
                }
            }
        }
        Ok(loaded)
    }

    async fn save(&self, entity: &Entity, expected: Option<u64>) -> Result<Saved, StoreError> {
        let (expression, values, names) = update_expression(entity_to_item(entity)?);
        let mut request = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(key_item(&entity.key())))
            .update_expression(expression)
            .set_expression_attribute_names(Some(names))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld);
        request = match expected {
            None => request
                .condition_expression("attribute_not_exists(pk)")
                .set_expression_attribute_values(Some(values)),
            Some(sequence) => {
                let mut values = values;
                values.insert(
                    ":loaded".to_owned(),
                    AttributeValue::N(sequence.to_string()),
                );
                request
                    .condition_expression("#seq = :loaded")
                    .expression_attribute_names("#seq", "sequence")
                    .set_expression_attribute_values(Some(values))
            }
        };
        self.count("UpdateItem");
        match request.send().await {
            Ok(_) => Ok(Saved::Written),
            Err(err) => match err.into_service_error() {
                UpdateItemError::ConditionalCheckFailedException(failed) => {
                    let current = match failed.item {
                        Some(item) => entity_from_item(item)?,
                        None => None,
                    };
                    Ok(Saved::Conflict { current })
                }
                other => Err(StoreError::Request {
                    operation: "UpdateItem",
                    message: DisplayErrorContext(other).to_string(),
                }),
            },
        }
    }

    async fn adjust_stock(&self, adjustments: &[StockAdjustment]) -> Result<Adjusted, StoreError> {
        if adjustments.is_empty() {
            return Ok(Adjusted::Applied);
        }
        // One transaction: a conditional Put of each deduplication record, then
        // one ADD per sku with the sum of its deltas (a transaction may touch an
        // item only once).
        let mut items = Vec::with_capacity(adjustments.len() + 1);
        for adjustment in adjustments {
            let record = to_item(DedupItem {
                pk: format!("{DEDUP_PREFIX}{}", adjustment.event_id),
                sk: format!("{HANDLER_PREFIX}{}", adjustment.handler),
                handled_at: adjustment.handled_at,
                expires_at: adjustment.expires_at,
            })
            .map_err(|err| build_error("serialize dedup record", err))?;
            let put = Put::builder()
                .table_name(&self.table)
                .set_item(Some(record))
                .condition_expression("attribute_not_exists(pk)")
                .build()
                .map_err(|err| build_error("TransactWriteItems", err))?;
            items.push(TransactWriteItem::builder().put(put).build());
        }
        let mut deltas: Vec<(&str, i128)> = Vec::new();
        for adjustment in adjustments {
            match deltas.iter_mut().find(|(sku, _)| *sku == adjustment.sku) {
                Some((_, sum)) => *sum += i128::from(adjustment.delta),
                None => deltas.push((&adjustment.sku, i128::from(adjustment.delta))),
            }
        }
        for (sku, delta) in deltas {
            let update = Update::builder()
                .table_name(&self.table)
                .set_key(Some(stock_key(sku)))
                .update_expression("ADD onHand :delta")
                .expression_attribute_values(":delta", AttributeValue::N(delta.to_string()))
                .build()
                .map_err(|err| build_error("TransactWriteItems", err))?;
            items.push(TransactWriteItem::builder().update(update).build());
        }
        self.count("TransactWriteItems");
        let result = self
            .client
            .transact_write_items()
            .set_transact_items(Some(items))
            .send()
            .await;
        match result {
            Ok(_) => Ok(Adjusted::Applied),
            Err(err) => match err.into_service_error() {
                TransactWriteItemsError::TransactionCanceledException(cancelled) => {
                    let reasons = cancelled.cancellation_reasons();
                    let existing: Vec<usize> = reasons
                        .iter()
                        .take(adjustments.len())
                        .enumerate()
                        .filter(|(_, reason)| reason.code() == Some("ConditionalCheckFailed"))
                        .map(|(index, _)| index)
                        .collect();
                    if existing.is_empty() {
                        let codes: Vec<&str> =
                            reasons.iter().filter_map(|reason| reason.code()).collect();
                        return Err(StoreError::Request {
                            operation: "TransactWriteItems",
                            message: format!("transaction cancelled: {codes:?}"),
                        });
                    }
                    Ok(Adjusted::Duplicates(existing))
                }
                other => Err(StoreError::Request {
                    operation: "TransactWriteItems",
                    message: DisplayErrorContext(other).to_string(),
                }),
            },
        }
    }

    async fn on_hand(&self, sku: &str) -> Result<Option<i64>, StoreError> {
        self.count("GetItem");
        let output = self
            .client
            .get_item()
            .table_name(&self.table)
            .set_key(Some(stock_key(sku)))
            .consistent_read(true)
            .send()
            .await
            .map_err(|err| request_error("GetItem", &err))?;
        match output.item.as_ref().and_then(|item| item.get("onHand")) {
            None => Ok(None),
            Some(AttributeValue::N(number)) => {
                number.parse().map(Some).map_err(|_| StoreError::Corrupt {
                    key: format!("SKU#{sku}"),
                    message: format!("onHand `{number}` is not a 64-bit integer"),
                })
            }
            Some(_) => Err(StoreError::Corrupt {
                key: format!("SKU#{sku}"),
                message: "onHand is not a number".into(),
            }),
        }
    }

    /// DynamoDB requests sent so far (each SDK call counts once, whatever
    /// the SDK retried inside it).
    fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }
}

/// Creates a table with the contract's key schema, on-demand, with TTL on
/// [`TTL_ATTRIBUTE`]. For `replay --create-table` and tests; production
/// tables come from `template.yaml`.
pub async fn create_table(client: &Client, table: &str) -> Result<(), StoreError> {
    let attribute = |name: &str| {
        AttributeDefinition::builder()
            .attribute_name(name)
            .attribute_type(ScalarAttributeType::S)
            .build()
            .map_err(|err| build_error("CreateTable", err))
    };
    let key = |name: &str, key_type| {
        KeySchemaElement::builder()
            .attribute_name(name)
            .key_type(key_type)
            .build()
            .map_err(|err| build_error("CreateTable", err))
    };
    client
        .create_table()
        .table_name(table)
        .attribute_definitions(attribute("pk")?)
        .attribute_definitions(attribute("sk")?)
        .key_schema(key("pk", KeyType::Hash)?)
        .key_schema(key("sk", KeyType::Range)?)
        .billing_mode(BillingMode::PayPerRequest)
        .send()
        .await
        .map_err(|err| request_error("CreateTable", &err))?;
    client
        .update_time_to_live()
        .table_name(table)
        .time_to_live_specification(
            TimeToLiveSpecification::builder()
                .attribute_name(TTL_ATTRIBUTE)
                .enabled(true)
                .build()
                .map_err(|err| build_error("UpdateTimeToLive", err))?,
        )
        .send()
        .await
        .map_err(|err| request_error("UpdateTimeToLive", &err))?;
    Ok(())
}

/// A client for `endpoint_url` (DynamoDB Local, say), or for the endpoint the
/// environment names. Without a region in the environment, `us-east-1`; for a
/// loopback endpoint without credentials in the environment, fixed local ones
/// (DynamoDB Local accepts any).
pub async fn connect(endpoint_url: Option<&str>) -> Client {
    let mut loader = aws_config::from_env();
    if let Some(url) = endpoint_url {
        loader = loader.endpoint_url(url);
        let loopback = ["://localhost", "://127.", "://[::1]"]
            .iter()
            .any(|host| url.contains(host));
        if loopback && std::env::var_os("AWS_ACCESS_KEY_ID").is_none() {
            loader = loader.credentials_provider(aws_sdk_dynamodb::config::Credentials::new(
                "local", "local", None, None, "local",
            ));
        }
    }
    let sdk = loader.load().await;
    let mut config = aws_sdk_dynamodb::config::Builder::from(&sdk);
    if sdk.region().is_none() {
        config = config.region(aws_sdk_dynamodb::config::Region::new("us-east-1"));
    }
    Client::from_conf(config.build())
}
