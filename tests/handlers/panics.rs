//! A handler that panics: on a message, and on a parked event being drained.

use super::*;

/// A panic in a handler is a handler error of its message alone: its
/// stream's later messages are skipped, other streams go on, the batch is
/// answered, and nothing the handler changed before panicking is written.
#[tokio::test]
async fn a_panicking_handler_fails_its_message_alone() {
    let store = MemoryStore::new();
    let runner = Runner::new(domain(), &store, RunnerConfig::default());
    let report = run_batch(
        &runner,
        &batch_of(
            &[
                ("t", "Started", 1),
                ("t", "Counted", 2),
                ("t", "CountedPanicking", 3),
                ("t", "Counted", 3),
                ("u", "Started", 1),
                ("u", "Counted", 2),
            ],
            1,
        ),
    )
    .await;
    assert_eq!(
        outcomes(&report),
        [
            Outcome::Applied,
            Outcome::Applied,
            Outcome::HandlerError,
            Outcome::Skipped,
            Outcome::Applied,
            Outcome::Applied
        ]
    );
    let reason = report.messages[2].reason.as_deref().unwrap_or_default();
    assert!(
        reason.contains("on_counted_panicking") && reason.contains("panicked"),
        "{reason}"
    );
    assert!(
        !reason.contains("a bug in the handler"),
        "the panic's message (it may quote data) stays in the panic hook's line: {reason}"
    );
    assert_eq!(report.handler_errors(), 1);
    assert_eq!(stored(&store), Some(tally(2, 1, "t-2-Counted")));
    // The same entity takes the next good event.
    let report = run(&runner, &[("Counted", 3)]).await;
    assert_eq!(outcomes(&report), [Outcome::Applied]);
}

/// A panic while draining a parked event: the message that closed the gap
/// is applied, the parked event stays parked, and the fault is named and
/// counted as a handler error, at every try.
#[tokio::test]
async fn a_panicking_handler_on_a_parked_event_keeps_it_parked_and_is_counted() {
    let store = MemoryStore::new();
    let runner = Runner::new(domain(), &store, RunnerConfig::default());
    run(&runner, &[("Started", 1)]).await;
    // Its third delivery: parked.
    let report = run_batch(
        &runner,
        &batch_of(&[("t", "CountedPanickingWhenNext", 3)], 3),
    )
    .await;
    assert_eq!(outcomes(&report), [Outcome::Parked]);
    let report = run(&runner, &[("Counted", 2)]).await;
    assert_eq!(outcomes(&report), [Outcome::Applied]);
    assert_eq!(report.drained(), 0);
    assert_eq!(report.handler_errors(), 1, "{report:?}");
    let stuck = report
        .parking
        .iter()
        .find_map(|parking| parking.stuck.clone())
        .expect("the stuck event is reported");
    assert_eq!(stuck.sequence, 3);
    assert!(stuck.handler_error);
    assert!(
        stuck.reason.contains("on_counted_panicking_when_next")
            && stuck.reason.contains("panicked"),
        "{}",
        stuck.reason
    );
    assert_eq!(stored(&store), Some(tally(2, 1, "t-2-Counted")));
    let parked: Vec<u64> = store
        .parking()
        .into_iter()
        .flat_map(|(_, inspection)| inspection.stored.parking.sequences)
        .collect();
    assert_eq!(parked, [3], "still parked");
    // The sweep's drain tries it again, and counts it again.
    let invocation = Invocation {
        deadline: None,
        now: 1_764_489_600,
    };
    let drained = runner
        .drain(&EntityKey::of::<Tally>("t"), &invocation)
        .await
        .expect("drain");
    assert!(
        drained.iter().any(|parking| parking
            .stuck
            .as_ref()
            .is_some_and(|stuck| stuck.handler_error)),
        "{drained:?}"
    );
}
