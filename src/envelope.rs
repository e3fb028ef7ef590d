//! Reading one SQS record: its identity, its stream and its typed event.
//!
//! Each record is read on its own; a record that cannot be read yields an
//! [`InvalidMessage`] naming what was wrong, and nothing else.

use aws_lambda_events::event::sqs::SqsMessage;
use serde::Deserialize;
use serde::de::value::MapDeserializer;
use serde_json::{Map, Value};

use crate::domain::Event;
use crate::domain::event::{InventoryAdjusted, Payload, Sequenced};

/// Largest `sequence` the contract allows: 2^63-1.
pub const MAX_SEQUENCE: u64 = i64::MAX as u64;

/// Every string in `data` holds 0 to 1,024 characters (the types may
/// declare less: the sku 1 to 256): an entity, a parked event and a conflict
/// record stay far below DynamoDB's 400 KB item.
pub const MAX_DATA_STRING: usize = 1024;

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
    Missing(String),
    #[error("field `{field}` {problem}")]
    Invalid { field: String, problem: String },
    #[error("unknown event type `{0}`")]
    UnknownType(String),
    /// A string anywhere in `data` (a field the type does not declare
    /// included: it is kept in the body, parked or recorded) over the limit.
    #[error("field `{field}` must be 0 to {max} characters, got more than {max}")]
    TooLong { field: String, max: usize },
}

fn invalid(field: &str, problem: impl Into<String>) -> InvalidMessage {
    InvalidMessage::Invalid {
        field: field.to_owned(),
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
    /// The root of the producer's X-Ray trace (`AWSTraceHeader`'s `Root=`),
    /// when SQS carried one: every log line about the message names it.
    pub trace_id: Option<String>,
    /// The body as received (kept to park the event).
    pub body: String,
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
        let trace_id = message
            .attributes
            .get("AWSTraceHeader")
            .and_then(|header| trace_root(header))
            .map(str::to_owned);
        Some(Record {
            message_id,
            stream,
            receive_count,
            trace_id,
            body: message.body.clone().unwrap_or_default(),
            event,
        })
    }
}

/// The `Root=` of an X-Ray trace header (`Root=1-...;Parent=...;Sampled=1`),
/// when it looks like one (at most 64 characters of `0-9 a-f -`).
fn trace_root(header: &str) -> Option<&str> {
    header
        .split(';')
        .find_map(|part| part.trim().strip_prefix("Root="))
        .filter(|root| {
            !root.is_empty()
                && root.len() <= 64
                && root.chars().all(|c| c.is_ascii_hexdigit() || c == '-')
        })
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
        None | Some(Value::Null) => return Err(missing("type")),
        Some(event_type @ Value::String(_)) => event_type,
        Some(_) => return Err(invalid("type", "must be a string")),
    };
    let data = match envelope.get("data") {
        None | Some(Value::Null) => return Err(missing("data")),
        Some(data @ Value::Object(fields)) => {
            check_strings(fields)?;
            data
        }
        Some(_) => return Err(invalid("data", "must be an object")),
    };
    let payload = payload(event_type, data)?;
    // The envelope of a sequenced event: its aggregate and its sequence.
    let sequenced = |event_id: String| -> Result<Meta, InvalidMessage> {
        Ok(Meta {
            event_id,
            aggregate_id: string(&envelope, "aggregateId", 256)?.to_owned(),
            sequence: sequence(&envelope)?,
        })
    };
    Ok(match payload {
        Payload::OrderCreated(data) => Event::OrderCreated(sequenced(event_id)?.with(data)),
        Payload::OrderUpdated(data) => Event::OrderUpdated(sequenced(event_id)?.with(data)),
        Payload::OrderCancelled(data) => Event::OrderCancelled(sequenced(event_id)?.with(data)),
        Payload::ProductCreated(data) => Event::ProductCreated(sequenced(event_id)?.with(data)),
        Payload::ProductPriceChanged(data) => {
            Event::ProductPriceChanged(sequenced(event_id)?.with(data))
        }
        Payload::InventoryAdjusted(change) => {
            if envelope
                .get("sequence")
                .is_some_and(|sequence| !sequence.is_null())
            {
                return Err(invalid("sequence", "must be absent for InventoryAdjusted"));
            }
            if envelope.get("aggregateId").is_some_and(|id| !id.is_null()) {
                string(&envelope, "aggregateId", 256)?;
            }
            Event::InventoryAdjusted(InventoryAdjusted {
                event_id,
                sku: change.sku,
                delta: change.delta,
            })
        }
    })
}

/// Reads `data` as the event type's payload, through serde and the limits
/// its types declare; a refusal names the field by its path.
fn payload(event_type: &Value, data: &Value) -> Result<Payload, InvalidMessage> {
    let fields = || {
        MapDeserializer::<_, serde_json::Error>::new(
            [("type", event_type), ("data", data)].into_iter(),
        )
    };
    // The common case pays for no path; a refusal is read again with its
    // path, to name the field.
    Payload::deserialize(fields()).or_else(|_| {
        serde_path_to_error::deserialize::<_, Payload>(fields()).map_err(|err| {
            let path = err.path().to_string();
            let message = err.into_inner().to_string();
            refusal(event_type.as_str().unwrap_or_default(), &path, &message)
        })
    })
}

/// serde's error at `path` as a reason. Values are not repeated: a string
/// may be personal data, and the reason is logged.
fn refusal(event_type: &str, path: &str, message: &str) -> InvalidMessage {
    if path == "type" {
        return InvalidMessage::UnknownType(event_type.chars().take(64).collect());
    }
    if let Some(name) = message
        .strip_prefix("missing field `")
        .and_then(|rest| rest.split('`').next())
    {
        return missing(&format!("{path}.{name}"));
    }
    if let Some(rest) = message.strip_prefix("invalid type: ") {
        // serde's own "expected ..." ends the message; a quoted value may
        // hold the same words, so split at the last one.
        let (unexpected, expected) = rest.rsplit_once(", expected ").unwrap_or((rest, "?"));
        let got = match unexpected.split([' ', '`']).next().unwrap_or_default() {
            "null" | "unit" => return missing(path),
            "string" | "char" => "a string",
            "integer" | "floating" => "a number",
            "boolean" => "a boolean",
            "map" => "an object",
            "sequence" => "an array",
            other => other,
        };
        return invalid(path, format!("must be {expected}, got {got}"));
    }
    if message.starts_with("must be") {
        return invalid(path, message);
    }
    // Any other refusal of serde's, without the value it may quote.
    let expected = message
        .rsplit_once(", expected ")
        .map_or(String::new(), |(_, expected)| {
            format!(": expected {expected}")
        });
    invalid(path, format!("is not valid{expected}"))
}

fn missing(field: &str) -> InvalidMessage {
    InvalidMessage::Missing(field.to_owned())
}

/// The envelope fields of a sequenced event.
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

/// A required envelope string of 1 to `max` characters.
fn string<'a>(
    object: &'a Map<String, Value>,
    field: &'static str,
    max: usize,
) -> Result<&'a str, InvalidMessage> {
    bounded_string(object, field, (1, max))
}

/// Every string in `data`, however deep and whether declared or not, holds
/// at most [`MAX_DATA_STRING`] characters; the first one over it is named
/// by its path (`data.notes`, `data.lines[2].label`).
fn check_strings(data: &Map<String, Value>) -> Result<(), InvalidMessage> {
    /// The path, innermost first, to the first string over the limit.
    fn too_long(value: &Value) -> Option<Vec<String>> {
        match value {
            // Bytes bound characters: most strings need no counting.
            Value::String(text) => (text.len() > MAX_DATA_STRING
                && text.chars().take(MAX_DATA_STRING + 1).count() > MAX_DATA_STRING)
                .then(Vec::new),
            Value::Object(object) => object.iter().find_map(|(key, value)| {
                if key.len() > MAX_DATA_STRING
                    && key.chars().take(MAX_DATA_STRING + 1).count() > MAX_DATA_STRING
                {
                    return Some(vec![" (a key in it over the limit)".to_owned()]);
                }
                let mut path = too_long(value)?;
                path.push(format!(".{key}"));
                Some(path)
            }),
            Value::Array(items) => items.iter().enumerate().find_map(|(index, value)| {
                let mut path = too_long(value)?;
                path.push(format!("[{index}]"));
                Some(path)
            }),
            _ => None,
        }
    }
    for (key, value) in data {
        if key.chars().take(MAX_DATA_STRING + 1).count() > MAX_DATA_STRING {
            // Named without itself: a key is as long, and may hold anything.
            return Err(invalid(
                "data",
                format!("has a key of more than {MAX_DATA_STRING} characters"),
            ));
        }
        if let Some(inner) = too_long(value) {
            let mut field = format!("data.{key}");
            for segment in inner.iter().rev() {
                field.push_str(segment);
            }
            return Err(InvalidMessage::TooLong {
                field,
                max: MAX_DATA_STRING,
            });
        }
    }
    Ok(())
}

/// A required string of `min` to `max` characters.
fn bounded_string<'a>(
    object: &'a Map<String, Value>,
    field: &str,
    (min, max): (usize, usize),
) -> Result<&'a str, InvalidMessage> {
    match object.get(field) {
        None | Some(Value::Null) => Err(missing(field)),
        Some(Value::String(text)) => {
            let count = text.chars().take(max + 1).count();
            if count < min || count > max {
                let got = if count > max {
                    format!("more than {max}")
                } else {
                    count.to_string()
                };
                Err(invalid(
                    field,
                    format!("must be {min} to {max} characters, got {got}"),
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

fn sequence(envelope: &Map<String, Value>) -> Result<u64, InvalidMessage> {
    match envelope.get("sequence") {
        None | Some(Value::Null) => Err(missing("sequence")),
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn order_updated() -> Value {
        json!({
            "eventId": "0f8fad5b-d9cb-469f-a165-70867728950e",
            "type": "OrderUpdated",
            "aggregateId": "order-42",
            "sequence": 2,
            "data": { "customerName": "Ada Lovelace", "email": "ada@example.com", "totalCents": 1250 }
        })
    }

    fn with(mut body: Value, path: &[&str], value: Option<Value>) -> String {
        let (last, parents) = path.split_last().expect("a path");
        let mut object = &mut body;
        for key in parents {
            object = &mut object[*key];
        }
        let map = object.as_object_mut().expect("an object");
        match value {
            Some(value) => map.insert((*last).to_owned(), value),
            None => map.remove(*last),
        };
        body.to_string()
    }

    fn error_of(body: &str) -> InvalidMessage {
        parse_body(body).expect_err("must be rejected")
    }

    #[test]
    fn the_contract_example_parses_to_its_typed_event() {
        let event = parse_body(&order_updated().to_string()).expect("valid");
        let Event::OrderUpdated(event) = event else {
            panic!("{event:?}")
        };
        assert_eq!(event.aggregate_id, "order-42");
        assert_eq!(event.sequence, 2);
        assert_eq!(event.data.total_cents, 1250);
        assert_eq!(event.data.email, "ada@example.com");
    }

    #[test]
    fn every_type_parses() {
        let bodies = [
            json!({"eventId":"e","type":"OrderCreated","aggregateId":"o","sequence":1,
                   "data":{"customerName":"A","email":"a@x","totalCents":0}}),
            json!({"eventId":"e","type":"OrderCancelled","aggregateId":"o","sequence":3,"data":{"reason":"r"}}),
            json!({"eventId":"e","type":"ProductCreated","aggregateId":"p","sequence":1,
                   "data":{"name":"Lamp","priceCents":10}}),
            json!({"eventId":"e","type":"ProductPriceChanged","aggregateId":"p","sequence":2,"data":{"priceCents":0}}),
            json!({"eventId":"e","type":"InventoryAdjusted","data":{"sku":"SKU-1","delta":-4}}),
        ];
        let types: Vec<&str> = bodies
            .iter()
            .map(|body| parse_body(&body.to_string()).expect("valid").type_name())
            .collect();
        assert_eq!(
            types,
            [
                "OrderCreated",
                "OrderCancelled",
                "ProductCreated",
                "ProductPriceChanged",
                "InventoryAdjusted"
            ]
        );
    }

    #[test]
    fn unknown_extra_fields_are_ignored() {
        let body = with(order_updated(), &["traceId"], Some(json!("abc")));
        let body: Value = serde_json::from_str(&body).expect("json");
        let body = with(
            body,
            &["data", "loyaltyTier"],
            Some(json!({"nested": true})),
        );
        assert!(parse_body(&body).is_ok());
    }

    #[test]
    fn a_body_that_is_not_json_is_named_so() {
        assert!(matches!(
            error_of("{\"eventId\": "),
            InvalidMessage::NotJson(_)
        ));
        assert!(matches!(error_of(""), InvalidMessage::NotJson(_)));
        assert!(matches!(
            error_of("order-42 updated"),
            InvalidMessage::NotJson(_)
        ));
    }

    #[test]
    fn a_body_that_is_not_an_object_is_named_so() {
        for body in ["[]", "42", "\"text\"", "null"] {
            assert_eq!(error_of(body), InvalidMessage::NotAnObject, "{body}");
        }
    }

    #[test]
    fn missing_fields_are_named() {
        for (path, field) in [
            (&["eventId"][..], "eventId"),
            (&["type"][..], "type"),
            (&["aggregateId"][..], "aggregateId"),
            (&["sequence"][..], "sequence"),
            (&["data"][..], "data"),
            (&["data", "customerName"][..], "data.customerName"),
            (&["data", "email"][..], "data.email"),
            (&["data", "totalCents"][..], "data.totalCents"),
        ] {
            assert_eq!(
                error_of(&with(order_updated(), path, None)),
                InvalidMessage::Missing(field.to_owned()),
                "{path:?}"
            );
            // null counts as missing
            assert_eq!(
                error_of(&with(order_updated(), path, Some(Value::Null))),
                InvalidMessage::Missing(field.to_owned()),
                "{path:?} null"
            );
        }
    }

    #[test]
    fn ill_typed_fields_are_named() {
        for (path, value, field) in [
            (&["eventId"][..], json!(17), "eventId"),
            (&["type"][..], json!(["OrderUpdated"]), "type"),
            (&["aggregateId"][..], json!(42), "aggregateId"),
            (&["sequence"][..], json!("2"), "sequence"),
            (&["sequence"][..], json!(2.5), "sequence"),
            (&["sequence"][..], json!(true), "sequence"),
            (&["data"][..], json!("{}"), "data"),
            (
                &["data", "customerName"][..],
                json!({"first": "Ada"}),
                "data.customerName",
            ),
            (&["data", "email"][..], json!(false), "data.email"),
            (
                &["data", "totalCents"][..],
                json!("1250"),
                "data.totalCents",
            ),
            (&["data", "totalCents"][..], json!(12.5), "data.totalCents"),
        ] {
            match error_of(&with(order_updated(), path, Some(value.clone()))) {
                InvalidMessage::Invalid { field: named, .. } => {
                    assert_eq!(named, field, "{path:?} = {value}")
                }
                other => panic!("{path:?} = {value}: {other:?}"),
            }
        }
    }

    #[test]
    fn sequence_must_be_from_1_to_2_pow_63_minus_1() {
        for bad in [
            json!(0),
            json!(-1),
            json!(9_223_372_036_854_775_808u64),
            json!(1e30),
        ] {
            let err = error_of(&with(order_updated(), &["sequence"], Some(bad.clone())));
            assert!(
                matches!(
                    err,
                    InvalidMessage::Invalid { ref field, .. } if field == "sequence"
                ),
                "{bad}: {err:?}"
            );
        }
        let max = with(
            order_updated(),
            &["sequence"],
            Some(json!(9_223_372_036_854_775_807u64)),
        );
        assert_eq!(
            parse_body(&max).expect("valid").sequence(),
            Some(MAX_SEQUENCE)
        );
    }

    #[test]
    fn lengths_of_identifiers_are_checked_in_characters() {
        let long_id = "é".repeat(128);
        assert!(parse_body(&with(order_updated(), &["eventId"], Some(json!(long_id)))).is_ok());
        for (path, value, field) in [
            (&["eventId"][..], json!(""), "eventId"),
            (&["eventId"][..], json!("x".repeat(129)), "eventId"),
            (&["aggregateId"][..], json!(""), "aggregateId"),
            (&["aggregateId"][..], json!("a".repeat(257)), "aggregateId"),
        ] {
            match error_of(&with(order_updated(), path, Some(value))) {
                InvalidMessage::Invalid { field: named, .. } => assert_eq!(named, field),
                other => panic!("{path:?}: {other:?}"),
            }
        }
    }

    /// Every string in `data` holds at most 1,024 characters (counted as
    /// characters, not bytes); a longer one makes the message invalid and
    /// names the field. Unbounded, two of them once made an item over 400 KB.
    #[test]
    fn strings_in_data_hold_at_most_1024_characters() {
        let created = json!({"eventId":"e","type":"ProductCreated","aggregateId":"p","sequence":1,
                             "data":{"name":"n","priceCents":1}});
        let cancelled = json!({"eventId":"e","type":"OrderCancelled","aggregateId":"o","sequence":2,
                               "data":{"reason":"r"}});
        let sku = json!({"eventId":"e","type":"InventoryAdjusted","data":{"sku":"s","delta":1}});
        let long_sku = with(sku, &["data", "sku"], Some(json!("s".repeat(257))));
        assert_eq!(
            error_of(&long_sku).to_string(),
            "field `data.sku` must be 1 to 256 characters, got more than 256"
        );
        for (event, path, field) in [
            (
                order_updated(),
                &["data", "customerName"][..],
                "data.customerName",
            ),
            (order_updated(), &["data", "email"][..], "data.email"),
            (created, &["data", "name"][..], "data.name"),
            (cancelled, &["data", "reason"][..], "data.reason"),
        ] {
            let fits = with(event.clone(), path, Some(json!("é".repeat(1024))));
            assert!(parse_body(&fits).is_ok(), "{field}: 1024 characters fit");
            let empty = with(event.clone(), path, Some(json!("")));
            assert!(parse_body(&empty).is_ok(), "{field}: may be empty");
            let long = with(event, path, Some(json!("x".repeat(240 * 1024))));
            let err = error_of(&long);
            assert_eq!(
                err.to_string(),
                format!("field `{field}` must be 0 to 1024 characters, got more than 1024")
            );
        }
    }

    /// Fields the type does not declare are ignored, but kept in the body
    /// (parked, recorded): their strings are held to the same limit.
    #[test]
    fn undeclared_strings_in_data_are_held_to_the_limit_too() {
        let notes = with(
            order_updated(),
            &["data", "notes"],
            Some(json!({"lines": ["ok", "n".repeat(1025)]})),
        );
        assert_eq!(
            error_of(&notes).to_string(),
            "field `data.notes.lines[1]` must be 0 to 1024 characters, got more than 1024"
        );
        let fits = with(
            order_updated(),
            &["data", "notes"],
            Some(json!("n".repeat(1024))),
        );
        assert!(parse_body(&fits).is_ok());
    }

    /// serde's refusals become reasons that name the field and what it
    /// must be, and never repeat a value (a string may be personal data,
    /// and the reason is logged).
    #[test]
    fn reasons_name_the_field_and_repeat_no_value() {
        for (path, value, reason) in [
            (
                &["data", "totalCents"][..],
                json!("ada@example.com"),
                "field `data.totalCents` must be an integer, got a string",
            ),
            (
                &["data", "email"][..],
                json!(5),
                "field `data.email` must be a string, got a number",
            ),
            (
                &["data", "customerName"][..],
                json!(["ada@example.com"]),
                "field `data.customerName` must be a string, got an array",
            ),
            (
                &["data", "totalCents"][..],
                json!(12.5),
                "field `data.totalCents` must be an integer from -2^63 to 2^63-1, got 12.5",
            ),
            (
                &["data", "email"][..],
                Value::Null,
                "missing field `data.email`",
            ),
        ] {
            let err = error_of(&with(order_updated(), path, Some(value.clone())));
            assert_eq!(err.to_string(), reason, "{path:?} = {value}");
            assert!(!err.to_string().contains("ada@"), "{err}");
        }
        let tricky = with(
            order_updated(),
            &["data", "totalCents"],
            Some(json!("Ada Lovelace, expected Monday")),
        );
        assert_eq!(
            error_of(&tricky).to_string(),
            "field `data.totalCents` must be an integer, got a string"
        );
        let key = with(
            order_updated(),
            &["data", &"k".repeat(1025)],
            Some(json!(1)),
        );
        assert_eq!(
            error_of(&key).to_string(),
            "field `data` has a key of more than 1024 characters"
        );
        let stock = json!({"eventId":"e","type":"InventoryAdjusted","data":{"sku":"s","delta":"ada@example.com"}});
        assert_eq!(
            error_of(&stock.to_string()).to_string(),
            "field `data.delta` must be an integer, got a string"
        );
    }

    #[test]
    fn the_producers_trace_root_is_read_from_aws_trace_header() {
        assert_eq!(
            trace_root(
                "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"
            ),
            Some("1-5759e988-bd862e3fe1be46a994272793")
        );
        assert_eq!(
            trace_root("Parent=53995c3f42cd8ad8;Root=1-abc"),
            Some("1-abc")
        );
        assert_eq!(trace_root("Root=<script>"), None);
        assert_eq!(trace_root("Sampled=1"), None);
    }

    #[test]
    fn money_must_not_be_negative() {
        let err = error_of(&with(
            order_updated(),
            &["data", "totalCents"],
            Some(json!(-5)),
        ));
        assert_eq!(
            err.to_string(),
            "field `data.totalCents` must be >= 0, got -5"
        );
        let price = json!({"eventId":"e","type":"ProductPriceChanged","aggregateId":"p","sequence":2,
                           "data":{"priceCents":-1}});
        assert!(matches!(
            error_of(&price.to_string()),
            InvalidMessage::Invalid { ref field, .. } if field == "data.priceCents"
        ));
    }

    #[test]
    fn an_unknown_type_is_named() {
        let err = error_of(&with(
            order_updated(),
            &["type"],
            Some(json!("OrderShipped")),
        ));
        assert_eq!(err, InvalidMessage::UnknownType("OrderShipped".into()));
        // Types are case-sensitive.
        assert!(matches!(
            error_of(&with(
                order_updated(),
                &["type"],
                Some(json!("orderupdated"))
            )),
            InvalidMessage::UnknownType(_)
        ));
    }

    #[test]
    fn inventory_adjusted_rules() {
        let adjusted =
            json!({"eventId":"e","type":"InventoryAdjusted","data":{"sku":"SKU-1","delta":-4}});
        let Ok(Event::InventoryAdjusted(event)) = parse_body(&adjusted.to_string()) else {
            panic!()
        };
        assert_eq!((event.sku.as_str(), event.delta), ("SKU-1", -4));
        for (path, value, expected) in [
            (&["sequence"][..], Some(json!(1)), "sequence"),
            (&["data", "sku"][..], None, "data.sku"),
            (&["data", "sku"][..], Some(json!("")), "data.sku"),
            (
                &["data", "sku"][..],
                Some(json!("s".repeat(257))),
                "data.sku",
            ),
            (&["data", "delta"][..], None, "data.delta"),
            (&["data", "delta"][..], Some(json!(1.5)), "data.delta"),
            (&["data", "delta"][..], Some(json!("3")), "data.delta"),
        ] {
            let err = error_of(&with(adjusted.clone(), path, value));
            let named = match err {
                InvalidMessage::Missing(field) | InvalidMessage::Invalid { field, .. } => field,
                other => panic!("{path:?}: {other:?}"),
            };
            assert_eq!(named, expected, "{path:?}");
        }
    }

    #[test]
    fn a_record_without_a_body_or_message_id() {
        let mut message = SqsMessage::default();
        assert!(
            Record::read(&message).is_none(),
            "no message id: cannot be reported"
        );
        message.message_id = Some(String::new());
        assert!(
            Record::read(&message).is_none(),
            "an empty message id cannot be reported either"
        );
        message.message_id = Some("m1".into());
        message
            .attributes
            .insert("MessageGroupId".into(), "order-9".into());
        let record = Record::read(&message).expect("readable record");
        assert_eq!(record.event, Err(InvalidMessage::NoBody));
        assert_eq!(
            record.stream, "order-9",
            "an unreadable record belongs to its message group"
        );
    }

    #[test]
    fn the_stream_is_the_aggregate_or_the_sku() {
        let mut message = SqsMessage::default();
        message.message_id = Some("m1".into());
        message
            .attributes
            .insert("MessageGroupId".into(), "group-from-sqs".into());
        message
            .attributes
            .insert("ApproximateReceiveCount".into(), "3".into());
        message.body = Some(order_updated().to_string());
        let record = Record::read(&message).expect("readable");
        assert_eq!(
            (record.stream.as_str(), record.receive_count),
            ("order-42", Some(3))
        );
        message.body = Some(
            json!({"eventId":"e","type":"InventoryAdjusted","data":{"sku":"SKU-9","delta":1}})
                .to_string(),
        );
        assert_eq!(Record::read(&message).expect("readable").stream, "SKU-9");
        // Without a group id (a standard queue), an unreadable record is a stream of its own.
        message.attributes.clear();
        message.body = Some("not json".into());
        assert_eq!(Record::read(&message).expect("readable").stream, "m1");
    }
}
