//! The code's own DynamoDB requests, recorded as they leave the SDK and
//! judged by the template's policies ([`iam`](super::iam)): a producer's
//! appends of personal data, a consumer that opens them, the payments
//! process's step and deadline, and `erase`, each on DynamoDB Local. Every
//! request each makes is one its role or policy allows, on the items it
//! names (`events_table.rs` holds each to no more than that).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use aws_lambda_events::event::sqs::SqsEvent;
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::config::interceptors::BeforeTransmitInterceptorContextRef;
use aws_sdk_dynamodb::config::{ConfigBag, Intercept, RuntimeComponents};
use aws_sdk_dynamodb::error::BoxError;
use sequence_guard::producer::{Append, EventStore, ExpectedSequence, NewEvent};
use sequence_guard::store::dynamodb::{DynamoStore, ensure_events_table};
use serde_json::{Value as Json, json};

use super::iam::{LEADING_KEYS, Policy, Request, index_arn, table_arn};
use super::*;

/// One item-level request as IAM authorizes it: a `TransactWriteItems`
/// is one request per item, a `BatchGetItem` one per table.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Call {
    action: String,
    table: String,
    index: Option<String>,
    leading: Vec<String>,
}

/// Every request of a client, as [`Call`]s.
#[derive(Debug, Clone, Default)]
struct Recorder(Arc<Mutex<Vec<Call>>>);

impl Recorder {
    /// `client` with its requests recorded here.
    fn client(&self, client: &Client) -> Client {
        let config = client
            .config()
            .to_builder()
            .interceptor(self.clone())
            .build();
        Client::from_conf(config)
    }

    /// The calls so far, and none kept.
    fn take(&self) -> Vec<Call> {
        std::mem::take(&mut *self.0.lock().expect("calls"))
    }
}

impl Intercept for Recorder {
    fn name(&self) -> &'static str {
        "Recorder"
    }

    fn read_before_transmit(
        &self,
        context: &BeforeTransmitInterceptorContextRef<'_>,
        _components: &RuntimeComponents,
        _cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let request = context.request();
        let target = request.headers().get("x-amz-target").unwrap_or_default();
        let operation = target.rsplit('.').next().unwrap_or_default().to_owned();
        let body: Json = serde_json::from_slice(request.body().bytes().unwrap_or_default())?;
        let calls = calls(&operation, &body);
        self.0.lock().expect("calls").extend(calls);
        Ok(())
    }
}

/// The partition key of an item or a key.
fn pk(item: &Json) -> Vec<String> {
    item["pk"]["S"]
        .as_str()
        .map(str::to_owned)
        .into_iter()
        .collect()
}

fn text(value: &Json) -> String {
    value.as_str().unwrap_or_default().to_owned()
}

/// What IAM authorizes for one request of `operation`.
fn calls(operation: &str, body: &Json) -> Vec<Call> {
    let call = |action: &str, table: &Json, leading: Vec<String>| Call {
        action: action.to_owned(),
        table: text(table),
        index: None,
        leading,
    };
    match operation {
        "GetItem" | "UpdateItem" | "DeleteItem" => {
            vec![call(operation, &body["TableName"], pk(&body["Key"]))]
        }
        "PutItem" => vec![call(operation, &body["TableName"], pk(&body["Item"]))],
        "Query" => vec![Call {
            index: body["IndexName"].as_str().map(str::to_owned),
            ..call(operation, &body["TableName"], vec![queried(body)])
        }],
        "BatchGetItem" => per_table(body, |asked| {
            asked["Keys"]
                .as_array()
                .into_iter()
                .flatten()
                .flat_map(pk)
                .collect()
        })
        .map(|(table, leading)| call(operation, &json!(table), leading))
        .collect(),
        "BatchWriteItem" => per_table(body, |writes| {
            let writes = writes.as_array().into_iter().flatten();
            writes
                .flat_map(|write| {
                    let item = &write["PutRequest"]["Item"];
                    pk(if item.is_null() {
                        &write["DeleteRequest"]["Key"]
                    } else {
                        item
                    })
                })
                .collect()
        })
        .map(|(table, leading)| call(operation, &json!(table), leading))
        .collect(),
        "TransactWriteItems" | "TransactGetItems" => body["TransactItems"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|item| {
                let (kind, inner) = item
                    .as_object()
                    .and_then(|item| item.iter().next())
                    .expect("a transaction's item");
                let action = match kind.as_str() {
                    "Put" => "PutItem",
                    "Update" => "UpdateItem",
                    "Delete" => "DeleteItem",
                    "ConditionCheck" => "ConditionCheckItem",
                    "Get" => "GetItem",
                    other => panic!("a transaction's {other}"),
                };
                let key = if kind == "Put" {
                    &inner["Item"]
                } else {
                    &inner["Key"]
                };
                call(action, &inner["TableName"], pk(key))
            })
            .collect(),
        _ => vec![call(operation, &body["TableName"], Vec::new())],
    }
}

/// `RequestItems`, table by table, with the partition keys `keys` reads.
fn per_table<'a>(
    body: &'a Json,
    keys: impl Fn(&Json) -> Vec<String> + 'a,
) -> impl Iterator<Item = (String, Vec<String>)> + 'a {
    body["RequestItems"]
        .as_object()
        .into_iter()
        .flatten()
        .map(move |(table, asked)| (table.clone(), keys(asked)))
}

/// The partition key a `Query` asks for: the value its key condition sets
/// the table's partition key (`pk`), or its index's (`dueShard`), to.
fn queried(body: &Json) -> String {
    let partition = if body["IndexName"].is_null() {
        "pk"
    } else {
        "dueShard"
    };
    let condition = text(&body["KeyConditionExpression"]);
    for clause in condition.split(" AND ") {
        let Some((name, value)) = clause.split_once('=') else {
            continue;
        };
        let name = name.trim();
        let name = body["ExpressionAttributeNames"][name]
            .as_str()
            .unwrap_or(name);
        if name == partition {
            return text(&body["ExpressionAttributeValues"][value.trim()]["S"]);
        }
    }
    panic!("a Query whose partition key is not read here: {body}")
}

/// Each of `calls` on the tables `tables` names (by their names here, as
/// the template's logical ids) is allowed by `policy`.
fn assert_allowed(who: &str, policy: &Policy, tables: &BTreeMap<&str, &str>, calls: &[Call]) {
    assert!(!calls.is_empty(), "{who} made no request");
    for call in calls {
        let table = tables
            .get(call.table.as_str())
            .unwrap_or_else(|| panic!("{who}: {call:?} on a table it has no right to"));
        let resource = match &call.index {
            Some(index) => index_arn(table, index),
            None => table_arn(table),
        };
        let mut request = Request::new(&format!("dynamodb:{}", call.action), &resource);
        if !call.leading.is_empty() {
            let leading: Vec<&str> = call.leading.iter().map(String::as_str).collect();
            request = request.with(LEADING_KEYS, &leading);
        }
        assert!(policy.allows(&request), "{who} may not: {call:?}");
    }
}

/// The (action, partition key's prefix) of `calls` on `table`.
fn made(calls: &[Call], table: &str) -> BTreeSet<(String, String)> {
    calls
        .iter()
        .filter(|call| call.table == table)
        .flat_map(|call| {
            call.leading.iter().map(|key| {
                let prefix = key
                    .split_once('#')
                    .map_or(key.as_str(), |(prefix, _)| prefix);
                (call.action.clone(), format!("{prefix}#"))
            })
        })
        .collect()
}

fn order(customer: &str) -> Json {
    json!({"customerName": customer, "email": "ada@example.com", "totalCents": 1250})
}

/// An event store and a projection table on DynamoDB Local, a client
/// whose requests are recorded, and one that is not (the test's own).
struct Stack {
    template: Value,
    local: Client,
    recorder: Recorder,
    client: Client,
    events: String,
    projection: String,
}

impl Stack {
    async fn new() -> Stack {
        let projection = fresh_table().await;
        let local = projection.client().clone();
        let events = format!("{}-events", projection.table());
        ensure_events_table(&local, &events)
            .await
            .expect("events table");
        let recorder = Recorder::default();
        let client = recorder.client(&local);
        Stack {
            template: template(),
            local,
            recorder,
            client,
            events,
            projection: projection.table().to_owned(),
        }
    }

    /// The shop's event store, its personal data sealed, as a producer (or
    /// `erase`) has it: every request recorded.
    fn producer(&self) -> EventStore {
        let domain = personal_data::keyed_domain(&self.client, &self.events);
        EventStore::new(self.client.clone(), self.events.clone(), domain)
    }

    /// A producer appends personal data to `order-1`: with a request id
    /// (its retry answered as the first), at an exact sequence it has not
    /// seen, and wherever the stream stands; and creates `order-2`. Its
    /// requests.
    async fn produce(&self) -> Vec<Call> {
        let created = Append {
            expected: ExpectedSequence::Exact(0),
            request_id: Some("create-order-1".to_owned()),
            ..Append::one("order-1", NewEvent::new("OrderCreated", order("Ada")))
        };
        let producer = self.producer();
        for _ in 0..2 {
            producer.append(created.clone()).await.expect("appended");
        }
        let updated = Append {
            expected: ExpectedSequence::Exact(1),
            ..Append::one("order-1", NewEvent::new("OrderUpdated", order("Ada L.")))
        };
        self.producer()
            .append(updated)
            .await
            .expect("appended at 1");
        let again = Append::one("order-1", NewEvent::new("OrderUpdated", order("Ada")));
        let producer = self.producer();
        producer.append(again).await.expect("appended");
        let alone = Append::one("order-2", NewEvent::new("OrderCreated", order("Bo")));
        producer.append(alone).await.expect("appended");
        self.recorder.take()
    }

    /// The shop's events on its order `order`, as SQS records, read
    /// through the test's own client.
    async fn delivered(&self, order: &str) -> SqsEvent {
        let reader = EventStore::new(self.local.clone(), self.events.clone(), shop::domain());
        let events = reader.read(order, 0, 100).await.expect("the stream");
        let records = events
            .iter()
            .map(|event| message(&format!("m-{order}-{}", event.sequence), order, &event.body))
            .collect();
        batch(records)
    }

    /// `who`'s calls are each allowed by `policy`, on the event store and
    /// on `table` as the template's `logical` table.
    fn assert_allowed(
        &self,
        who: &str,
        policy: &Policy,
        own: Option<(&str, &str)>,
        calls: &[Call],
    ) {
        let mut tables = BTreeMap::from([(self.events.as_str(), "EventsTable")]);
        tables.extend(own);
        assert_allowed(who, policy, &tables, calls);
    }
}

fn at(now: u64) -> Invocation {
    Invocation {
        deadline: None,
        now,
    }
}

fn pair(action: &str, prefix: &str) -> (String, String) {
    (action.to_owned(), prefix.to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_producers_appends_of_personal_data_are_what_its_policy_allows() {
    let stack = Stack::new().await;
    let calls = stack.produce().await;
    let policy = Policy::of_policy(&stack.template, "AppendPersonalDataPolicy");
    stack.assert_allowed("the producer", &policy, None, &calls);
    let seen = made(&calls, &stack.events);
    for (action, prefix) in [
        ("BatchGetItem", "SUBJECT#"),
        ("PutItem", "SUBJECT#"),
        ("PutItem", "STREAM#"),
        ("PutItem", "REQUEST#"),
        ("ConditionCheckItem", "STREAM#"),
        ("Query", "STREAM#"),
    ] {
        assert!(
            seen.contains(&pair(action, prefix)),
            "{action} {prefix}: {seen:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_projector_reads_key_items_as_its_role_allows() {
    let stack = Stack::new().await;
    stack.produce().await;
    let domain = personal_data::keyed_domain(&stack.client, &stack.events);
    let store = DynamoStore::new(stack.client.clone(), stack.projection.clone());
    let runner = Runner::new(domain, store, RunnerConfig::default());
    let now = sequence_guard::lambda::epoch_seconds();
    let report = runner
        .run(&stack.delivered("order-1").await, at(now))
        .await
        .expect("a batch");
    assert_eq!(report.messages.len(), 3, "{report:?}");
    let calls = stack.recorder.take();
    let role = Policy::of_role(&stack.template, "ProjectorRole");
    let own = (stack.projection.as_str(), "ProjectionTable");
    stack.assert_allowed("the projector", &role, Some(own), &calls);
    assert_eq!(
        made(&calls, &stack.events),
        BTreeSet::from([pair("BatchGetItem", "SUBJECT#")])
    );
}

/// The order awaits its payment; then the deadline cancels it, an event
/// appended with the process's state.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_payments_process_appends_as_its_role_allows_and_reads_no_key() {
    let stack = Stack::new().await;
    stack.produce().await;
    let payments = fresh_table().await;
    let appends = EventStore::new(stack.client.clone(), stack.events.clone(), shop::domain())
        .with_retry_budget(std::time::Duration::from_secs(2));
    let store = DynamoStore::new(stack.client.clone(), payments.table().to_owned())
        .with_event_store(appends);
    let process = Runner::new(shop::payments::domain(), store, RunnerConfig::default());
    let now = sequence_guard::lambda::epoch_seconds();
    let created = stack.delivered("order-2").await;
    process.run(&created, at(now)).await.expect("a batch");
    // (the index may take a moment to show the deadline)
    let mut fired = 0;
    for _ in 0..50 {
        fired += process.fire_due(&at(now + 7 * 24 * 3600)).await.fired;
        if fired > 0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(fired, 1, "the deadline fired");
    let calls = stack.recorder.take();
    let role = Policy::of_role(&stack.template, "PaymentsProjectorRole");
    let own = (payments.table(), "PaymentsTable");
    stack.assert_allowed("the payments process", &role, Some(own), &calls);
    let seen = made(&calls, &stack.events);
    assert!(seen.contains(&pair("PutItem", "STREAM#")), "{seen:?}");
    assert!(seen.contains(&pair("PutItem", "REQUEST#")), "{seen:?}");
    assert!(
        seen.iter().all(|(_, prefix)| prefix != "SUBJECT#"),
        "{seen:?}"
    );
}

/// `erase`: the key removed, the stream told, the item marked told.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn erase_calls_what_its_policy_allows() {
    let stack = Stack::new().await;
    stack.produce().await;
    let erased = sequence_guard::producer::erase(&stack.producer(), "order-1")
        .await
        .expect("erased");
    assert_eq!(erased.told.len(), 1, "{erased:?}");
    let calls = stack.recorder.take();
    let policy = Policy::of_policy(&stack.template, "EraseToolPolicy");
    stack.assert_allowed("erase", &policy, None, &calls);
    let seen = made(&calls, &stack.events);
    for (action, prefix) in [
        ("UpdateItem", "SUBJECT#"),
        ("PutItem", "STREAM#"),
        ("PutItem", "REQUEST#"),
    ] {
        assert!(
            seen.contains(&pair(action, prefix)),
            "{action} {prefix}: {seen:?}"
        );
    }
}
