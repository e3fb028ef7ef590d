//! The domain: items, made by `sequence-guard new` to start from. Rename
//! them, or replace them with yours; the binaries (`src/bin/`), the
//! template and the build script need no change.
//!
//! | event         | handled as | handler |
//! | ------------- | ---------- | ------- |
//! | `ItemCreated` | sequenced, a creation (checks existence) | [`on_item_created`] |
//! | `ItemRenamed` | sequenced (the guard) | [`on_item_renamed`] |
//! | `ItemArchived` | sequenced (the guard) | [`on_item_archived`] |
//! | `ItemViewed`  | a deduplicated effect: `ADD views` on the item's `VIEWS` item | [`on_item_viewed`] |
//!
//! Items, in one partition per item: `ITEM#<aggregateId>` / `STATE`
//! (`sequence`, `lastEventId`, `name`, `archived`) and `ITEM#<itemId>` /
//! `VIEWS` (`views`).
//!
//! [`archiver`] is a process, a second consumer of the same events that
//! reacts with events of its own: it archives an item not renamed for 30
//! days (its own binaries, table and queue; see the README).
//!
//! [`system`] is the whole: the event store and every consumer, as
//! `template.yaml` deploys them (`sequence-guard sync` writes it from
//! `Cargo.toml`); `{{name}}-local` runs it on one machine from a script of
//! `local/`.
//!
//! To add an event type: a variant (with its data struct), a handler, one
//! arm in `handling`. A new entity kind: its struct, its `impl Entity`, and
//! `.entity::<T>()` in [`domain`].

use sequence_guard::limits::Text;
use sequence_guard::{Counter, Decision, Domain, Entity, Events, Handling, Sequenced};
use serde::{Deserialize, Serialize};

pub mod archiver;
pub mod system;

/// The item projection: the item `ITEM#<aggregateId>` / `STATE`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Entity)]
#[serde(rename_all = "camelCase")]
#[entity(kind = "ITEM")]
pub struct Item {
    /// The sequence of the last event applied (the guard's condition reads it).
    pub sequence: u64,
    pub last_event_id: String,
    pub name: String,
    pub archived: bool,
}

/// How often an item was viewed, counted once per `ItemViewed`: an item of
/// its own in the item's partition.
pub const VIEWS: Counter = Counter {
    kind: "ITEM",
    sort_key: "VIEWS",
    attribute: "views",
};

/// The name `ItemViewed` events are deduplicated under.
pub const VIEWS_HANDLER: &str = "ItemViews";

/// `ItemCreated` and `ItemRenamed` data.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Naming {
    pub name: Text<1, 256>,
}

/// `ItemArchived` data: why (a person's reason, or the archiver's).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Reason {
    pub reason: Text<1, 256>,
}

/// `ItemViewed` data: not sequenced; the item is its stream.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct View {
    pub item_id: Text<1, 256>,
}

/// The events, by the envelope's `type`, each with its `data`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(tag = "type", content = "data")]
pub enum ItemEvent {
    ItemCreated(Naming),
    ItemRenamed(Naming),
    ItemArchived(Reason),
    ItemViewed(View),
}

/// The registration: how each event type is handled, and by which handler.
impl Events for ItemEvent {
    fn handling(self) -> Handling {
        match self {
            ItemEvent::ItemCreated(data) => Handling::sequenced(data, on_item_created),
            ItemEvent::ItemRenamed(data) => Handling::sequenced(data, on_item_renamed),
            ItemEvent::ItemArchived(data) => Handling::sequenced(data, on_item_archived),
            ItemEvent::ItemViewed(view) => on_item_viewed(view),
        }
    }
}

/// The domain, registered: its events, its entity kinds and its counter.
/// Every binary of `src/bin/` runs it.
pub fn domain() -> Domain {
    Domain::new::<ItemEvent>().entity::<Item>().counter(&VIEWS)
}

/// `ItemCreated`: a creation checks existence instead of the sequence.
pub fn on_item_created(item: &mut Option<Item>, event: &Sequenced<Naming>) -> Decision {
    if item.is_some() {
        return Decision::Duplicate;
    }
    *item = Some(Item {
        sequence: event.sequence,
        last_event_id: event.event_id.clone(),
        name: event.data.name.to_string(),
        archived: false,
    });
    Decision::Applied
}

/// The guard of an update: the entity, when the event is its next;
/// otherwise the decision (a duplicate, a gap, or not created yet).
pub fn guard<'a, T: Entity, D>(
    entity: &'a mut Option<T>,
    event: &Sequenced<D>,
) -> Result<&'a mut T, Decision> {
    let Some(entity) = entity else {
        return Err(Decision::NotCreated);
    };
    if entity.sequence() != event.sequence - 1 {
        return Err(if entity.sequence() >= event.sequence {
            Decision::Duplicate
        } else {
            Decision::Gap
        });
    }
    Ok(entity)
}

/// `ItemRenamed`: the guard, then the new name.
pub fn on_item_renamed(item: &mut Option<Item>, event: &Sequenced<Naming>) -> Decision {
    let item = match guard(item, event) {
        Ok(item) => item,
        Err(decision) => return decision,
    };
    item.name = event.data.name.to_string();
    item.last_event_id.clone_from(&event.event_id);
    item.sequence = event.sequence;
    Decision::Applied
}

/// `ItemArchived`: the guard, then archived (a rename is still applied).
pub fn on_item_archived(item: &mut Option<Item>, event: &Sequenced<Reason>) -> Decision {
    let item = match guard(item, event) {
        Ok(item) => item,
        Err(decision) => return decision,
    };
    item.archived = true;
    item.last_event_id.clone_from(&event.event_id);
    item.sequence = event.sequence;
    Decision::Applied
}

/// `ItemViewed`: one view added to the item's views, once per event.
pub fn on_item_viewed(view: View) -> Handling {
    Handling::add(VIEWS_HANDLER, &VIEWS, view.item_id, 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use sequence_guard::testkit::{given, when_effect};

    fn at(sequence: u64, name: &str) -> Item {
        Item {
            sequence,
            last_event_id: format!("e{sequence}"),
            name: name.into(),
            archived: false,
        }
    }

    fn created(name: &str) -> ItemEvent {
        ItemEvent::ItemCreated(Naming {
            name: Text::new(name).expect("a valid name"),
        })
    }

    fn renamed(name: &str) -> ItemEvent {
        ItemEvent::ItemRenamed(Naming {
            name: Text::new(name).expect("a valid name"),
        })
    }

    #[test]
    fn the_domain_is_well_declared() {
        if let Err(err) = domain().check() {
            panic!("{err}");
        }
    }

    #[test]
    fn a_creation_creates_the_item_at_its_sequence_once() {
        given(None::<Item>)
            .when("e1", "item-1", 1, created("Lamp"))
            .then(Decision::Applied, Some(at(1, "Lamp")));
        given(Some(at(3, "Desk lamp")))
            .when("e1", "item-1", 1, created("Lamp"))
            .then(Decision::Duplicate, Some(at(3, "Desk lamp")));
    }

    #[test]
    fn a_rename_next_in_line_is_applied_and_moves_the_sequence() {
        given(Some(at(1, "Lamp")))
            .when("e2", "item-1", 2, renamed("Desk lamp"))
            .then(Decision::Applied, Some(at(2, "Desk lamp")));
    }

    #[test]
    fn the_guard_answers_duplicate_gap_and_not_created() {
        given(Some(at(2, "Lamp")))
            .when("e2", "item-1", 2, renamed("Other"))
            .then(Decision::Duplicate, Some(at(2, "Lamp")));
        given(Some(at(2, "Lamp")))
            .when("e4", "item-1", 4, renamed("Other"))
            .then(Decision::Gap, Some(at(2, "Lamp")));
        given(None::<Item>)
            .when("e2", "item-1", 2, renamed("Other"))
            .then(Decision::NotCreated, None);
    }

    #[test]
    fn an_archive_marks_the_item_archived_through_the_guard() {
        let archived = || {
            ItemEvent::ItemArchived(Reason {
                reason: Text::new("sold out").expect("a valid reason"),
            })
        };
        let archived_at = |sequence, name| Item {
            archived: true,
            ..at(sequence, name)
        };
        given(Some(at(1, "Lamp")))
            .when("e2", "item-1", 2, archived())
            .then(Decision::Applied, Some(archived_at(2, "Lamp")));
        given(Some(at(1, "Lamp")))
            .when("e3", "item-1", 3, archived())
            .then(Decision::Gap, Some(at(1, "Lamp")));
    }

    #[test]
    fn a_view_adds_one_to_the_items_views() {
        let view = ItemEvent::ItemViewed(View {
            item_id: Text::new("item-1").expect("a valid id"),
        });
        when_effect(view).adds(&VIEWS, "item-1", 1);
    }

    #[test]
    fn a_body_is_read_as_the_function_reads_it() {
        let body = r#"{"eventId":"e2","type":"ItemRenamed","aggregateId":"item-1","sequence":2,"data":{"name":"Desk lamp"}}"#;
        match given(Some(at(1, "Lamp"))).when_body(&domain(), body) {
            Ok(then) => then.then(Decision::Applied, Some(at(2, "Desk lamp"))),
            Err(refused) => panic!("refused: {refused}"),
        }
        let nameless = r#"{"eventId":"e2","type":"ItemRenamed","aggregateId":"item-1","sequence":2,"data":{"name":""}}"#;
        let refused = given(Some(at(1, "Lamp"))).when_body(&domain(), nameless);
        assert!(refused.is_err(), "an empty name is refused");
    }

    /// The samples of `events/`, by their number.
    const SAMPLES: [(&str, &str); 4] = [
        (
            "01",
            include_str!("../events/01-item-created-and-renamed.json"),
        ),
        ("02", include_str!("../events/02-gap-parked.json")),
        ("03", include_str!("../events/03-gap-closed.json")),
        ("04", include_str!("../events/04-item-archived.json")),
    ];

    #[test]
    fn every_sample_body_is_read_by_the_domain() {
        for (file, sample) in SAMPLES {
            let event: serde_json::Value = serde_json::from_str(sample)
                .unwrap_or_else(|err| panic!("events/{file}: not JSON: {err}"));
            let records = event["Records"].as_array().cloned().unwrap_or_default();
            assert!(!records.is_empty(), "events/{file}: no Records");
            for record in records {
                let body = record["body"].as_str().unwrap_or_default();
                if let Err(refused) = given(None::<Item>).when_body(&domain(), body) {
                    panic!("events/{file}: {body} refused: {refused}");
                }
            }
        }
    }

    #[test]
    fn an_erasure_leaves_no_personal_value_in_clear() {
        // Once events declare personal fields (`Events::personal`), each
        // entity attribute that keeps one must be declared too
        // (`#[entity(personal(..))]`): this folds the samples with every
        // personal value marked, erases each subject, and names the entity
        // and attribute that still holds one.
        let samples = SAMPLES.map(|(_, sample)| sample);
        for domain in [domain(), archiver::domain()] {
            if let Err(leak) = sequence_guard::testkit::check_erasures(&domain, &samples) {
                panic!("{leak}");
            }
        }
    }
}
