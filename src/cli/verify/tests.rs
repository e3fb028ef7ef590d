//! `verify`'s fold of a process: what its handlers append is not appended
//! again (an append at an exact sequence in the fold's embedded store, which
//! never sees the streams, would fail a message the projector applied), and
//! a state's deadline is compared by its presence.

use aws_lambda_events::event::sqs::{SqsEvent, SqsMessage};
use aws_sdk_dynamodb::types::AttributeValue;
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::compare::{self, ItemKey, Number, Side};
use super::fold_runner;
use crate::entity::Item;
use crate::process::{Outbox, Process};
use crate::runner::{Invocation, RunnerConfig};
use crate::{Decision, Domain, Entity, Events, Handling, Sequenced};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Question {
    sequence: u64,
    last_event_id: String,
    answered: bool,
}

impl Entity for Question {
    const KIND: &'static str = "QUESTION";
    fn sequence(&self) -> u64 {
        self.sequence
    }
    fn last_event_id(&self) -> &str {
        &self.last_event_id
    }
}

#[derive(Debug, Default, Deserialize, Serialize)]
struct Nothing {}

/// The store's events, and the process's: a question asked, then answered.
#[derive(Debug, Deserialize)]
#[serde(tag = "type", content = "data")]
enum QuestionEvent {
    Asked(Nothing),
    Answered(Nothing),
}

fn plain(question: &mut Option<Question>, event: &Sequenced<Nothing>) -> Decision {
    match question {
        None if event.sequence == 1 => {
            *question = Some(Question {
                sequence: 1,
                last_event_id: event.event_id.clone(),
                answered: false,
            });
            Decision::Applied
        }
        None => Decision::NotCreated,
        Some(question) if question.sequence >= event.sequence => Decision::Duplicate,
        Some(question) if question.sequence + 1 < event.sequence => Decision::Gap,
        Some(question) => {
            question.sequence = event.sequence;
            question.last_event_id.clone_from(&event.event_id);
            question.answered = true;
            Decision::Applied
        }
    }
}

impl Events for QuestionEvent {
    fn handling(self) -> Handling {
        match self {
            QuestionEvent::Asked(data) | QuestionEvent::Answered(data) => {
                Handling::sequenced(data, plain)
            }
        }
    }
}

/// The process's view: asked, it answers at once, at the sequence it has
/// seen, and keeps a deadline until the answer arrives.
#[derive(Debug, Deserialize)]
#[serde(tag = "type", content = "data")]
enum Asking {
    Asked(Nothing),
    Answered(Nothing),
}

fn on_asked(
    question: &mut Option<Question>,
    event: &Sequenced<Nothing>,
    outbox: &mut Outbox,
) -> Decision {
    let decision = plain(question, event);
    if decision == Decision::Applied {
        outbox.append_at(&event.aggregate_id, event.sequence, "Answered", &Nothing {});
        outbox.set_deadline(outbox.now() + 60);
    }
    decision
}

fn on_answered(
    question: &mut Option<Question>,
    event: &Sequenced<Nothing>,
    outbox: &mut Outbox,
) -> Decision {
    let decision = plain(question, event);
    if decision == Decision::Applied {
        outbox.clear_deadline();
    }
    decision
}

impl Events for Asking {
    fn handling(self) -> Handling {
        match self {
            Asking::Asked(data) => Handling::process(data, on_asked),
            Asking::Answered(data) => Handling::process(data, on_answered),
        }
    }
}

fn domain() -> Domain {
    let store = Domain::new::<QuestionEvent>().entity::<Question>();
    Domain::new::<Asking>()
        .entity::<Question>()
        .with_process(Process::new("asking", store))
}

/// The store's events of `stream`, up to `sequence`, as records.
fn batch(stream: &str, sequence: u64) -> SqsEvent {
    let mut batch = SqsEvent::default();
    for n in 1..=sequence {
        let kind = if n == 1 { "Asked" } else { "Answered" };
        let mut message = SqsMessage::default();
        message.message_id = Some(format!("{stream}-{n}"));
        message.body = Some(
            json!({"eventId": format!("{stream}-{n}"), "type": kind,
                   "aggregateId": stream, "sequence": n, "data": {}})
            .to_string(),
        );
        message
            .attributes
            .insert("MessageGroupId".into(), stream.to_owned());
        batch.records.push(message);
    }
    batch
}

/// The fold of `q-1` (asked, and answered by the process) and `q-2`
/// (asked, its answer not in the store yet), through verify's runner.
async fn folded() -> std::collections::BTreeMap<ItemKey, Side> {
    let runner = fold_runner(&domain(), RunnerConfig::default());
    let invocation = Invocation {
        deadline: None,
        now: 1_800_000_000,
    };
    for (stream, sequence) in [("q-1", 2), ("q-2", 1)] {
        let report = runner
            .run(&batch(stream, sequence), invocation)
            .await
            .expect("a batch");
        assert!(
            report.response().batch_item_failures.is_empty(),
            "{stream}: {report:?}"
        );
    }
    assert!(
        runner.store().appended().is_empty(),
        "the fold appends nothing"
    );
    compare::expected(runner.store()).expect("expected")
}

/// An item of the table as the process wrote it, with a deadline or not.
fn item(pk: &str, sequence: u64, answered: bool, due_at: Option<u64>) -> Item {
    let mut item = Item::from([
        ("pk".into(), AttributeValue::S(pk.into())),
        ("sk".into(), AttributeValue::S("STATE".into())),
        ("sequence".into(), AttributeValue::N(sequence.to_string())),
        (
            "lastEventId".into(),
            AttributeValue::S(format!("{}-{sequence}", &pk[9..])),
        ),
        ("answered".into(), AttributeValue::Bool(answered)),
    ]);
    if let Some(at) = due_at {
        item.insert("dueAt".into(), AttributeValue::N(at.to_string()));
        item.insert("dueShard".into(), AttributeValue::S("DUE#3".into()));
    }
    item
}

fn read(items: Vec<Item>) -> std::collections::BTreeMap<ItemKey, Side> {
    items
        .into_iter()
        .filter_map(|item| compare::found(&domain(), item))
        .collect()
}

#[tokio::test]
async fn a_process_whose_handler_appends_at_a_sequence_folds_as_the_projector_applied_it() {
    let expected = folded().await;
    let q1 = &expected[&("QUESTION#q-1".to_owned(), "STATE".to_owned())];
    let q2 = &expected[&("QUESTION#q-2".to_owned(), "STATE".to_owned())];
    assert_eq!(
        (&q1.number, q1.deadline, &q2.number, q2.deadline),
        (
            &Number::Sequence(Some(2)),
            false,
            &Number::Sequence(Some(1)),
            true
        )
    );
    // The table as the process wrote it, its deadline set at another
    // time: they agree.
    let table = read(vec![
        item("QUESTION#q-1", 2, true, None),
        item("QUESTION#q-2", 1, false, Some(1_700_000_060)),
    ]);
    assert_eq!(compare::compare(&expected, &table), (2, Vec::new()));
}

#[tokio::test]
async fn a_deadline_on_one_side_only_is_named() {
    let expected = folded().await;
    // q-1 keeps a deadline the fold cleared; q-2 lost the one it keeps.
    let table = read(vec![
        item("QUESTION#q-1", 2, true, Some(1_700_000_060)),
        item("QUESTION#q-2", 1, false, None),
    ]);
    let (checked, differences) = compare::compare(&expected, &table);
    let lines: Vec<String> = differences
        .iter()
        .map(|difference| serde_json::to_string(difference).expect("json"))
        .collect();
    assert_eq!(checked, 2);
    assert_eq!(
        lines,
        [
            r#"{"pk":"QUESTION#q-1","sk":"STATE","expectedSequence":2,"foundSequence":2,"attributes":["dueAt"]}"#,
            r#"{"pk":"QUESTION#q-2","sk":"STATE","expectedSequence":1,"foundSequence":1,"attributes":["dueAt"]}"#,
        ]
    );
}
