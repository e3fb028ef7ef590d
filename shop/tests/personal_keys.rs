//! Personal data's keys on the real parts: `DynamoKeys` over DynamoDB Local
//! (the event store's table) and LocalStack's KMS, under a `Keyring`, with
//! a small domain of the test's own. Appends seal, one `GenerateDataKey`
//! per subject; a reader opens after fetching the keys; two writers racing
//! for a new subject end with one key; `erase` deletes the key, tells the
//! stream once, and refuses the subject's personal data from then on. The
//! KMS and DynamoDB requests of each step are counted and asserted; a key
//! vouched for by the writer's own events is read again after another
//! writer's event, and refuses the append once another process erased it.

mod support;

use std::sync::Arc;

use aws_sdk_dynamodb::types::AttributeValue;
use sequence_guard::envelope::InvalidMessage;
use sequence_guard::personal::{
    DynamoKeys, Erasure, KeySource, Keyring, PLACEHOLDER, Personal, is_sealed,
};
use sequence_guard::producer::erase;
use sequence_guard::producer::{Append, AppendError, EventStore, NewEvent};
use sequence_guard::{Decision, Domain, Entity, Events, Handling, Sequenced};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use support::localstack::KeyedEventStore;

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

#[derive(Debug, Clone, Deserialize)]
struct PlanChanged {
    plan: String,
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type", content = "data")]
enum ClubEvent {
    MemberJoined(Joined),
    MemberRenamed(Renamed),
    PlanChanged(PlanChanged),
    PersonalDataErased(Erasure),
}

impl Events for ClubEvent {
    fn handling(self) -> Handling {
        match self {
            ClubEvent::MemberJoined(data) => Handling::sequenced(data, joined),
            ClubEvent::MemberRenamed(data) => Handling::sequenced(data, |member, event| {
                update(member, event, |member, data: &Renamed| {
                    member.name.clone_from(&data.name);
                })
            }),
            ClubEvent::PlanChanged(data) => Handling::sequenced(data, |member, event| {
                update(member, event, |member, data: &PlanChanged| {
                    member.plan.clone_from(&data.plan);
                })
            }),
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

fn update<D>(
    member: &mut Option<Member>,
    event: &Sequenced<D>,
    change: impl FnOnce(&mut Member, &D),
) -> Decision {
    let Some(member) = member else {
        return Decision::NotCreated;
    };
    if member.sequence >= event.sequence {
        return Decision::Duplicate;
    }
    if member.sequence != event.sequence - 1 {
        return Decision::Gap;
    }
    change(member, &event.data);
    member.sequence = event.sequence;
    member.last_event_id.clone_from(&event.event_id);
    Decision::Applied
}

const NAME: &str = "Ada MARKER Lovelace";
const EMAIL: &str = "ada@MARKER.example";

impl KeyedEventStore {
    /// A process: its keyring over `keys`, and its domain and event store.
    fn process(&self, keys: &Arc<DynamoKeys>) -> (Domain, EventStore) {
        let keyring = Arc::new(Keyring::shared(keys.clone()));
        let domain = Domain::new::<ClubEvent>()
            .entity::<Member>()
            .with_keys(keyring);
        if let Err(err) = domain.check() {
            panic!("the test's domain: {err}");
        }
        let store = EventStore::new(self.dynamodb.clone(), &self.table, domain.clone());
        (domain, store)
    }

    /// The subject's key item, as stored.
    async fn item(
        &self,
        subject: &str,
    ) -> Option<std::collections::HashMap<String, AttributeValue>> {
        self.dynamodb
            .get_item()
            .table_name(&self.table)
            .key("pk", AttributeValue::S(format!("SUBJECT#{subject}")))
            .key("sk", AttributeValue::S("KEY".to_owned()))
            .consistent_read(true)
            .send()
            .await
            .expect("get the key item")
            .item
    }
}

async fn append(
    store: &EventStore,
    stream: &str,
    event_type: &str,
    data: Value,
) -> Result<u64, AppendError> {
    store
        .append(Append::one(stream, NewEvent::new(event_type, data)))
        .await
        .map(|appended| appended.sequence)
}

fn joined_data() -> Value {
    json!({"name": NAME, "email": EMAIL, "plan": "gold"})
}

/// The stream's bodies, in order.
async fn bodies(store: &EventStore, stream: &str) -> Vec<String> {
    store
        .read(stream, 0, 100)
        .await
        .expect("read the stream")
        .into_iter()
        .map(|event| event.body)
        .collect()
}

/// The member that `bodies`, read by `domain`, make.
fn fold(domain: &Domain, bodies: &[String]) -> Option<Member> {
    let mut slot = None;
    for body in bodies {
        domain
            .parse(body)
            .expect("readable")
            .decide(&mut slot)
            .expect("decided");
    }
    slot.as_ref().and_then(|any| any.get::<Member>()).cloned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn appends_seal_with_one_data_key_a_subject_and_a_reader_opens_them_after_fetching() {
    let setup = KeyedEventStore::new("keys", "seal").await;
    let writer = setup.keys();
    let (_, store) = setup.process(&writer);

    // The subject's first personal append: its key made (one GenerateDataKey),
    // read first and put (two DynamoDB requests).
    assert_eq!(
        append(&store, "ada", "MemberJoined", joined_data()).await,
        Ok(1)
    );
    assert_eq!((writer.kms_requests(), writer.requests()), (1, 2));

    let stored = bodies(&store, "ada").await;
    assert!(!stored[0].contains("MARKER"), "{}", stored[0]);
    let data = &serde_json::from_str::<Value>(&stored[0]).expect("json")["data"];
    assert!(data["name"].as_str().is_some_and(is_sealed), "{data}");
    assert!(data["email"].as_str().is_some_and(is_sealed), "{data}");
    assert_eq!(data["plan"], "gold");

    // The key item holds the key wrapped, never in clear.
    let item = setup.item("ada").await.expect("a key item");
    let Some(AttributeValue::B(wrapped)) = item.get("wrappedKey") else {
        panic!("no binary wrappedKey: {:?}", item.keys());
    };
    assert_eq!(
        item.get("streams"),
        Some(&AttributeValue::Ss(vec!["ada".to_owned()]))
    );
    assert!(matches!(item.get("createdAt"), Some(AttributeValue::N(_))));
    let plain = setup
        .kms
        .decrypt()
        .ciphertext_blob(wrapped.clone())
        .encryption_context("subject", "ada")
        .send()
        .await
        .expect("the test unwraps the key")
        .plaintext
        .expect("a key");
    assert_eq!(plain.as_ref().len(), 32);
    assert!(
        !wrapped
            .as_ref()
            .windows(32)
            .any(|window| window == plain.as_ref()),
        "the plain key is in the wrapped one"
    );
    let binary: Vec<&String> = item
        .iter()
        .filter(|(_, value)| matches!(value, AttributeValue::B(_) | AttributeValue::Bs(_)))
        .map(|(name, _)| name)
        .collect();
    assert_eq!(binary, ["wrappedKey"], "no other bytes are kept");
    // Unwrapped for another subject, it is refused (the encryption context).
    assert!(
        writer
            .unwrap_key("bob", wrapped.as_ref())
            .await
            .is_err_and(|err| err.to_string().contains("`bob`"))
    );
    let before = writer.kms_requests();

    // Later appends of the subject: the first event's transaction checked
    // the key item, and every event since is this store's own: the key is
    // vouched for, no item read, no KMS request; one without personal data
    // reads no key at all.
    assert_eq!(
        append(&store, "ada", "MemberRenamed", json!({"name": NAME})).await,
        Ok(2)
    );
    assert_eq!((writer.kms_requests(), writer.requests()), (before, 2));
    assert_eq!(
        append(&store, "ada", "PlanChanged", json!({"plan": "silver"})).await,
        Ok(3)
    );
    assert_eq!((writer.kms_requests(), writer.requests()), (before, 2));
    assert_eq!(
        append(&store, "ada", "MemberRenamed", json!({"name": NAME})).await,
        Ok(4)
    );
    assert_eq!((writer.kms_requests(), writer.requests()), (before, 2));

    // A reader with a cold keyring: the key is needed, then fetched (one
    // BatchGetItem and one Decrypt), then every body opens.
    let reader_keys = setup.keys();
    let (reader, _) = setup.process(&reader_keys);
    let stored = bodies(&store, "ada").await;
    match reader.parse(&stored[0]) {
        Err(InvalidMessage::KeyNeeded(subject)) => assert_eq!(subject, "ada"),
        other => panic!("{other:?}"),
    }
    reader
        .fetch_keys(stored.iter().map(String::as_str))
        .await
        .expect("keys fetched");
    assert_eq!((reader_keys.kms_requests(), reader_keys.requests()), (1, 1));
    let member = fold(&reader, &stored).expect("a member");
    assert_eq!((member.name.as_str(), member.email.as_str()), (NAME, EMAIL));
    assert_eq!((member.plan.as_str(), member.sequence), ("silver", 4));
    // Fetched again while kept: the item read again (a kept key is used
    // only while its item holds it), and no KMS request.
    reader
        .fetch_keys(stored.iter().map(String::as_str))
        .await
        .expect("kept");
    assert_eq!((reader_keys.kms_requests(), reader_keys.requests()), (1, 2));

    // The store's streams are its streams: a key item is none.
    let (streams, _) = store.streams(None).await.expect("streams");
    assert_eq!(streams, ["ada"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_writers_racing_for_a_new_subject_end_with_one_key_both_use() {
    let setup = KeyedEventStore::new("keys", "race").await;
    let (first, second) = (setup.keys(), setup.keys());

    // The loser of the put is answered the winner's item.
    let Ok(Ok((wrapped, key))) = first.create("bo", "bo").await else {
        panic!("the first writer's key is stored");
    };
    match second.create("bo", "bo").await {
        Ok(Err(found)) => {
            assert_eq!(found.wrapped.as_deref(), Some(wrapped.as_slice()));
            assert_eq!(found.streams, ["bo"]);
        }
        other => panic!("{other:?}"),
    }
    let unwrapped = second.unwrap_key("bo", &wrapped).await.expect("unwrapped");
    let sealed = key.seal(b"\"Bo\"", b"e-1\0name").expect("sealed");
    assert_eq!(
        unwrapped.open(&sealed, b"e-1\0name"),
        Ok(b"\"Bo\"".to_vec())
    );

    // Two keyrings appending for one new subject at once: one key item,
    // and each writer's values open with the other's key.
    let (one, two) = (
        Arc::new(Keyring::shared(setup.keys())),
        Arc::new(Keyring::shared(setup.keys())),
    );
    let (a, b) = tokio::join!(one.for_append("cy", "cy"), two.for_append("cy", "cy"));
    let (a, b) = (a.expect("first"), b.expect("second"));
    let sealed = a.seal(b"\"Cy\"", b"e-2\0name").expect("sealed");
    assert_eq!(b.open(&sealed, b"e-2\0name"), Ok(b"\"Cy\"".to_vec()));
    let item = setup.item("cy").await.expect("one key item");
    assert!(matches!(item.get("wrappedKey"), Some(AttributeValue::B(_))));
    // Each made one key (GenerateDataKey); a loser of the put also unwraps
    // the winner's (Decrypt).
    let made = one.kms_requests() + two.kms_requests();
    assert!((2..=3).contains(&made), "{made} KMS requests");
}

/// A key vouched for by the writer's own events (no item read) is read
/// again once another writer's event comes first; after another process
/// erased the subject, that read refuses the append.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_vouched_for_is_read_again_after_another_writers_event() {
    let setup = KeyedEventStore::new("keys", "vouch").await;
    let keys = setup.keys();
    let (_, writer) = setup.process(&keys);
    let renamed = || json!({"name": NAME});
    // 1: the key made; 2: its item read while the stream holds event 1.
    assert_eq!(
        append(&writer, "fay", "MemberJoined", joined_data()).await,
        Ok(1)
    );
    assert_eq!(
        append(&writer, "fay", "MemberRenamed", renamed()).await,
        Ok(2)
    );
    let read = keys.requests();
    assert_eq!(
        append(&writer, "fay", "MemberRenamed", renamed()).await,
        Ok(3)
    );
    assert_eq!(keys.requests(), read, "vouched for: no item read");

    // Another process's event at 4: the writer's put there is refused, the
    // item read again, the event appended at 5; vouched for again after.
    let other_keys = setup.keys();
    let (_, other) = setup.process(&other_keys);
    assert_eq!(
        append(&other, "fay", "PlanChanged", json!({"plan": "silver"})).await,
        Ok(4)
    );
    assert_eq!(
        append(&writer, "fay", "MemberRenamed", renamed()).await,
        Ok(5)
    );
    assert_eq!(keys.requests(), read + 1, "read again");
    assert_eq!(
        append(&writer, "fay", "MemberRenamed", renamed()).await,
        Ok(6)
    );
    assert_eq!(keys.requests(), read + 1, "vouched for again");

    // The other process erases the subject: the writer's next personal
    // append is refused, naming them, and nothing is written.
    let erased = erase(&other, "fay").await.expect("erased");
    assert_eq!(erased.told, [("fay".to_owned(), 7)]);
    match append(&writer, "fay", "MemberRenamed", renamed()).await {
        Err(err @ AppendError::Erased { .. }) => {
            assert!(err.to_string().contains("`fay`"), "{err}")
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(writer.last_sequence("fay").await, Ok(7));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn erasure_deletes_the_key_tells_the_stream_once_and_refuses_the_subjects_personal_data() {
    let setup = KeyedEventStore::new("keys", "erase").await;
    let keys = setup.keys();
    let (_, store) = setup.process(&keys);
    append(&store, "dee", "MemberJoined", joined_data())
        .await
        .expect("joined");
    append(&store, "dee", "PlanChanged", json!({"plan": "silver"}))
        .await
        .expect("plan");
    append(&store, "eve", "MemberJoined", joined_data())
        .await
        .expect("another subject");
    let old = bodies(&store, "dee").await;
    let kms_before = keys.kms_requests();

    // Erased: the key gone, the stream told with one erasure event.
    let erased = erase(&store, "dee").await.expect("erased");
    assert!(erased.key_deleted && !erased.already_done, "{erased:?}");
    assert_eq!(erased.told, [("dee".to_owned(), 3)]);
    assert_eq!(keys.kms_requests(), kms_before, "erasure asks KMS nothing");
    let item = setup.item("dee").await.expect("the erased item");
    assert!(!item.contains_key("wrappedKey"), "{:?}", item.keys());
    assert_eq!(
        item.get("streams"),
        Some(&AttributeValue::Ss(vec!["dee".to_owned()]))
    );
    assert_eq!(item.get("told"), Some(&AttributeValue::Bool(true)));
    assert!(matches!(item.get("erasedAt"), Some(AttributeValue::N(_))));
    let after = bodies(&store, "dee").await;
    assert_eq!(after.len(), 3);
    let told: Value = serde_json::from_str(&after[2]).expect("json");
    assert_eq!(
        (told["type"].as_str(), told["data"]["subject"].as_str()),
        (Some("PersonalDataErased"), Some("dee"))
    );

    // Again: nothing more to do, nothing appended.
    let again = erase(&store, "dee").await.expect("erased again");
    assert!(
        again.already_done && !again.key_deleted && again.told.is_empty(),
        "{again:?}"
    );
    assert_eq!(store.last_sequence("dee").await, Ok(3));

    // Personal data of the subject is refused, naming them; the rest goes on.
    match append(&store, "dee", "MemberRenamed", json!({"name": NAME})).await {
        Err(err @ AppendError::Erased { .. }) => {
            assert!(err.to_string().contains("`dee`"), "{err}")
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        append(&store, "dee", "PlanChanged", json!({"plan": "gold"})).await,
        Ok(4)
    );

    // A reader: the old bodies read with the placeholder, no KMS request
    // for the erased subject; the other subject is intact.
    let reader_keys = setup.keys();
    let (reader, _) = setup.process(&reader_keys);
    let all = bodies(&store, "dee").await;
    reader
        .fetch_keys(old.iter().chain(&all).map(String::as_str))
        .await
        .expect("fetched");
    assert_eq!(reader_keys.kms_requests(), 0);
    let member = fold(&reader, &all).expect("a member");
    assert_eq!(
        (
            member.name.as_str(),
            member.email.as_str(),
            member.plan.as_str(),
            member.sequence
        ),
        (PLACEHOLDER, PLACEHOLDER, "gold", 4)
    );
    let other = bodies(&store, "eve").await;
    reader
        .fetch_keys(other.iter().map(String::as_str))
        .await
        .expect("fetched");
    assert_eq!(
        fold(&reader, &other).map(|member| member.name),
        Some(NAME.to_owned())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_of_many_subjects_asks_a_hundred_a_request_and_an_unknown_subject_erased_is_refused()
{
    let setup = KeyedEventStore::new("keys", "many").await;
    let keys = setup.keys();
    let (_, store) = setup.process(&keys);
    append(&store, "s-007", "MemberJoined", joined_data())
        .await
        .expect("joined");
    append(&store, "s-150", "MemberJoined", joined_data())
        .await
        .expect("joined");
    let reader = setup.keys();

    // 250 subjects (one named twice), two with keys: three requests.
    let mut subjects: Vec<String> = (0..250).map(|n| format!("s-{n:03}")).collect();
    subjects.push("s-007".to_owned());
    let found = reader.read(&subjects).await.expect("read");
    assert_eq!(reader.requests(), 3);
    let mut named: Vec<&String> = found.keys().collect();
    named.sort();
    assert_eq!(named, ["s-007", "s-150"]);
    assert!(found.values().all(|stored| stored.wrapped.is_some()));
    assert_eq!(reader.kms_requests(), 0, "a read unwraps nothing");

    // A subject with no key erased: an erased item, nothing to tell; its
    // personal data is refused from then on.
    let erased = erase(&store, "nobody").await.expect("erased");
    assert!(!erased.key_deleted && erased.told.is_empty(), "{erased:?}");
    let item = setup.item("nobody").await.expect("an erased item");
    assert!(!item.contains_key("wrappedKey") && !item.contains_key("streams"));
    assert_eq!(item.get("told"), Some(&AttributeValue::Bool(true)));
    assert!(erase(&store, "nobody").await.expect("again").already_done);
    assert!(matches!(
        append(&store, "nobody", "MemberJoined", joined_data()).await,
        Err(AppendError::Erased { subject }) if subject == "nobody"
    ));
    assert_eq!(
        store.last_sequence("nobody").await,
        Ok(0),
        "nothing written"
    );
}
