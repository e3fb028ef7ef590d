//! The sweep on both stores: its index of parked entities, the longest ids,
//! a drain cut short finished, also behind a hundred entities that waited
//! longer.

use super::*;

/// The index of parked entities (what the scheduled sweep reads) follows
/// parking and draining, oldest first.
pub async fn the_sweep_finds_every_entity_with_events_parked<S: Store>(store: S) {
    let runner = Runner::new(domain(), store, RunnerConfig::default());
    let sweep = |now| sequence_guard::sweep::sweep(&runner, at(now));
    assert_eq!(sweep(now()).await.expect("sweep").entities, 0);
    let first = now();
    run(&runner, vec![event("i1", 1, 1)]).await;
    let parked = batch(vec![event("i1", 3, 3), event("i1", 4, 3)]);
    runner.run(&parked, at(first)).await.expect("run");
    let later = batch(vec![event("i2", 2, 3)]);
    runner.run(&later, at(first + 60)).await.expect("run");

    let report = sweep(first + 100).await.expect("sweep");
    assert_eq!(report.entities, 2);
    assert_eq!(report.oldest_parked_age_seconds, Some(100));
    let longest: Vec<(EntityKey, u64, usize, u64)> = report
        .longest
        .iter()
        .map(|stream| {
            (
                stream.key.clone(),
                stream.parked_for_seconds,
                stream.parked,
                stream.waiting_for,
            )
        })
        .collect();
    assert_eq!(
        longest,
        [
            (EntityKey::of::<Item>("i1"), 100, 2, 2),
            (EntityKey::of::<Item>("i2"), 40, 1, 1),
        ]
    );

    // Drained: out of the index.
    run(&runner, vec![event("i1", 2, 1)]).await;
    let report = sweep(first + 200).await.expect("sweep");
    assert_eq!(report.entities, 1);
    assert_eq!(report.longest[0].key, EntityKey::of::<Item>("i2"));
    assert_eq!(report.oldest_parked_age_seconds, Some(140));
    run(&runner, vec![event("i2", 1, 1)]).await;
    let report = sweep(first + 300).await.expect("sweep");
    assert_eq!(
        (report.entities, report.oldest_parked_age_seconds),
        (0, None)
    );
}

/// The longest id the contract allows (256 characters of four bytes
/// each) parks, is found by the sweep and drains: its entry in the
/// index of parked entities fits DynamoDB's 1,024-byte sort key.
pub async fn the_longest_ids_park_and_are_swept<S: Store>(store: S) {
    let runner = Runner::new(domain(), store, RunnerConfig::default());
    let store = runner.store();
    let long = "😀".repeat(256);
    let event =
        |sequence, received| other_event(&long, sequence, &format!("l-{sequence}"), received);
    run(&runner, vec![event(1, 1)]).await;
    let report = run(&runner, vec![event(3, 3), event(4, 3)]).await;
    assert_eq!(outcomes(&report), [Outcome::Parked, Outcome::Parked]);
    let swept = sequence_guard::sweep::sweep(&runner, at(now()))
        .await
        .expect("sweep");
    assert_eq!(swept.entities, 1);
    assert_eq!(swept.longest[0].key, EntityKey::of::<Item>(long.clone()));
    let report = run(&runner, vec![event(2, 1)]).await;
    assert_eq!(outcomes(&report), [Outcome::Applied]);
    assert_eq!(report.drained(), 2);
    assert_eq!(sequence(store, &long).await, Some(4));
    let swept = sequence_guard::sweep::sweep(&runner, at(now()))
        .await
        .expect("sweep");
    assert_eq!(swept.entities, 0, "out of the index once drained");
}

/// A drain cut short (the deadline, an error) leaves the entity's next
/// sequence parked; nothing in the stream may come to finish it, so the
/// sweep drains it.
pub async fn the_sweep_finishes_a_drain_cut_short<S: Store>(store: S) {
    let runner = Runner::new(domain(), store, RunnerConfig::default());
    let store = runner.store();
    run(&runner, vec![event("d", 1, 1)]).await;
    run(&runner, vec![event("d", 3, 3), event("d", 4, 3)]).await;
    // Event 2 applied by a write that did not drain (as a cut-short run leaves it).
    apply_two_without_draining(store, "d", now()).await;
    let seen = sequence_guard::sweep::look(&domain(), store, now())
        .await
        .expect("look");
    assert!(seen.longest[0].drainable, "{seen:?}");

    let report = sequence_guard::sweep::sweep(&runner, at(now()))
        .await
        .expect("sweep");
    let drained: Vec<u64> = report
        .drained
        .iter()
        .flat_map(|parking| parking.drained.iter().map(|parked| parked.sequence))
        .collect();
    assert_eq!(drained, [3, 4]);
    assert_eq!(
        (report.entities, report.oldest_parked_age_seconds),
        (0, None)
    );
    assert_eq!(sequence(store, "d").await, Some(4));
    assert!(inspect(store, "d").await.parked.is_empty());
}

/// The sweep pages through the whole index: a drain cut short behind
/// more than LOGGED entities that have waited longer (streams whose
/// missing event was lost) is still finished, while only the LOGGED
/// longest waiting are reported one by one. A sweep out of time stops
/// without an error and says so.
pub async fn the_sweep_drains_behind_a_hundred_older_parked_entities<S: Store>(store: S) {
    use sequence_guard::sweep::{LOGGED, PAGE};

    let runner = Runner::new(domain(), store, RunnerConfig::default());
    let store = runner.store();
    let first = now();
    let older = PAGE + 20;
    let items: Vec<String> = (0..older).map(|n| format!("old-{n:03}")).collect();
    for chunk in items.chunks(10) {
        run(
            &runner,
            chunk.iter().map(|item| event(item, 1, 1)).collect(),
        )
        .await;
        let gaps = batch(chunk.iter().map(|item| event(item, 3, 3)).collect());
        runner.run(&gaps, at(first)).await.expect("run");
    }
    // "zz-cut" parks 3 and 4 later, then 2 is applied by a write that did
    // not drain (as a run cut short by the deadline leaves it).
    run(&runner, vec![event("zz-cut", 1, 1)]).await;
    let gaps = batch(vec![event("zz-cut", 3, 3), event("zz-cut", 4, 3)]);
    runner.run(&gaps, at(first + 60)).await.expect("run");
    apply_two_without_draining(store, "zz-cut", first + 60).await;

    // Out of time: nothing read, no error, and said.
    let late = Invocation {
        deadline: Some(std::time::Instant::now()),
        now: first + 100,
    };
    let report = sequence_guard::sweep::sweep(&runner, late)
        .await
        .expect("sweep");
    assert!(!report.complete);
    assert_eq!(sequence(store, "zz-cut").await, Some(2));

    let report = sequence_guard::sweep::sweep(&runner, at(first + 100))
        .await
        .expect("sweep");
    let drained: Vec<u64> = report
        .drained
        .iter()
        .flat_map(|parking| parking.drained.iter().map(|parked| parked.sequence))
        .collect();
    assert_eq!(
        drained,
        [3, 4],
        "the drain behind the older entities is finished"
    );
    assert_eq!(sequence(store, "zz-cut").await, Some(4));
    assert!(report.complete);
    assert_eq!(report.entities, older, "every waiting entity counted");
    assert_eq!(report.oldest_parked_age_seconds, Some(100));
    assert_eq!(report.longest.len(), LOGGED, "only the longest reported");
    assert!(
        report
            .longest
            .iter()
            .all(|stream| stream.parked_for_seconds == 100)
    );
    assert_eq!(report.longest[0].key, EntityKey::of::<Item>("old-000"));

    let report = sequence_guard::sweep::look(&domain(), store, first + 100)
        .await
        .expect("look");
    assert_eq!((report.entities, report.drained.len()), (older, 0));
}
