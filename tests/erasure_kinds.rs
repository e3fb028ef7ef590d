//! A subject's erasure in a domain whose personal data is on several entity
//! kinds, on the embedded store: `Handling::erasure` erases whichever kind
//! the erasure's stream projects onto (the kind this domain's handling of
//! `data.streamType` names), an earlier release's erasure (no `streamType`)
//! is read where it can be told and refused with why where it cannot, and a
//! domain that registers the erasure on one kind while another holds
//! personal data is refused when it is built.

use aws_lambda_events::event::sqs::{SqsEvent, SqsMessage};
use sequence_guard::envelope::InvalidMessage;
use sequence_guard::personal::{Erasure, PLACEHOLDER, Personal};
use sequence_guard::runner::{Invocation, Outcome, Runner, RunnerConfig};
use sequence_guard::store::memory::MemoryStore;
use sequence_guard::testkit::given;
use sequence_guard::{Decision, Domain, Entity, EntityKey, Events, Handling, Sequenced};
use serde::de::IgnoredAny;
use serde::{Deserialize, Serialize};
use serde_json::json;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Entity)]
#[serde(rename_all = "camelCase")]
#[entity(kind = "MEMBER", personal("name"))]
struct Member {
    sequence: u64,
    last_event_id: String,
    name: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Entity)]
#[serde(rename_all = "camelCase")]
#[entity(kind = "GUEST", personal("name"))]
struct Guest {
    sequence: u64,
    last_event_id: String,
    name: String,
}

#[derive(Debug, Clone, Deserialize)]
struct Named {
    name: String,
}

/// Members and guests, each with a name, and the erasure on either.
#[derive(Debug, Deserialize)]
#[serde(tag = "type", content = "data")]
enum VenueEvent {
    MemberJoined(Named),
    GuestArrived(Named),
    PersonalDataErased(Erasure),
}

impl Events for VenueEvent {
    fn handling(self) -> Handling {
        match self {
            VenueEvent::MemberJoined(data) => Handling::sequenced(data, create::<Member>),
            VenueEvent::GuestArrived(data) => Handling::sequenced(data, create::<Guest>),
            VenueEvent::PersonalDataErased(data) => Handling::erasure(data),
        }
    }

    fn personal() -> Personal {
        Personal::new()
            .fields("MemberJoined", &["name"])
            .fields("GuestArrived", &["name"])
    }
}

/// The same domain, its erasure registered on members alone.
#[derive(Debug, Deserialize)]
#[serde(tag = "type", content = "data")]
enum OnMembersOnly {
    MemberJoined(Named),
    GuestArrived(Named),
    PersonalDataErased(Erasure),
}

impl Events for OnMembersOnly {
    fn handling(self) -> Handling {
        match self {
            OnMembersOnly::MemberJoined(data) => Handling::sequenced(data, create::<Member>),
            OnMembersOnly::GuestArrived(data) => Handling::sequenced(data, create::<Guest>),
            OnMembersOnly::PersonalDataErased(data) => Handling::erase::<Member>(data),
        }
    }

    fn personal() -> Personal {
        VenueEvent::personal()
    }
}

/// A consumer of the venue's streams that projects members only and keeps
/// nothing personal: a guest's erasure is ignored as its stream is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Entity)]
#[serde(rename_all = "camelCase")]
#[entity(kind = "VISITS")]
struct Visits {
    sequence: u64,
    last_event_id: String,
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type", content = "data")]
enum VisitsEvent {
    MemberJoined(IgnoredAny),
    GuestArrived(IgnoredAny),
    PersonalDataErased(Erasure),
}

impl Events for VisitsEvent {
    fn handling(self) -> Handling {
        match self {
            VisitsEvent::MemberJoined(_) => Handling::sequenced((), create_visits),
            VisitsEvent::GuestArrived(_) => Handling::ignore(),
            VisitsEvent::PersonalDataErased(data) => Handling::erasure(data),
        }
    }
}

fn create_visits(visits: &mut Option<Visits>, event: &Sequenced<()>) -> Decision {
    if visits.is_some() {
        return Decision::Duplicate;
    }
    *visits = Some(Visits {
        sequence: event.sequence,
        last_event_id: event.event_id.clone(),
    });
    Decision::Applied
}

trait Person: Entity {
    fn made(sequence: u64, event_id: &str, name: &str) -> Self;
}

impl Person for Member {
    fn made(sequence: u64, event_id: &str, name: &str) -> Self {
        Member {
            sequence,
            last_event_id: event_id.to_owned(),
            name: name.to_owned(),
        }
    }
}

impl Person for Guest {
    fn made(sequence: u64, event_id: &str, name: &str) -> Self {
        Guest {
            sequence,
            last_event_id: event_id.to_owned(),
            name: name.to_owned(),
        }
    }
}

fn create<T: Person>(entity: &mut Option<T>, event: &Sequenced<Named>) -> Decision {
    if entity.is_some() {
        return Decision::Duplicate;
    }
    *entity = Some(T::made(event.sequence, &event.event_id, &event.data.name));
    Decision::Applied
}

fn body(stream: &str, sequence: u64, event_type: &str, data: serde_json::Value) -> String {
    json!({
        "eventId": format!("{stream}-{sequence}"),
        "type": event_type,
        "aggregateId": stream,
        "sequence": sequence,
        "data": data,
    })
    .to_string()
}

fn batch(bodies: &[String]) -> SqsEvent {
    let mut event = SqsEvent::default();
    event.records = bodies
        .iter()
        .enumerate()
        .map(|(index, body)| {
            let mut message = SqsMessage::default();
            message.message_id = Some(format!("m-{index}"));
            message.body = Some(body.clone());
            message
        })
        .collect();
    event
}

const NOW: Invocation = Invocation {
    deadline: None,
    now: 1_800_000_000,
};

fn entity<T: Entity>(store: &MemoryStore, id: &str) -> Option<T> {
    let key = EntityKey::of::<T>(id);
    store
        .entities()
        .into_iter()
        .find(|(found, _)| *found == key)
        .and_then(|(_, any)| any.get::<T>().cloned())
}

#[tokio::test]
async fn an_erasure_erases_whichever_kind_its_stream_projects_onto() {
    let domain = Domain::new::<VenueEvent>();
    domain
        .check()
        .expect("personal data on two kinds, erased on either");
    let runner = Runner::new(domain, MemoryStore::new(), RunnerConfig::default());
    let bodies = [
        body("m-1", 1, "MemberJoined", json!({"name": "Ada"})),
        body("g-1", 1, "GuestArrived", json!({"name": "Grace"})),
        body(
            "m-1",
            2,
            "PersonalDataErased",
            json!({"subject": "m-1", "streamType": "MemberJoined"}),
        ),
        body(
            "g-1",
            2,
            "PersonalDataErased",
            json!({"subject": "g-1", "streamType": "GuestArrived"}),
        ),
    ];
    let report = runner.run(&batch(&bodies), NOW).await.expect("a batch");
    assert_eq!(report.count(Outcome::Applied), 4, "{report:?}");
    let member: Member = entity(runner.store(), "m-1").expect("a member");
    let guest: Guest = entity(runner.store(), "g-1").expect("a guest");
    assert_eq!((member.name.as_str(), member.sequence), (PLACEHOLDER, 2));
    assert_eq!((guest.name.as_str(), guest.sequence), (PLACEHOLDER, 2));
    assert_eq!(member.last_event_id, "m-1-2");

    // Delivered again: a duplicate on each.
    let again = runner
        .run(&batch(&bodies[2..]), NOW)
        .await
        .expect("a batch");
    assert_eq!(again.count(Outcome::Duplicate), 2, "{again:?}");
}

#[tokio::test]
async fn a_consumer_ignores_the_erasure_of_a_stream_it_does_not_project() {
    let runner = Runner::new(
        Domain::new::<VisitsEvent>(),
        MemoryStore::new(),
        RunnerConfig::default(),
    );
    let bodies = [
        body("m-1", 1, "MemberJoined", json!({"name": "Ada"})),
        body(
            "m-1",
            2,
            "PersonalDataErased",
            json!({"subject": "m-1", "streamType": "MemberJoined"}),
        ),
        body(
            "g-1",
            2,
            "PersonalDataErased",
            json!({"subject": "g-1", "streamType": "GuestArrived"}),
        ),
    ];
    let report = runner.run(&batch(&bodies), NOW).await.expect("a batch");
    let outcomes: Vec<Outcome> = report.messages.iter().map(|m| m.outcome).collect();
    assert_eq!(
        outcomes,
        [Outcome::Applied, Outcome::Applied, Outcome::Ignored]
    );
    let visits: Visits = entity(runner.store(), "m-1").expect("visits");
    assert_eq!(visits.sequence, 2, "a pass: its sequence moved");
}

#[test]
fn an_earlier_releases_erasure_is_read_where_its_kind_can_be_told() {
    let legacy = body("m-1", 2, "PersonalDataErased", json!({"subject": "m-1"}));
    // Two kinds hold personal data: which one it erases cannot be told.
    match Domain::new::<VenueEvent>().parse(&legacy) {
        Err(InvalidMessage::Invalid { field, problem }) => {
            assert_eq!(field, "data.streamType");
            assert!(
                problem.contains("GUEST") && problem.contains("MEMBER"),
                "{problem}"
            );
        }
        other => panic!("{other:?}"),
    }
    // A consumer with one kind: that one.
    let event = Domain::new::<VisitsEvent>()
        .parse(&legacy)
        .expect("one kind");
    assert_eq!(event.kind().map(|kind| kind.name), Some("VISITS"));
    // A type the domain does not declare: refused, naming the field.
    let unknown = body(
        "m-1",
        2,
        "PersonalDataErased",
        json!({"subject": "m-1", "streamType": "Elsewhere"}),
    );
    assert!(matches!(
        Domain::new::<VenueEvent>().parse(&unknown),
        Err(InvalidMessage::Invalid { field, .. }) if field == "data.streamType"
    ));
}

#[test]
fn an_erasure_on_one_kind_is_refused_where_another_holds_personal_data() {
    let err = Domain::new::<OnMembersOnly>()
        .check()
        .expect_err("guests could never be erased");
    let problem = err.to_string();
    assert!(
        problem.contains("MEMBER entities alone")
            && problem.contains("GUEST")
            && problem.contains("Handling::erasure(data)"),
        "{problem}"
    );
}

#[test]
fn the_test_kit_erases_the_entity_it_is_given() {
    let member = Member::made(1, "m-1-1", "Ada");
    let erased = Member::made(2, "m-1-2", PLACEHOLDER);
    given(Some(member))
        .when(
            "m-1-2",
            "m-1",
            2,
            VenueEvent::PersonalDataErased(Erasure::new("m-1", "MemberJoined")),
        )
        .then(Decision::Applied, Some(erased));
}
