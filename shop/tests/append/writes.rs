//! What an append writes: the event and the request record, item by item, and
//! no head; several events and the caller's own write in one transaction, all
//! or nothing; a table of the earlier head layout read and appended to.

use super::*;

#[tokio::test]
async fn an_append_writes_the_event_and_the_request_and_no_head() {
    let local = dynamodb_local();
    let store = fresh_store(&local.endpoint).await;
    let mut append = Append::one("order-42", created(1250));
    append.expected = ExpectedSequence::Exact(0);
    append.request_id = Some("req-1".into());
    let appended = store.append(append).await.expect("append");
    assert_eq!(
        (
            appended.stream_id.as_str(),
            appended.sequence,
            appended.duplicate_request
        ),
        ("order-42", 1, false)
    );
    assert_eq!(
        serde_json::to_value(&appended).expect("json"),
        json!({"streamId": "order-42", "sequence": 1, "eventId": appended.event_id, "duplicateRequest": false})
    );
    let items = items(&store, &local.endpoint).await;
    let keys: Vec<(&str, &str)> = items
        .keys()
        .map(|(pk, sk)| (pk.as_str(), sk.as_str()))
        .collect();
    // And the order's (its subject's) data key, its personal values
    // sealed under it.
    assert_eq!(
        keys,
        [
            ("REQUEST#req-1", "REQUEST"),
            ("STREAM#order-42", "EVENT#00000000000000000001"),
            ("SUBJECT#order-42", "KEY"),
        ]
    );
    let event = &items[&(
        "STREAM#order-42".into(),
        "EVENT#00000000000000000001".into(),
    )];
    assert_eq!(event["type"], "OrderCreated");
    assert_eq!(event["eventId"], json!(appended.event_id));
    assert_eq!(event["sequence"], "1");
    let body = personal_data::opened(store.domain(), event["body"].as_str().expect("body")).await;
    assert_eq!(
        body,
        json!({"eventId": appended.event_id, "type": "OrderCreated", "aggregateId": "order-42", "sequence": 1,
               "data": {"customerName": "Ada", "email": "ada@example.com", "totalCents": 1250}})
    );
    let request = &items[&("REQUEST#req-1".into(), "REQUEST".into())];
    assert_eq!(request["streamId"], "order-42");
    assert_eq!(request["sequence"], "1");
    assert_eq!(request["eventId"], json!(appended.event_id));
    assert!(request["expiresAt"].as_str().is_some(), "{request}");
}

#[tokio::test]
async fn several_events_and_the_callers_own_write_go_in_one_transaction() {
    let local = dynamodb_local();
    let store = fresh_store(&local.endpoint).await;
    let business = |condition: Option<&str>| {
        let mut put = Put::builder()
            .table_name(store.table())
            .item("pk", AttributeValue::S("CUSTOMER#ada".into()))
            .item("sk", AttributeValue::S("ORDERS".into()))
            .item("count", AttributeValue::N("1".into()));
        if let Some(condition) = condition {
            put = put.condition_expression(condition);
        }
        TransactWriteItem::builder()
            .put(put.build().expect("put"))
            .build()
    };
    let failing = Append {
        events: vec![created(1), updated(2)],
        writes: vec![business(Some("attribute_exists(pk)"))],
        ..Append::one("order-9", created(1))
    };
    assert_eq!(
        store.append(failing).await,
        Err(AppendError::Condition { index: 0 })
    );
    // All or nothing: no event, no write of the caller's; only the
    // order's data key, made before the transaction to seal its values.
    let left: Vec<(String, String)> = items(&store, &local.endpoint).await.into_keys().collect();
    assert_eq!(
        left,
        [("SUBJECT#order-9".to_owned(), "KEY".to_owned())],
        "all or nothing"
    );
    let append = Append {
        events: vec![created(1), updated(2), updated(3)],
        writes: vec![business(None)],
        ..Append::one("order-9", created(1))
    };
    let appended = store.append(append).await.expect("append");
    assert_eq!((appended.first_sequence, appended.sequence), (1, 3));
    assert_eq!(assert_contiguous(&store, "order-9").await.len(), 3);
    assert!(
        items(&store, &local.endpoint)
            .await
            .contains_key(&("CUSTOMER#ada".into(), "ORDERS".into()))
    );
}

/// A table an earlier release wrote (a HEAD item per stream, updated with
/// its events): the store appends after the last event, ignores the heads,
/// and lists the old streams with the new. A producer of that release
/// beside this one is refused on a stream this one appended to: never a gap,
/// never a duplicate.
#[tokio::test]
async fn a_table_of_the_head_layout_is_read_and_appended_and_an_old_producer_is_refused() {
    let local = dynamodb_local();
    let store = fresh_store(&local.endpoint).await;
    let client = connect(Some(&local.endpoint)).await;
    let old_append = |stream: &str, at: u64| {
        let head = aws_sdk_dynamodb::types::Update::builder()
            .table_name(store.table())
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
                [(":last".to_owned(), AttributeValue::N((at + 1).to_string()))]
                    .into_iter()
                    .chain((at > 0).then(|| (":at".to_owned(), AttributeValue::N(at.to_string()))))
                    .collect(),
            ))
            .build()
            .expect("update");
        let id = format!("old-{stream}-{}", at + 1);
        let body = json!({"eventId": id, "type": "OrderUpdated", "aggregateId": stream, "sequence": at + 1,
            "data": {"customerName": "Ada", "email": "ada@example.com", "totalCents": 1}});
        let event = Put::builder()
            .table_name(store.table())
            .item("pk", AttributeValue::S(format!("STREAM#{stream}")))
            .item("sk", AttributeValue::S(format!("EVENT#{:020}", at + 1)))
            .item("eventId", AttributeValue::S(id))
            .item("type", AttributeValue::S("OrderUpdated".into()))
            .item("sequence", AttributeValue::N((at + 1).to_string()))
            .item("body", AttributeValue::S(body.to_string()))
            .item("appendedAt", AttributeValue::N("1".into()))
            .condition_expression("attribute_not_exists(pk)")
            .build()
            .expect("put");
        client
            .transact_write_items()
            .transact_items(TransactWriteItem::builder().update(head).build())
            .transact_items(TransactWriteItem::builder().put(event).build())
            .send()
    };
    for at in 0..2 {
        old_append("order-old", at).await.expect("the old layout");
    }
    assert_eq!(store.last_sequence("order-old").await.expect("last"), 2);
    let appended = store
        .append(Append::one("order-old", updated(3)))
        .await
        .expect("after the old events");
    assert_eq!(appended.sequence, 3);
    let exact = Append {
        expected: ExpectedSequence::Exact(3),
        ..Append::one("order-old", updated(4))
    };
    assert_eq!(store.append(exact).await.expect("exact").sequence, 4);
    let mut stale = Append::one("order-old", updated(5));
    stale.expected = ExpectedSequence::Exact(2);
    assert_eq!(
        store.append(stale).await,
        Err(AppendError::ExpectedSequence {
            expected: 2,
            current: 4
        })
    );
    // The old producer: its head says 2, its event 3 is taken.
    assert!(old_append("order-old", 2).await.is_err(), "refused");
    // On a stream of this release (no head): event 1 is taken.
    store
        .append(Append::one("order-new", created(1)))
        .await
        .expect("new");
    assert!(old_append("order-new", 0).await.is_err(), "refused");
    assert_eq!(assert_contiguous(&store, "order-old").await.len(), 4);
    assert_eq!(assert_contiguous(&store, "order-new").await.len(), 1);
    let (mut streams, next) = store.streams(None).await.expect("streams");
    streams.sort();
    assert_eq!(
        (streams, next),
        (vec!["order-new".to_owned(), "order-old".to_owned()], None)
    );
}
