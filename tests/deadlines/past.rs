//! A deadline set in the past is kept, and fires at the next sweep, once
//! a sweep.

use super::*;

/// A periodic deadline behind after the sweep was out for ten periods: its
/// handler sets the next one in the past, and each sweep fires it once,
/// never twice, never dropping it; a message's handler that sets one in
/// the past has it fired by the next sweep too.
async fn a_deadline_set_in_the_past_fires_at_each_sweep_once<S: Tickets>(store: S) {
    // GIVEN a ticket due a period after it opened, and one opened with its
    // deadline already past.
    let runner = runner(store, Duration::ZERO, periodic);
    open(&runner, &["t-1".to_owned()], PERIOD as i64).await;
    open(&runner, &["t-2".to_owned()], -600).await;
    assert_eq!(ticket(runner.store(), "t-2").await.1, Some(NOW - 600));

    // WHEN the sweep comes back ten periods late, twice.
    let late = NOW + PERIOD + 10 * PERIOD;
    for sweep in 1..=2 {
        let report = sequence_guard::sweep::sweep(&runner, at(late))
            .await
            .expect("a sweep");

        // THEN each sweep fires each once: its next deadline, a period on
        // from the last and still past, is kept for the next sweep.
        assert_eq!(report.deadlines.fired, 2, "sweep {sweep}: {report:?}");
        let (state, due) = ticket(runner.store(), "t-1").await;
        assert_eq!(state.map(|t| t.reminded), Some(sweep), "t-1, sweep {sweep}");
        assert_eq!(
            due,
            Some(NOW + PERIOD + u64::from(sweep) * PERIOD),
            "t-1: kept, in the past, after sweep {sweep}"
        );
        let (state, due) = ticket(runner.store(), "t-2").await;
        assert_eq!(state.map(|t| t.reminded), Some(sweep), "t-2, sweep {sweep}");
        assert_eq!(due, Some(NOW - 600 + u64::from(sweep) * PERIOD), "t-2");
    }
}

#[tokio::test]
async fn a_deadline_set_in_the_past_fires_at_each_sweep_once_in_memory() {
    a_deadline_set_in_the_past_fires_at_each_sweep_once(MemoryStore::new()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deadline_set_in_the_past_fires_at_each_sweep_once_on_dynamodb() {
    a_deadline_set_in_the_past_fires_at_each_sweep_once(dynamodb().await).await;
}

/// More periodic deadlines due in one partition than a page holds: each
/// fired sets its next one in the past, ahead of where the sweep reads,
/// and the sweep comes upon it again; it fires each state once all the
/// same.
async fn a_sweep_fires_each_state_once_however_often_it_meets_it<S: Tickets>(store: S) {
    let runner = runner(store, Duration::ZERO, periodic);
    let ids = ids_in(5, 130, "p");
    open(&runner, &ids, PERIOD as i64).await;
    let late = NOW + PERIOD + 10 * PERIOD;
    let report = sequence_guard::sweep::sweep(&runner, at(late))
        .await
        .expect("a sweep");
    assert_eq!(
        (report.deadlines.fired, report.deadlines.cut_short),
        (130, false),
        "{report:?}"
    );
    for id in &ids {
        let (state, due) = ticket(runner.store(), id).await;
        assert_eq!(state.map(|t| t.reminded), Some(1), "{id}: fired once");
        assert_eq!(due, Some(NOW + 2 * PERIOD), "{id}: the next one kept");
    }
}

#[tokio::test]
async fn a_sweep_fires_each_state_once_however_often_it_meets_it_in_memory() {
    a_sweep_fires_each_state_once_however_often_it_meets_it(MemoryStore::new()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sweep_fires_each_state_once_however_often_it_meets_it_on_dynamodb() {
    a_sweep_fires_each_state_once_however_often_it_meets_it(dynamodb().await).await;
}
