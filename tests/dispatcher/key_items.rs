//! Personal data's key items (`SUBJECT#<subject>` / `KEY`) live in the
//! event store's table, so their changes come down its stream: created
//! (a binary wrapped key, a string set of streams), a stream added, erased
//! (the key removed, `told` set). The dispatcher sends none of them and
//! reports none as corrupt.

use super::*;

/// A key item's record as Lambda delivers it, with this image.
fn key_record(event_name: &str, seq: u64, image: Value) -> Value {
    let keys = json!({ "pk": { "S": "SUBJECT#ada" }, "sk": { "S": "KEY" } });
    let mut full = keys.clone();
    for (name, value) in image.as_object().unwrap() {
        full[name] = value.clone();
    }
    stream_record(event_name, seq, keys, Some(full))
}

fn key_records() -> Vec<Value> {
    vec![
        key_record(
            "INSERT",
            1,
            json!({
                "wrappedKey": { "B": "AQIDBAUGBwgJCgsMDQ4PEA==" },
                "streams": { "SS": ["ada"] },
                "createdAt": { "N": "1764500000" },
            }),
        ),
        key_record(
            "MODIFY",
            2,
            json!({
                "wrappedKey": { "B": "AQIDBAUGBwgJCgsMDQ4PEA==" },
                "streams": { "SS": ["ada", "order-7"] },
                "createdAt": { "N": "1764500000" },
            }),
        ),
        key_record(
            "MODIFY",
            3,
            json!({
                "streams": { "SS": ["ada", "order-7"] },
                "createdAt": { "N": "1764500000" },
                "erasedAt": { "N": "1764500100" },
                "told": { "BOOL": false },
            }),
        ),
        key_record(
            "INSERT",
            4,
            json!({ "erasedAt": { "N": "1764500200" }, "told": { "BOOL": true } }),
        ),
    ]
}

#[test]
fn each_change_of_a_key_item_is_skipped() {
    for record in key_records() {
        match read(&record, &domain()) {
            Read::Skip(_) => {}
            other => panic!("{other:?} for {record}"),
        }
    }
}

#[tokio::test]
async fn key_items_among_events_send_nothing_report_nothing_and_hold_up_nothing() {
    let mut records = Vec::new();
    for (n, key) in key_records().into_iter().enumerate() {
        records.push(insert(10 + n as u64, "a", n as u64 + 1));
        records.push(key);
    }
    let queue = TestQueue::default();
    let outcome = dispatch(&records, &domain(), &queue, quick(), None).await;
    assert_eq!(outcome.failure, None, "{:?}", outcome.failure_reason);
    assert_eq!(of_stream(&taken(&queue), "a"), [1, 2, 3, 4]);
    assert_eq!(taken(&queue).len(), 4, "only the events are sent");
    assert!(queue.reports.lock().unwrap().is_empty(), "nothing reported");
    assert!(outcome.corrupt.is_empty());
}
