//! The test domain itself (`tests/support/domain.rs`): every shape the
//! suites lean on behaves as its table says.

use super::*;

/// A creation, a pass, an update; a type ignored with and without a
/// sequence; a snapshot, then an older one; an addition: each answered as
/// its handling says, and each entity as its events leave it.
#[tokio::test]
async fn the_test_domain_has_every_shape() {
    let store = FaultyStore::with(Faults::default());
    let runner = Runner::new(domain(), store.clone(), RunnerConfig::default());
    let unsequenced_elsewhere = json!({"eventId": "x-0", "type": "Elsewhere", "data": {}});
    let snapshot = |sequence: u64, weight: u64| {
        body(
            "TagSnapshot",
            "tag-s",
            sequence,
            json!({ "label": "Shelf", "weight": weight }),
        )
    };
    let event = batch(vec![
        message("c1", "item-s", &item_body("ItemCreated", "item-s", 1)),
        message("t2", "item-s", &item_body("ItemTouched", "item-s", 2)),
        message("x3", "item-s", &item_body("ItemClosed", "item-s", 3)),
        message("e5", "else-1", &item_body("Elsewhere", "else-1", 5)),
        message("e0", "else-2", &unsequenced_elsewhere.to_string()),
        message("s4", "tag-s", &snapshot(4, 40)),
        message("s2", "tag-s", &snapshot(2, 20)),
        message("l1", "G-S", &level_adjusted("l1", "G-S", 3)),
    ]);
    let report = runner.run(&event, no_deadline()).await.expect("run");
    assert_eq!(
        outcomes(&report),
        [
            ("c1", Outcome::Applied),
            ("t2", Outcome::Applied),
            ("x3", Outcome::Applied),
            ("e5", Outcome::Ignored),
            ("e0", Outcome::Ignored),
            ("s4", Outcome::Applied),
            ("s2", Outcome::Duplicate),
            ("l1", Outcome::Applied),
        ]
    );
    assert_eq!(
        typed::<Item, _>(&*store, "item-s").await,
        Some(Item {
            sequence: 3,
            last_event_id: "item-s-3-ItemClosed".into(),
            status: ItemStatus::Closed,
            reason: Some("reason 3".into()),
            ..item_at(1)
        }),
        "the pass moved only the guard"
    );
    assert_eq!(
        typed::<Tag, _>(&*store, "tag-s").await,
        Some(Tag {
            sequence: 4,
            last_event_id: "tag-s-4-TagSnapshot".into(),
            label: "Shelf".into(),
            weight: 40,
        })
    );
    assert_eq!(store.counter(&LEVEL, "G-S").await.expect("read"), Some(3));
}
