//! Today's layout (0.2), the stream's head written with its events, kept
//! to be measured beside the event store's.

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::{
    AttributeValue, ConsumedCapacity, Put, ReturnConsumedCapacity,
    ReturnValuesOnConditionCheckFailure, TransactWriteItem, Update,
};
use sequence_guard::producer::{Consumed, capacity};
use serde_json::json;

use super::units::{Shape, caller_write};

/// Today's layout (0.2): the stream's head and its events in one
/// transaction, the head read first for any sequence; kept here to be
/// measured beside the event store, as the naive producer is.
pub struct HeadLayout {
    pub client: Client,
    pub table: String,
    pub requests: u64,
    pub consumed: Consumed,
}

pub fn reported_sum<'a>(reported: impl IntoIterator<Item = &'a ConsumedCapacity>) -> f64 {
    reported
        .into_iter()
        .filter_map(ConsumedCapacity::capacity_units)
        .sum()
}

impl HeadLayout {
    async fn head(&mut self, stream: &str) -> Result<u64, String> {
        self.requests += 1;
        let output = self
            .client
            .get_item()
            .table_name(&self.table)
            .key("pk", AttributeValue::S(format!("STREAM#{stream}")))
            .key("sk", AttributeValue::S("HEAD".into()))
            .consistent_read(true)
            .return_consumed_capacity(ReturnConsumedCapacity::Total)
            .send()
            .await
            .map_err(|err| err.to_string())?;
        let item = output.item.unwrap_or_default();
        self.consumed.reported.read += reported_sum(output.consumed_capacity.iter());
        self.consumed.by_rules.read += capacity::read_units(capacity::item_bytes(&item));
        Ok(match item.get("sequence") {
            Some(AttributeValue::N(n)) => n.parse().unwrap_or(0),
            _ => 0,
        })
    }

    fn event(&self, stream: &str, sequence: u64, n: u64) -> TransactWriteItem {
        let id = sequence_guard::producer::new_event_id();
        let body = json!({"eventId": id, "type": "OrderUpdated", "aggregateId": stream, "sequence": sequence,
            "data": {"customerName": "Ada", "email": "ada@example.com", "totalCents": n}});
        let put = Put::builder()
            .table_name(&self.table)
            .item("pk", AttributeValue::S(format!("STREAM#{stream}")))
            .item("sk", AttributeValue::S(format!("EVENT#{sequence:020}")))
            .item("eventId", AttributeValue::S(id))
            .item("type", AttributeValue::S("OrderUpdated".into()))
            .item("sequence", AttributeValue::N(sequence.to_string()))
            .item("body", AttributeValue::S(body.to_string()))
            .item("appendedAt", AttributeValue::N("1764547200".into()))
            .condition_expression("attribute_not_exists(pk)");
        TransactWriteItem::builder()
            .put(put.build().expect("a put"))
            .build()
    }

    /// One append as 0.2 sent it: the items written, or 0 when refused or a
    /// duplicate request.
    pub async fn append(&mut self, shape: &Shape, stream: &str, n: u64) -> Result<u64, String> {
        let at = match shape.expected {
            Some(at) => at,
            None => self.head(stream).await?,
        };
        let last = at + shape.events;
        let head = Update::builder()
            .table_name(&self.table)
            .key("pk", AttributeValue::S(format!("STREAM#{stream}")))
            .key("sk", AttributeValue::S("HEAD".into()))
            .update_expression("SET #s = :last")
            .condition_expression(if at == 0 {
                "attribute_not_exists(#s)"
            } else {
                "#s = :at"
            })
            .expression_attribute_names("#s", "sequence")
            .set_expression_attribute_values(Some(
                [(":last".to_owned(), AttributeValue::N(last.to_string()))]
                    .into_iter()
                    .chain((at > 0).then(|| (":at".to_owned(), AttributeValue::N(at.to_string()))))
                    .collect(),
            ))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .build()
            .expect("an update");
        let mut items = vec![TransactWriteItem::builder().update(head).build()];
        for sequence in at + 1..=last {
            items.push(self.event(stream, sequence, n));
        }
        if let Some(request) = &shape.request {
            items.push(request_put(&self.table, request, stream, last));
        }
        if shape.write {
            items.push(caller_write(&self.table, n));
        }
        let written = items.len() as u64;
        let units = capacity::transaction_units(&items);
        self.requests += 1;
        self.consumed.by_rules.write += units;
        match self
            .client
            .transact_write_items()
            .set_transact_items(Some(items))
            .return_consumed_capacity(ReturnConsumedCapacity::Total)
            .send()
            .await
        {
            Ok(output) => {
                self.consumed.reported.write +=
                    reported_sum(output.consumed_capacity.iter().flatten());
                Ok(written)
            }
            Err(err) => {
                let request_failed = format!("{err:?}").matches("ConditionalCheckFailed").count()
                    > 0
                    && shape.request.is_some()
                    && shape.expected.is_none();
                if request_failed {
                    // 0.2 read the request record for the first answer: a
                    // strongly consistent GetItem of a small item, as this.
                    self.head(&format!("request-{n}")).await?;
                }
                Ok(0)
            }
        }
    }
}

pub fn request_put(table: &str, request: &str, stream: &str, last: u64) -> TransactWriteItem {
    let put = Put::builder()
        .table_name(table)
        .item("pk", AttributeValue::S(format!("REQUEST#{request}")))
        .item("sk", AttributeValue::S("REQUEST".into()))
        .item("streamId", AttributeValue::S(stream.into()))
        .item("sequence", AttributeValue::N(last.to_string()))
        .item(
            "eventId",
            AttributeValue::S(sequence_guard::producer::new_event_id()),
        )
        .item("firstSequence", AttributeValue::N(last.to_string()))
        .item("expiresAt", AttributeValue::N("1765152000".into()))
        .condition_expression("attribute_not_exists(pk)");
    TransactWriteItem::builder()
        .put(put.build().expect("a put"))
        .build()
}
