//! The projectors the naive and idempotency pipelines run in place of the
//! runner: one conditional write per message, and the usual idempotency
//! utility around it.

use aws_sdk_dynamodb::types::AttributeValue;
use serde_json::Value;

/// The naive projector's one conditional write: the order at the event's
/// sequence, if it is at the one before.
pub async fn naive_write(
    client: &aws_sdk_dynamodb::Client,
    table: &str,
    body: &Value,
) -> Result<(), String> {
    let id = body["aggregateId"].as_str().unwrap_or_default();
    let sequence = body["sequence"].as_u64().unwrap_or(0);
    let written = client
        .update_item()
        .table_name(table)
        .key("pk", AttributeValue::S(format!("ORDER#{id}")))
        .key("sk", AttributeValue::S("STATE".to_owned()))
        .update_expression("SET #s = :s, totalCents = :t, lastEventId = :e")
        .condition_expression("attribute_not_exists(#s) OR #s = :p")
        .expression_attribute_names("#s", "sequence")
        .expression_attribute_values(":s", AttributeValue::N(sequence.to_string()))
        .expression_attribute_values(":p", AttributeValue::N((sequence - 1).to_string()))
        .expression_attribute_values(
            ":t",
            AttributeValue::N(body["data"]["totalCents"].to_string()),
        )
        .expression_attribute_values(
            ":e",
            AttributeValue::S(body["eventId"].as_str().unwrap_or_default().to_owned()),
        )
        .send()
        .await;
    match written {
        Ok(_) => Ok(()),
        // Applied before (a redelivery): done.
        Err(err)
            if aws_sdk_dynamodb::error::ProvideErrorMetadata::code(&err)
                == Some("ConditionalCheckFailedException") =>
        {
            Ok(())
        }
        Err(err) => Err(err.to_string()),
    }
}

/// Whether a DynamoDB call failed on its condition.
pub fn condition_failed<E: aws_sdk_dynamodb::error::ProvideErrorMetadata>(err: &E) -> bool {
    err.code() == Some("ConditionalCheckFailedException")
}

/// The usual idempotency utility around the naive projector's write, as a
/// batch handler runs it for each message in turn: the idempotency record
/// put if absent (or expired), the handler's write, the record marked
/// completed. A record already there: the message was handled before.
pub async fn idempotent_write(
    client: &aws_sdk_dynamodb::Client,
    table: &str,
    body: &Value,
) -> Result<(), String> {
    let id = body["eventId"].as_str().unwrap_or_default();
    let key =
        |item: aws_sdk_dynamodb::operation::update_item::builders::UpdateItemFluentBuilder| {
            item.key("pk", AttributeValue::S(format!("IDEMPOTENCY#{id}")))
                .key("sk", AttributeValue::S("IDEMPOTENCY".to_owned()))
        };
    let now = sequence_guard::lambda::epoch_seconds();
    let claimed = client
        .put_item()
        .table_name(table)
        .item("pk", AttributeValue::S(format!("IDEMPOTENCY#{id}")))
        .item("sk", AttributeValue::S("IDEMPOTENCY".to_owned()))
        .item("status", AttributeValue::S("INPROGRESS".to_owned()))
        .item("expiration", AttributeValue::N((now + 3600).to_string()))
        .condition_expression("attribute_not_exists(pk) OR expiration < :now")
        .expression_attribute_values(":now", AttributeValue::N(now.to_string()))
        .send()
        .await;
    match claimed {
        Ok(_) => {}
        Err(err) if condition_failed(&err) => return Ok(()),
        Err(err) => return Err(err.to_string()),
    }
    naive_write(client, table, body).await?;
    key(client.update_item().table_name(table))
        .update_expression("SET #status = :done")
        .expression_attribute_names("#status", "status")
        .expression_attribute_values(":done", AttributeValue::S("COMPLETED".to_owned()))
        .send()
        .await
        .map(|_| ())
        .map_err(|err| err.to_string())
}
