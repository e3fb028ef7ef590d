//! Reading message bodies of the worked example: each of its event types
//! parses, and its money is never negative. The envelope's rules and the
//! limits' reasons are the library's (`tests/envelope.rs`).

use sequence_guard::envelope::{Event, InvalidMessage};
use serde_json::{Value, json};

fn parse_body(body: &str) -> Result<Event, InvalidMessage> {
    shop::domain().parse(body)
}

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
fn every_type_parses() {
    let bodies = [
        json!({"eventId":"e","type":"OrderCreated","aggregateId":"o","sequence":1,
               "data":{"customerName":"A","email":"a@x","totalCents":0}}),
        json!({"eventId":"e","type":"OrderCancelled","aggregateId":"o","sequence":3,"data":{"reason":"r"}}),
        json!({"eventId":"e","type":"PaymentReceived","aggregateId":"o","sequence":4,"data":{"amountCents":1}}),
        json!({"eventId":"e","type":"RefundRequested","aggregateId":"o","sequence":5,
               "data":{"amountCents":1,"reason":"order cancelled"}}),
        json!({"eventId":"e","type":"ProductCreated","aggregateId":"p","sequence":1,
               "data":{"name":"Lamp","priceCents":10}}),
        json!({"eventId":"e","type":"ProductPriceChanged","aggregateId":"p","sequence":2,"data":{"priceCents":0}}),
        json!({"eventId":"e","type":"InventoryAdjusted","data":{"sku":"SKU-1","delta":-4}}),
    ];
    let types: Vec<String> = bodies
        .iter()
        .map(|body| {
            parse_body(&body.to_string())
                .expect("valid")
                .type_name()
                .to_owned()
        })
        .collect();
    assert_eq!(
        types,
        [
            "OrderCreated",
            "OrderCancelled",
            "PaymentReceived",
            "RefundRequested",
            "ProductCreated",
            "ProductPriceChanged",
            "InventoryAdjusted"
        ]
    );
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
