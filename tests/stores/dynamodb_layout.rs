//! On DynamoDB Local only: every item's layout read back raw (entities,
//! dedup records, parked events, conflicts, the index of parked entities), and
//! the sweep moving the one-partition index of an earlier release to its shards.

use super::*;
use aws_lambda_events::event::sqs::SqsMessage;

/// What readers of the table depend on: the contract's keys, attribute names
/// and types, read back raw from DynamoDB Local.
#[tokio::test]
async fn dynamodb_items_have_the_contract_layout() {
    use aws_sdk_dynamodb::types::AttributeValue;
    use std::collections::HashMap;

    let store = fresh_table().await;
    let runner = Runner::new(domain(), store.clone(), RunnerConfig::default());
    let before = now();
    for (messages, expected) in story() {
        let report = runner
            .run(&batch(messages), invocation())
            .await
            .expect("run");
        assert_eq!(outcomes(&report), expected);
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

    let closed = item("ITEM#item-42".into(), "STATE").await;
    assert_eq!(
        names(&closed),
        [
            "amount",
            "lastEventId",
            "name",
            "pk",
            "reason",
            "sequence",
            "sk",
            "status"
        ]
    );
    assert_eq!((n(&closed, "sequence"), n(&closed, "amount")), (6, 500));
    assert_eq!(s(&closed, "status"), "CLOSED");
    assert_eq!(s(&closed, "reason"), "customer request");
    let open = item("ITEM#item-200".into(), "STATE").await;
    assert_eq!(s(&open, "status"), "OPEN");
    assert!(!open.contains_key("reason"));

    let tag = item("TAG#tag-7".into(), "STATE").await;
    assert_eq!(
        names(&tag),
        ["label", "lastEventId", "pk", "sequence", "sk", "weight"]
    );
    assert_eq!((n(&tag, "sequence"), n(&tag, "weight")), (3, 1003));

    let level = item("GAUGE#G-LAMP".into(), "LEVEL").await;
    assert_eq!(n(&level, "level"), 7);

    // The dedup record of the first G-LAMP adjustment.
    let record = item("MESSAGE#lamp-1".into(), "HANDLER#Levels").await;
    let handled_at = n(&record, "handledAt");
    assert!(handled_at >= before as i64 && handled_at <= now() as i64);
    assert_eq!(n(&record, "expiresAt"), handled_at + 35 * 24 * 60 * 60);

    // Parked: events 5 and 6 of item-100, listed on its item, and the item in
    // the index of parked entities.
    let waiting = item("ITEM#item-100".into(), "STATE").await;
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
    let parked = parked_batch();
    let sent = parked[0].body.clone().expect("body");
    let pending = item("ITEM#item-100".into(), "PENDING#00000000000000000005").await;
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
    assert_eq!(s(&pending, "eventId"), "item-100-5-ItemUpdated");
    assert_eq!(s(&pending, "type"), "ItemUpdated");
    assert_eq!(Some(s(&pending, "messageId")), parked[0].message_id);
    assert_eq!(n(&pending, "parkedAt"), since);
    // The index's entry, in one of its 16 shards.
    let entries = index_entries(&store, "ITEM#item-100").await;
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
    let closing = closing_batch();
    let report = runner
        .run(&batch(closing.clone()), invocation())
        .await
        .expect("run");
    assert_eq!(outcomes(&report), [Outcome::Applied, Outcome::Conflict]);
    let done = item("ITEM#item-100".into(), "STATE").await;
    assert_eq!(n(&done, "sequence"), 6);
    assert!(!done.contains_key("parked") && !done.contains_key("parkedSince"));
    let inspection = store
        .inspect(&EntityKey::of::<Item>("item-100"))
        .await
        .expect("inspect");
    assert!(inspection.parked.is_empty());
    let conflict = item(
        "ITEM#item-100".into(),
        "CONFLICT#00000000000000000006#item-100-6-other",
    )
    .await;
    assert_eq!(names(&conflict), ["body", "pk", "seenAt", "sk"]);
    assert_eq!(Some(s(&conflict, "body")), closing[1].body.clone());
    assert!(n(&conflict, "seenAt") >= before as i64);
    assert!(
        index_entries(&store, "ITEM#item-100").await.is_empty(),
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
    let runner = Runner::new(domain(), store.clone(), RunnerConfig::default());
    let item = |id: &str, sequence: u64, receives: u32| {
        let mut message = support::message(
            &format!("{id}-{sequence}"),
            id,
            &support::item_event(
                if sequence == 1 {
                    "ItemCreated"
                } else {
                    "ItemUpdated"
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
            .run(&support::batch(vec![item(id, 1, 1)]), at(parked_at))
            .await
            .expect("run");
        runner
            .run(&support::batch(vec![item(id, 3, 3)]), at(parked_at))
            .await
            .expect("run");
    }
    // As the earlier release left them: the entries in `PARKED`, and old-2's
    // gap closed since (its entity has nothing parked, its entry stale).
    for id in ["old-1", "old-2"] {
        let pk = format!("ITEM#{id}");
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
        .run(&support::batch(vec![item("old-2", 2, 1)]), at(parked_at))
        .await
        .expect("run");

    let report = sequence_guard::sweep::sweep(&runner, at(now()))
        .await
        .expect("sweep");
    assert_eq!(report.entities, 1, "{report:?}");
    assert_eq!(report.longest[0].key, EntityKey::of::<Item>("old-1"));
    assert!(report.longest[0].parked_for_seconds >= 600);
    let old_1 = index_entries(&store, "ITEM#old-1").await;
    assert_eq!(old_1.len(), 1, "{old_1:?}");
    assert_ne!(
        old_1[0].get("pk"),
        Some(&AttributeValue::S("PARKED".into()))
    );
    assert_eq!(
        old_1[0].get("parkedSince"),
        Some(&AttributeValue::N(parked_at.to_string()))
    );
    assert!(index_entries(&store, "ITEM#old-2").await.is_empty());
    // Moved once: the next sweep finds the same.
    let again = sequence_guard::sweep::sweep(&runner, at(now()))
        .await
        .expect("sweep");
    assert_eq!(again.entities, 1);
}

/// The batches whose items the layout test reads, each with its outcomes:
/// item-42 closed at 6 and item-200 open, tag-7 at 3, gauge G-LAMP at 7,
/// item-100 at 3 with its events 5 and 6 parked.
fn story() -> Vec<(Vec<SqsMessage>, Vec<Outcome>)> {
    let mut items = vec![message(
        "i42-1",
        "item-42",
        &item_body("ItemCreated", "item-42", 1),
    )];
    for sequence in 2..=5 {
        items.push(message(
            &format!("i42-{sequence}"),
            "item-42",
            &item_body("ItemUpdated", "item-42", sequence),
        ));
    }
    items.push(message(
        "i42-6",
        "item-42",
        &body(
            "ItemClosed",
            "item-42",
            6,
            serde_json::json!({ "reason": "customer request" }),
        ),
    ));
    items.push(message(
        "i200-1",
        "item-200",
        &item_body("ItemCreated", "item-200", 1),
    ));
    let tags = vec![
        message("t7-1", "tag-7", &tag_created("tag-7")),
        message("t7-2", "tag-7", &tag_weighed("tag-7", 2)),
        message("t7-3", "tag-7", &tag_weighed("tag-7", 3)),
    ];
    let levels = vec![
        message("lamp-1", "G-LAMP", &level_adjusted("lamp-1", "G-LAMP", 10)),
        message("lamp-2", "G-LAMP", &level_adjusted("lamp-2", "G-LAMP", -3)),
    ];
    let waiting = (1..=3)
        .map(|sequence| {
            let event_type = if sequence == 1 {
                "ItemCreated"
            } else {
                "ItemUpdated"
            };
            message(
                &format!("i100-{sequence}"),
                "item-100",
                &item_body(event_type, "item-100", sequence),
            )
        })
        .collect();
    use Outcome::*;
    vec![
        (items, vec![Applied; 7]),
        (tags, vec![Applied; 3]),
        (levels, vec![Applied; 2]),
        (waiting, vec![Applied; 3]),
        (parked_batch(), vec![Parked, Parked]),
    ]
}

/// Events 5 and 6 of item-100 (at 3), delivered a third time: parked.
fn parked_batch() -> Vec<SqsMessage> {
    vec![
        delivered(
            message("p5", "item-100", &item_body("ItemUpdated", "item-100", 5)),
            3,
        ),
        delivered(
            message("p6", "item-100", &item_body("ItemClosed", "item-100", 6)),
            3,
        ),
    ]
}

/// Event 4 of item-100, closing the gap, and another event for its
/// sequence 6: a conflict.
fn closing_batch() -> Vec<SqsMessage> {
    vec![
        message("c4", "item-100", &item_body("ItemUpdated", "item-100", 4)),
        message(
            "c6",
            "item-100",
            &item_event("ItemClosed", "item-100", 6, "item-100-6-other"),
        ),
    ]
}
