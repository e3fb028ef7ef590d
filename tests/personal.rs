//! Personal data in the engine, with a small domain of its own and keys in
//! memory: declarations checked, values sealed and opened, the placeholder
//! once a subject is erased, the erasure applied under the guard, and a
//! consumer that declares nothing never reading a key, and the line the
//! tools print of an entity showing none of it.

use std::collections::HashMap;
use std::sync::Arc;

use aws_lambda_events::event::sqs::{SqsEvent, SqsMessage};
use futures::future::BoxFuture;
use sequence_guard::envelope::InvalidMessage;
use sequence_guard::personal::{
    DataKey, Erasure, KeyError, KeyItem, KeySource, Keyring, LocalKeys, Personal, is_sealed,
};
use sequence_guard::producer::seal_data;
use sequence_guard::runner::{Invocation, Outcome, Runner, RunnerConfig};
use sequence_guard::store::memory::MemoryStore;
use sequence_guard::{Decision, Domain, Entity, EntityKey, Events, Handling, Sequenced};
use serde::de::IgnoredAny;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Entity)]
#[serde(rename_all = "camelCase")]
#[entity(kind = "MEMBER", personal("name", "email"))]
struct Member {
    sequence: u64,
    last_event_id: String,
    name: String,
    email: String,
    plan: String,
}

#[derive(Debug, Clone, Deserialize)]
struct Joined {
    name: String,
    email: String,
    plan: String,
}

#[derive(Debug, Clone, Deserialize)]
struct Renamed {
    name: String,
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type", content = "data")]
enum ClubEvent {
    MemberJoined(Joined),
    MemberRenamed(Renamed),
    PersonalDataErased(Erasure),
}

impl Events for ClubEvent {
    fn handling(self) -> Handling {
        match self {
            ClubEvent::MemberJoined(data) => Handling::sequenced(data, joined),
            ClubEvent::MemberRenamed(data) => Handling::sequenced(data, renamed),
            ClubEvent::PersonalDataErased(data) => Handling::erase::<Member>(data),
        }
    }

    fn personal() -> Personal {
        Personal::new()
            .fields("MemberJoined", &["name", "email"])
            .fields("MemberRenamed", &["name"])
    }
}

fn joined(member: &mut Option<Member>, event: &Sequenced<Joined>) -> Decision {
    if member.is_some() {
        return Decision::Duplicate;
    }
    *member = Some(Member {
        sequence: event.sequence,
        last_event_id: event.event_id.clone(),
        name: event.data.name.clone(),
        email: event.data.email.clone(),
        plan: event.data.plan.clone(),
    });
    Decision::Applied
}

fn renamed(member: &mut Option<Member>, event: &Sequenced<Renamed>) -> Decision {
    let Some(member) = member else {
        return Decision::NotCreated;
    };
    if member.sequence != event.sequence - 1 {
        return if member.sequence >= event.sequence {
            Decision::Duplicate
        } else {
            Decision::Gap
        };
    }
    member.name.clone_from(&event.data.name);
    member.sequence = event.sequence;
    member.last_event_id.clone_from(&event.event_id);
    Decision::Applied
}

/// A consumer of the same streams that keeps no personal data.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Entity)]
#[serde(rename_all = "camelCase")]
#[entity(kind = "PLAN")]
struct Plan {
    sequence: u64,
    last_event_id: String,
    plan: String,
}

#[derive(Debug, Deserialize)]
struct PlanOnly {
    plan: String,
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type", content = "data")]
enum PlanEvent {
    MemberJoined(PlanOnly),
    MemberRenamed(IgnoredAny),
    PersonalDataErased(IgnoredAny),
}

impl Events for PlanEvent {
    fn handling(self) -> Handling {
        match self {
            PlanEvent::MemberJoined(data) => Handling::sequenced(data, plan_of),
            PlanEvent::MemberRenamed(_) | PlanEvent::PersonalDataErased(_) => {
                Handling::pass::<Plan>()
            }
        }
    }
}

fn plan_of(plan: &mut Option<Plan>, event: &Sequenced<PlanOnly>) -> Decision {
    if plan.is_some() {
        return Decision::Duplicate;
    }
    *plan = Some(Plan {
        sequence: event.sequence,
        last_event_id: event.event_id.clone(),
        plan: event.data.plan.clone(),
    });
    Decision::Applied
}

fn club(keys: &Arc<Keyring>) -> Domain {
    Domain::new::<ClubEvent>()
        .entity::<Member>()
        .with_keys(Arc::clone(keys))
}

/// A body of `event_type` for `member`, its personal values sealed as
/// `append` seals them.
async fn sealed_body(
    domain: &Domain,
    member: &str,
    sequence: u64,
    event_type: &str,
    mut data: Value,
) -> String {
    let event_id = format!("{member}-{sequence}");
    seal_data(domain, member, &event_id, event_type, &mut data)
        .await
        .expect("sealed");
    json!({
        "eventId": event_id,
        "type": event_type,
        "aggregateId": member,
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

fn entity<T: Entity>(store: &MemoryStore, key: &EntityKey) -> Option<T> {
    store
        .entities()
        .into_iter()
        .find(|(found, _)| found == key)
        .and_then(|(_, any)| any.get::<T>().cloned())
}

fn invocation() -> Invocation {
    Invocation {
        now: 1_800_000_000,
        deadline: None,
    }
}

#[test]
fn a_sound_declaration_is_taken_and_each_mistake_is_named() {
    let keys = Arc::new(Keyring::new(LocalKeys::new().expect("keys")));
    assert_eq!(club(&keys).check(), Ok(()));

    #[derive(Debug, Deserialize)]
    #[serde(tag = "type", content = "data")]
    enum Wrong {
        MemberJoined(Joined),
    }
    impl Events for Wrong {
        fn handling(self) -> Handling {
            match self {
                Wrong::MemberJoined(data) => Handling::sequenced(data, joined),
            }
        }
        fn personal() -> Personal {
            Personal::new()
                .fields("MemberJoined", &["name", "phone"])
                .fields("MemberLeft", &["name"])
                .fields_of("MemberJoined", "memberId", &["email"])
        }
    }
    let problems = Domain::new::<Wrong>()
        .entity::<Member>()
        .check()
        .expect_err("refused")
        .problems()
        .join("\n");
    for named in [
        "MemberJoined's data has no field `phone`",
        "MemberLeft, which the events enum does not have",
        "MemberJoined's data has no field `memberId`",
        "the events enum has no PersonalDataErased",
    ] {
        assert!(problems.contains(named), "{named} in {problems}");
    }
}

#[test]
fn an_entity_declaring_a_field_it_lacks_is_refused() {
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Entity)]
    #[serde(rename_all = "camelCase")]
    #[entity(kind = "MISNAMED", personal("fullName"), placeholder = "-")]
    struct Misnamed {
        sequence: u64,
        last_event_id: String,
        name: String,
    }
    let problems = Domain::new::<ClubEvent>()
        .entity::<Misnamed>()
        .check()
        .expect_err("refused")
        .problems()
        .join("\n");
    assert!(
        problems.contains("declares `fullName` personal"),
        "{problems}"
    );
    assert!(problems.contains("one placeholder"), "{problems}");
}

#[tokio::test]
async fn sealed_values_open_with_their_key_and_read_as_the_placeholder_once_erased() {
    let source = Arc::new(LocalKeys::new().expect("keys"));
    let keys = Arc::new(Keyring::shared(source.clone()));
    let domain = club(&keys);
    let body = sealed_body(
        &domain,
        "m-1",
        1,
        "MemberJoined",
        json!({"name": "Ada MARKER", "email": "ada@MARKER.example", "plan": "gold"}),
    )
    .await;
    assert!(!body.contains("MARKER"), "{body}");
    let data: Value = serde_json::from_str::<Value>(&body).expect("json")["data"].clone();
    assert!(data["name"].as_str().is_some_and(is_sealed));
    assert_eq!(data["plan"], "gold", "what is not personal stays plain");

    // Another process, its keyring empty: the key is needed, then fetched.
    let reader = Arc::new(Keyring::shared(source.clone()));
    let cold = club(&reader);
    match cold.parse(&body) {
        Err(InvalidMessage::KeyNeeded(subject)) => assert_eq!(subject, "m-1"),
        other => panic!("{other:?}"),
    }
    cold.fetch_keys([body.as_str()]).await.expect("fetched");
    let mut slot = None;
    assert_eq!(
        cold.parse(&body).expect("read").decide(&mut slot),
        Ok(Decision::Applied)
    );
    let member = slot
        .as_ref()
        .and_then(|any| any.get::<Member>())
        .expect("member");
    assert_eq!(
        (member.name.as_str(), member.email.as_str()),
        ("Ada MARKER", "ada@MARKER.example")
    );

    // A value moved to another event does not open.
    let moved = body.replace("\"m-1-1\"", "\"m-1-9\"");
    assert!(matches!(
        cold.parse(&moved),
        Err(InvalidMessage::Invalid { field, .. }) if field == "data.email" || field == "data.name"
    ));

    // Erased: a fresh reader reads the placeholder; appending is refused.
    use sequence_guard::personal::KeySource as _;
    source.erase("m-1").await.expect("erased");
    let after = club(&Arc::new(Keyring::shared(source.clone())));
    after.fetch_keys([body.as_str()]).await.expect("fetched");
    let mut slot = None;
    after
        .parse(&body)
        .expect("read")
        .decide(&mut slot)
        .expect("decided");
    let member = slot
        .as_ref()
        .and_then(|any| any.get::<Member>())
        .expect("member");
    assert_eq!(
        (
            member.name.as_str(),
            member.email.as_str(),
            member.plan.as_str()
        ),
        ("(erased)", "(erased)", "gold")
    );
    let mut data = json!({"name": "Ada again"});
    match seal_data(&after, "m-1", "m-1-2", "MemberRenamed", &mut data).await {
        Err(sequence_guard::producer::AppendError::Erased { subject }) => {
            assert_eq!(subject, "m-1")
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn the_erasure_replaces_personal_attributes_under_the_guard_and_a_consumer_without_any_passes()
 {
    let keys = Arc::new(Keyring::new(LocalKeys::new().expect("keys")));
    let domain = club(&keys);
    let joined = sealed_body(
        &domain,
        "m-2",
        1,
        "MemberJoined",
        json!({"name": "Grace MARKER", "email": "grace@MARKER.example", "plan": "silver"}),
    )
    .await;
    let renamed = sealed_body(
        &domain,
        "m-2",
        2,
        "MemberRenamed",
        json!({"name": "G. MARKER"}),
    )
    .await;
    let erased = json!({
        "eventId": "m-2-3", "type": "PersonalDataErased", "aggregateId": "m-2",
        "sequence": 3, "data": {"subject": "m-2"}
    })
    .to_string();

    let runner = Runner::new(club(&keys), MemoryStore::new(), RunnerConfig::default());
    let report = runner
        .run(&batch(&[joined.clone(), renamed.clone()]), invocation())
        .await
        .expect("ran");
    assert!(
        report
            .messages
            .iter()
            .all(|line| line.outcome == Outcome::Applied),
        "{report:?}"
    );
    let key = EntityKey::of::<Member>("m-2");
    let member = entity::<Member>(runner.store(), &key).expect("member");
    assert_eq!(member.name, "G. MARKER");

    let report = runner
        .run(&batch(std::slice::from_ref(&erased)), invocation())
        .await
        .expect("ran");
    assert_eq!(report.messages[0].outcome, Outcome::Applied, "{report:?}");
    let member = entity::<Member>(runner.store(), &key).expect("member");
    assert_eq!(
        member,
        Member {
            sequence: 3,
            last_event_id: "m-2-3".to_owned(),
            name: "(erased)".to_owned(),
            email: "(erased)".to_owned(),
            plan: "silver".to_owned(),
        }
    );
    // Delivered again: a duplicate, nothing changes.
    let report = runner
        .run(&batch(std::slice::from_ref(&erased)), invocation())
        .await
        .expect("ran");
    assert_eq!(report.messages[0].outcome, Outcome::Duplicate);
    // The erasure marked the subject in the consumer's keyring: an earlier
    // event, read again, reads as the placeholder though the key was kept.
    let mut slot = Some(sequence_guard::AnyEntity::new(Member {
        name: "x".to_owned(),
        sequence: 1,
        ..member
    }));
    let event = runner.domain().parse(&renamed).expect("read");
    assert_eq!(event.decide(&mut slot), Ok(Decision::Applied));
    let read = slot
        .as_ref()
        .and_then(|any| any.get::<Member>())
        .expect("member");
    assert_eq!(read.name, "(erased)");

    // The plans' consumer declares nothing: it reads the sealed bodies
    // without a keyring, and the erasure moves its sequence.
    let plans = Runner::new(
        Domain::new::<PlanEvent>().entity::<Plan>(),
        MemoryStore::new(),
        RunnerConfig::default(),
    );
    let report = plans
        .run(&batch(&[joined, renamed, erased]), invocation())
        .await
        .expect("ran");
    assert!(
        report
            .messages
            .iter()
            .all(|line| line.outcome == Outcome::Applied),
        "{report:?}"
    );
    let plan = entity::<Plan>(plans.store(), &EntityKey::of::<Plan>("m-2")).expect("plan");
    assert_eq!((plan.sequence, plan.plan.as_str()), (3, "silver"));
}

/// Keys whose `refused` subject's key does not unwrap (a KMS error for
/// that one), the rest as `inner` has them.
struct Refusing {
    inner: Arc<LocalKeys>,
    refused: &'static str,
}

impl KeySource for Refusing {
    fn read<'a>(
        &'a self,
        subjects: &'a [String],
    ) -> BoxFuture<'a, Result<HashMap<String, KeyItem>, KeyError>> {
        self.inner.read(subjects)
    }

    fn unwrap_key<'a>(
        &'a self,
        subject: &'a str,
        wrapped: &'a [u8],
    ) -> BoxFuture<'a, Result<DataKey, KeyError>> {
        if subject == self.refused {
            return Box::pin(async move { Err(KeyError::Kms(format!("{subject}: throttled"))) });
        }
        self.inner.unwrap_key(subject, wrapped)
    }

    fn create<'a>(
        &'a self,
        subject: &'a str,
        stream: &'a str,
    ) -> BoxFuture<'a, Result<Result<(Vec<u8>, DataKey), KeyItem>, KeyError>> {
        self.inner.create(subject, stream)
    }

    fn add_stream<'a>(
        &'a self,
        subject: &'a str,
        stream: &'a str,
    ) -> BoxFuture<'a, Result<bool, KeyError>> {
        self.inner.add_stream(subject, stream)
    }

    fn erase<'a>(&'a self, subject: &'a str) -> BoxFuture<'a, Result<Option<KeyItem>, KeyError>> {
        self.inner.erase(subject)
    }

    fn told<'a>(&'a self, subject: &'a str) -> BoxFuture<'a, Result<(), KeyError>> {
        self.inner.told(subject)
    }

    fn kms_requests(&self) -> u64 {
        self.inner.kms_requests()
    }
}

/// A batch of several subjects whose keys are not kept yet: one subject's
/// key that cannot be unwrapped holds its own records (retried), not the
/// other subjects' (as it did when the first failed unwrap ended the
/// fetch).
#[tokio::test]
async fn one_subjects_key_failing_holds_only_its_own_records() {
    let source = Arc::new(LocalKeys::new().expect("keys"));
    let writer = club(&Arc::new(Keyring::shared(source.clone())));
    let mut bodies = Vec::new();
    for member in ["m-a", "m-b", "m-c"] {
        let data = json!({"name": "Ada", "email": "ada@example.com", "plan": "gold"});
        bodies.push(sealed_body(&writer, member, 1, "MemberJoined", data).await);
    }
    let refusing = Refusing {
        inner: source.clone(),
        refused: "m-b",
    };
    let store = MemoryStore::default();
    let runner = Runner::new(
        club(&Arc::new(Keyring::new(refusing))),
        &store,
        RunnerConfig::default(),
    );
    let report = runner
        .run(&batch(&bodies), invocation())
        .await
        .expect("run");
    let outcomes: Vec<Outcome> = report.messages.iter().map(|m| m.outcome).collect();
    assert_eq!(
        outcomes,
        [Outcome::Applied, Outcome::StorageError, Outcome::Applied]
    );
    for (member, stored) in [("m-a", true), ("m-b", false), ("m-c", true)] {
        let key = EntityKey::of::<Member>(member);
        assert_eq!(entity::<Member>(&store, &key).is_some(), stored, "{member}");
    }
}

/// The line `replay` and `inspect` print of an entity without a summary of
/// its own names a personal attribute, never its value.
#[test]
fn the_default_summary_names_personal_attributes_without_their_values() {
    let member = Member {
        sequence: 3,
        last_event_id: "m-3".to_owned(),
        name: "Ada Lovelace".to_owned(),
        email: "ada@example.com".to_owned(),
        plan: "gold".to_owned(),
    };
    let line = sequence_guard::AnyEntity::new(member.clone()).summary();
    assert_eq!(line, r#"email (personal) name (personal) plan "gold""#);
    // Once erased: the placeholder, which is no one's, so that the line
    // tells a forgotten member from one whose data is kept.
    let erased = Member {
        name: "(erased)".to_owned(),
        email: "(erased)".to_owned(),
        ..member
    };
    let line = sequence_guard::AnyEntity::new(erased).summary();
    assert_eq!(line, r#"email (erased) name (erased) plan "gold""#);
}
