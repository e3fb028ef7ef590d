//! Event versions, from the outside: the envelope's `version`, a domain's
//! declaration of its versions and upcasts (its mistakes found when the
//! domain is built), and the runner's outcome for a body it cannot upcast.

use aws_lambda_events::event::sqs::{SqsEvent, SqsMessage};
use sequence_guard::runner::{Invocation, Outcome, Runner, RunnerConfig};
use sequence_guard::store::memory::MemoryStore;
use sequence_guard::versions::Versions;
use sequence_guard::{Decision, Domain, Entity, Events, Handling, Sequenced};
use serde::{Deserialize, Serialize};
use serde_json::Value;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Doc {
    sequence: u64,
    last_event_id: String,
    title: String,
    text: String,
}

impl Entity for Doc {
    const KIND: &'static str = "DOC";
    fn sequence(&self) -> u64 {
        self.sequence
    }
    fn last_event_id(&self) -> &str {
        &self.last_event_id
    }
}

/// `DocWritten` data, version 3. Version 1 had `body`, version 2 renamed it
/// `text`, version 3 added `title` (taken from the first line of the text).
#[derive(Debug, Deserialize)]
struct Written {
    #[serde(deserialize_with = "sequence_guard::limits::text::<_, 1, 64>")]
    title: String,
    text: String,
}

#[derive(Debug, Deserialize)]
struct Deleted {}

#[derive(Debug, Deserialize)]
#[serde(tag = "type", content = "data")]
enum DocEvent {
    DocWritten(Written),
    DocDeleted(Deleted),
}

fn on_written(doc: &mut Option<Doc>, event: &Sequenced<Written>) -> Decision {
    if doc.is_some() {
        return Decision::Duplicate;
    }
    *doc = Some(Doc {
        sequence: event.sequence,
        last_event_id: event.event_id.clone(),
        title: event.data.title.clone(),
        text: event.data.text.clone(),
    });
    Decision::Applied
}

fn on_deleted(doc: &mut Option<Doc>, event: &Sequenced<Deleted>) -> Decision {
    let Some(doc) = doc else {
        return Decision::NotCreated;
    };
    if doc.sequence != event.sequence - 1 {
        return if doc.sequence >= event.sequence {
            Decision::Duplicate
        } else {
            Decision::Gap
        };
    }
    doc.text.clear();
    doc.sequence = event.sequence;
    doc.last_event_id.clone_from(&event.event_id);
    Decision::Applied
}

/// Version 1 to 2: `body` is renamed `text`.
fn renamed(mut data: Value) -> Result<Value, String> {
    if let Value::Object(fields) = &mut data
        && let Some(body) = fields.remove("body")
    {
        fields.insert("text".to_owned(), body);
    }
    Ok(data)
}

/// Version 2 to 3: the title is the text's first line; a text without one
/// cannot have a title, and is refused.
fn titled(mut data: Value) -> Result<Value, String> {
    let Value::Object(fields) = &mut data else {
        return Err("is not an object".to_owned());
    };
    let title = fields
        .get("text")
        .and_then(Value::as_str)
        .and_then(|text| text.lines().next())
        .filter(|line| !line.trim().is_empty())
        .ok_or("`text` has no first line to make a title of")?
        .to_owned();
    fields.insert("title".to_owned(), title.into());
    Ok(data)
}

impl Events for DocEvent {
    fn handling(self) -> Handling {
        match self {
            DocEvent::DocWritten(data) => Handling::sequenced(data, on_written),
            DocEvent::DocDeleted(data) => Handling::sequenced(data, on_deleted),
        }
    }

    fn versions() -> Versions {
        Versions::none()
            .current("DocWritten", 3)
            .upcast("DocWritten", 1, renamed)
            .upcast("DocWritten", 2, titled)
    }
}

fn domain() -> Domain {
    Domain::new::<DocEvent>().entity::<Doc>()
}

fn body(event_type: &str, sequence: u64, version: Option<Value>, data: Value) -> String {
    let mut body = serde_json::json!({
        "eventId": format!("e-{sequence}"), "type": event_type, "aggregateId": "doc-1",
        "sequence": sequence, "data": data,
    });
    if let (Some(version), Value::Object(fields)) = (version, &mut body) {
        fields.insert("version".to_owned(), version);
    }
    body.to_string()
}

fn reason(domain: &Domain, body: &str) -> Option<String> {
    domain.parse(body).err().map(|err| err.to_string())
}

#[test]
fn version_is_absent_or_an_integer_from_1_to_65535() {
    let domain = domain();
    let deleted = |version: Option<Value>| body("DocDeleted", 2, version, serde_json::json!({}));
    assert_eq!(reason(&domain, &deleted(None)), None, "absent: version 1");
    assert_eq!(reason(&domain, &deleted(Some(1.into()))), None);
    let invalid = [
        (
            Value::from(65535),
            "field `version` names DocDeleted version 65535, newer than this consumer knows (1)",
        ),
        (
            Value::from(0),
            "field `version` must be an integer from 1 to 65535, got 0",
        ),
        (
            Value::from(65536),
            "field `version` must be an integer from 1 to 65535, got 65536",
        ),
        (
            Value::from(-1),
            "field `version` must be an integer from 1 to 65535, got -1",
        ),
        (
            Value::Null,
            "field `version` must be an integer from 1 to 65535 (or absent, for 1), got null",
        ),
        (
            Value::from("2"),
            "field `version` must be an integer, got a string",
        ),
        (
            Value::from(2.5),
            "field `version` must be an integer from 1 to 65535, got 2.5",
        ),
        (
            Value::from(1.0),
            "field `version` must be an integer from 1 to 65535, got 1.0",
        ),
    ];
    for (version, expected) in invalid {
        assert_eq!(
            reason(&domain, &deleted(Some(version.clone()))).as_deref(),
            Some(expected),
            "version {version}"
        );
    }
}

/// A type at the highest version there is: 65534 upcasts, each run on a
/// version-1 body.
#[derive(Debug, Deserialize)]
#[serde(tag = "type", content = "data")]
enum Wide {
    DocDeleted(Deleted),
}

impl Events for Wide {
    fn handling(self) -> Handling {
        match self {
            Wide::DocDeleted(data) => Handling::sequenced(data, on_deleted),
        }
    }

    fn versions() -> Versions {
        (1..u16::MAX).fold(
            Versions::none().current("DocDeleted", u16::MAX),
            |v, from| v.upcast("DocDeleted", from, Ok),
        )
    }
}

#[test]
fn version_65535_is_read_by_a_domain_that_knows_it() {
    let domain = Domain::new::<Wide>().entity::<Doc>();
    assert_eq!(domain.check(), Ok(()));
    assert_eq!(domain.version("DocDeleted"), 65535);
    for version in [Some(65535.into()), Some(1.into()), None] {
        let deleted = body("DocDeleted", 2, version, serde_json::json!({}));
        assert_eq!(reason(&domain, &deleted), None, "{deleted}");
    }
}

#[test]
fn an_older_body_is_upcast_step_by_step_before_its_data_is_read() {
    let domain = domain();
    let doc = |body: &str| {
        let mut slot = None;
        let decision = domain.parse(body).map(|event| event.decide(&mut slot));
        (
            decision.map_err(|err| err.to_string()),
            slot.and_then(|entity| {
                entity
                    .get::<Doc>()
                    .map(|doc| (doc.title.clone(), doc.text.clone()))
            }),
        )
    };
    let written = |version, data| body("DocWritten", 1, version, data);
    let expected = (
        Ok(Ok(Decision::Applied)),
        Some(("Hi".to_owned(), "Hi\nthere".to_owned())),
    );
    assert_eq!(
        doc(&written(None, serde_json::json!({"body": "Hi\nthere"}))),
        expected
    );
    assert_eq!(
        doc(&written(
            Some(2.into()),
            serde_json::json!({"text": "Hi\nthere"})
        )),
        expected
    );
    assert_eq!(
        doc(&written(
            Some(3.into()),
            serde_json::json!({"title": "Hi", "text": "Hi\nthere"})
        )),
        expected
    );
    // What an upcast makes is checked as the type declares it.
    let long = format!("{}\nthere", "x".repeat(65));
    assert_eq!(
        doc(&written(Some(2.into()), serde_json::json!({"text": long}))).0,
        Err("field `data.title` must be 1 to 64 characters, got more than 64".to_owned())
    );
    // A body missing what the current version needs, at the current version, is refused as ever.
    assert_eq!(
        doc(&written(Some(3.into()), serde_json::json!({"text": "Hi"}))).0,
        Err("missing field `data.title`".to_owned())
    );
}

#[test]
fn a_domain_with_a_mistake_in_its_versions_does_not_start() {
    #[derive(Debug, Deserialize)]
    #[serde(tag = "type", content = "data")]
    enum Mistaken {
        DocWritten(Written),
    }
    impl Events for Mistaken {
        fn handling(self) -> Handling {
            match self {
                Mistaken::DocWritten(data) => Handling::sequenced(data, on_written),
            }
        }
        fn versions() -> Versions {
            Versions::none()
                .current("DocWritten", 3)
                .upcast("DocWritten", 2, titled)
                .current("DocWriten", 2)
        }
    }
    let domain = Domain::new::<Mistaken>().entity::<Doc>();
    let problems = domain.check().map_err(|err| err.problems().to_vec());
    assert_eq!(
        problems,
        Err(vec![
            "versions are declared for `DocWriten`, a type the events enum does not have (it has DocWritten): name the type as the envelope's `type` does".to_owned(),
            "DocWritten is at version 3 and has no upcast from version 1: add .upcast(\"DocWritten\", 1, ...) for each, from that version's data to the next's".to_owned(),
        ])
    );
    let runner = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        Runner::new(domain, MemoryStore::new(), RunnerConfig::default())
    }));
    assert!(runner.is_err(), "Runner::new refuses it");
}

fn message(id: &str, stream: &str, body: String) -> SqsMessage {
    let mut message = SqsMessage::default();
    message.message_id = Some(id.to_owned());
    message.body = Some(body);
    message
        .attributes
        .insert("MessageGroupId".to_owned(), stream.to_owned());
    message
}

#[tokio::test]
async fn an_upcast_that_refuses_makes_its_message_invalid_and_holds_only_its_stream() {
    let runner = Runner::new(domain(), MemoryStore::new(), RunnerConfig::default());
    let at = |stream: &str, body: String| body.replace("doc-1", stream);
    let mut batch = SqsEvent::default();
    batch.records = vec![
        // A version-2 text without a first line: its upcast to 3 refuses.
        message(
            "m-1",
            "doc-1",
            body(
                "DocWritten",
                1,
                Some(2.into()),
                serde_json::json!({"text": ""}),
            ),
        ),
        message(
            "m-2",
            "doc-1",
            body("DocDeleted", 2, None, serde_json::json!({})),
        ),
        // Another stream, version 1, upcast twice: applied.
        message(
            "m-3",
            "doc-2",
            at(
                "doc-2",
                body("DocWritten", 1, None, serde_json::json!({"body": "Hello"})),
            ),
        ),
    ];
    let invocation = Invocation {
        deadline: None,
        now: 1_764_489_600,
    };
    let report = runner.run(&batch, invocation).await.expect("run");
    let outcomes: Vec<(Outcome, Option<&str>)> = report
        .messages
        .iter()
        .map(|message| (message.outcome, message.reason.as_deref()))
        .collect();
    assert_eq!(outcomes[0].0, Outcome::Invalid);
    assert_eq!(
        outcomes[0].1,
        Some(
            "field `data` of DocWritten version 2 cannot be upcast to version 3: `text` has no first line to make a title of"
        )
    );
    assert_eq!(outcomes[1].0, Outcome::Skipped, "{outcomes:?}");
    assert_eq!(outcomes[2], (Outcome::Applied, None));
    let failed: Vec<String> = report
        .response()
        .batch_item_failures
        .into_iter()
        .map(|failure| failure.item_identifier)
        .collect();
    assert_eq!(failed, ["m-1", "m-2"]);
}
