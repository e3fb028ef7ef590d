//! The invocation's deadline: past it nothing is attempted, and a write
//! that would outlive it is cut and failed.

use super::*;

#[tokio::test]
async fn past_the_deadline_nothing_is_attempted_and_everything_is_failed() {
    let store = FaultyStore::with(Faults::default());
    let runner = Runner::new(domain(), store.clone(), RunnerConfig::default());
    let event = batch(vec![
        message("o1", "item-t", &item_body("ItemCreated", "item-t", 1)),
        message("i1", "G-T", &level_adjusted("inv-t", "G-T", 4)),
    ]);
    // 300 ms left, less than the 500 ms margin.
    let invocation = Invocation {
        deadline: Some(Instant::now() + Duration::from_millis(300)),
        now: 0,
    };
    let report = runner.run(&event, invocation).await.expect("run");
    assert_eq!(failed_ids(&report), ["o1", "i1"]);
    assert_eq!(store.calls(), (0, 0, 0), "no store call was made");
    for message in &report.messages {
        assert_eq!(message.outcome, Outcome::Skipped, "{}", message.message_id);
        let reason = message.reason.as_deref().unwrap_or_default();
        assert!(reason.contains("deadline"), "{reason}");
    }
}

#[tokio::test]
async fn a_write_that_would_outlive_the_invocation_is_cut_and_failed() {
    let store = FaultyStore::with(Faults {
        save_delay: Some(Duration::from_secs(30)),
        ..Default::default()
    });
    let runner = Runner::new(
        domain(),
        store.clone(),
        RunnerConfig {
            deadline_margin: Duration::from_millis(100),
            ..RunnerConfig::default()
        },
    );
    let event = batch(vec![message(
        "o1",
        "item-s",
        &item_body("ItemCreated", "item-s", 1),
    )]);
    let started = Instant::now();
    let invocation = Invocation {
        deadline: Some(started + Duration::from_millis(400)),
        now: 0,
    };
    let report = runner.run(&event, invocation).await.expect("run");
    assert_eq!(outcomes(&report), [("o1", Outcome::StorageError)]);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "the runner did not wait for the slow write"
    );
    let reason = report.messages[0].reason.clone().unwrap_or_default();
    assert!(reason.contains("did not answer"), "{reason}");
}
