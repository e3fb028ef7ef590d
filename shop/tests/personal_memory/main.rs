//! Personal data in the worked example, in memory (no AWS): an order's
//! `customerName` and `email` sealed as `append` seals them, opened by the
//! order projection with its subject's key, and by no other consumer (the
//! status consumer and the payments process read the same body without
//! any key); the subject's erasure through the runner on the embedded
//! store, on each consumer of the order's stream; and the declarations
//! that `Domain::check` refuses.

#[path = "../support/mod.rs"]
mod support;

mod declarations;
mod erasure;
mod reading;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use futures::future::BoxFuture;
use sequence_guard::envelope::InvalidMessage;
use sequence_guard::personal::{
    DataKey, Erasure, KeyError, KeyItem, KeySource, Keyring, LocalKeys, PLACEHOLDER, Personal,
    is_sealed,
};
use sequence_guard::producer::seal_data;
use sequence_guard::runner::{Invocation, Outcome, Runner, RunnerConfig};
use sequence_guard::store::memory::MemoryStore;
use sequence_guard::testkit::given;
use sequence_guard::{Decision, Domain, Entity, EntityKey, Events, Handling};
use serde::Deserialize;
use serde_json::{Value, json};
use shop::events::OrderDetails;
use shop::payments::{Payment, PaymentState};
use shop::status::Status;
use shop::{Order, OrderStatus};
use support::*;

const NAME: &str = "Ada Lovelace";
const EMAIL: &str = "ada@example.com";
const NOW: u64 = 1_800_000_000;

fn invocation() -> Invocation {
    Invocation {
        deadline: None,
        now: NOW,
    }
}

/// The subjects' key items in memory (under a local master key), as the
/// event store's table holds them in AWS.
fn local_keys() -> Arc<LocalKeys> {
    Arc::new(LocalKeys::new().expect("a local master key"))
}

/// A process's keyring over `source`: each process (the producer, each
/// consumer) keeps the keys it read.
fn keyring(source: &Arc<LocalKeys>) -> Arc<Keyring> {
    let source: Arc<dyn KeySource> = source.clone();
    Arc::new(Keyring::shared(source))
}

/// An order event whose `customerName` and `email` are sealed as `append`
/// seals them (`seal_data`, with the producer's keyring): each value's
/// JSON text under the subject's (the order's) key, with the event's id
/// and the field's name as associated data.
async fn sealed(
    producer: &Arc<Keyring>,
    event_type: &str,
    order: &str,
    sequence: u64,
    name: &str,
    total_cents: u64,
) -> String {
    let event_id = format!("{order}-{sequence}");
    let mut data = json!({ "customerName": name, "email": EMAIL, "totalCents": total_cents });
    let domain = shop::domain().with_keys(producer.clone());
    seal_data(&domain, order, &event_id, event_type, &mut data)
        .await
        .expect("sealed");
    let body = json!({
        "eventId": event_id,
        "type": event_type,
        "aggregateId": order,
        "sequence": sequence,
        "data": data,
    })
    .to_string();
    assert!(!body.contains(name) && !body.contains(EMAIL), "{body}");
    body
}

/// The same, sealed by hand as the engine documents it: the subject's key
/// (`Keyring::for_append`), and `DataKey::seal` of each value's JSON text
/// with `eventId \0 field` as associated data.
/// How a value is sealed by hand.
#[derive(Clone, Copy)]
enum Format {
    /// `sg:pd2:`: the associated data binds the event, the field, the
    /// stream and the subject, each with its length (docs/personal-data.md).
    Now,
    /// `sg:pd1:`, an earlier release's: the event's id and the field only.
    Earlier,
}

async fn by_hand(
    producer: &Keyring,
    order: &str,
    sequence: u64,
    name: &str,
    format: Format,
) -> String {
    let event_id = format!("{order}-{sequence}");
    let key = producer
        .for_append(order, order)
        .await
        .expect("the subject's key");
    let seal = |field: &str, value: &str| {
        let aad = match format {
            Format::Now => {
                let mut aad = b"sg:pd2\0".to_vec();
                for part in [event_id.as_str(), field, order, order] {
                    aad.extend_from_slice(&(part.len() as u32).to_be_bytes());
                    aad.extend_from_slice(part.as_bytes());
                }
                aad
            }
            Format::Earlier => {
                let mut aad = event_id.as_bytes().to_vec();
                aad.push(0);
                aad.extend_from_slice(field.as_bytes());
                aad
            }
        };
        let sealed = key
            .seal(&serde_json::to_vec(value).expect("json"), &aad)
            .expect("sealed");
        match format {
            Format::Now => sealed,
            Format::Earlier => sealed.replacen("sg:pd2:", "sg:pd1:", 1),
        }
    };
    json!({
        "eventId": event_id,
        "type": "OrderCreated",
        "aggregateId": order,
        "sequence": sequence,
        "data": {
            "customerName": seal("customerName", name),
            "email": seal("email", EMAIL),
            "totalCents": 1250,
        },
    })
    .to_string()
}

/// The erasure `erase` appends to an order's stream.
fn erasure(order: &str, sequence: u64) -> String {
    json!({
        "eventId": format!("erasure-{order}"),
        "type": "PersonalDataErased",
        "aggregateId": order,
        "sequence": sequence,
        "data": { "subject": order },
    })
    .to_string()
}

fn messages(bodies: &[(&str, &str, &str)]) -> aws_lambda_events::event::sqs::SqsEvent {
    batch(
        bodies
            .iter()
            .map(|(id, group, body)| message(id, group, body))
            .collect(),
    )
}

/// A key source that answers nothing, and counts the calls made to it: a
/// consumer that declares no personal data must make none.
#[derive(Default)]
struct NoKeys {
    calls: AtomicU64,
}

impl NoKeys {
    fn refuse<'a, T: Send + 'a>(&'a self) -> BoxFuture<'a, Result<T, KeyError>> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        Box::pin(async { Err(KeyError::Store("this consumer reads no key".to_owned())) })
    }
}

impl KeySource for NoKeys {
    fn read<'a>(
        &'a self,
        _: &'a [String],
    ) -> BoxFuture<'a, Result<std::collections::HashMap<String, KeyItem>, KeyError>> {
        self.refuse()
    }

    fn unwrap_key<'a>(
        &'a self,
        _: &'a str,
        _: &'a [u8],
    ) -> BoxFuture<'a, Result<DataKey, KeyError>> {
        self.refuse()
    }

    fn create<'a>(
        &'a self,
        _: &'a str,
        _: &'a str,
    ) -> BoxFuture<'a, Result<Result<(Vec<u8>, DataKey), KeyItem>, KeyError>> {
        self.refuse()
    }

    fn add_stream<'a>(&'a self, _: &'a str, _: &'a str) -> BoxFuture<'a, Result<bool, KeyError>> {
        self.refuse()
    }

    fn erase<'a>(&'a self, _: &'a str) -> BoxFuture<'a, Result<Option<KeyItem>, KeyError>> {
        self.refuse()
    }

    fn told<'a>(&'a self, _: &'a str) -> BoxFuture<'a, Result<(), KeyError>> {
        self.refuse()
    }

    fn kms_requests(&self) -> u64 {
        self.calls.load(Ordering::Relaxed)
    }
}
