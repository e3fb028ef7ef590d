//! Gaps on both stores: failed below the threshold and parked at it, parked
//! before the creation, the bound per stream, `GAP_POLICY=retry`, a gap
//! closed in the same batch.

use super::*;
use Outcome::*;

pub async fn a_gap_fails_below_the_threshold_and_is_parked_at_it<S: Store>(store: S) {
    let runner = Runner::new(domain(), store, RunnerConfig::default());
    let store = runner.store();
    assert_eq!(
        outcomes(&run(&runner, vec![event("o", 1, 1)]).await),
        [Applied]
    );
    for received in [1, 2] {
        let report = run(&runner, vec![event("o", 3, received)]).await;
        assert_eq!(outcomes(&report), [Gap], "delivery {received}");
        assert_eq!(failed_ids(&report), ["m3"]);
        assert!(inspect(store, "o").await.parked.is_empty());
    }

    let before = now();
    let report = run(&runner, vec![event("o", 3, 3)]).await;
    assert_eq!(outcomes(&report), [Parked]);
    assert!(
        failed_ids(&report).is_empty(),
        "a parked message is completed"
    );
    assert_eq!(report.messages[0].waiting_for, Some(2));
    assert_eq!(report.parking.len(), 1);
    assert_eq!(report.parking[0].parked, [3]);
    assert_eq!(report.parking[0].waiting_for, Some(2));
    let inspection = inspect(store, "o").await;
    assert_eq!(
        inspection.stored.entity.as_ref().map(AnyEntity::sequence),
        Some(1)
    );
    assert_eq!(
        inspection
            .stored
            .parking
            .sequences
            .iter()
            .copied()
            .collect::<Vec<_>>(),
        [3]
    );
    let since = inspection.stored.parking.since.expect("parkedSince");
    assert!(since >= before && since <= now());
    let parked = &inspection.parked[0];
    assert_eq!(
        (
            parked.sequence,
            parked.event_id.as_str(),
            parked.event_type.as_str()
        ),
        (3, "o-3", "ItemUpdated")
    );
    assert_eq!(parked.message_id, "m3");
    assert_eq!(Some(parked.body.as_str()), event("o", 3, 3).body.as_deref());
    assert_eq!(parked.parked_at, since);

    let report = run(&runner, vec![event("o", 2, 1)]).await;
    assert_eq!(outcomes(&report), [Applied]);
    assert_eq!(report.drained(), 1);
    assert_eq!(report.parking[0].drained[0].sequence, 3);
    assert_eq!(report.parking[0].parked_now, 0);
    assert!(report.oldest_parked_age_seconds().is_some());
    match typed::<Item, _>(store, "o").await {
        Some(item) => {
            assert_eq!((item.sequence, item.amount), (3, 300));
            assert_eq!(item.last_event_id, "o-3");
        }
        other => panic!("{other:?}"),
    }
    let inspection = inspect(store, "o").await;
    assert!(inspection.parked.is_empty());
    assert!(inspection.stored.parking.sequences.is_empty());
    assert_eq!(inspection.stored.parking.since, None);
}

pub async fn updates_before_the_creation_park_on_an_item_that_is_not_an_entity<S: Store>(store: S) {
    let runner = Runner::new(domain(), store, RunnerConfig::default());
    let store = runner.store();
    let cancel = delivered(
        message("m3", "q", &item_event("ItemClosed", "q", 3, "q-3")),
        3,
    );
    let report = run(&runner, vec![event("q", 2, 3), cancel]).await;
    assert_eq!(outcomes(&report), [Parked, Parked]);
    assert_eq!(report.messages[0].waiting_for, Some(1));
    let key = EntityKey::of::<Item>("q");
    let loaded = store
        .load(std::slice::from_ref(&key), &[])
        .await
        .expect("load");
    assert!(!loaded.entities.contains_key(&key), "no entity yet");
    assert_eq!(
        loaded.parking[&key]
            .sequences
            .iter()
            .copied()
            .collect::<Vec<_>>(),
        [2, 3]
    );

    // The creation finds no entity: it creates, and the parked events follow.
    let report = run(&runner, vec![event("q", 1, 1)]).await;
    assert_eq!(outcomes(&report), [Applied]);
    assert_eq!(report.drained(), 2);
    match typed::<Item, _>(store, key.id()).await {
        Some(item) => {
            assert_eq!((item.sequence, item.status), (3, ItemStatus::Closed));
            assert_eq!(item.amount, 200);
        }
        other => panic!("{other:?}"),
    }
    assert!(inspect(store, "q").await.parked.is_empty());
}

pub async fn parking_is_bounded_per_stream<S: Store>(store: S) {
    let runner = Runner::new(
        domain(),
        store,
        with(|config| config.max_parked_per_entity = 2),
    );
    let store = runner.store();
    run(&runner, vec![event("b", 1, 1)]).await;
    let report = run(
        &runner,
        vec![event("b", 4, 3), event("b", 5, 3), event("b", 6, 3)],
    )
    .await;
    assert_eq!(outcomes(&report), [Parked, Parked, Gap]);
    assert_eq!(failed_ids(&report), ["m6"]);
    assert_eq!(report.parking_full(), 1);
    assert!(report.messages[2].parking_full);
    assert!(
        report.messages[2]
            .reason
            .as_deref()
            .is_some_and(|reason| reason.contains("MAX_PARKED_PER_STREAM"))
    );
    assert_eq!(parked_sequences(&inspect(store, "b").await), [4, 5]);

    let report = run(&runner, vec![event("b", 2, 1), event("b", 3, 1)]).await;
    assert_eq!(outcomes(&report), [Applied, Applied]);
    assert_eq!(report.drained(), 2);
    assert_eq!(sequence(store, "b").await, Some(5));
    let report = run(&runner, vec![event("b", 6, 4)]).await;
    assert_eq!(outcomes(&report), [Applied]);
    assert_eq!(sequence(store, "b").await, Some(6));
}

pub async fn the_retry_policy_never_parks<S: Store>(store: S) {
    let runner = Runner::new(
        domain(),
        store,
        with(|config| config.gap_policy = GapPolicy::Retry),
    );
    let store = runner.store();
    run(&runner, vec![event("r", 1, 1)]).await;
    let report = run(&runner, vec![event("r", 3, 10)]).await;
    assert_eq!(outcomes(&report), [Gap]);
    assert_eq!(failed_ids(&report), ["m3"]);
    assert!(inspect(store, "r").await.parked.is_empty());
}

pub async fn a_gap_filled_in_the_same_batch_is_applied_without_parking<S: Store>(store: S) {
    let runner = Runner::new(domain(), store, RunnerConfig::default());
    let store = runner.store();
    run(&runner, vec![event("s", 1, 1)]).await;
    let report = run(
        &runner,
        vec![event("s", 3, 3), event("s", 5, 3), event("s", 2, 3)],
    )
    .await;
    assert_eq!(outcomes(&report), [Applied, Parked, Applied]);
    assert!(failed_ids(&report).is_empty());
    assert_eq!(sequence(store, "s").await, Some(3));
    assert_eq!(parked_sequences(&inspect(store, "s").await), [5]);
    assert_eq!(report.parking[0].parked, [5]);
    assert!(report.parking[0].drained.is_empty());
}
