//! An entity or counter that a handling names is registered by that naming,
//! as the domain is built: no `.entity::<T>()` to forget. Where a type's
//! data cannot be made up to ask its handling, `.entity::<T>()` registers
//! it as before. And a pass given a type without a sequence is refused with
//! why, at its first message (only a message says a type has none).

use aws_lambda_events::event::sqs::{SqsEvent, SqsMessage};
use sequence_guard::envelope::InvalidMessage;
use sequence_guard::limits::Text;
use sequence_guard::runner::{Invocation, Outcome, Runner, RunnerConfig};
use sequence_guard::store::memory::MemoryStore;
use sequence_guard::{Counter, Decision, Domain, Entity, EntityKey, Events, Handling, Sequenced};
use serde::de::IgnoredAny;
use serde::{Deserialize, Deserializer, Serialize};

macro_rules! entity {
    ($name:ident, $kind:literal) => {
        #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct $name {
            sequence: u64,
            last_event_id: String,
        }

        impl Entity for $name {
            const KIND: &'static str = $kind;
            fn sequence(&self) -> u64 {
                self.sequence
            }
            fn last_event_id(&self) -> &str {
                &self.last_event_id
            }
        }
    };
}

entity!(Book, "BOOK");
entity!(Edition, "EDITION");
entity!(Volume, "BOOK");

static VIEWS: Counter = Counter {
    kind: "BOOKVIEWS",
    sort_key: "VIEWS",
    attribute: "count",
};

#[derive(Debug, Deserialize)]
struct Added {
    #[allow(dead_code)]
    title: Text<1, 64>,
    #[allow(dead_code)]
    shelves: Vec<String>,
    #[allow(dead_code)]
    note: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Viewed {
    book: Text<1, 64>,
}

/// An ISBN: 13 digits, nothing else, which no made-up value is.
#[derive(Debug)]
struct Isbn(#[allow(dead_code)] String);

impl<'de> Deserialize<'de> for Isbn {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        if text.len() == 13 && text.bytes().all(|byte| byte.is_ascii_digit()) {
            Ok(Isbn(text))
        } else {
            Err(serde::de::Error::custom("must be 13 digits"))
        }
    }
}

#[derive(Debug, Deserialize)]
struct Printed {
    #[allow(dead_code)]
    isbn: Isbn,
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type", content = "data")]
enum ShelfEvent {
    BookAdded(Added),
    BookViewed(Viewed),
    BookMoved(IgnoredAny),
    BookShelved(IgnoredAny),
    /// Its data cannot be made up: its Edition is not found by naming.
    EditionPrinted(Printed),
}

fn create<T: Entity, D>(
    make: fn(u64, String) -> T,
) -> impl Fn(&mut Option<T>, &Sequenced<D>) -> Decision {
    move |entity, event| {
        if entity.is_some() {
            return Decision::Duplicate;
        }
        *entity = Some(make(event.sequence, event.event_id.clone()));
        Decision::Applied
    }
}

impl Events for ShelfEvent {
    fn handling(self) -> Handling {
        match self {
            ShelfEvent::BookAdded(data) => Handling::sequenced(
                data,
                create(|sequence, last_event_id| Book {
                    sequence,
                    last_event_id,
                }),
            ),
            ShelfEvent::BookViewed(data) => {
                Handling::add("views", &VIEWS, data.book.into_string(), 1)
            }
            ShelfEvent::BookMoved(_) => Handling::pass::<Book>(),
            ShelfEvent::BookShelved(_) => Handling::ignore(),
            ShelfEvent::EditionPrinted(data) => Handling::sequenced(
                data,
                create(|sequence, last_event_id| Edition {
                    sequence,
                    last_event_id,
                }),
            ),
        }
    }
}

fn kinds(domain: &Domain) -> Vec<&'static str> {
    domain.kinds().iter().map(|kind| kind.name).collect()
}

fn message(id: &str, body: serde_json::Value) -> SqsMessage {
    let mut message = SqsMessage::default();
    message.message_id = Some(id.to_owned());
    message.body = Some(body.to_string());
    message
        .attributes
        .insert("ApproximateReceiveCount".to_owned(), "1".to_owned());
    message
}

#[test]
fn the_kinds_and_counters_handlings_name_are_registered_as_the_domain_is_built() {
    // GIVEN no .entity::<Book>() and no .counter(&VIEWS)
    let domain = Domain::new::<ShelfEvent>();
    // THEN both are known right after `new`; Edition, whose data cannot be
    // made up, is not.
    assert_eq!(kinds(&domain), ["BOOK"]);
    assert_eq!(domain.counters(), [&VIEWS]);
    assert_eq!(domain.kind("book").map(|kind| kind.name), Some("BOOK"));
    assert_eq!(
        domain.key_of_pk("BOOK#b-1"),
        Some(EntityKey::of::<Book>("b-1"))
    );
    assert_eq!(domain.check(), Ok(()));
    // Registering them again is harmless.
    let again = Domain::new::<ShelfEvent>().entity::<Book>().counter(&VIEWS);
    assert_eq!(kinds(&again), ["BOOK"]);
    assert_eq!(again.counters(), [&VIEWS]);
    assert_eq!(again.check(), Ok(()));
}

#[tokio::test]
async fn a_domain_without_entity_handles_its_first_message() {
    let store = MemoryStore::new();
    let runner = Runner::new(Domain::new::<ShelfEvent>(), &store, RunnerConfig::default());
    let mut batch = SqsEvent::default();
    batch.records.push(message(
        "m-1",
        serde_json::json!({
            "eventId": "e-1", "type": "BookAdded", "aggregateId": "b-1", "sequence": 1,
            "data": {"title": "Middlemarch", "shelves": ["classics"]}
        }),
    ));
    batch.records.push(message(
        "m-2",
        serde_json::json!({"eventId": "e-2", "type": "BookViewed", "data": {"book": "b-1"}}),
    ));
    let invocation = Invocation {
        deadline: None,
        now: 1_764_489_600,
    };
    let report = runner.run(&batch, invocation).await.expect("run");
    let outcomes: Vec<Outcome> = report.messages.iter().map(|m| m.outcome).collect();
    assert_eq!(outcomes, [Outcome::Applied, Outcome::Applied], "{report:?}");
    let books: Vec<EntityKey> = store.entities().into_iter().map(|(key, _)| key).collect();
    assert_eq!(books, [EntityKey::of::<Book>("b-1")]);
    assert_eq!(store.counters(), [(&VIEWS, "b-1".to_owned(), 1)]);
}

#[test]
fn a_type_whose_data_cannot_be_made_up_works_with_explicit_registration() {
    let printed = r#"{"eventId":"e-1","type":"EditionPrinted","aggregateId":"ed-1","sequence":1,"data":{"isbn":"9780141439549"}}"#;
    // Without it: named at the first message, with the fix.
    let err = Domain::new::<ShelfEvent>()
        .parse(printed)
        .expect_err("Edition is not registered");
    let InvalidMessage::Undeclared(reason) = &err else {
        panic!("{err:?}")
    };
    assert!(
        reason.contains("EDITION") && reason.contains("add .entity::<Edition>()"),
        "{reason}"
    );
    // With it: read, and listed after the kinds found by naming.
    let domain = Domain::new::<ShelfEvent>().entity::<Edition>();
    assert_eq!(kinds(&domain), ["BOOK", "EDITION"]);
    let event = domain.parse(printed).expect("registered");
    assert_eq!(event.entity_key(), Some(EntityKey::of::<Edition>("ed-1")));
    assert_eq!(domain.check(), Ok(()));
}

#[test]
fn two_entity_types_handlings_name_with_one_kind_are_refused_as_the_domain_is_built() {
    #[derive(Debug, Deserialize)]
    #[serde(tag = "type", content = "data")]
    enum Shelf {
        BookAdded(IgnoredAny),
        VolumeAdded(IgnoredAny),
    }

    impl Events for Shelf {
        fn handling(self) -> Handling {
            match self {
                Shelf::BookAdded(_) => Handling::pass::<Book>(),
                Shelf::VolumeAdded(_) => Handling::pass::<Volume>(),
            }
        }
    }

    let problems = Domain::new::<Shelf>()
        .check()
        .expect_err("one kind, two types")
        .problems()
        .join("\n");
    assert!(
        problems.contains("registration::Book")
            && problems.contains("registration::Volume")
            && problems.contains("share the kind BOOK"),
        "{problems}"
    );
}

/// Only a message says its type has no sequence (the producer's handling
/// decides): a pass given one is refused at the first, saying why and what
/// to do, not merely that `sequence` is missing.
#[test]
fn a_pass_given_a_type_without_a_sequence_is_refused_with_why() {
    let domain = Domain::new::<ShelfEvent>();
    let err = domain
        .parse(r#"{"eventId":"e-3","type":"BookMoved","data":{"shelf":"attic"}}"#)
        .expect_err("a pass needs a sequence");
    let InvalidMessage::Invalid { field, problem } = &err else {
        panic!("{err:?}")
    };
    assert_eq!(field, "sequence");
    assert!(
        problem.contains("BookMoved is passed (Handling::pass)")
            && problem.contains("Handling::ignore()"),
        "{problem}"
    );
    // With its stream and no sequence, the same.
    let err = domain
        .parse(r#"{"eventId":"e-3","type":"BookMoved","aggregateId":"b-1","data":{}}"#)
        .expect_err("a pass needs a sequence");
    assert!(err.to_string().contains("BookMoved is passed"), "{err}");
    // Sequenced, it is read; another type without a sequence is refused as before.
    let moved = domain
        .parse(r#"{"eventId":"e-3","type":"BookMoved","aggregateId":"b-1","sequence":2,"data":{}}"#)
        .expect("sequenced");
    assert_eq!(moved.sequence(), Some(2));
    let err = domain
        .parse(r#"{"eventId":"e-1","type":"BookAdded","aggregateId":"b-1","data":{"title":"M","shelves":[]}}"#)
        .expect_err("no sequence");
    assert_eq!(err, InvalidMessage::Missing("sequence".to_owned()));
    // An ignored type without a sequence is still done.
    let shelved = domain
        .parse(r#"{"eventId":"e-4","type":"BookShelved","data":{}}"#)
        .expect("ignored");
    assert!(shelved.is_ignored());
}
