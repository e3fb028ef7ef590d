//! Counters on both stores: an adjustment applied once per event, the
//! adjustments of a dedup transaction all or nothing, the counter kept in the
//! 64-bit range (refused whole at the store, rejected by the runner).

use super::*;
use Outcome::*;

pub async fn an_addition_applies_once_per_event<S: Store>(store: S) {
    assert_eq!(store.counter(&LEVEL, "G-1").await.expect("read"), None);
    let adjust =
        async |adjustments: &[DedupAddition]| store.add(adjustments).await.expect("adjust");
    assert_eq!(adjust(&[adjustment("a", "G-1", 10)]).await, Added::Applied);
    assert_eq!(adjust(&[adjustment("b", "G-1", -3)]).await, Added::Applied);
    assert_eq!(
        adjust(&[adjustment("a", "G-1", 10)]).await,
        Added::Existing(vec![existing(0, "G-1")])
    );
    assert_eq!(store.counter(&LEVEL, "G-1").await.expect("read"), Some(7));
    assert_eq!(store.counter(&LEVEL, "G-2").await.expect("read"), None);
    // The load sees which records exist.
    let loaded = store
        .load(&[], &[dedup("a"), dedup("b"), dedup("c")])
        .await
        .expect("load");
    let mut handled: Vec<(String, Option<String>)> = loaded
        .handled
        .into_iter()
        .map(|(key, stream)| (key.event_id, stream))
        .collect();
    handled.sort();
    let g_1 = Some("G-1".to_owned());
    assert_eq!(
        handled,
        [("a".to_owned(), g_1.clone()), ("b".to_owned(), g_1)],
        "each record knows its stream"
    );
}

/// Several adjustments, several gauges, one atomic step; one known record
/// cancels all of it and says which.
pub async fn additions_apply_together_or_not_at_all<S: Store>(store: S) {
    let first = [
        adjustment("x1", "G-X", 5),
        adjustment("y1", "G-Y", 2),
        adjustment("x2", "G-X", -1),
    ];
    assert_eq!(store.add(&first).await.expect("adjust"), Added::Applied);
    assert_eq!(store.counter(&LEVEL, "G-X").await.expect("read"), Some(4));
    assert_eq!(store.counter(&LEVEL, "G-Y").await.expect("read"), Some(2));
    let mixed = [
        adjustment("x3", "G-X", 100),
        adjustment("y1", "G-Y", 2),
        adjustment("x2", "G-X", -1),
    ];
    assert_eq!(
        store.add(&mixed).await.expect("adjust"),
        Added::Existing(vec![existing(1, "G-Y"), existing(2, "G-X")])
    );
    assert_eq!(
        store.counter(&LEVEL, "G-X").await.expect("read"),
        Some(4),
        "nothing of a cancelled step lands"
    );
    let rest = [adjustment("x3", "G-X", 100)];
    assert_eq!(store.add(&rest).await.expect("adjust"), Added::Applied);
    assert_eq!(store.counter(&LEVEL, "G-X").await.expect("read"), Some(104));
}

/// A counter stays a 64-bit integer on both stores: an adjustment that
/// would take it outside is refused whole (no record, no change), with
/// the value it found; DynamoDB's ADD alone would store a number no
/// reader can take, the memory store used to clamp it.
pub async fn a_counter_never_leaves_the_64_bit_range<S: Store>(store: S) {
    let adjust =
        async |adjustments: &[DedupAddition]| store.add(adjustments).await.expect("adjust");
    assert_eq!(
        adjust(&[adjustment("m1", "G-MAX", i64::MAX - 10)]).await,
        Added::Applied
    );
    assert_eq!(
        adjust(&[adjustment("m2", "G-MAX", 6), adjustment("m3", "G-MAX", 6)]).await,
        Added::OutOfRange {
            counter: &LEVEL,
            id: "G-MAX".into(),
            value: Some(i64::MAX - 10)
        }
    );
    assert_eq!(
        store.counter(&LEVEL, "G-MAX").await.expect("read"),
        Some(i64::MAX - 10)
    );
    let loaded = store
        .load(&[], &[dedup("m2"), dedup("m3")])
        .await
        .expect("load");
    assert!(loaded.handled.is_empty(), "no record of a refused step");
    assert_eq!(
        adjust(&[adjustment("m2", "G-MAX", 10)]).await,
        Added::Applied
    );
    assert_eq!(
        store.counter(&LEVEL, "G-MAX").await.expect("read"),
        Some(i64::MAX)
    );

    assert_eq!(
        adjust(&[adjustment("n1", "G-MIN", i64::MIN)]).await,
        Added::Applied
    );
    assert_eq!(
        adjust(&[adjustment("n2", "G-MIN", -1)]).await,
        Added::OutOfRange {
            counter: &LEVEL,
            id: "G-MIN".into(),
            value: Some(i64::MIN)
        }
    );
    assert_eq!(
        store.counter(&LEVEL, "G-MIN").await.expect("read"),
        Some(i64::MIN)
    );
    // Out of range from nothing; an in-range sum of out-of-range steps is taken.
    assert_eq!(
        adjust(&[
            adjustment("z1", "G-NEW", i64::MAX),
            adjustment("z2", "G-NEW", 1)
        ])
        .await,
        Added::OutOfRange {
            counter: &LEVEL,
            id: "G-NEW".into(),
            value: None
        }
    );
    assert_eq!(store.counter(&LEVEL, "G-NEW").await.expect("read"), None);
    assert_eq!(
        adjust(&[
            adjustment("z1", "G-NEW", i64::MAX),
            adjustment("z3", "G-NEW", -5)
        ])
        .await,
        Added::Applied
    );
    assert_eq!(
        store.counter(&LEVEL, "G-NEW").await.expect("read"),
        Some(i64::MAX - 5)
    );
}

/// Through the runner: adjustments summing past `i64::MAX` in one
/// stream: those before the one that crosses are applied, that one is
/// rejected for good (reported failed with a reason), the rest wait, and
/// the gauge stays readable. (Within one step the stores add the sum, so
/// a stream that only passes through the edge, ending inside, is taken.)
pub async fn an_adjustment_past_the_64_bit_range_is_rejected<S: Store>(store: S) {
    let runner = Runner::new(domain(), store, RunnerConfig::default());
    let messages = vec![
        message("r1", "G-R", &level_adjusted("r1", "G-R", i64::MAX - 5)),
        message("r2", "G-R", &level_adjusted("r2", "G-R", 3)),
        message("r3", "G-R", &level_adjusted("r3", "G-R", 3)),
        message("r4", "G-R", &level_adjusted("r4", "G-R", 1)),
    ];
    let report = runner
        .run(&batch(messages), invocation())
        .await
        .expect("run");
    assert_eq!(outcomes(&report), [Applied, Applied, Rejected, Skipped]);
    let reason = report.messages[2].reason.as_deref().unwrap_or_default();
    assert!(
        reason.contains("G-R") && reason.contains("64-bit") && reason.contains("will not help"),
        "{reason}"
    );
    assert_eq!(failed_ids(&report), ["r3", "r4"]);
    let store = runner.store();
    assert_eq!(
        store.counter(&LEVEL, "G-R").await.expect("read"),
        Some(i64::MAX - 2)
    );
    // The stream goes on past the refused event once it is gone.
    let later = vec![message("r4", "G-R", &level_adjusted("r4", "G-R", 1))];
    let report = runner.run(&batch(later), invocation()).await.expect("run");
    assert_eq!(outcomes(&report), [Applied]);
    assert_eq!(
        store.counter(&LEVEL, "G-R").await.expect("read"),
        Some(i64::MAX - 1)
    );
}
