//! Concurrency on both stores: two invocations racing on one entity, and
//! concurrent duplicate additions, each event applied exactly once.

use super::*;

/// Two invocations race on one tag with overlapping batches of
/// `TagWeighed`, whose behaviour increments the sequence: a double
/// apply would show as a second `applied` and a sequence too far.
pub async fn concurrent_invocations_apply_each_event_exactly_once<S: Store + Clone>(store: S) {
    let first = Runner::new(domain(), store.clone(), RunnerConfig::default());
    let second = Runner::new(domain(), store.clone(), RunnerConfig::default());
    let created = batch(vec![message(
        "create",
        "tag-race",
        &tag_created("tag-race"),
    )]);
    first.run(&created, invocation()).await.expect("run");

    let last = 61;
    let mut applied = vec![0u32; last as usize + 1];
    let mut next = 2; // the head of the stream: the first sequence not yet applied
    let mut round = 0;
    while next <= last {
        round += 1;
        assert!(round < 100, "no progress: stuck at {next}");
        // Both invocations start at the head; one runs ahead further.
        let ahead = (round % 3) as u64;
        let batch_of = |from: u64, count: u64| {
            batch(
                (from..(from + count).min(last + 1))
                    .map(|sequence| {
                        message(
                            &format!("m{sequence}"),
                            "tag-race",
                            &tag_weighed("tag-race", sequence),
                        )
                    })
                    .collect(),
            )
        };
        let (longer, shorter) = (batch_of(next, 10), batch_of(next, 10 - ahead));
        let (a, b) = futures::join!(
            first.run(&longer, invocation()),
            second.run(&shorter, invocation())
        );
        for report in [a.expect("run"), b.expect("run")] {
            for message in &report.messages {
                if message.outcome == Outcome::Applied {
                    applied[message.sequence.expect("sequenced") as usize] += 1;
                }
            }
        }
        // The messages not done are redelivered from the head of the stream.
        next = entity(&store, EntityKey::of::<Tag>("tag-race"))
            .await
            .map_or(0, |e| e.sequence())
            + 1;
    }
    for sequence in 2..=last {
        assert_eq!(
            applied[sequence as usize], 1,
            "event {sequence} applied {} times",
            applied[sequence as usize]
        );
    }
    match typed::<Tag, _>(&store, "tag-race").await {
        Some(tag) => {
            assert_eq!(
                tag.sequence, last,
                "a sequence too far means an event was applied twice"
            );
            assert_eq!(tag.weight, 1000 + last);
        }
        other => panic!("tag-race: {other:?}"),
    }
}

/// Ten invocations carry the same `LevelAdjusted` at once (producer
/// resends under new message ids): the level moves once.
pub async fn concurrent_duplicate_adjustments_apply_once<S: Store + Clone>(store: S) {
    let runners: Vec<Runner<S>> = (0..10)
        .map(|_| Runner::new(domain(), store.clone(), RunnerConfig::default()))
        .collect();
    let body = level_adjusted("adjust-once", "G-RACE", 25);
    let events: Vec<_> = (0..10)
        .map(|n| batch(vec![message(&format!("copy-{n}"), "G-RACE", &body)]))
        .collect();
    let mut pending: Vec<usize> = (0..10).collect();
    let mut applied = 0;
    for _round in 0..5 {
        let reports = futures::future::join_all(
            pending
                .iter()
                .map(|&n| runners[n].run(&events[n], invocation())),
        )
        .await;
        let mut failed = Vec::new();
        for (&n, report) in pending.iter().zip(reports) {
            let outcome = report.expect("run").messages[0].outcome;
            match outcome {
                Outcome::Applied => applied += 1,
                Outcome::Duplicate => {}
                // A transaction that collided with another is failed and redelivered.
                Outcome::StorageError => failed.push(n),
                other => panic!("unexpected {other:?}"),
            }
        }
        pending = failed;
        if pending.is_empty() {
            break;
        }
    }
    assert!(
        pending.is_empty(),
        "still failing after 5 deliveries: {pending:?}"
    );
    assert_eq!(applied, 1);
    assert_eq!(
        store.counter(&LEVEL, "G-RACE").await.expect("read"),
        Some(25)
    );
}
