//! Mistakes in a domain's declarations, caught when the domain is built
//! (`Domain::check`: every binary refuses to start, `Runner::new` panics) or,
//! where only a message can tell, at the first message they affect, naming
//! the fix.

// One type name on two variants is the mistake under test: serde's derive
// then has a pattern that can never match.
#![allow(unreachable_patterns)]

use sequence_guard::{Counter, Decision, Domain, Entity, Events, Handling, Sequenced};
use serde::{Deserialize, Serialize};

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

entity!(Shipment, "SHIPMENT");
entity!(Parcel, "SHIPMENT");
entity!(Carrier, "CARRIER");

static DELIVERED: Counter = Counter {
    kind: "CARRIER",
    sort_key: "DELIVERED",
    attribute: "count",
};

#[derive(Debug, Deserialize)]
struct Nothing {}

#[derive(Debug, Deserialize)]
struct Delivery {
    carrier: String,
}

fn create<T: Entity>(
    make: fn(u64, String) -> T,
) -> impl Fn(&mut Option<T>, &Sequenced<Nothing>) -> Decision {
    move |entity, event| {
        if entity.is_some() {
            return Decision::Duplicate;
        }
        *entity = Some(make(event.sequence, event.event_id.clone()));
        Decision::Applied
    }
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type", content = "data")]
enum ShipmentEvent {
    ShipmentCreated(Nothing),
    /// Writes a Carrier, which no `.entity::<Carrier>()` registers.
    CarrierCreated(Nothing),
    /// Adds to a counter no `.counter(&DELIVERED)` registers.
    ShipmentDelivered(Delivery),
    #[serde(rename = "ShipmentCreated")]
    ShipmentCreatedAgain(Nothing),
}

impl Events for ShipmentEvent {
    fn handling(self) -> Handling {
        match self {
            ShipmentEvent::ShipmentCreated(data) | ShipmentEvent::ShipmentCreatedAgain(data) => {
                Handling::sequenced(
                    data,
                    create(|sequence, last_event_id| Shipment {
                        sequence,
                        last_event_id,
                    }),
                )
            }
            ShipmentEvent::CarrierCreated(data) => Handling::sequenced(
                data,
                create(|sequence, last_event_id| Carrier {
                    sequence,
                    last_event_id,
                }),
            ),
            ShipmentEvent::ShipmentDelivered(data) => {
                Handling::add("deliveries", &DELIVERED, data.carrier, 1)
            }
        }
    }
}

/// The envelope's `type` as the events enum's own tag, not serde's
/// adjacent tagging the envelope needs.
#[derive(Debug, Deserialize)]
enum Untagged {
    ShipmentCreated(Nothing),
}

impl Events for Untagged {
    fn handling(self) -> Handling {
        match self {
            Untagged::ShipmentCreated(data) => Handling::sequenced(
                data,
                create(|sequence, last_event_id| Shipment {
                    sequence,
                    last_event_id,
                }),
            ),
        }
    }
}

fn problems(domain: &Domain) -> Vec<String> {
    domain
        .check()
        .err()
        .map(|err| err.problems().to_vec())
        .unwrap_or_default()
}

#[test]
fn two_entity_types_with_one_kind_are_refused() {
    let domain = Domain::new::<ShipmentEvent>()
        .entity::<Shipment>()
        .entity::<Parcel>();
    let found = problems(&domain);
    assert!(
        found
            .iter()
            .any(|problem| problem.contains("declarations::Shipment")
                && problem.contains("declarations::Parcel")
                && problem.contains("share the kind SHIPMENT")),
        "{found:?}"
    );
}

#[test]
fn one_type_name_on_two_variants_is_refused() {
    let found = problems(&Domain::new::<ShipmentEvent>());
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].contains("both named `ShipmentCreated`") && found[0].contains("serde rename"),
        "{found:?}"
    );
}

#[test]
fn an_events_enum_not_tagged_as_the_envelope_is_refused() {
    let found = problems(&Domain::new::<Untagged>().entity::<Shipment>());
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].contains("declarations::Untagged")
            && found[0].contains(r#"#[serde(tag = "type", content = "data")]"#),
        "{found:?}"
    );
}

/// The entity and the counter a handling names are registered by the
/// naming, as the domain is built (tests/registration.rs: where they are
/// not, and what then says so at the first message).
#[test]
fn an_entity_or_counter_a_handling_names_is_registered_by_the_naming() {
    let domain = Domain::new::<ShipmentEvent>();
    let kinds: Vec<&str> = domain.kinds().iter().map(|kind| kind.name).collect();
    assert_eq!(kinds, ["SHIPMENT", "CARRIER"]);
    assert_eq!(domain.counters(), [&DELIVERED]);
    let created = domain
        .parse(r#"{"eventId":"e1","type":"CarrierCreated","aggregateId":"c-1","sequence":1,"data":{}}"#)
        .expect("Carrier is registered by its handling");
    assert_eq!(created.kind().map(|kind| kind.name), Some("CARRIER"));
    let delivered = domain
        .parse(r#"{"eventId":"e2","type":"ShipmentDelivered","data":{"carrier":"post"}}"#)
        .expect("the counter is registered by its handling");
    assert_eq!(
        delivered.deduplicated().map(|add| add.counter),
        Some(&DELIVERED)
    );
}

/// Tagged `type` without `content = "data"`, serde reads the data's fields
/// from the envelope itself: every message would be refused. Found as the
/// domain is built.
#[test]
fn an_events_enum_tagged_type_alone_is_refused_as_it_is_built() {
    #[derive(Debug, Deserialize)]
    struct Label {
        #[allow(dead_code)]
        label: String,
    }

    #[derive(Debug, Deserialize)]
    #[serde(tag = "type")]
    enum Untidy {
        #[allow(dead_code)]
        Labelled(Label),
    }

    impl Events for Untidy {
        fn handling(self) -> Handling {
            match self {
                Untidy::Labelled(_) => Handling::pass::<Shipment>(),
            }
        }
    }

    let problems = Domain::new::<Untidy>()
        .entity::<Shipment>()
        .check()
        .expect_err("refused")
        .problems()
        .join("\n");
    assert!(
        problems.contains("is not tagged with `content = \"data\"`")
            && problems.contains("#[serde(tag = \"type\", content = \"data\")]"),
        "{problems}"
    );
}
