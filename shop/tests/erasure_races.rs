//! An erasure against whatever runs beside it, on the real parts
//! (`DynamoKeys` over DynamoDB Local, LocalStack's KMS), with a domain of the
//! test's own whose subject is a field of `data` (one person on several
//! streams, and on two entity kinds):
//!
//! - an append that read its subject's key just before `erase` deleted it
//!   is refused, naming the subject, whether the erasure then took the
//!   append's slot or the append opens a stream the erasure could not tell;
//! - a consumer instance that holds the key from before opens nothing of
//!   the subject once the erasure is applied;
//! - `erase` tells the streams of both kinds, and each erases its own.

mod support;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use aws_lambda_events::event::sqs::{SqsEvent, SqsMessage};
use futures::future::BoxFuture;
use sequence_guard::personal::{
    DataKey, DynamoKeys, Erasure, KeyError, KeyItem, KeySource, Keyring, PLACEHOLDER, Personal,
};
use sequence_guard::producer::erase;
use sequence_guard::producer::{Append, AppendError, EventStore, NewEvent};
use sequence_guard::runner::{Invocation, Outcome, Runner, RunnerConfig};
use sequence_guard::{Decision, Domain, Entity, Events, Handling, Sequenced};
use serde::{Deserialize, Serialize};
use serde_json::json;
use support::localstack::KeyedEventStore;
use support::{fresh_table, typed};

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
#[serde(rename_all = "camelCase")]
struct Person {
    #[allow(dead_code)]
    person_id: String,
    name: String,
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type", content = "data")]
enum VenueEvent {
    MemberJoined(Person),
    MemberRenamed(Person),
    GuestArrived(Person),
    PersonalDataErased(Erasure),
}

impl Events for VenueEvent {
    fn handling(self) -> Handling {
        match self {
            VenueEvent::MemberJoined(data) => Handling::sequenced(data, |member, event| {
                create(member, event, |sequence, id, name| Member {
                    sequence,
                    last_event_id: id,
                    name,
                })
            }),
            VenueEvent::MemberRenamed(data) => Handling::sequenced(data, renamed),
            VenueEvent::GuestArrived(data) => Handling::sequenced(data, |guest, event| {
                create(guest, event, |sequence, id, name| Guest {
                    sequence,
                    last_event_id: id,
                    name,
                })
            }),
            VenueEvent::PersonalDataErased(data) => Handling::erasure(data),
        }
    }

    fn personal() -> Personal {
        Personal::new()
            .fields_of("MemberJoined", "personId", &["name"])
            .fields_of("MemberRenamed", "personId", &["name"])
            .fields_of("GuestArrived", "personId", &["name"])
    }
}

fn create<T>(
    entity: &mut Option<T>,
    event: &Sequenced<Person>,
    made: impl FnOnce(u64, String, String) -> T,
) -> Decision {
    if entity.is_some() {
        return Decision::Duplicate;
    }
    *entity = Some(made(
        event.sequence,
        event.event_id.clone(),
        event.data.name.clone(),
    ));
    Decision::Applied
}

fn renamed(member: &mut Option<Member>, event: &Sequenced<Person>) -> Decision {
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

const NAME: &str = "Ada MARKER Lovelace";

/// When a hooked key source runs its hook.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum After {
    /// After the key item was read (holding the key).
    Read,
    /// After a stream was added to the key item.
    AddStream,
}

type Hook = Box<dyn FnOnce() -> BoxFuture<'static, ()> + Send>;

/// `DynamoKeys`, with a hook run once, right after a call: another
/// process's `erase`, between this process's read of a key and its write.
struct Hooked {
    inner: Arc<DynamoKeys>,
    after: After,
    hook: Mutex<Option<Hook>>,
}

impl Hooked {
    async fn run(&self, now: After) {
        if now != self.after {
            return;
        }
        let hook = self.hook.lock().expect("hook").take();
        if let Some(hook) = hook {
            hook().await;
        }
    }
}

impl KeySource for Hooked {
    fn read<'a>(
        &'a self,
        subjects: &'a [String],
    ) -> BoxFuture<'a, Result<HashMap<String, KeyItem>, KeyError>> {
        Box::pin(async move {
            let read = self.inner.read(subjects).await;
            self.run(After::Read).await;
            read
        })
    }

    fn unwrap_key<'a>(
        &'a self,
        subject: &'a str,
        wrapped: &'a [u8],
    ) -> BoxFuture<'a, Result<DataKey, KeyError>> {
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
        Box::pin(async move {
            let added = self.inner.add_stream(subject, stream).await;
            self.run(After::AddStream).await;
            added
        })
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

    fn key_check(&self, subject: &str) -> Option<aws_sdk_dynamodb::types::TransactWriteItem> {
        self.inner.key_check(subject)
    }
}

impl KeyedEventStore {
    /// A process of its own (its own keyring and event store) over `keys`.
    fn process(&self, keys: Arc<dyn KeySource>) -> (Domain, EventStore) {
        let domain = Domain::new::<VenueEvent>().with_keys(Arc::new(Keyring::shared(keys)));
        if let Err(err) = domain.check() {
            panic!("the test's domain: {err}");
        }
        let store = EventStore::new(self.dynamodb.clone(), &self.table, domain.clone());
        (domain, store)
    }

    /// A process whose key source runs `erase` of `subject` (by another
    /// process) once, right `after` the call named.
    fn racing_erase(&self, subject: &str, after: After) -> EventStore {
        let (_, eraser) = self.process(self.keys());
        let subject = subject.to_owned();
        let hook: Hook = Box::new(move || {
            Box::pin(async move {
                erase(&eraser, &subject).await.expect("erased");
            })
        });
        let hooked = Hooked {
            inner: self.keys(),
            after,
            hook: Mutex::new(Some(hook)),
        };
        self.process(Arc::new(hooked)).1
    }
}

async fn append(
    store: &EventStore,
    stream: &str,
    event_type: &str,
    person: &str,
) -> Result<u64, AppendError> {
    let data = json!({"personId": person, "name": NAME});
    store
        .append(Append::one(stream, NewEvent::new(event_type, data)))
        .await
        .map(|appended| appended.sequence)
}

async fn types(store: &EventStore, stream: &str) -> Vec<String> {
    store
        .read(stream, 0, 100)
        .await
        .expect("read the stream")
        .into_iter()
        .map(|event| event.event_type)
        .collect()
}

fn refused_as_erased(appended: Result<u64, AppendError>, person: &str) {
    match appended {
        Err(err @ AppendError::Erased { .. }) => {
            assert!(err.to_string().contains(&format!("`{person}`")), "{err}")
        }
        other => panic!("the append was not refused as erased: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_append_that_read_its_key_before_an_erasure_lands_nowhere_after_it() {
    let setup = KeyedEventStore::new("races", "slot").await;
    let (_, writer) = setup.process(setup.keys());
    assert_eq!(append(&writer, "m-1", "MemberJoined", "p-1").await, Ok(1));

    // Another process reads the key (it holds it), then `erase` deletes it
    // and tells the stream (event 2) before that process writes: the slot
    // it found is taken, the key read again, the append refused.
    let racing = setup.racing_erase("p-1", After::Read);
    refused_as_erased(append(&racing, "m-1", "MemberRenamed", "p-1").await, "p-1");
    assert_eq!(
        types(&writer, "m-1").await,
        ["MemberJoined", "PersonalDataErased"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_append_opening_a_stream_after_its_key_was_deleted_is_refused() {
    let setup = KeyedEventStore::new("races", "open").await;
    let (_, writer) = setup.process(setup.keys());
    assert_eq!(append(&writer, "m-2", "MemberJoined", "p-2").await, Ok(1));

    // The key is given the new stream, then erased: `erase` tells only the
    // streams that hold an event, so nothing of the new one would follow
    // the event. The append's transaction checks the key item: refused.
    let racing = setup.racing_erase("p-2", After::AddStream);
    refused_as_erased(append(&racing, "g-2", "GuestArrived", "p-2").await, "p-2");
    assert!(types(&writer, "g-2").await.is_empty(), "nothing written");
}

fn batch(bodies: &[String]) -> SqsEvent {
    let mut event = SqsEvent::default();
    event.records = bodies
        .iter()
        .enumerate()
        .map(|(index, body)| {
            let mut message = SqsMessage::default();
            message.message_id = Some(format!("m-{index}-{}", body.len()));
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_instance_opens_a_subjects_values_once_its_erasure_is_applied() {
    let setup = KeyedEventStore::new("races", "instances").await;
    let (_, producer) = setup.process(setup.keys());
    // One person on two streams, each projected by the same consumer.
    assert_eq!(append(&producer, "m-3", "MemberJoined", "p-3").await, Ok(1));
    assert_eq!(append(&producer, "g-3", "GuestArrived", "p-3").await, Ok(1));
    let bodies = |stream: &'static str| {
        let producer = producer.clone();
        async move {
            producer
                .read(stream, 0, 10)
                .await
                .expect("read")
                .into_iter()
                .map(|event| event.body)
                .collect::<Vec<_>>()
        }
    };
    let table = fresh_table().await;
    let instance = || {
        let (domain, _) = setup.process(setup.keys());
        Runner::new(domain, table.clone(), RunnerConfig::default())
    };
    let (a, b) = (instance(), instance());

    // Instance B opens the person's member event: it holds their key now.
    let member = bodies("m-3").await;
    let report = b.run(&batch(&member), NOW).await.expect("a batch");
    assert_eq!(report.count(Outcome::Applied), 1, "{report:?}");
    let joined: Member = typed(&table, "m-3").await.expect("a member");
    assert_eq!(joined.name, NAME);

    // The person is erased; instance A applies the member stream's erasure.
    erase(&producer, "p-3").await.expect("erased");
    let member = bodies("m-3").await;
    let report = a.run(&batch(&member[1..]), NOW).await.expect("a batch");
    assert_eq!(report.count(Outcome::Applied), 1, "{report:?}");
    let erased: Member = typed(&table, "m-3").await.expect("a member");
    assert_eq!(erased.name, PLACEHOLDER);

    // Instance B, with the key it kept, receives the guest stream's first
    // event (its erasure follows it): it opens nothing.
    let guest = bodies("g-3").await;
    let report = b.run(&batch(&guest[..1]), NOW).await.expect("a batch");
    assert_eq!(report.count(Outcome::Applied), 1, "{report:?}");
    let arrived: Guest = typed(&table, "g-3").await.expect("a guest");
    assert_eq!(
        arrived.name, PLACEHOLDER,
        "opened with a key kept from before"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_erasure_tells_the_streams_of_every_kind_and_each_erases_its_own() {
    let setup = KeyedEventStore::new("races", "kinds").await;
    let (domain, producer) = setup.process(setup.keys());
    assert_eq!(append(&producer, "m-4", "MemberJoined", "p-4").await, Ok(1));
    assert_eq!(append(&producer, "g-4", "GuestArrived", "p-4").await, Ok(1));

    let erased = erase(&producer, "p-4").await.expect("erased");
    let mut told = erased.told.clone();
    told.sort();
    assert_eq!(told, [("g-4".to_owned(), 2), ("m-4".to_owned(), 2)]);
    assert!(erase(&producer, "p-4").await.expect("again").already_done);

    let table = fresh_table().await;
    let runner = Runner::new(domain, table.clone(), RunnerConfig::default());
    let mut bodies = Vec::new();
    for stream in ["m-4", "g-4"] {
        for event in producer.read(stream, 0, 10).await.expect("read") {
            bodies.push(event.body);
        }
    }
    let report = runner.run(&batch(&bodies), NOW).await.expect("a batch");
    assert_eq!(report.count(Outcome::Applied), 4, "{report:?}");
    let member: Member = typed(&table, "m-4").await.expect("a member");
    let guest: Guest = typed(&table, "g-4").await.expect("a guest");
    assert_eq!((member.name.as_str(), member.sequence), (PLACEHOLDER, 2));
    assert_eq!((guest.name.as_str(), guest.sequence), (PLACEHOLDER, 2));
}
