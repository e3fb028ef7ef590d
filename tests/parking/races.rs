//! Races on both stores: two writers decided on one parked set, a park
//! racing the missing event (never stranded).

use super::*;

/// Two writers decided on the same item: one clears a parked sequence and
/// parks another, so the set keeps its size; the other, with a different
/// set in mind, must lose its condition.
pub async fn a_commit_checks_the_very_set_it_was_decided_on<S: Store>(store: S) {
    use sequence_guard::store::{Commit, Committed, Expected, ParkedEvent};

    let parked = |sequence: u64| ParkedEvent {
        sequence,
        event_id: format!("v-{sequence}"),
        event_type: "ItemUpdated".into(),
        body: "{}".into(),
        message_id: format!("m{sequence}"),
        parked_at: 1,
    };
    let key = EntityKey::of::<Item>("v");
    let item = AnyEntity::new(Item {
        sequence: 5,
        last_event_id: "v-5".into(),
        name: "Ada".into(),
        amount: 5,
        status: ItemStatus::Open,
        reason: None,
    });
    let commit =
        |expected: &[u64], entity: Option<AnyEntity>, park: Vec<ParkedEvent>, drain| Commit {
            key: key.clone(),
            expected: Expected {
                sequence: if expected.is_empty() && entity.is_some() {
                    None
                } else {
                    Some(5)
                },
                parked: expected.iter().copied().collect(),
                entity: None,
                due_at: None,
            },
            entity,
            park,
            drain,
            conflicts: vec![],
            now: 1,
            deadline: None,
            outbox: None,
        };
    let first = commit(&[], Some(item), vec![parked(3), parked(8)], vec![]);
    assert_eq!(
        store.commit(&first).await.expect("commit"),
        Committed::Written
    );
    let one = commit(&[3, 8], None, vec![parked(9)], vec![3]);
    assert_eq!(
        store.commit(&one).await.expect("commit"),
        Committed::Written
    );
    let other = commit(&[3, 8], None, vec![parked(10)], vec![3]);
    match store.commit(&other).await.expect("commit") {
        Committed::LostRace { current } => {
            assert_eq!(
                current.parking.sequences.into_iter().collect::<Vec<_>>(),
                [8, 9]
            )
        }
        Committed::Written => panic!("written over a set it was not decided on"),
        moved @ Committed::Moved { .. } => panic!("no append in this commit: {moved:?}"),
    }
    assert_eq!(parked_sequences(&inspect(&store, "v").await), [8, 9]);
}

/// One invocation parks 3 while another applies 2: whichever writes
/// second loses its condition and decides again, so 3 is never stranded.
pub async fn a_park_racing_the_missing_event_never_strands_it<S: Store + Clone>(store: S) {
    let first = Runner::new(domain(), store.clone(), RunnerConfig::default());
    let second = Runner::new(domain(), store.clone(), RunnerConfig::default());
    for round in 0..10 {
        let item = format!("race-{round}");
        run(&first, vec![event(&item, 1, 1)]).await;
        let (a, b) = tokio::join!(
            run(&first, vec![event(&item, 3, 3)]),
            run(&second, vec![event(&item, 2, 1)]),
        );
        assert!(
            failed_ids(&a).is_empty() && failed_ids(&b).is_empty(),
            "{a:?} {b:?}"
        );
        assert_eq!(sequence(&store, &item).await, Some(3), "round {round}");
        let inspection = inspect(&store, &item).await;
        assert!(
            inspection.parked.is_empty(),
            "round {round}: {inspection:?}"
        );
        assert!(inspection.stored.parking.sequences.is_empty());
    }
}
