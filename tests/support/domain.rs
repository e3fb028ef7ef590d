//! The engine's test domain: every shape the behaviour suites exercise, and
//! no business rule. The engine never names it; only these tests do.
//!
//! | event             | handled as                                          |
//! | ----------------- | --------------------------------------------------- |
//! | `ItemCreated`     | sequenced, a creation ([`Item`]: checks existence) |
//! | `ItemUpdated`     | sequenced: `name` and `amount` set                  |
//! | `ItemClosed`      | sequenced: `status` `CLOSED`, its `reason`          |
//! | `ItemTouched`     | passed ([`Handling::pass`]): only the guard moves   |
//! | `TagCreated`      | sequenced, a creation ([`Tag`])                     |
//! | `TagWeighed`      | sequenced: `weight` set, `sequence` incremented     |
//! | `TagSnapshot`     | a complete snapshot of a [`Tag`]                    |
//! | `LevelAdjusted`   | unsequenced: `delta` added to [`LEVEL`] once        |
//! | `Elsewhere`       | ignored ([`Handling::ignore`])                      |
//! | `PersonalDataErased` | an item's `name` erased ([`Handling::erase`])    |

use sequence_guard::limits::{integer, non_negative, text};
use sequence_guard::personal::Erasure;
use sequence_guard::{Counter, Decision, Domain, Entity, Events, Handling, Sequenced};
use serde::de::IgnoredAny;
use serde::{Deserialize, Serialize};

/// As the table stores it: `OPEN` or `CLOSED`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ItemStatus {
    Open,
    Closed,
}

/// The item `ITEM#<aggregateId>` / `STATE`: created by one type, updated by
/// others under the guard. Its `name` is personal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Entity)]
#[serde(rename_all = "camelCase")]
#[entity(kind = "ITEM", personal("name"))]
pub struct Item {
    pub sequence: u64,
    pub last_event_id: String,
    pub name: String,
    pub amount: u64,
    pub status: ItemStatus,
    /// Once closed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// The item `TAG#<aggregateId>` / `STATE`: a second entity kind.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Entity)]
#[serde(rename_all = "camelCase")]
#[entity(kind = "TAG")]
pub struct Tag {
    pub sequence: u64,
    pub last_event_id: String,
    pub label: String,
    pub weight: u64,
}

/// A gauge's level: the item `GAUGE#<gauge>` / `LEVEL`, its `level`.
pub const LEVEL: Counter = Counter {
    kind: "GAUGE",
    sort_key: "LEVEL",
    attribute: "level",
};

/// The handler name under which `LevelAdjusted` events are deduplicated.
pub const LEVEL_HANDLER: &str = "Levels";

/// `ItemCreated` and `ItemUpdated` data.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Details {
    #[serde(deserialize_with = "text::<_, 0, 1024>")]
    pub name: String,
    #[serde(deserialize_with = "non_negative")]
    pub amount: u64,
}

/// `ItemClosed` data.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Closing {
    #[serde(deserialize_with = "text::<_, 0, 1024>")]
    pub reason: String,
}

/// `TagCreated` and `TagSnapshot` data.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct NewTag {
    #[serde(deserialize_with = "text::<_, 0, 1024>")]
    pub label: String,
    #[serde(deserialize_with = "non_negative")]
    pub weight: u64,
}

/// `TagWeighed` data.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Weight {
    #[serde(deserialize_with = "non_negative")]
    pub weight: u64,
}

/// `LevelAdjusted` data: the gauge is the event's stream.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Adjustment {
    #[serde(deserialize_with = "text::<_, 1, 256>")]
    pub gauge: String,
    #[serde(deserialize_with = "integer")]
    pub delta: i64,
}

/// The test domain's event types.
#[derive(Debug, Deserialize)]
#[serde(tag = "type", content = "data")]
pub enum TestEvent {
    ItemCreated(Details),
    ItemUpdated(Details),
    ItemClosed(Closing),
    ItemTouched(IgnoredAny),
    TagCreated(NewTag),
    TagWeighed(Weight),
    TagSnapshot(NewTag),
    LevelAdjusted(Adjustment),
    Elsewhere(IgnoredAny),
    PersonalDataErased(Erasure),
}

impl Events for TestEvent {
    fn handling(self) -> Handling {
        match self {
            TestEvent::ItemCreated(data) => Handling::sequenced(data, on_item_created),
            TestEvent::ItemUpdated(data) => Handling::sequenced(data, on_item_updated),
            TestEvent::ItemClosed(data) => Handling::sequenced(data, on_item_closed),
            TestEvent::ItemTouched(_) => Handling::pass::<Item>(),
            TestEvent::TagCreated(data) => Handling::sequenced(data, on_tag_created),
            TestEvent::TagWeighed(data) => Handling::sequenced(data, on_tag_weighed),
            TestEvent::TagSnapshot(data) => Handling::snapshot(data, tag_snapshot),
            TestEvent::LevelAdjusted(data) => {
                Handling::add(LEVEL_HANDLER, &LEVEL, data.gauge, data.delta)
            }
            TestEvent::Elsewhere(_) => Handling::ignore(),
            TestEvent::PersonalDataErased(data) => Handling::erase::<Item>(data),
        }
    }
}

/// The test domain, registered: its events, its two entity kinds, its counter.
pub fn domain() -> Domain {
    Domain::new::<TestEvent>()
        .entity::<Item>()
        .entity::<Tag>()
        .counter(&LEVEL)
}

/// What the guard answers for an update of an entity at `current`.
fn guard(current: u64, event: u64) -> Option<Decision> {
    if current == event - 1 {
        None
    } else if current >= event {
        Some(Decision::Duplicate)
    } else {
        Some(Decision::Gap)
    }
}

fn on_item_created(item: &mut Option<Item>, event: &Sequenced<Details>) -> Decision {
    if item.is_some() {
        return Decision::Duplicate;
    }
    *item = Some(Item {
        sequence: event.sequence,
        last_event_id: event.event_id.clone(),
        name: event.data.name.clone(),
        amount: event.data.amount,
        status: ItemStatus::Open,
        reason: None,
    });
    Decision::Applied
}

fn on_item_updated(item: &mut Option<Item>, event: &Sequenced<Details>) -> Decision {
    let Some(item) = item else {
        return Decision::NotCreated;
    };
    if let Some(decision) = guard(item.sequence, event.sequence) {
        return decision;
    }
    item.name.clone_from(&event.data.name);
    item.amount = event.data.amount;
    item.last_event_id.clone_from(&event.event_id);
    item.sequence = event.sequence;
    Decision::Applied
}

fn on_item_closed(item: &mut Option<Item>, event: &Sequenced<Closing>) -> Decision {
    let Some(item) = item else {
        return Decision::NotCreated;
    };
    if let Some(decision) = guard(item.sequence, event.sequence) {
        return decision;
    }
    item.status = ItemStatus::Closed;
    item.reason = Some(event.data.reason.clone());
    item.last_event_id.clone_from(&event.event_id);
    item.sequence = event.sequence;
    Decision::Applied
}

fn on_tag_created(tag: &mut Option<Tag>, event: &Sequenced<NewTag>) -> Decision {
    if tag.is_some() {
        return Decision::Duplicate;
    }
    *tag = Some(tag_snapshot(event));
    Decision::Applied
}

/// Increments the sequence rather than set it: a second apply of one event
/// shows as a sequence too far.
fn on_tag_weighed(tag: &mut Option<Tag>, event: &Sequenced<Weight>) -> Decision {
    let Some(tag) = tag else {
        return Decision::NotCreated;
    };
    if let Some(decision) = guard(tag.sequence, event.sequence) {
        return decision;
    }
    tag.weight = event.data.weight;
    tag.last_event_id.clone_from(&event.event_id);
    tag.sequence += 1;
    Decision::Applied
}

fn tag_snapshot(event: &Sequenced<NewTag>) -> Tag {
    Tag {
        sequence: event.sequence,
        last_event_id: event.event_id.clone(),
        label: event.data.label.clone(),
        weight: event.data.weight,
    }
}

/// An open item at `sequence`, as [`super::item_event`]'s creation and
/// updates leave it (last event id `e<sequence>`).
pub fn item_at(sequence: u64) -> Item {
    Item {
        sequence,
        last_event_id: format!("e{sequence}"),
        name: super::NAME.to_owned(),
        amount: 100 * sequence,
        status: ItemStatus::Open,
        reason: None,
    }
}

/// A tag at `sequence` (last event id `t<sequence>`).
pub fn tag_at(sequence: u64) -> Tag {
    Tag {
        sequence,
        last_event_id: format!("t{sequence}"),
        label: "Lamp".to_owned(),
        weight: 3999,
    }
}
