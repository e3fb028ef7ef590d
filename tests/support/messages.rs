//! Messages of the test domain as Lambda delivers them: an SQS FIFO record
//! for a body, a batch, and the bodies of each event type.

use aws_lambda_events::event::sqs::{SqsEvent, SqsMessage};
use serde_json::{Value, json};

/// The name every item is created and updated with: personal data, that
/// no log nor reason may show.
pub const NAME: &str = "Ada Lovelace";

/// An SQS FIFO record as Lambda delivers it (received once).
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

/// A batch of these messages, in order.
pub fn batch(messages: Vec<SqsMessage>) -> SqsEvent {
    let mut event = SqsEvent::default();
    event.records = messages;
    event
}

/// A sequenced event body, its event id `<stream>-<sequence>-<type>`.
pub fn body(event_type: &str, stream: &str, sequence: u64, data: Value) -> String {
    event(
        &format!("{stream}-{sequence}-{event_type}"),
        event_type,
        stream,
        sequence,
        data,
    )
}

/// A sequenced event body with its own event id.
pub fn event(event_id: &str, event_type: &str, stream: &str, sequence: u64, data: Value) -> String {
    json!({
        "eventId": event_id,
        "type": event_type,
        "aggregateId": stream,
        "sequence": sequence,
        "data": data,
    })
    .to_string()
}

/// The data an item event of `event_type` carries at `sequence`: a
/// creation or an update: [`NAME`] and `amount` 100 × `sequence`;
/// `ItemClosed`: `reason <sequence>`; an erasure: the item as subject.
pub fn item_data(event_type: &str, item: &str, sequence: u64) -> Value {
    match event_type {
        "ItemClosed" => json!({ "reason": format!("reason {sequence}") }),
        "PersonalDataErased" => json!({ "subject": item }),
        "ItemTouched" | "Elsewhere" => json!({}),
        _ => json!({ "name": NAME, "amount": 100 * sequence }),
    }
}

/// An item event with its own event id (data: [`item_data`]).
pub fn item_event(event_type: &str, item: &str, sequence: u64, event_id: &str) -> String {
    event(
        event_id,
        event_type,
        item,
        sequence,
        item_data(event_type, item, sequence),
    )
}

/// An item event, its event id derived (data: [`item_data`]).
pub fn item_body(event_type: &str, item: &str, sequence: u64) -> String {
    body(
        event_type,
        item,
        sequence,
        item_data(event_type, item, sequence),
    )
}

/// `TagCreated` at sequence 1: `Lamp`, weight 1000.
pub fn tag_created(tag: &str) -> String {
    body(
        "TagCreated",
        tag,
        1,
        json!({ "label": "Lamp", "weight": 1000 }),
    )
}

/// `TagWeighed` at `sequence`: weight 1000 + `sequence`.
pub fn tag_weighed(tag: &str, sequence: u64) -> String {
    body(
        "TagWeighed",
        tag,
        sequence,
        json!({ "weight": 1000 + sequence }),
    )
}

/// `LevelAdjusted`: unsequenced, `delta` added to `gauge`'s level once.
pub fn level_adjusted(event_id: &str, gauge: &str, delta: i64) -> String {
    json!({
        "eventId": event_id,
        "type": "LevelAdjusted",
        "data": { "gauge": gauge, "delta": delta },
    })
    .to_string()
}
