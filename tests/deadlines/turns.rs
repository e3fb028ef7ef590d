//! Deadlines that keep being tried and not fired (their streams moved: the
//! process is behind them) take no other state's turn: each sweep goes on
//! where the last one's time ran out; and they take no more than half a
//! sweep, the parked events having the rest.

use std::time::Instant;

use sequence_guard::store::DUE_SHARDS;

use super::*;

/// Each read of a state takes this long.
const DELAY: Duration = Duration::from_millis(100);

/// Each sweep's time, its margin aside: at most eight reads at once, so
/// about eighty states tried in it, forty in its deadlines' half.
const SWEEP: Duration = Duration::from_millis(1000);

/// States whose streams moved: more than a whole sweep could try.
const BEHIND: usize = 120;

async fn deadlines_that_keep_moving_take_no_others_turn<S: Tickets>(store: S) {
    // GIVEN tickets of the first partition of the index whose streams moved
    // after the process saw them (it is behind them), and one of the last
    // partition, all due at once.
    let behind = ids_in(0, BEHIND, "behind");
    let current = ids_in(DUE_SHARDS - 1, 1, "current");
    let runner = runner(store, DELAY, reminding);
    open(&runner, &behind, PERIOD as i64).await;
    open(&runner, &current, PERIOD as i64).await;
    for id in &behind {
        runner.store().append(id).await;
    }
    runner.store().forget_reads();

    // WHEN the sweeps run, each with time for fewer states than are due.
    let margin = RunnerConfig::default().deadline_margin;
    let mut reports = Vec::new();
    for n in 0..60 {
        let invocation = Invocation {
            deadline: Some(Instant::now() + margin + SWEEP),
            now: NOW + PERIOD + n * PERIOD,
        };
        let report = sequence_guard::sweep::sweep(&runner, invocation)
            .await
            .expect("a sweep");
        let fired = report.deadlines.fired;
        reports.push(report);
        if fired > 0 {
            break;
        }
    }
    let sweeps: Vec<(u64, u64, bool, bool)> = reports
        .iter()
        .map(|r| {
            let d = &r.deadlines;
            (d.fired, d.moved, d.cut_short, r.complete)
        })
        .collect();

    // THEN no sweep could try them all, and yet the ticket behind them
    // fired, once, its reminder appended.
    assert!(reports[0].deadlines.cut_short, "{sweeps:?}");
    let (state, due) = ticket(runner.store(), &current[0]).await;
    assert_eq!(state.map(|t| t.reminded), Some(1), "{sweeps:?}");
    assert_eq!(due, None, "cleared once fired");
    assert_eq!(runner.store().length(&current[0]).await, 2);
    // AND each of those whose stream moved had its turn, wrote nothing, and
    // keeps its deadline.
    let moved: u64 = reports.iter().map(|r| r.deadlines.moved).sum();
    assert!(moved >= BEHIND as u64, "{sweeps:?}");
    for id in &behind {
        assert!(
            runner.store().reads(id) >= 1,
            "{id} never tried: {sweeps:?}"
        );
        assert_eq!(runner.store().length(id).await, 2, "{id}: nothing appended");
        let (state, due) = ticket(runner.store(), id).await;
        assert_eq!(state.map(|t| t.reminded), Some(0), "{id}");
        assert_eq!(due, Some(NOW + PERIOD), "{id}");
    }
    // AND every sweep walked the parked events to the end, in its half.
    assert!(reports.iter().all(|r| r.complete), "{sweeps:?}");
}

/// A sweep whose walk of the parked events fails still keeps where its
/// deadlines stopped: the next goes on from there, not from the start.
#[tokio::test]
async fn a_sweep_whose_walk_fails_keeps_where_its_deadlines_stopped() {
    // GIVEN more states whose streams moved than a sweep can try.
    let behind = ids_in(0, BEHIND, "behind");
    let runner = runner(MemoryStore::new(), DELAY, reminding);
    open(&runner, &behind, PERIOD as i64).await;
    for id in &behind {
        runner.store().append(id).await;
    }
    // WHEN a sweep runs out of time among them, and its walk fails.
    runner
        .store()
        .walk_fails
        .store(true, std::sync::atomic::Ordering::Relaxed);
    let invocation = Invocation {
        deadline: Some(Instant::now() + RunnerConfig::default().deadline_margin + SWEEP),
        now: NOW + PERIOD,
    };
    let failed = sequence_guard::sweep::sweep(&runner, invocation).await;
    // THEN the sweep fails, and where its deadlines stopped is kept.
    assert!(failed.is_err(), "{failed:?}");
    let mark = runner.store().sweep_mark().await.expect("the mark");
    assert!(
        mark.as_ref().is_some_and(|mark| mark.deadlines.is_some()),
        "{mark:?}"
    );
}

#[tokio::test]
async fn deadlines_that_keep_moving_take_no_others_turn_in_memory() {
    deadlines_that_keep_moving_take_no_others_turn(MemoryStore::new()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deadlines_that_keep_moving_take_no_others_turn_on_dynamodb() {
    deadlines_that_keep_moving_take_no_others_turn(dynamodb().await).await;
}
