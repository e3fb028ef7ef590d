//! Stream records: the DynamoDB Streams client, a table's stream, and a
//! record as Lambda delivers it to a function.

use super::*;

/// A DynamoDB Streams client for the shared DynamoDB Local, with local
/// credentials in us-east-1.
pub async fn streams_client() -> Client {
    let config = aws_sdk_dynamodbstreams::config::Builder::new()
        .behavior_version(aws_sdk_dynamodbstreams::config::BehaviorVersion::latest())
        .endpoint_url(&dynamodb_local().endpoint)
        .region(aws_sdk_dynamodbstreams::config::Region::new("us-east-1"))
        .credentials_provider(aws_sdk_dynamodbstreams::config::Credentials::new(
            "local", "local", None, None, "local",
        ))
        .build();
    Client::from_conf(config)
}

/// The ARN of `table`'s stream on the shared DynamoDB Local (its
/// `LatestStreamArn`); the table must have a stream, as
/// `ensure_events_table` gives it.
pub async fn stream_arn(table: &str) -> String {
    let client = sequence_guard::store::dynamodb::connect(Some(&dynamodb_local().endpoint)).await;
    client
        .describe_table()
        .table_name(table)
        .send()
        .await
        .expect("DescribeTable")
        .table
        .and_then(|table| table.latest_stream_arn)
        .unwrap_or_else(|| panic!("{table} has no stream"))
}

/// An attribute map as DynamoDB JSON (`{"pk": {"S": "..."}}`).
fn dynamodb_json(map: &HashMap<String, AttributeValue>) -> Value {
    serde_json::to_value(serde_dynamo::Item::from(map.clone())).expect("DynamoDB JSON")
}

/// A stream record as Lambda delivers it to a function.
pub fn lambda_record(record: &Record, stream_arn: &str) -> Value {
    let change = record
        .dynamodb
        .as_ref()
        .expect("a stream record has its change");
    let mut dynamodb = json!({
        "ApproximateCreationDateTime": change.approximate_creation_date_time.map(|at| at.secs()),
        "Keys": change.keys.as_ref().map(dynamodb_json).unwrap_or_else(|| json!({})),
        "SequenceNumber": change.sequence_number,
        "SizeBytes": change.size_bytes,
        "StreamViewType": change.stream_view_type.as_ref().map(|view| view.as_str()),
    });
    if let Some(image) = &change.new_image {
        dynamodb["NewImage"] = dynamodb_json(image);
    }
    if let Some(image) = &change.old_image {
        dynamodb["OldImage"] = dynamodb_json(image);
    }
    let mut lambda = json!({
        "eventID": record.event_id,
        "eventName": record.event_name.as_ref().map(|name| name.as_str()),
        "eventVersion": "1.1",
        "eventSource": "aws:dynamodb",
        "awsRegion": "us-east-1",
        "dynamodb": dynamodb,
        "eventSourceARN": stream_arn,
    });
    if let Some(identity) = &record.user_identity {
        lambda["userIdentity"] = json!({
            "type": identity.r#type,
            "principalId": identity.principal_id,
        });
    }
    lambda
}

/// A record's sequence number.
pub(super) fn sequence(record: &Record) -> String {
    record
        .dynamodb
        .as_ref()
        .and_then(|change| change.sequence_number.clone())
        .expect("a stream record has a sequence number")
}
