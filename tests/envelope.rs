//! Reading message bodies, on the test domain: the envelope's rules, the
//! limits a domain's data types declare (`sequence_guard::limits`), and the
//! reasons a refusal gives. (That the worked example's own types parse,
//! and its money is never negative, is in `shop/tests/envelope.rs`.)

mod support;

use aws_lambda_events::event::sqs::SqsMessage;
use sequence_guard::envelope::{Event, InvalidMessage, MAX_SEQUENCE, Record};
use serde_json::{Value, json};
use support::{LEVEL, LEVEL_HANDLER, domain};

fn parse_body(body: &str) -> Result<Event, InvalidMessage> {
    domain().parse(body)
}

fn item_updated() -> Value {
    json!({
        "eventId": "0f8fad5b-d9cb-469f-a165-70867728950e",
        "type": "ItemUpdated",
        "aggregateId": "item-42",
        "sequence": 2,
        "data": { "name": "Ada Lovelace", "amount": 1250 }
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
    let event = parse_body(&item_updated().to_string()).expect("valid");
    assert_eq!(event.type_name(), "ItemUpdated");
    assert_eq!(event.stream(), "item-42");
    assert_eq!(event.sequence(), Some(2));
    assert_eq!(
        event.entity_key(),
        Some(sequence_guard::EntityKey::of::<support::Item>("item-42"))
    );
    assert_eq!(
        event.handler(),
        "envelope::support::domain::on_item_updated"
    );
}

#[test]
fn unknown_extra_fields_are_ignored() {
    let body = with(item_updated(), &["traceId"], Some(json!("abc")));
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
        error_of("item-42 updated"),
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
        (&["data", "name"][..], "data.name"),
        (&["data", "amount"][..], "data.amount"),
    ] {
        assert_eq!(
            error_of(&with(item_updated(), path, None)),
            InvalidMessage::Missing(field.to_owned()),
            "{path:?}"
        );
        // null counts as missing
        assert_eq!(
            error_of(&with(item_updated(), path, Some(Value::Null))),
            InvalidMessage::Missing(field.to_owned()),
            "{path:?} null"
        );
    }
}

#[test]
fn ill_typed_fields_are_named() {
    for (path, value, field) in [
        (&["eventId"][..], json!(17), "eventId"),
        (&["type"][..], json!(["ItemUpdated"]), "type"),
        (&["aggregateId"][..], json!(42), "aggregateId"),
        (&["sequence"][..], json!("2"), "sequence"),
        (&["sequence"][..], json!(2.5), "sequence"),
        (&["sequence"][..], json!(true), "sequence"),
        (&["data"][..], json!("{}"), "data"),
        (&["data", "name"][..], json!({"first": "Ada"}), "data.name"),
        (&["data", "name"][..], json!(false), "data.name"),
        (&["data", "amount"][..], json!("1250"), "data.amount"),
        (&["data", "amount"][..], json!(12.5), "data.amount"),
    ] {
        match error_of(&with(item_updated(), path, Some(value.clone()))) {
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
        let err = error_of(&with(item_updated(), &["sequence"], Some(bad.clone())));
        assert!(
            matches!(
                err,
                InvalidMessage::Invalid { ref field, .. } if field == "sequence"
            ),
            "{bad}: {err:?}"
        );
    }
    let max = with(
        item_updated(),
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
    assert!(parse_body(&with(item_updated(), &["eventId"], Some(json!(long_id)))).is_ok());
    for (path, value, field) in [
        (&["eventId"][..], json!(""), "eventId"),
        (&["eventId"][..], json!("x".repeat(129)), "eventId"),
        (&["aggregateId"][..], json!(""), "aggregateId"),
        (&["aggregateId"][..], json!("a".repeat(257)), "aggregateId"),
    ] {
        match error_of(&with(item_updated(), path, Some(value))) {
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
    let created = json!({"eventId":"e","type":"TagCreated","aggregateId":"t","sequence":1,
                         "data":{"label":"l","weight":1}});
    let closed = json!({"eventId":"e","type":"ItemClosed","aggregateId":"i","sequence":2,
                        "data":{"reason":"r"}});
    let gauge = json!({"eventId":"e","type":"LevelAdjusted","data":{"gauge":"g","delta":1}});
    let long_gauge = with(gauge, &["data", "gauge"], Some(json!("g".repeat(257))));
    assert_eq!(
        error_of(&long_gauge).to_string(),
        "field `data.gauge` must be 1 to 256 characters, got more than 256"
    );
    for (event, path, field) in [
        (item_updated(), &["data", "name"][..], "data.name"),
        (created, &["data", "label"][..], "data.label"),
        (closed, &["data", "reason"][..], "data.reason"),
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
        item_updated(),
        &["data", "notes"],
        Some(json!({"lines": ["ok", "n".repeat(1025)]})),
    );
    assert_eq!(
        error_of(&notes).to_string(),
        "field `data.notes.lines[1]` must be 0 to 1024 characters, got more than 1024"
    );
    let fits = with(
        item_updated(),
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
            &["data", "amount"][..],
            json!("ada@example.com"),
            "field `data.amount` must be an integer, got a string",
        ),
        (
            &["data", "name"][..],
            json!(5),
            "field `data.name` must be a string, got a number",
        ),
        (
            &["data", "name"][..],
            json!(["ada@example.com"]),
            "field `data.name` must be a string, got an array",
        ),
        (
            &["data", "amount"][..],
            json!(12.5),
            "field `data.amount` must be an integer from -2^63 to 2^63-1, got 12.5",
        ),
        (
            &["data", "name"][..],
            Value::Null,
            "missing field `data.name`",
        ),
    ] {
        let err = error_of(&with(item_updated(), path, Some(value.clone())));
        assert_eq!(err.to_string(), reason, "{path:?} = {value}");
        assert!(!err.to_string().contains("ada@"), "{err}");
    }
    let tricky = with(
        item_updated(),
        &["data", "amount"],
        Some(json!("Ada Lovelace, expected Monday")),
    );
    assert_eq!(
        error_of(&tricky).to_string(),
        "field `data.amount` must be an integer, got a string"
    );
    let key = with(item_updated(), &["data", &"k".repeat(1025)], Some(json!(1)));
    assert_eq!(
        error_of(&key).to_string(),
        "field `data` has a key of more than 1024 characters"
    );
    let level = json!({"eventId":"e","type":"LevelAdjusted","data":{"gauge":"g","delta":"ada@example.com"}});
    assert_eq!(
        error_of(&level.to_string()).to_string(),
        "field `data.delta` must be an integer, got a string"
    );
}

#[test]
fn an_unknown_type_is_named() {
    let err = error_of(&with(item_updated(), &["type"], Some(json!("ItemShipped"))));
    assert_eq!(err, InvalidMessage::UnknownType("ItemShipped".into()));
    // Types are case-sensitive.
    assert!(matches!(
        error_of(&with(item_updated(), &["type"], Some(json!("itemupdated")))),
        InvalidMessage::UnknownType(_)
    ));
}

#[test]
fn inventory_adjusted_rules() {
    let adjusted = json!({"eventId":"e","type":"LevelAdjusted","data":{"gauge":"G-1","delta":-4}});
    let event = parse_body(&adjusted.to_string()).expect("valid");
    let effect = event.deduplicated().expect("a deduplicated effect");
    assert_eq!((effect.id.as_str(), effect.delta), ("G-1", -4));
    assert_eq!((effect.handler, effect.counter), (LEVEL_HANDLER, &LEVEL));
    assert_eq!((event.stream(), event.sequence()), ("G-1", None));
    for (path, value, expected) in [
        (&["sequence"][..], Some(json!(1)), "sequence"),
        (&["data", "gauge"][..], None, "data.gauge"),
        (&["data", "gauge"][..], Some(json!("")), "data.gauge"),
        (
            &["data", "gauge"][..],
            Some(json!("g".repeat(257))),
            "data.gauge",
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
        Record::read(&message, &domain()).is_none(),
        "no message id: cannot be reported"
    );
    message.message_id = Some(String::new());
    assert!(
        Record::read(&message, &domain()).is_none(),
        "an empty message id cannot be reported either"
    );
    message.message_id = Some("m1".into());
    message
        .attributes
        .insert("MessageGroupId".into(), "item-9".into());
    let record = Record::read(&message, &domain()).expect("readable record");
    assert_eq!(record.event.err(), Some(InvalidMessage::NoBody));
    assert_eq!(
        record.stream, "item-9",
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
    message.body = Some(item_updated().to_string());
    let record = Record::read(&message, &domain()).expect("readable");
    assert_eq!(
        (record.stream.as_str(), record.receive_count),
        ("item-42", Some(3))
    );
    message.body = Some(
        json!({"eventId":"e","type":"LevelAdjusted","data":{"gauge":"G-9","delta":1}}).to_string(),
    );
    assert_eq!(
        Record::read(&message, &domain()).expect("readable").stream,
        "G-9"
    );
    // Without a group id (a standard queue), an unreadable record is a stream of its own.
    message.attributes.clear();
    message.body = Some("not json".into());
    assert_eq!(
        Record::read(&message, &domain()).expect("readable").stream,
        "m1"
    );
}
