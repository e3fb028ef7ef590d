//! An entity that copies a personal value into an attribute it does not
//! declare personal: its erasure is applied, and the value stays in clear.
//! `testkit::check_erasures`, which every scaffolded crate runs on its
//! samples, names the entity kind and the attribute.

use sequence_guard::personal::{Erasure, Personal};
use sequence_guard::testkit::check_erasures;
use sequence_guard::{Decision, Domain, Entity, Events, Handling, Sequenced};
use serde::de::IgnoredAny;
use serde::{Deserialize, Serialize};

use super::{Lending, library};

/// A loan that also keeps a greeting with the borrower's name, not
/// declared personal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Entity)]
#[serde(rename_all = "camelCase")]
#[entity(kind = "CARD", personal("borrower"))]
struct Card {
    sequence: u64,
    last_event_id: String,
    borrower: String,
    greeting: String,
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type", content = "data")]
enum CardEvent {
    Lent(Lending),
    Returned(IgnoredAny),
    Reminded(IgnoredAny),
    PersonalDataErased(Erasure),
}

impl Events for CardEvent {
    fn handling(self) -> Handling {
        match self {
            CardEvent::Lent(data) => Handling::sequenced(data, on_lent),
            CardEvent::Returned(_) | CardEvent::Reminded(_) => Handling::pass::<Card>(),
            CardEvent::PersonalDataErased(data) => Handling::erasure(data),
        }
    }

    fn personal() -> Personal {
        Personal::new().fields("Lent", &["borrower"])
    }
}

fn on_lent(card: &mut Option<Card>, event: &Sequenced<Lending>) -> Decision {
    if card.is_some() {
        return Decision::Duplicate;
    }
    *card = Some(Card {
        sequence: event.sequence,
        last_event_id: event.event_id.clone(),
        borrower: event.data.borrower.clone(),
        greeting: format!("Dear {},", event.data.borrower),
    });
    Decision::Applied
}

/// The samples: an SQS event as Lambda delivers it, and bare bodies.
const SAMPLES: [&str; 2] = [
    r#"{"Records": [
        {"messageId": "m-1", "body": "{\"eventId\":\"loan-1-1\",\"type\":\"Lent\",\"aggregateId\":\"loan-1\",\"sequence\":1,\"data\":{\"borrower\":\"Ada Lovelace\"}}"},
        {"messageId": "m-2", "body": "{\"eventId\":\"loan-1-2\",\"type\":\"Returned\",\"aggregateId\":\"loan-1\",\"sequence\":2,\"data\":{}}"}
    ]}"#,
    "{\"eventId\":\"loan-2-1\",\"type\":\"Lent\",\"aggregateId\":\"loan-2\",\"sequence\":1,\"data\":{\"borrower\":\"Grace Hopper\"}}\n",
];

#[test]
fn an_entity_that_copies_a_personal_value_undeclared_is_named_with_its_attribute() {
    let domain = Domain::new::<CardEvent>();
    assert_eq!(domain.check(), Ok(()), "nothing at build can see it");
    let leak = check_erasures(&domain, &SAMPLES).expect_err("a leak");
    assert!(
        leak.contains("CARD entities")
            && leak.contains("`greeting`")
            && leak.contains("Lent's personal field `borrower`")
            && leak.contains("#[entity(personal(\"greeting\"))]"),
        "{leak}"
    );
    assert_eq!(
        leak.matches("CARD entities").count(),
        1,
        "said once: {leak}"
    );
    // No personal value in the report itself.
    assert!(
        !leak.contains("Ada") && !leak.contains("Lovelace"),
        "{leak}"
    );
}

#[test]
fn a_domain_whose_entities_declare_what_they_copy_passes_and_says_how_much_it_followed() {
    assert_eq!(check_erasures(&library(), &SAMPLES), Ok(2));
    // Samples without personal values check nothing, and say so.
    let returned =
        r#"{"eventId":"loan-1-2","type":"Returned","aggregateId":"loan-1","sequence":2,"data":{}}"#;
    assert_eq!(check_erasures(&library(), &[returned]), Ok(0));
}
