//! The event store's DynamoDB stream read as Lambda's event source mapping
//! reads it: from the start, a batch at a time, each record in Lambda's shape.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use aws_sdk_dynamodbstreams::types::ShardIteratorType;
use sequence_guard::store::dynamodb::connect;
use serde_json::{Value, json};

pub fn streams_client(endpoint: &str) -> aws_sdk_dynamodbstreams::Client {
    let config = aws_sdk_dynamodbstreams::config::Builder::new()
        .behavior_version(aws_sdk_dynamodbstreams::config::BehaviorVersion::latest())
        .endpoint_url(endpoint)
        .region(aws_sdk_dynamodbstreams::config::Region::new("us-east-1"))
        .credentials_provider(aws_sdk_dynamodbstreams::config::Credentials::new(
            "local", "local", None, None, "bench",
        ))
        .build();
    aws_sdk_dynamodbstreams::Client::from_conf(config)
}

/// A stream record as Lambda delivers it.
pub fn lambda_record(record: &aws_sdk_dynamodbstreams::types::Record) -> Value {
    let change = record.dynamodb.as_ref();
    let image = |item: Option<&HashMap<String, aws_sdk_dynamodbstreams::types::AttributeValue>>| {
        item.map(|item| {
            serde_json::to_value(serde_dynamo::Item::from(item.clone())).unwrap_or(Value::Null)
        })
    };
    let mut dynamodb = json!({
        "ApproximateCreationDateTime": 0,
        "Keys": image(change.and_then(|c| c.keys.as_ref())),
        "SequenceNumber": change.and_then(|c| c.sequence_number.clone()),
        "SizeBytes": change.and_then(|c| c.size_bytes).unwrap_or(0),
        "StreamViewType": "NEW_IMAGE",
    });
    if let Some(new_image) = image(change.and_then(|c| c.new_image.as_ref())) {
        dynamodb["NewImage"] = new_image;
    }
    json!({
        "eventID": record.event_id,
        "eventName": record.event_name.as_ref().map(|name| name.as_str()),
        "eventVersion": "1.1",
        "eventSource": "aws:dynamodb",
        "awsRegion": "us-east-1",
        "dynamodb": dynamodb,
    })
}

/// Reads the table's stream from its start, `limit` records a batch, and
/// hands each batch to `send` until `done`; answers the `GetRecords` calls
/// made and their time.
pub async fn read_stream<F, Fut>(
    endpoint: &str,
    table: &str,
    limit: i32,
    done: impl Fn() -> bool,
    mut send: F,
) -> (u64, Duration)
where
    F: FnMut(Vec<Value>) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let mut polled = (0, Duration::ZERO);
    let dynamodb = connect(Some(endpoint)).await;
    let streams = streams_client(endpoint);
    let Ok(described) = dynamodb.describe_table().table_name(table).send().await else {
        return polled;
    };
    let Some(arn) = described.table.and_then(|t| t.latest_stream_arn) else {
        return polled;
    };
    let Ok(stream) = streams.describe_stream().stream_arn(&arn).send().await else {
        return polled;
    };
    let shards = stream
        .stream_description
        .and_then(|d| d.shards)
        .unwrap_or_default();
    let Some(shard) = shards.first().and_then(|s| s.shard_id.clone()) else {
        return polled;
    };
    let mut iterator = streams
        .get_shard_iterator()
        .stream_arn(&arn)
        .shard_id(shard)
        .shard_iterator_type(ShardIteratorType::TrimHorizon)
        .send()
        .await
        .ok()
        .and_then(|answer| answer.shard_iterator);
    while let Some(current) = iterator.take() {
        if done() {
            return polled;
        }
        let began = Instant::now();
        let answer = streams
            .get_records()
            .shard_iterator(&current)
            .limit(limit)
            .send()
            .await;
        polled.0 += 1;
        polled.1 += began.elapsed();
        let Ok(answer) = answer else {
            iterator = Some(current);
            continue;
        };
        iterator = answer.next_shard_iterator;
        let records: Vec<Value> = answer
            .records
            .unwrap_or_default()
            .iter()
            .map(lambda_record)
            .collect();
        if records.is_empty() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        } else {
            send(records).await;
        }
    }
    polled
}
