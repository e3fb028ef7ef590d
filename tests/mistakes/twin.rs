//! The test kit is the runner's twin: what the runner refuses of a
//! handler's answer beyond its entity (a process's appends, effects on
//! counters of other keys), the test kit refuses in the same words; and
//! effects are tested as additions are.

use sequence_guard::handling::{Counter, Effects};
use sequence_guard::runner::Outcome;
use sequence_guard::testkit::given;
use sequence_guard::{Decision, Domain, Entity, Events, Handling, Sequenced};
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::{Act, NOW, Reminder, ReminderEvent, lent_asking, record, remind, reminders, runner};

#[tokio::test]
async fn what_the_runner_refuses_of_a_process_step_the_kit_refuses_in_its_words() {
    let domain = reminders(Some(remind));
    for (act, names) in [
        (
            "two-streams",
            "appended to the streams `loan-1` and `another-loan`",
        ),
        ("unknown-type", "the event store refuses"),
        ("personal", "the personal field `borrower`"),
        ("forty-one", "at most 40"),
    ] {
        let runner = runner(domain.clone());
        let message = lent_asking(&runner, act).await;
        assert_eq!(message.outcome, Outcome::HandlerError, "{act}: {message:?}");
        let reason = message.reason.unwrap_or_default();
        assert!(reason.contains(names), "{act}: {reason}");

        let then = given(None::<Reminder>).within(&domain).at(NOW).when(
            "loan-1-1",
            "loan-1",
            1,
            ReminderEvent::Lent(Act {
                act: act.to_owned(),
            }),
        );
        let fault = then.decision().expect_err(act).to_string();
        assert_eq!(reason, format!("Lent event: {fault}"), "{act}");
        assert_eq!(then.entity(), None, "{act}: the state as it was");
        assert!(
            then.outbox().appends().is_empty(),
            "{act}: nothing appended"
        );
    }
    // A body read through the domain: the same.
    let body = json!({"eventId": "loan-1-1", "type": "Lent", "aggregateId": "loan-1", "sequence": 1, "data": {"act": "two-streams"}});
    let then = given(None::<Reminder>)
        .when_body(&domain, &body.to_string())
        .expect("read");
    assert!(then.decision().is_err(), "{:?}", then.decision());
}

#[test]
#[should_panic(expected = "give the test the domain: given(..).within(&domain())")]
fn an_answer_beyond_the_entity_needs_the_domain_to_be_checked() {
    let _ = given(None::<Reminder>).when(
        "loan-1-1",
        "loan-1",
        1,
        ReminderEvent::Lent(Act {
            act: "two-streams".to_owned(),
        }),
    );
}

/// A shelf's count of its loans, by member: effects on counters of other
/// keys.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Entity)]
#[serde(rename_all = "camelCase")]
#[entity(kind = "BOOK")]
struct Book {
    sequence: u64,
    last_event_id: String,
}

static ON_LOAN: Counter = Counter {
    kind: "MEMBER",
    sort_key: "LOANS",
    attribute: "onLoan",
};

static UNREGISTERED: Counter = Counter {
    kind: "MEMBER",
    sort_key: "FINES",
    attribute: "fines",
};

#[derive(Debug, Deserialize)]
struct Borrowing {
    member: String,
    #[serde(default)]
    act: String,
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type", content = "data")]
enum ShelfEvent {
    Borrowed(Borrowing),
}

impl Events for ShelfEvent {
    fn handling(self) -> Handling {
        match self {
            ShelfEvent::Borrowed(data) => Handling::sequenced_with_effects(data, on_borrowed),
        }
    }
}

fn on_borrowed(
    book: &mut Option<Book>,
    event: &Sequenced<Borrowing>,
    effects: &mut Effects,
) -> Decision {
    if book.is_some() {
        return Decision::Duplicate;
    }
    *book = Some(Book {
        sequence: event.sequence,
        last_event_id: event.event_id.clone(),
    });
    match event.data.act.as_str() {
        "unregistered" => effects.add(&UNREGISTERED, event.data.member.clone(), 1),
        "crowd" => {
            for n in 0..51 {
                effects.add(&ON_LOAN, format!("m-{n}"), 1);
            }
        }
        _ => effects.add(&ON_LOAN, event.data.member.clone(), 1),
    }
    Decision::Applied
}

fn shelf() -> Domain {
    Domain::new::<ShelfEvent>().counter(&ON_LOAN)
}

fn borrowed(member: &str, act: &str) -> ShelfEvent {
    ShelfEvent::Borrowed(Borrowing {
        member: member.to_owned(),
        act: act.to_owned(),
    })
}

#[test]
fn effects_are_tested_as_additions_are() {
    let then = given(None::<Book>)
        .within(&shelf())
        .when("b-1-1", "b-1", 1, borrowed("ada", ""))
        .adds_effects(&[(&ON_LOAN, "ada", 1)]);
    assert_eq!(then.effects().len(), 1);
    then.then(
        Decision::Applied,
        Some(Book {
            sequence: 1,
            last_event_id: "b-1-1".to_owned(),
        }),
    );
    // A duplicate has none.
    let book = Book {
        sequence: 1,
        last_event_id: "b-1-1".to_owned(),
    };
    given(Some(book.clone()))
        .within(&shelf())
        .when("b-1-1", "b-1", 1, borrowed("ada", ""))
        .adds_effects(&[])
        .then(Decision::Duplicate, Some(book));
}

#[tokio::test]
async fn what_the_runner_refuses_of_effects_the_kit_refuses_in_its_words() {
    for (act, names) in [
        ("unregistered", "the domain does not register it"),
        ("crowd", "at most 50"),
    ] {
        let runner = sequence_guard::runner::Runner::new(
            shelf(),
            sequence_guard::store::memory::MemoryStore::new(),
            sequence_guard::runner::RunnerConfig::default(),
        );
        let report = {
            let mut event = aws_lambda_events::event::sqs::SqsEvent::default();
            event.records = vec![record(
                "Borrowed",
                "b-1",
                1,
                json!({"member": "ada", "act": act}),
            )];
            runner.run(&event, super::at(NOW)).await.expect("a batch")
        };
        let message = &report.messages[0];
        assert_eq!(message.outcome, Outcome::HandlerError, "{act}: {message:?}");
        let reason = message.reason.clone().unwrap_or_default();
        assert!(reason.contains(names), "{act}: {reason}");

        let then =
            given(None::<Book>)
                .within(&shelf())
                .when("b-1-1", "b-1", 1, borrowed("ada", act));
        let fault = then.decision().expect_err(act).to_string();
        assert_eq!(reason, format!("Borrowed event: {fault}"), "{act}");
        assert!(then.effects().is_empty(), "{act}");
        assert_eq!(then.entity(), None, "{act}");
    }
}
