//! On DynamoDB Local only: every item's layout read back raw (entities,
//! dedup records, parked events, conflicts, the index of parked entities), and
//! the sweep moving the one-partition index of an earlier release to its shards.

use super::*;

/// What readers of the table depend on: the contract's keys, attribute names
/// and types, read back raw from DynamoDB Local.
#[tokio::test]
async fn dynamodb_items_have_the_contract_layout() {
    use aws_sdk_dynamodb::types::AttributeValue;
    use std::collections::HashMap;

    let store = fresh_table().await;
    let runner = Runner::new(shop::domain(), store.clone(), RunnerConfig::default());
    let before = now();
    // The samples until 11-gap-closed.json, which closes the gap of 10-gap-parked.json.
    let (story, closing_sample) = samples::until_the_gap_closes();
    for (_, json) in story {
        runner.run(&sample(json), invocation()).await.expect("run");
    }
    let item = |pk: String, sk: &str| {
        let store = store.clone();
        let sk = sk.to_owned();
        async move {
            store
                .client()
                .get_item()
                .table_name(store.table())
                .key("pk", AttributeValue::S(pk.clone()))
                .key("sk", AttributeValue::S(sk.clone()))
                .consistent_read(true)
                .send()
                .await
                .expect("GetItem")
                .item
                .unwrap_or_else(|| panic!("no item {pk} / {sk}"))
        }
    };
    let s = |item: &HashMap<String, AttributeValue>, name: &str| match item.get(name) {
        Some(AttributeValue::S(text)) => text.clone(),
        other => panic!("{name}: expected S, got {other:?}"),
    };
    let n = |item: &HashMap<String, AttributeValue>, name: &str| match item.get(name) {
        Some(AttributeValue::N(number)) => number.parse::<i64>().expect("integer"),
        other => panic!("{name}: expected N, got {other:?}"),
    };
    let names = |item: &HashMap<String, AttributeValue>| {
        let mut names: Vec<String> = item.keys().cloned().collect();
        names.sort();
        names
    };

    let order = item("ORDER#order-42".into(), "STATE").await;
    assert_eq!(
        names(&order),
        [
            "cancelReason",
            "customerName",
            "email",
            "lastEventId",
            "pk",
            "sequence",
            "sk",
            "status",
            "totalCents"
        ]
    );
    assert_eq!((n(&order, "sequence"), n(&order, "totalCents")), (6, 2000));
    assert_eq!(s(&order, "status"), "CANCELLED");
    assert_eq!(s(&order, "cancelReason"), "customer request");
    let open = item("ORDER#order-200".into(), "STATE").await;
    assert_eq!(s(&open, "status"), "OPEN");
    assert!(!open.contains_key("cancelReason"));

    let product = item("PRODUCT#product-7".into(), "STATE").await;
    assert_eq!(
        names(&product),
        ["lastEventId", "name", "pk", "priceCents", "sequence", "sk"]
    );
    assert_eq!(
        (n(&product, "sequence"), n(&product, "priceCents")),
        (3, 2999)
    );

    let stock = item("SKU#SKU-LAMP".into(), "STOCK").await;
    assert_eq!(n(&stock, "onHand"), 7);

    // The dedup record of the first SKU-LAMP adjustment.
    let inventory = sample(samples::INVENTORY);
    let body: serde_json::Value =
        serde_json::from_str(inventory.records[0].body.as_deref().expect("body")).expect("json");
    let event_id = body["eventId"].as_str().expect("eventId");
    let record = item(format!("MESSAGE#{event_id}"), "HANDLER#StockOnHand").await;
    let handled_at = n(&record, "handledAt");
    assert!(handled_at >= before as i64 && handled_at <= now() as i64);
    assert_eq!(n(&record, "expiresAt"), handled_at + 35 * 24 * 60 * 60);

    // Parked: events 5 and 6 of order-100, listed on its item, and the item in
    // the index of parked entities.
    let waiting = item("ORDER#order-100".into(), "STATE").await;
    assert_eq!(n(&waiting, "sequence"), 3);
    match waiting.get("parked") {
        Some(AttributeValue::Ns(numbers)) => {
            let mut numbers = numbers.clone();
            numbers.sort();
            assert_eq!(numbers, ["5", "6"]);
        }
        other => panic!("parked: expected NS, got {other:?}"),
    }
    let since = n(&waiting, "parkedSince");
    assert!(since >= before as i64 && since <= now() as i64);
    let parked_sample = sample(samples::GAP_PARKED);
    let sent = parked_sample.records[0].body.clone().expect("body");
    let sent_event: serde_json::Value = serde_json::from_str(&sent).expect("json");
    let pending = item("ORDER#order-100".into(), "PENDING#00000000000000000005").await;
    assert_eq!(
        names(&pending),
        [
            "body",
            "eventId",
            "messageId",
            "parkedAt",
            "pk",
            "sk",
            "type"
        ]
    );
    assert_eq!(s(&pending, "body"), sent, "the body as received");
    assert_eq!(
        s(&pending, "eventId"),
        sent_event["eventId"].as_str().expect("id")
    );
    assert_eq!(s(&pending, "type"), "OrderUpdated");
    assert_eq!(
        Some(s(&pending, "messageId")),
        parked_sample.records[0].message_id
    );
    assert_eq!(n(&pending, "parkedAt"), since);
    // The index's entry, in one of its 16 shards.
    let entries = index_entries(&store, "ORDER#order-100").await;
    assert_eq!(entries.len(), 1, "{entries:?}");
    let index = entries[0].clone();
    let shard = s(&index, "pk");
    assert!(
        shard.len() == "PARKED#0".len() && shard.starts_with("PARKED#"),
        "{shard}"
    );
    assert_eq!(names(&index), ["parkedSince", "pk", "sk"]);
    assert_eq!(n(&index, "parkedSince"), since);

    // The gap closes: drained, and a conflict recorded for sequence 6.
    runner
        .run(&sample(closing_sample), invocation())
        .await
        .expect("run");
    let done = item("ORDER#order-100".into(), "STATE").await;
    assert_eq!(n(&done, "sequence"), 6);
    assert!(!done.contains_key("parked") && !done.contains_key("parkedSince"));
    let inspection = store
        .inspect(&EntityKey::of::<shop::Order>("order-100"))
        .await
        .expect("inspect");
    assert!(inspection.parked.is_empty());
    let closing = sample(closing_sample);
    let conflicting: serde_json::Value =
        serde_json::from_str(closing.records[1].body.as_deref().expect("body")).expect("json");
    let conflict_id = conflicting["eventId"].as_str().expect("eventId");
    let conflict = item(
        "ORDER#order-100".into(),
        &format!("CONFLICT#00000000000000000006#{conflict_id}"),
    )
    .await;
    assert_eq!(names(&conflict), ["body", "pk", "seenAt", "sk"]);
    assert_eq!(Some(s(&conflict, "body")), closing.records[1].body.clone());
    assert!(n(&conflict, "seenAt") >= before as i64);
    assert!(
        index_entries(&store, "ORDER#order-100").await.is_empty(),
        "out of the index once drained"
    );
}

/// The entries of the index of parked entities (any shard, or the one
/// partition of the earlier release) whose sort key is `sk`.
async fn index_entries(
    store: &sequence_guard::store::dynamodb::DynamoStore,
    sk: &str,
) -> Vec<std::collections::HashMap<String, aws_sdk_dynamodb::types::AttributeValue>> {
    use aws_sdk_dynamodb::types::AttributeValue;

    let scan = store
        .client()
        .scan()
        .table_name(store.table())
        .filter_expression("begins_with(pk, :index) AND sk = :sk")
        .expression_attribute_values(":index", AttributeValue::S("PARKED".into()))
        .expression_attribute_values(":sk", AttributeValue::S(sk.into()))
        .consistent_read(true)
        .send()
        .await
        .expect("Scan");
    scan.items.unwrap_or_default()
}

/// Entries an earlier release wrote in the index's one partition `PARKED`
/// are moved to their shard by the sweep, with their entity's own
/// `parkedSince`; one whose entity has nothing parked any more is deleted.
#[tokio::test]
async fn the_sweep_moves_entries_of_the_one_partition_index_to_their_shards() {
    use aws_sdk_dynamodb::types::AttributeValue;

    let store = fresh_table().await;
    let runner = Runner::new(shop::domain(), store.clone(), RunnerConfig::default());
    let order = |id: &str, sequence: u64, receives: u32| {
        let mut message = support::message(
            &format!("{id}-{sequence}"),
            id,
            &support::order_event(
                if sequence == 1 {
                    "OrderCreated"
                } else {
                    "OrderUpdated"
                },
                id,
                sequence,
                &format!("{id}-{sequence}"),
            ),
        );
        message
            .attributes
            .insert("ApproximateReceiveCount".into(), receives.to_string());
        message
    };
    let parked_at = now() - 600;
    let at = |now| Invocation {
        deadline: None,
        now,
    };
    for id in ["old-1", "old-2"] {
        runner
            .run(&support::batch(vec![order(id, 1, 1)]), at(parked_at))
            .await
            .expect("run");
        runner
            .run(&support::batch(vec![order(id, 3, 3)]), at(parked_at))
            .await
            .expect("run");
    }
    // As the earlier release left them: the entries in `PARKED`, and old-2's
    // gap closed since (its entity has nothing parked, its entry stale).
    for id in ["old-1", "old-2"] {
        let pk = format!("ORDER#{id}");
        let entry = index_entries(&store, &pk).await.remove(0);
        store
            .client()
            .delete_item()
            .table_name(store.table())
            .set_key(Some(
                entry
                    .iter()
                    .filter(|(name, _)| *name == "pk" || *name == "sk")
                    .map(|(name, value)| (name.clone(), value.clone()))
                    .collect(),
            ))
            .send()
            .await
            .expect("DeleteItem");
        store
            .client()
            .put_item()
            .table_name(store.table())
            .item("pk", AttributeValue::S("PARKED".into()))
            .item("sk", AttributeValue::S(pk))
            .item("parkedSince", AttributeValue::N(parked_at.to_string()))
            .send()
            .await
            .expect("PutItem");
    }
    runner
        .run(&support::batch(vec![order("old-2", 2, 1)]), at(parked_at))
        .await
        .expect("run");

    let report = sequence_guard::sweep::sweep(&runner, at(now()))
        .await
        .expect("sweep");
    assert_eq!(report.entities, 1, "{report:?}");
    assert_eq!(report.longest[0].key, EntityKey::of::<Order>("old-1"));
    assert!(report.longest[0].parked_for_seconds >= 600);
    let old_1 = index_entries(&store, "ORDER#old-1").await;
    assert_eq!(old_1.len(), 1, "{old_1:?}");
    assert_ne!(
        old_1[0].get("pk"),
        Some(&AttributeValue::S("PARKED".into()))
    );
    assert_eq!(
        old_1[0].get("parkedSince"),
        Some(&AttributeValue::N(parked_at.to_string()))
    );
    assert!(index_entries(&store, "ORDER#old-2").await.is_empty());
    // Moved once: the next sweep finds the same.
    let again = sequence_guard::sweep::sweep(&runner, at(now()))
        .await
        .expect("sweep");
    assert_eq!(again.entities, 1);
}
