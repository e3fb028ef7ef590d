//! On DynamoDB Local only: a parked item lost from the table, healed by its
//! resend.

use super::*;

/// A parked event whose item was deleted or damaged by hand cannot be
/// drained: it stays listed, the entity stops before it, and the event
/// itself, sent again, is applied and clears the slot.
#[tokio::test]
async fn a_parked_event_lost_from_the_table_is_healed_by_its_resend() {
    use aws_sdk_dynamodb::types::AttributeValue;

    let store = fresh_table().await;
    let runner = Runner::new(domain(), store.clone(), RunnerConfig::default());
    run(&runner, vec![event("h", 1, 1)]).await;
    let report = run(&runner, vec![event("h", 3, 3), event("h", 4, 3)]).await;
    assert_eq!(outcomes(&report), [Outcome::Parked, Outcome::Parked]);
    let pending = |sequence: u64| {
        (
            AttributeValue::S("ITEM#h".into()),
            AttributeValue::S(format!("PENDING#{sequence:020}")),
        )
    };
    // Event 3's item is deleted, event 4's body damaged.
    let (pk, sk) = pending(3);
    store
        .client()
        .delete_item()
        .table_name(store.table())
        .key("pk", pk)
        .key("sk", sk)
        .send()
        .await
        .expect("DeleteItem");
    let (pk, sk) = pending(4);
    store
        .client()
        .update_item()
        .table_name(store.table())
        .key("pk", pk)
        .key("sk", sk)
        .update_expression("SET body = :garbage")
        .expression_attribute_values(":garbage", AttributeValue::S("{not json".into()))
        .send()
        .await
        .expect("UpdateItem");

    let report = run(&runner, vec![event("h", 2, 1)]).await;
    assert_eq!(outcomes(&report), [Outcome::Applied]);
    assert_eq!(
        sequence(&store, "h").await,
        Some(2),
        "stops before the lost event"
    );
    assert_eq!(report.drained(), 0);

    let report = run(&runner, vec![event("h", 3, 1), event("h", 4, 1)]).await;
    assert_eq!(outcomes(&report), [Outcome::Applied, Outcome::Applied]);
    assert_eq!(sequence(&store, "h").await, Some(4));
    let inspection = inspect(&store, "h").await;
    assert!(inspection.parked.is_empty(), "{inspection:?}");
    assert!(inspection.stored.parking.sequences.is_empty());
}
