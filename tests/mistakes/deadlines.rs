//! Deadlines that would be stored and never fired, refused at the step by
//! the runner and the test kit in the same words; and a deadline handler's
//! append, which the types keep at the sequence the process has seen.

use sequence_guard::Decision;
use sequence_guard::process::{Due, DueOutbox};
use sequence_guard::runner::Outcome;
use sequence_guard::testkit::given;
use serde_json::json;

use super::{
    Act, NOW, Reminder, ReminderEvent, at, lent_asking, record, remind, reminders, run, runner,
};

fn fresh(sequence: u64) -> Reminder {
    Reminder {
        sequence,
        last_event_id: format!("loan-1-{sequence}"),
        reminded: 0,
    }
}

fn lent(act: &str) -> ReminderEvent {
    ReminderEvent::Lent(Act {
        act: act.to_owned(),
    })
}

#[tokio::test]
async fn a_deadline_set_in_a_process_without_a_deadline_handler_is_refused_in_the_same_words() {
    let domain = reminders(None);
    let runner = runner(domain.clone());
    let message = lent_asking(&runner, "deadline").await;
    assert_eq!(message.outcome, Outcome::HandlerError, "{message:?}");
    let reason = message.reason.unwrap_or_default();
    assert!(
        reason.contains("the process reminders has no deadline handler")
            && reason.contains("Process::on_deadline"),
        "{reason}"
    );
    assert!(runner.store().entities().is_empty(), "nothing written");
    assert!(runner.store().deadlines().is_empty(), "no deadline stored");

    let then = given(None::<Reminder>).within(&domain).at(NOW).when(
        "loan-1-1",
        "loan-1",
        1,
        lent("deadline"),
    );
    let fault = then.decision().expect_err("refused").to_string();
    assert_eq!(reason, format!("Lent event: {fault}"));
    assert_eq!(then.entity(), None, "the state as it was");
    assert!(then.outbox().is_empty(), "nothing answered");

    // With a deadline handler, the same step keeps its deadline.
    let then = given(None::<Reminder>)
        .within(&reminders(Some(remind)))
        .at(NOW)
        .when("loan-1-1", "loan-1", 1, lent("deadline"));
    assert_eq!(then.outbox().deadline(), Some(Some(NOW + 60)));
    then.then(Decision::Applied, Some(fresh(1)));
}

#[tokio::test]
async fn a_deadline_in_milliseconds_is_refused_in_the_same_words() {
    let domain = reminders(Some(remind));
    let runner = runner(domain.clone());
    let message = lent_asking(&runner, "deadline-in-ms").await;
    assert_eq!(message.outcome, Outcome::HandlerError, "{message:?}");
    let reason = message.reason.unwrap_or_default();
    assert!(
        reason.contains(&format!("set a deadline at {}", (NOW + 60) * 1000))
            && reason.contains("epoch seconds"),
        "{reason}"
    );
    assert!(runner.store().deadlines().is_empty(), "no deadline stored");

    let then = given(None::<Reminder>).within(&domain).at(NOW).when(
        "loan-1-1",
        "loan-1",
        1,
        lent("deadline-in-ms"),
    );
    let fault = then.decision().expect_err("refused").to_string();
    assert_eq!(reason, format!("Lent event: {fault}"));
}

/// Sets its next deadline in milliseconds.
fn remind_in_ms(state: &mut Reminder, due: &Due, outbox: &mut DueOutbox) {
    state.reminded += 1;
    outbox.set_deadline((due.at + 60) * 1000);
}

/// Appends to the loan's own stream wherever it stands: refused.
fn remind_anywhere(state: &mut Reminder, due: &Due, outbox: &mut DueOutbox) {
    state.reminded += 1;
    outbox.append_to(&due.stream, "Reminded", &json!({}));
}

#[tokio::test]
async fn a_deadline_handlers_mistakes_are_refused_by_the_sweep_and_the_kit_in_the_same_words() {
    for (handler, names) in [
        (
            remind_in_ms as fn(&mut Reminder, &Due, &mut DueOutbox),
            "epoch seconds",
        ),
        (remind_anywhere, "DueOutbox::append_to"),
    ] {
        let domain = reminders(Some(handler));
        let runner = runner(domain.clone());
        runner
            .store()
            .append_event("loan-1", "loan-1-1", "Lent", json!({}));
        assert_eq!(
            lent_asking(&runner, "deadline").await.outcome,
            Outcome::Applied
        );
        let report = runner.fire_due(&at(NOW + 60)).await;
        assert_eq!((report.fired, report.failed), (0, 1), "{names}");
        let [problem] = report.problems.as_slice() else {
            panic!("one problem: {report:?}");
        };
        assert!(problem.contains(names), "{problem}");
        assert_eq!(
            runner.store().stream_events("loan-1").len(),
            1,
            "nothing appended"
        );

        let fired = given(Some(fresh(1)))
            .within(&domain)
            .at(NOW + 60)
            .when_due("loan-1", NOW + 60);
        let fault = fired.fault().expect("refused").to_string();
        assert_eq!(problem, &format!("REMINDER#loan-1: {fault}"));
        assert_eq!(fired.state(), &fresh(1), "the state as it was");
        assert!(fired.outbox().is_empty());
    }
}

#[tokio::test]
async fn a_deadlines_append_after_a_return_it_has_not_seen_writes_nothing() {
    let domain = reminders(Some(remind));
    let runner = runner(domain.clone());
    runner
        .store()
        .append_event("loan-1", "loan-1-1", "Lent", json!({}));
    let report = run(
        &runner,
        vec![record("Lent", "loan-1", 1, json!({"act": "deadline"}))],
    )
    .await;
    assert_eq!(report.messages[0].outcome, Outcome::Applied);
    // The book is returned; the process has not seen it yet.
    runner
        .store()
        .append_event("loan-1", "loan-1-2", "Returned", json!({}));
    let report = runner.fire_due(&at(NOW + 60)).await;
    assert_eq!((report.fired, report.moved), (0, 1), "{report:?}");
    let types: Vec<String> = runner
        .store()
        .stream_events("loan-1")
        .into_iter()
        .map(|event| event.event_type)
        .collect();
    assert_eq!(types, ["Lent", "Returned"], "no reminder after the return");
    assert_eq!(runner.store().deadlines().len(), 1, "it fires again later");

    // Seen: the reminder lands right after the return.
    run(&runner, vec![record("Returned", "loan-1", 2, json!({}))]).await;
    let report = runner.fire_due(&at(NOW + 61)).await;
    assert_eq!(report.fired, 1, "{report:?}");
    let reminder = &runner.store().stream_events("loan-1")[2];
    assert_eq!(
        (reminder.sequence, reminder.event_type.as_str()),
        (3, "Reminded")
    );

    // The test kit fires it the same way: at the sequence of the state.
    let fired = given(Some(fresh(2)))
        .within(&domain)
        .at(NOW + 61)
        .when_due("loan-1", NOW + 60)
        .appends(&[("loan-1", "Reminded")]);
    assert_eq!(
        fired.outbox().appends()[0].expected,
        sequence_guard::producer::ExpectedSequence::Exact(2)
    );
    fired.then(Reminder {
        reminded: 1,
        ..fresh(2)
    });
}
