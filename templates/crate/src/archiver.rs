//! A process: a consumer that reacts with events. The archiver follows each
//! item's stream and archives an item not renamed for
//! [`ARCHIVE_AFTER_SECONDS`]: when that deadline passes, it appends
//! `ItemArchived` to the item's stream, which the item projection (and
//! every other consumer) then receives like any event.
//!
//! | on | its state becomes | its deadline | it appends |
//! | --- | --- | --- | --- |
//! | `ItemCreated` | `ACTIVE` | now + 30 days | |
//! | `ItemRenamed` | unchanged | now + 30 days, while `ACTIVE` | |
//! | `ItemArchived` (its own, or a person's) | `ARCHIVED` | cleared | |
//! | the deadline, still `ACTIVE` | `ARCHIVING` | | `ItemArchived`, at the sequence it has seen |
//!
//! Its state and what it appends are written in one transaction, or not at
//! all. A deadline's append to the item's stream is at the sequence the
//! archiver has seen ([`DueOutbox::append`]): if the item was renamed
//! meanwhile, nothing is written, and the rename, when it arrives, sets a
//! new deadline.
//!
//! Its item, in its own table: `ARCHIVAL#<aggregateId>` / `STATE`
//! (`sequence`, `lastEventId`, `state`; and the engine's `dueAt` while a
//! deadline is set). Its binaries are `{{name}}-archiver-process` (the
//! Lambda function's code; the function keeps a consumer's name,
//! `<stack>-archiver-projector`), `-replay`, `-rebuild`, `-verify` and
//! `-inspect`; its entry in `Cargo.toml` gives it its part of the template.

use serde::de::IgnoredAny;
use serde::{Deserialize, Serialize};

use sequence_guard::process::{Due, DueOutbox, Outbox, Process};
use sequence_guard::{Decision, Domain, Entity, Events, Handling, Sequenced};

use crate::guard;

/// How long an item may go without a rename before it is archived: 30 days.
pub const ARCHIVE_AFTER_SECONDS: u64 = 30 * 24 * 60 * 60;

/// The reason of the `ItemArchived` it appends.
pub const NOT_RENAMED: &str = "not renamed for 30 days";

/// Where an item stands for the archiver.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ArchivalState {
    Active,
    /// It appended `ItemArchived`; the event has not reached it yet.
    Archiving,
    Archived,
}

/// The archiver's state for one item: `ARCHIVAL#<aggregateId>` / `STATE`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Entity)]
#[serde(rename_all = "camelCase")]
#[entity(kind = "ARCHIVAL")]
pub struct Archival {
    pub sequence: u64,
    pub last_event_id: String,
    pub state: ArchivalState,
}

/// `ItemArchived` data, as the archiver appends it (checked against the
/// items' domain, as a producer's event is).
#[derive(Debug, Serialize)]
struct Archived<'a> {
    reason: &'a str,
}

/// The events it receives: the items' own. It reads none of their data.
#[derive(Debug, Deserialize)]
#[serde(tag = "type", content = "data")]
pub enum ArchiverEvent {
    ItemCreated(IgnoredAny),
    ItemRenamed(IgnoredAny),
    ItemArchived(IgnoredAny),
    ItemViewed(IgnoredAny),
}

impl Events for ArchiverEvent {
    fn handling(self) -> Handling {
        match self {
            ArchiverEvent::ItemCreated(data) => Handling::process(data, on_item_created),
            ArchiverEvent::ItemRenamed(data) => Handling::process(data, on_item_renamed),
            ArchiverEvent::ItemArchived(data) => Handling::process(data, on_item_archived),
            ArchiverEvent::ItemViewed(_) => Handling::ignore(),
        }
    }
}

/// The process, registered: its state, its deadline's handler, and the
/// event store it appends to (the items').
pub fn domain() -> Domain {
    Domain::new::<ArchiverEvent>()
        .entity::<Archival>()
        .with_process(Process::new("archiver", crate::domain()).on_deadline(on_deadline))
}

/// `ItemCreated`: active, until the deadline.
pub fn on_item_created(
    state: &mut Option<Archival>,
    event: &Sequenced<IgnoredAny>,
    outbox: &mut Outbox,
) -> Decision {
    if state.is_some() {
        return Decision::Duplicate;
    }
    *state = Some(Archival {
        sequence: event.sequence,
        last_event_id: event.event_id.clone(),
        state: ArchivalState::Active,
    });
    outbox.set_deadline(outbox.now() + ARCHIVE_AFTER_SECONDS);
    Decision::Applied
}

/// `ItemRenamed`: an active item's deadline starts again.
pub fn on_item_renamed(
    state: &mut Option<Archival>,
    event: &Sequenced<IgnoredAny>,
    outbox: &mut Outbox,
) -> Decision {
    let state = match guard(state, event) {
        Ok(state) => state,
        Err(decision) => return decision,
    };
    if state.state == ArchivalState::Active {
        outbox.set_deadline(outbox.now() + ARCHIVE_AFTER_SECONDS);
    }
    state.sequence = event.sequence;
    state.last_event_id.clone_from(&event.event_id);
    Decision::Applied
}

/// `ItemArchived` (its own, or a person's): archived, no deadline.
pub fn on_item_archived(
    state: &mut Option<Archival>,
    event: &Sequenced<IgnoredAny>,
    outbox: &mut Outbox,
) -> Decision {
    let state = match guard(state, event) {
        Ok(state) => state,
        Err(decision) => return decision,
    };
    state.state = ArchivalState::Archived;
    outbox.clear_deadline();
    state.sequence = event.sequence;
    state.last_event_id.clone_from(&event.event_id);
    Decision::Applied
}

/// The deadline: an item still active is archived, at the sequence the
/// archiver has seen. (A deadline moves no sequence: no event was applied.)
pub fn on_deadline(state: &mut Archival, _: &Due, outbox: &mut DueOutbox) {
    if state.state != ArchivalState::Active {
        return;
    }
    let archived = Archived {
        reason: NOT_RENAMED,
    };
    outbox.append("ItemArchived", &archived);
    state.state = ArchivalState::Archiving;
}

#[cfg(test)]
mod tests {
    use sequence_guard::testkit::given;

    use super::*;

    const NOW: u64 = 1_800_000_000;

    fn at(sequence: u64, state: ArchivalState) -> Archival {
        Archival {
            sequence,
            last_event_id: format!("e{sequence}"),
            state,
        }
    }

    #[test]
    fn the_process_is_well_declared() {
        if let Err(err) = domain().check() {
            panic!("{err}");
        }
    }

    #[test]
    fn a_created_item_is_active_until_its_deadline_and_a_rename_moves_it() {
        let created = given(None::<Archival>).within(&domain()).at(NOW).when(
            "e1",
            "item-1",
            1,
            ArchiverEvent::ItemCreated(IgnoredAny),
        );
        let deadline = NOW + ARCHIVE_AFTER_SECONDS;
        assert_eq!(created.outbox().deadline(), Some(Some(deadline)));
        created
            .appends(&[])
            .then(Decision::Applied, Some(at(1, ArchivalState::Active)));

        let renamed = given(Some(at(1, ArchivalState::Active)))
            .within(&domain())
            .at(NOW + 60)
            .when("e2", "item-1", 2, ArchiverEvent::ItemRenamed(IgnoredAny));
        assert_eq!(renamed.outbox().deadline(), Some(Some(deadline + 60)));
        renamed.then(Decision::Applied, Some(at(2, ArchivalState::Active)));
    }

    #[test]
    fn an_archive_ends_it_and_clears_the_deadline_once() {
        let archived = || ArchiverEvent::ItemArchived(IgnoredAny);
        let then = given(Some(at(2, ArchivalState::Archiving)))
            .within(&domain())
            .when("e3", "item-1", 3, archived());
        assert_eq!(then.outbox().deadline(), Some(None));
        then.then(Decision::Applied, Some(at(3, ArchivalState::Archived)));
        // A redelivery is a duplicate: nothing set, nothing appended.
        let again = given(Some(at(3, ArchivalState::Archived)))
            .within(&domain())
            .when("e3", "item-1", 3, archived());
        assert!(again.outbox().is_empty());
        again.then(Decision::Duplicate, Some(at(3, ArchivalState::Archived)));
    }

    #[test]
    fn the_deadline_archives_an_active_item_at_the_sequence_seen() {
        // Fired as the sweep fires it: its append checked as the sweep's.
        let fired = given(Some(at(4, ArchivalState::Active)))
            .within(&domain())
            .at(NOW)
            .when_due("item-1", NOW)
            .appends(&[("item-1", "ItemArchived")]);
        let appended = fired.outbox().appends()[0].clone();
        assert_eq!(
            appended.expected,
            sequence_guard::producer::ExpectedSequence::Exact(4)
        );
        fired.then(at(4, ArchivalState::Archiving));

        // The event it appends is one the item projection applies.
        let body = serde_json::json!({
            "eventId": "process-archiver-due-item-1-0",
            "type": appended.event.event_type,
            "aggregateId": "item-1",
            "sequence": 5,
            "data": appended.event.data,
        });
        let lamp = crate::Item {
            sequence: 4,
            last_event_id: "e4".into(),
            name: "Lamp".into(),
            archived: false,
        };
        let archived_lamp = crate::Item {
            sequence: 5,
            last_event_id: "process-archiver-due-item-1-0".into(),
            archived: true,
            ..lamp.clone()
        };
        match given(Some(lamp)).when_body(&crate::domain(), &body.to_string()) {
            Ok(then) => then.then(Decision::Applied, Some(archived_lamp)),
            Err(refused) => panic!("the items refuse it: {refused}"),
        }

        // An item archived already: nothing.
        given(Some(at(4, ArchivalState::Archived)))
            .within(&domain())
            .at(NOW)
            .when_due("item-1", NOW)
            .appends(&[])
            .then(at(4, ArchivalState::Archived));
    }
}
