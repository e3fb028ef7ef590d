//! On DynamoDB Local only: refusals for good (`ValidationException`, an
//! entity without its `sequence` attribute) told apart from storage errors,
//! and an unreadable entity named without its values.

use super::*;

/// DynamoDB's ValidationException (here: an item over 400 KB, as unbounded
/// strings once made) is a refusal for good, told apart from a storage error,
/// for the single conditional write and for a transaction.
#[tokio::test]
async fn dynamodb_refusals_for_good_are_told_apart_from_storage_errors() {
    use sequence_guard::store::{Commit, Expected, ParkedEvent, StoreError};

    let store = fresh_table().await;
    let mut huge = item_at(1);
    huge.name = "x".repeat(410 * 1024);
    let huge = Keyed::new("huge", huge);
    match store.save(&huge, None).await {
        Err(StoreError::Rejected { operation, message }) => {
            assert_eq!(operation, "UpdateItem");
            assert!(message.contains("ValidationException"), "{message}");
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    let parked = |sequence: u64| ParkedEvent {
        sequence,
        event_id: format!("e{sequence}"),
        event_type: "ItemUpdated".into(),
        body: "y".repeat(420 * 1024),
        message_id: format!("m{sequence}"),
        parked_at: now(),
    };
    let commit = Commit {
        key: EntityKey::of::<Item>("huge"),
        expected: Expected {
            sequence: None,
            parked: Default::default(),
            entity: None,
            due_at: None,
        },
        entity: None,
        park: vec![parked(3)],
        drain: vec![],
        conflicts: vec![],
        now: now(),
        deadline: None,
        outbox: None,
    };
    match store.commit(&commit).await {
        Err(StoreError::Rejected { operation, .. }) => assert_eq!(operation, "TransactWriteItems"),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

/// An entity must be written with its sequence in the attribute `sequence`
/// (the guard's condition reads it there): one that names it otherwise is
/// refused, not written without its guard.
#[tokio::test]
async fn an_entity_without_a_sequence_attribute_is_refused() {
    use sequence_guard::store::StoreError;

    #[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
    struct Misnamed {
        #[serde(rename = "version")]
        sequence: u64,
        last_event_id: String,
    }

    impl sequence_guard::Entity for Misnamed {
        const KIND: &'static str = "MISNAMED";
        fn sequence(&self) -> u64 {
            self.sequence
        }
        fn last_event_id(&self) -> &str {
            &self.last_event_id
        }
    }

    let store = fresh_table().await;
    let entity = Misnamed {
        sequence: 1,
        last_event_id: "e1".into(),
    };
    match store.save(&Keyed::new("m-1", entity), None).await {
        Err(StoreError::Rejected { message, .. }) => {
            assert!(message.contains("in the attribute `sequence`"), "{message}")
        }
        other => panic!("{other:?}"),
    }
}

/// An entity item that cannot be read is named by its key and attribute,
/// never by the value stored there: the reason is logged, and a stored
/// value may be personal data.
#[tokio::test]
async fn an_unreadable_entity_is_told_without_its_values() {
    use aws_sdk_dynamodb::types::AttributeValue;

    let store = fresh_table().await;
    let runner = Runner::new(domain(), store.clone(), RunnerConfig::default());
    store
        .client()
        .put_item()
        .table_name(store.table())
        .item("pk", AttributeValue::S("ITEM#i-1".into()))
        .item("sk", AttributeValue::S("STATE".into()))
        .item("sequence", AttributeValue::N("1".into()))
        .item("lastEventId", AttributeValue::S("e1".into()))
        .item("name", AttributeValue::S("Ada Lovelace".into()))
        .item("amount", AttributeValue::S("ada@example.com".into()))
        .item("status", AttributeValue::S("OPEN".into()))
        .send()
        .await
        .expect("PutItem");
    let loaded = store
        .load(&[EntityKey::of::<Item>("i-1")], &[])
        .await
        .expect("load");
    let message = match loaded.entities.get(&EntityKey::of::<Item>("i-1")) {
        Some(Err(err)) => err.to_string(),
        other => panic!("unreadable, not {other:?}"),
    };
    assert!(
        message.contains("ITEM#i-1") && message.contains("`amount`"),
        "{message}"
    );
    assert!(!message.contains("ada@example.com"), "{message}");
    let batch = support::batch(vec![support::message(
        "m2",
        "i-1",
        &support::item_event("ItemUpdated", "i-1", 2, "e2"),
    )]);
    let report = runner.run(&batch, invocation()).await.expect("run");
    let reason = report.messages[0].reason.clone().unwrap_or_default();
    assert!(reason.contains("`amount`"), "{reason}");
    assert!(
        !reason.contains("ada@example.com") && !reason.contains("1815"),
        "{reason}"
    );
}
