//! Reading one SQS record: its identity, its stream and its typed event.
//!
//! Each record is read on its own; a record that cannot be read yields an
//! [`InvalidMessage`] naming what was wrong, and nothing else.

use aws_lambda_events::event::sqs::SqsMessage;
use serde_json::{Map, Value};

use crate::domain::Event;
use crate::domain::event::{
    InventoryAdjusted, NewProduct, OrderCancellation, OrderDetails, PriceChange, Sequenced,
};

/// Largest `sequence` the contract allows: 2^63-1.
pub const MAX_SEQUENCE: u64 = i64::MAX as u64;

/// The event types of the contract.
pub const EVENT_TYPES: [&str; 6] = [
    "OrderCreated",
    "OrderUpdated",
    "OrderCancelled",
    "ProductCreated",
    "ProductPriceChanged",
    "InventoryAdjusted",
];

/// Why a message body was not accepted. These never heal by retrying.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidMessage {
    #[error("the record has no body")]
    NoBody,
    #[error("the body is not JSON: {0}")]
    NotJson(String),
    #[error("the body is not a JSON object")]
    NotAnObject,
    #[error("missing field `{0}`")]
    Missing(&'static str),
    #[error("field `{field}` {problem}")]
    Invalid {
        field: &'static str,
        problem: String,
    },
    #[error("unknown event type `{0}`")]
    UnknownType(String),
}

fn invalid(field: &'static str, problem: impl Into<String>) -> InvalidMessage {
    InvalidMessage::Invalid {
        field,
        problem: problem.into(),
    }
}

/// One record of a batch, read.
#[derive(Debug, Clone)]
pub struct Record {
    pub message_id: String,
    /// The stream the record belongs to: the event's aggregate id (the sku for
    /// `InventoryAdjusted`), or the `MessageGroupId` when the body could not be
    /// read (the message id when there is none either).
    pub stream: String,
    /// `ApproximateReceiveCount`, when SQS gave it.
    pub receive_count: Option<u32>,
    pub event: Result<Event, InvalidMessage>,
}

impl Record {
    /// Reads a record. `None` when it has no message id: such a record cannot
    /// be reported failed on its own.
    pub fn read(message: &SqsMessage) -> Option<Record> {
        let message_id = message
            .message_id
            .as_deref()
            .filter(|id| !id.is_empty())?
            .to_owned();
        let event = match message.body.as_deref() {
            None => Err(InvalidMessage::NoBody),
            Some(body) => parse_body(body),
        };
        let stream = match &event {
            Ok(event) => event.stream().to_owned(),
            Err(_) => message
                .attributes
                .get("MessageGroupId")
                .filter(|group| !group.is_empty())
                .cloned()
                .unwrap_or_else(|| message_id.clone()),
        };
        let receive_count = message
            .attributes
            .get("ApproximateReceiveCount")
            .and_then(|count| count.parse().ok());
        Some(Record {
            message_id,
            stream,
            receive_count,
            event,
        })
    }
}

/// Parses and checks one message body against the contract's field table.
pub fn parse_body(body: &str) -> Result<Event, InvalidMessage> {
    let value: Value =
        serde_json::from_str(body).map_err(|err| InvalidMessage::NotJson(err.to_string()))?;
    let Value::Object(envelope) = value else {
        return Err(InvalidMessage::NotAnObject);
    };
    let event_id = string(&envelope, "eventId", 128)?.to_owned();
    let event_type = match envelope.get("type") {
        None | Some(Value::Null) => return Err(InvalidMessage::Missing("type")),
        Some(Value::String(event_type)) => event_type.as_str(),
        Some(_) => return Err(invalid("type", "must be a string")),
    };
    if !EVENT_TYPES.contains(&event_type) {
        return Err(InvalidMessage::UnknownType(
            event_type.chars().take(64).collect(),
        ));
    }
    let data = match envelope.get("data") {
        None | Some(Value::Null) => return Err(InvalidMessage::Missing("data")),
        Some(Value::Object(data)) => data,
        Some(_) => return Err(invalid("data", "must be an object")),
    };

    if event_type == "InventoryAdjusted" {
        if envelope
            .get("sequence")
            .is_some_and(|sequence| !sequence.is_null())
        {
            return Err(invalid("sequence", "must be absent for InventoryAdjusted"));
        }
        if envelope.get("aggregateId").is_some_and(|id| !id.is_null()) {
            string(&envelope, "aggregateId", 256)?;
        }
        return Ok(Event::InventoryAdjusted(InventoryAdjusted {
            event_id,
            sku: data_string(data, "data.sku", "sku", 256)?.to_owned(),
            delta: data_integer(data, "data.delta", "delta")?,
        }));
    }

    let meta = Meta {
        event_id,
        aggregate_id: string(&envelope, "aggregateId", 256)?.to_owned(),
        sequence: sequence(&envelope)?,
    };
    match event_type {
        "OrderCreated" => Ok(Event::OrderCreated(meta.with(order_details(data)?))),
        "OrderUpdated" => Ok(Event::OrderUpdated(meta.with(order_details(data)?))),
        "OrderCancelled" => Ok(Event::OrderCancelled(meta.with(OrderCancellation {
            reason: data_string(data, "data.reason", "reason", usize::MAX)?.to_owned(),
        }))),
        "ProductCreated" => Ok(Event::ProductCreated(meta.with(NewProduct {
            name: data_string(data, "data.name", "name", usize::MAX)?.to_owned(),
            price_cents: data_cents(data, "data.priceCents", "priceCents")?,
        }))),
        "ProductPriceChanged" => Ok(Event::ProductPriceChanged(meta.with(PriceChange {
            price_cents: data_cents(data, "data.priceCents", "priceCents")?,
        }))),
        other => Err(InvalidMessage::UnknownType(
            other.chars().take(64).collect(),
        )),
    }
}

/// The envelope fields of a sequenced event, read before its data.
struct Meta {
    event_id: String,
    aggregate_id: String,
    sequence: u64,
}

impl Meta {
    fn with<T>(self, data: T) -> Sequenced<T> {
        Sequenced {
            event_id: self.event_id,
            aggregate_id: self.aggregate_id,
            sequence: self.sequence,
            data,
        }
    }
}

fn order_details(data: &Map<String, Value>) -> Result<OrderDetails, InvalidMessage> {
    Ok(OrderDetails {
        customer_name: data_string(data, "data.customerName", "customerName", usize::MAX)?
            .to_owned(),
        email: data_string(data, "data.email", "email", usize::MAX)?.to_owned(),
        total_cents: data_cents(data, "data.totalCents", "totalCents")?,
    })
}

/// A required envelope string of 1 to `max` characters.
fn string<'a>(
    object: &'a Map<String, Value>,
    field: &'static str,
    max: usize,
) -> Result<&'a str, InvalidMessage> {
    data_string(object, field, field, max).and_then(|text| {
        if text.is_empty() {
            Err(invalid(field, "must not be empty"))
        } else {
            Ok(text)
        }
    })
}

fn data_string<'a>(
    object: &'a Map<String, Value>,
    field: &'static str,
    key: &str,
    max: usize,
) -> Result<&'a str, InvalidMessage> {
    match object.get(key) {
        None | Some(Value::Null) => Err(InvalidMessage::Missing(field)),
        Some(Value::String(text)) => {
            if max != usize::MAX && (text.is_empty() || text.chars().count() > max) {
                Err(invalid(
                    field,
                    format!(
                        "must be 1 to {max} characters, got {}",
                        text.chars().count()
                    ),
                ))
            } else {
                Ok(text)
            }
        }
        Some(other) => Err(invalid(
            field,
            format!("must be a string, got {}", kind(other)),
        )),
    }
}

fn data_integer(
    object: &Map<String, Value>,
    field: &'static str,
    key: &str,
) -> Result<i64, InvalidMessage> {
    match object.get(key) {
        None | Some(Value::Null) => Err(InvalidMessage::Missing(field)),
        Some(Value::Number(number)) => number.as_i64().ok_or_else(|| {
            invalid(
                field,
                format!("must be an integer from -2^63 to 2^63-1, got {number}"),
            )
        }),
        Some(other) => Err(invalid(
            field,
            format!("must be an integer, got {}", kind(other)),
        )),
    }
}

fn data_cents(
    object: &Map<String, Value>,
    field: &'static str,
    key: &str,
) -> Result<u64, InvalidMessage> {
    let cents = data_integer(object, field, key)?;
    u64::try_from(cents).map_err(|_| invalid(field, format!("must be >= 0, got {cents}")))
}

fn sequence(envelope: &Map<String, Value>) -> Result<u64, InvalidMessage> {
    match envelope.get("sequence") {
        None | Some(Value::Null) => Err(InvalidMessage::Missing("sequence")),
        Some(Value::Number(number)) => match number.as_u64() {
            Some(sequence @ 1..=MAX_SEQUENCE) => Ok(sequence),
            _ => Err(invalid(
                "sequence",
                format!("must be an integer from 1 to 2^63-1, got {number}"),
            )),
        },
        Some(other) => Err(invalid(
            "sequence",
            format!("must be an integer, got {}", kind(other)),
        )),
    }
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}
