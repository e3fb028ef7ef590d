//! A corrupt event item: reported to the failure queue by its keys, never its
//! body, and blocking no stream.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_corrupt_event_item_is_reported_and_blocks_no_stream() {
    let mut p = pipeline("corrupt", &Faults::default()).await;
    orders(&p.events, &names("order", 2), 2).await;
    // An event item written by other means than append: its body is not a
    // message (a total that is not a number), and it holds personal data.
    let client = connect(Some(&dynamodb_local().endpoint)).await;
    client
        .put_item()
        .table_name(&p.events_table)
        .item("pk", AttributeValue::S("STREAM#order-bad".to_owned()))
        .item("sk", AttributeValue::S(format!("EVENT#{:020}", 1)))
        .item("eventId", AttributeValue::S("bad-1".to_owned()))
        .item("type", AttributeValue::S("OrderCreated".to_owned()))
        .item("sequence", AttributeValue::N("1".to_owned()))
        .item(
            "body",
            AttributeValue::S(
                json!({"eventId": "bad-1", "type": "OrderCreated", "aggregateId": "order-bad",
                       "sequence": 1, "data": {"customerName": "Marker Personname",
                       "email": "marker@example.com", "totalCents": "lots"}})
                .to_string(),
            ),
        )
        .send()
        .await
        .expect("put");
    orders(&p.events, &names("later", 2), 2).await;
    let polls = p.source.drain(Duration::from_secs(30)).await;
    assert!(
        polls
            .iter()
            .all(|poll| poll.failures.is_empty() && !poll.retried),
        "nothing failed, nothing retried: {polls:?}"
    );
    p.settle().await;
    // rebuild reads every stream's events: it names the corrupt one too.
    p.assert_projection_is_the_fold_but(&["order-bad:1"]).await;
    assert_eq!(p.projected("Applied"), 12.0);
    let reports = bodies(&p.poller.sqs, &p.failure_url).await;
    assert_eq!(reports.len(), 1, "{reports:?}");
    // The report names where and what the item is, and why; never its body
    // or data, which may hold personal data.
    for personal in ["Marker Personname", "marker@example.com", "lots"] {
        assert!(!reports[0].contains(personal), "{}", reports[0]);
    }
    let report: Value = serde_json::from_str(&reports[0]).expect("a JSON report");
    let reason = report["reason"].as_str().unwrap_or_default().to_owned();
    assert!(reason.contains("not a message of the domain"), "{report}");
    assert_eq!(
        report,
        json!({
            "source": "sequence-guard dispatcher",
            "condition": "CorruptEventItem",
            "reason": reason,
            "sequenceNumber": report["sequenceNumber"],
            "eventSourceARN": report["eventSourceARN"],
            "keys": {"pk": "STREAM#order-bad", "sk": format!("EVENT#{:020}", 1)},
            "type": "OrderCreated",
            "version": 1,
            "sequence": 1,
        })
    );
    assert!(report["sequenceNumber"].is_string(), "{report}");
    assert_eq!(p.dispatched("Corrupt"), 1.0);
    let logs = p.dispatcher.output();
    assert!(logs.contains("corrupt event item"), "{logs}");
    assert!(!logs.contains("Marker Personname"), "{logs}");
}
