//! Conflicts on both stores: recorded once, overwriting nothing, and
//! creations past parked events (a conflict at their sequence, many cleared in
//! steps).

use super::*;
use Outcome::*;

pub async fn conflicts_are_recorded_once_and_overwrite_nothing<S: Store>(store: S) {
    let runner = Runner::new(domain(), store, RunnerConfig::default());
    let store = runner.store();
    let report = run(&runner, vec![event("c", 1, 1), event("c", 2, 1)]).await;
    assert_eq!(outcomes(&report), [Applied, Applied]);

    // Another event for the applied sequence 2.
    let first_seen = now();
    let report = runner
        .run(
            &batch(vec![other_event("c", 2, "other-2", 1)]),
            at(first_seen),
        )
        .await
        .expect("run");
    assert_eq!(outcomes(&report), [Conflict]);
    assert!(failed_ids(&report).is_empty(), "a conflict is completed");
    assert!(
        report.messages[0]
            .reason
            .as_deref()
            .is_some_and(|reason| reason.contains("c-2") && reason.contains("other-2")),
        "{:?}",
        report.messages[0].reason
    );
    // Seen again later: still one record, first seen as before.
    let report = runner
        .run(
            &batch(vec![other_event("c", 2, "other-2", 2)]),
            at(first_seen + 100),
        )
        .await
        .expect("run");
    assert_eq!(outcomes(&report), [Conflict]);
    let inspection = inspect(store, "c").await;
    assert_eq!(inspection.conflicts.len(), 1);
    let conflict = &inspection.conflicts[0];
    assert_eq!(
        (
            conflict.sequence,
            conflict.event_id.as_str(),
            conflict.seen_at
        ),
        (2, "other-2", first_seen)
    );
    assert_eq!(
        Some(conflict.body.as_str()),
        other_event("c", 2, "other-2", 1).body.as_deref()
    );
    match inspection
        .stored
        .entity
        .as_ref()
        .and_then(|entity| entity.get::<Item>())
    {
        Some(item) => {
            assert_eq!((item.sequence, item.last_event_id.as_str()), (2, "c-2"));
            assert_eq!(item.amount, 200);
        }
        other => panic!("{other:?}"),
    }

    // Another event for a parked sequence; the parked one stays.
    assert_eq!(
        outcomes(&run(&runner, vec![event("c", 5, 3)]).await),
        [Parked]
    );
    let report = run(&runner, vec![other_event("c", 5, "other-5", 1)]).await;
    assert_eq!(outcomes(&report), [Conflict]);
    // The parked event itself again (a producer resend): already parked.
    let report = run(&runner, vec![event("c", 5, 1)]).await;
    assert_eq!(outcomes(&report), [Duplicate]);
    assert!(failed_ids(&report).is_empty());
    let inspection = inspect(store, "c").await;
    assert_eq!(parked_sequences(&inspection), [5]);
    assert_eq!(inspection.parked[0].event_id, "c-5");
    let conflicts: Vec<(u64, &str)> = inspection
        .conflicts
        .iter()
        .map(|conflict| (conflict.sequence, conflict.event_id.as_str()))
        .collect();
    assert_eq!(conflicts, [(2, "other-2"), (5, "other-5")]);

    // Behind the last applied event only its id is known: a duplicate.
    let report = run(&runner, vec![other_event("c", 1, "other-1", 1)]).await;
    assert_eq!(outcomes(&report), [Duplicate]);
}

/// A creation may carry a later sequence than 1: what is parked at or
/// behind it can never be applied. It is cleared; the one at the
/// creation's own sequence, another event, is recorded as a conflict.
pub async fn a_creation_past_parked_events_clears_them<S: Store>(store: S) {
    let runner = Runner::new(domain(), store, RunnerConfig::default());
    let store = runner.store();
    let created_at = |item: &str, sequence: u64, event_id: &str, id: &str| {
        let body = item_event("ItemCreated", item, sequence, event_id);
        message(id, item, &body)
    };
    // Parked 2 and 3, then created at 2 by another event: 2 conflicts, 3 drains.
    run(&runner, vec![event("k", 2, 3), event("k", 3, 3)]).await;
    let report = run(&runner, vec![created_at("k", 2, "k-created", "c")]).await;
    assert_eq!(outcomes(&report), [Applied]);
    assert_eq!(report.conflicts(), 1);
    assert_eq!(report.parking[0].cleared, [2]);
    assert_eq!(report.parking[0].conflicts, [2]);
    assert_eq!(report.drained(), 1);
    assert_eq!(sequence(store, "k").await, Some(3));
    let inspection = inspect(store, "k").await;
    assert!(inspection.parked.is_empty(), "{inspection:?}");
    let conflicts: Vec<(u64, &str)> = inspection
        .conflicts
        .iter()
        .map(|conflict| (conflict.sequence, conflict.event_id.as_str()))
        .collect();
    assert_eq!(conflicts, [(2, "k-2")]);
    assert_eq!(
        Some(inspection.conflicts[0].body.as_str()),
        event("k", 2, 3).body.as_deref()
    );

    // Parked 2 and 3, then created at 5: both behind it, cleared as duplicates.
    run(&runner, vec![event("m", 2, 3), event("m", 3, 3)]).await;
    let report = run(&runner, vec![created_at("m", 5, "m-created", "c")]).await;
    assert_eq!(outcomes(&report), [Applied]);
    assert_eq!(report.parking[0].cleared, [2, 3]);
    assert_eq!(report.conflicts(), 0);
    assert_eq!(sequence(store, "m").await, Some(5));
    let inspection = inspect(store, "m").await;
    assert!(inspection.parked.is_empty() && inspection.conflicts.is_empty());
    assert!(inspection.stored.parking.sequences.is_empty());

    // In one batch: 2 parks, then a creation at 2 takes its place.
    let report = run(
        &runner,
        vec![event("n", 2, 3), created_at("n", 2, "n-created", "c")],
    )
    .await;
    assert_eq!(outcomes(&report), [Conflict, Applied]);
    assert!(failed_ids(&report).is_empty());
    let inspection = inspect(store, "n").await;
    assert!(inspection.parked.is_empty());
    assert_eq!(inspection.conflicts.len(), 1);
    assert_eq!(inspection.conflicts[0].event_id, "n-2");
    // Nothing is left for a sweep.
    let swept = sequence_guard::sweep::look(&domain(), store, now())
        .await
        .expect("look");
    assert_eq!(swept.entities, 0);
}

/// A creation past a hundred parked events clears them in more than one
/// transaction, the conflict at its own sequence included.
pub async fn a_creation_past_a_hundred_parked_events_clears_them_in_steps<S: Store>(store: S) {
    let runner = Runner::new(domain(), store, RunnerConfig::default());
    let store = runner.store();
    let updates: Vec<SqsMessage> = (3..=100).map(|sequence| event("w", sequence, 3)).collect();
    let report = run(&runner, updates).await;
    assert_eq!(report.count(Parked), 98);
    let body = item_event("ItemCreated", "w", 100, "w-created");
    let report = run(&runner, vec![message("c", "w", &body)]).await;
    assert_eq!(outcomes(&report), [Applied]);
    assert!(report.parking.len() >= 2, "more than one transaction");
    assert_eq!(report.conflicts(), 1);
    assert_eq!(sequence(store, "w").await, Some(100));
    let inspection = inspect(store, "w").await;
    assert!(inspection.parked.is_empty());
    assert!(inspection.stored.parking.sequences.is_empty());
    assert_eq!(inspection.conflicts.len(), 1);
    assert_eq!(inspection.conflicts[0].event_id, "w-100");
}
