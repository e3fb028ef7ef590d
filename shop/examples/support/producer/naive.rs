//! The naive producer most teams write (a counter `ADD`, then a `PutItem`
//! of the event), and the check of a stream for the gaps and duplicates
//! that faults leave in it.

use std::collections::{BTreeMap, HashSet};

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValue};

/// The naive producer: `ADD` the head, then put the event at the sequence it
/// answered. A caller retries the whole command when either fails.
pub async fn naive_append(
    client: &Client,
    table: &str,
    stream: &str,
    event_id: &str,
) -> Result<(), String> {
    let output = client
        .update_item()
        .table_name(table)
        .key("pk", AttributeValue::S(format!("STREAM#{stream}")))
        .key("sk", AttributeValue::S("HEAD".into()))
        .update_expression("ADD #s :one")
        .expression_attribute_names("#s", "sequence")
        .expression_attribute_values(":one", AttributeValue::N("1".into()))
        .return_values(ReturnValue::UpdatedNew)
        .send()
        .await
        .map_err(|err| err.to_string())?;
    let sequence: u64 = match output
        .attributes
        .as_ref()
        .and_then(|item| item.get("sequence"))
    {
        Some(AttributeValue::N(number)) => number.parse().map_err(|_| "sequence".to_owned())?,
        _ => return Err("no sequence".into()),
    };
    client
        .put_item()
        .table_name(table)
        .item("pk", AttributeValue::S(format!("STREAM#{stream}")))
        .item("sk", AttributeValue::S(format!("EVENT#{sequence:020}")))
        .item("eventId", AttributeValue::S(event_id.into()))
        .item("sequence", AttributeValue::N(sequence.to_string()))
        .send()
        .await
        .map_err(|err| err.to_string())?;
    Ok(())
}

/// Gaps (sequences up to the head with no event) and duplicates (events
/// stored more than once) in a stream, read without faults.
pub async fn gaps_and_duplicates(client: &Client, table: &str, stream: &str) -> (u64, u64) {
    let mut events: BTreeMap<u64, String> = BTreeMap::new();
    let mut head = 0;
    let mut start = None;
    loop {
        let Ok(output) = client
            .query()
            .table_name(table)
            .key_condition_expression("pk = :pk")
            .expression_attribute_values(":pk", AttributeValue::S(format!("STREAM#{stream}")))
            .consistent_read(true)
            .set_exclusive_start_key(start)
            .send()
            .await
        else {
            return (u64::MAX, u64::MAX);
        };
        for item in output.items.unwrap_or_default() {
            let number = |name: &str| match item.get(name) {
                Some(AttributeValue::N(n)) => n.parse::<u64>().ok(),
                _ => None,
            };
            match item.get("sk") {
                Some(AttributeValue::S(sk)) if sk == "HEAD" => {
                    head = number("sequence").unwrap_or(0)
                }
                _ => {
                    if let (Some(sequence), Some(AttributeValue::S(id))) =
                        (number("sequence"), item.get("eventId"))
                    {
                        events.insert(sequence, id.clone());
                    }
                }
            }
        }
        start = output.last_evaluated_key;
        if start.is_none() {
            break;
        }
    }
    let gaps = (1..=head)
        .filter(|sequence| !events.contains_key(sequence))
        .count() as u64;
    let distinct: HashSet<&String> = events.values().collect();
    (gaps, (events.len() - distinct.len()) as u64)
}
