//! A race lost too often: failed, never forced.

use super::*;

#[tokio::test]
async fn a_race_lost_too_often_is_failed_not_forced() {
    let store = FaultyStore::with(Faults {
        save_always_raced: true,
        ..Default::default()
    });
    let runner = Runner::new(
        domain(),
        store.clone(),
        RunnerConfig {
            condition_retries: 2,
            ..RunnerConfig::default()
        },
    );
    store
        .inner
        .save(&tag_entity("tag-r", 1), None)
        .await
        .expect("seed");
    // The competing writer moves the tag on before each of our writes.
    let event = batch(vec![message("p2", "tag-r", &tag_weighed("tag-r", 2))]);
    let report = runner.run(&event, no_deadline()).await.expect("run");
    // First try expects 1 (raced to 2): decided again from 2, event 2 is a duplicate.
    assert_eq!(outcomes(&report), [("p2", Outcome::Duplicate)]);
    assert_eq!(store.calls().1, 1);

    let event = batch(vec![
        message("p3", "tag-r", &tag_weighed("tag-r", 3)),
        message("p4", "tag-r", &tag_weighed("tag-r", 4)),
        message("p5", "tag-r", &tag_weighed("tag-r", 5)),
        message("p6", "tag-r", &tag_weighed("tag-r", 6)),
    ]);
    store
        .inner
        .save(&tag_entity("tag-r", 2), Some(2))
        .await
        .expect("reset");
    let report = runner.run(&event, no_deadline()).await.expect("run");
    // Every write loses; after 2 re-decisions the runner gives up on the run.
    let failed: Vec<Outcome> = report
        .messages
        .iter()
        .map(|message| message.outcome)
        .collect();
    assert!(failed.contains(&Outcome::StorageError), "{failed:?}");
    let reason = report
        .messages
        .iter()
        .find_map(|message| message.reason.clone())
        .unwrap_or_default();
    assert!(reason.contains("lost the race"), "{reason}");
    assert_eq!(
        store.calls().1,
        1 + 3,
        "the first run's write, then a try and two re-decisions"
    );
}

fn tag_entity(id: &str, sequence: u64) -> Keyed {
    Keyed::new(
        id,
        Tag {
            sequence,
            last_event_id: format!("seed-{sequence}"),
            label: "Lamp".into(),
            weight: 1,
        },
    )
}
