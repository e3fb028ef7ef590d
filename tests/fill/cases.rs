//! The cases, each run on both stores by `main.rs`.

use std::future::Future;

use sequence_guard::runner::{GapPolicy, Outcome, RunnerConfig};
use sequence_guard::{Decision, Domain, Events, Handling, Sequenced};
use serde::Deserialize;
use serde::de::IgnoredAny;

use super::*;
use Outcome::*;

/// A store's domain that knows one type more than the consumer:
/// `ItemRenamed`, which the consumer's domain refuses as unknown.
#[derive(Debug, Deserialize)]
#[serde(tag = "type", content = "data")]
#[allow(clippy::enum_variant_names)] // the event types' names
enum Wider {
    ItemCreated(IgnoredAny),
    ItemUpdated(IgnoredAny),
    ItemRenamed(IgnoredAny),
}

fn created(item: &mut Option<Item>, event: &Sequenced<()>) -> Decision {
    if item.is_some() {
        return Decision::Duplicate;
    }
    let mut created = item_at(event.sequence);
    created.last_event_id.clone_from(&event.event_id);
    *item = Some(created);
    Decision::Applied
}

impl Events for Wider {
    fn handling(self) -> Handling {
        match self {
            Wider::ItemCreated(_) => Handling::sequenced((), created),
            Wider::ItemUpdated(_) | Wider::ItemRenamed(_) => Handling::pass::<Item>(),
        }
    }
}

pub async fn a_stream_out_of_order_is_applied_at_its_first_delivery<S, L, F>(
    setup: impl Fn(Domain, RunnerConfig) -> F,
) where
    S: Store,
    L: Log,
    F: Future<Output = Setup<S, L>>,
{
    // GIVEN 30 events of one item in the store, and the consumer given
    // its last ten first (as a stream split over two shards can send them).
    let Setup { runner, log } = setup(domain(), RunnerConfig::default()).await;
    let stored = append_items(&log, "o", 30).await;

    // WHEN they arrive, at their first delivery.
    let report = run(
        &runner,
        stored[20..]
            .iter()
            .map(|event| sent("o", event, 1))
            .collect(),
    )
    .await;

    // THEN all ten are applied, the twenty before them read from the
    // event store and applied first, in the same write: nothing failed,
    // nothing parked.
    assert_eq!(outcomes(&report), [Applied; 10]);
    assert!(failed_ids(&report).is_empty());
    assert!(report.parking.is_empty(), "{:?}", report.parking);
    assert_eq!(report.filled.len(), 1, "{:?}", report.filled);
    assert_eq!((report.filled[0].from, report.filled[0].to), (1, 20));
    assert_eq!(report.filled_events(), 20);
    assert_eq!(sequence_of(runner.store(), "o").await, Some(30));
    // One read of the entity, one of the event store, one write (the
    // memory store counts none).
    assert!(report.requests <= 3, "{} requests", report.requests);

    // AND the earlier messages, when they come, are duplicates.
    for chunk in stored[..20].chunks(10) {
        let report = run(
            &runner,
            chunk.iter().map(|event| sent("o", event, 1)).collect(),
        )
        .await;
        assert_eq!(outcomes(&report), [Duplicate; 10]);
        assert!(report.filled.is_empty());
    }
    let item = typed::<Item, _>(runner.store(), "o")
        .await
        .expect("the item");
    assert_eq!(item.amount, 3000);
    assert_eq!(item.last_event_id, stored[29].event_id);
}

pub async fn a_fill_is_bounded_and_the_next_delivery_goes_on<S, L, F>(
    setup: impl Fn(Domain, RunnerConfig) -> F,
) where
    S: Store,
    L: Log,
    F: Future<Output = Setup<S, L>>,
{
    // GIVEN 151 events, and the last one delivered first.
    let Setup { runner, log } = setup(domain(), RunnerConfig::default()).await;
    let stored = append_items(&log, "o", 151).await;
    let last = &stored[150];

    // WHEN it is delivered: the fill reads at most MAX_FILL (100) events.
    let report = run(&runner, vec![sent("o", last, 1)]).await;
    assert_eq!(sequence_of(runner.store(), "o").await, Some(100));
    assert_eq!(outcomes(&report), [Gap]);
    assert_eq!(report.messages[0].waiting_for, Some(101));
    assert_eq!(failed_ids(&report), ["m151"]);

    // THEN its redelivery reads the rest and is applied.
    let report = run(&runner, vec![sent("o", last, 2)]).await;
    assert_eq!(outcomes(&report), [Applied]);
    assert_eq!((report.filled[0].from, report.filled[0].to), (101, 150));
    assert_eq!(sequence_of(runner.store(), "o").await, Some(151));
}

pub async fn events_the_store_does_not_hold_are_a_gap_then_parked<S, L, F>(
    setup: impl Fn(Domain, RunnerConfig) -> F,
) where
    S: Store,
    L: Log,
    F: Future<Output = Setup<S, L>>,
{
    // GIVEN an item fed directly (its events are not in the event store),
    // created, and its event 3 delivered before 2.
    let Setup { runner, log: _log } = setup(domain(), RunnerConfig::default()).await;
    let created = item_event("ItemCreated", "fed", 1, "fed-1");
    let third = item_event("ItemUpdated", "fed", 3, "fed-3");
    assert_eq!(
        outcomes(&run(&runner, vec![message("m1", "fed", &created)]).await),
        [Applied]
    );

    // THEN it is a gap at its first deliveries (nothing to read in), and
    // parked at the third, as without an event store.
    for received in [1, 2] {
        let report = run(
            &runner,
            vec![delivered(message("m3", "fed", &third), received)],
        )
        .await;
        assert_eq!(outcomes(&report), [Gap], "delivery {received}");
        assert!(report.filled.is_empty());
    }
    let report = run(&runner, vec![delivered(message("m3", "fed", &third), 3)]).await;
    assert_eq!(outcomes(&report), [Parked]);

    // AND under GAP_POLICY=retry a gap is never parked, each delivery
    // tries the store.
    let retry = RunnerConfig {
        gap_policy: GapPolicy::Retry,
        ..RunnerConfig::default()
    };
    let Setup { runner, log } = setup(domain(), retry).await;
    let stored = append_items(&log, "r", 3).await;
    let report = run(&runner, vec![sent("r", &stored[2], 9)]).await;
    assert_eq!(outcomes(&report), [Applied]);
    assert_eq!(report.filled_events(), 2);
}

pub async fn an_event_parked_before_is_cleared_by_a_fill_past_it<S, L, F>(
    setup: impl Fn(Domain, RunnerConfig) -> F,
) where
    S: Store,
    L: Log,
    F: Future<Output = Setup<S, L>>,
{
    // GIVEN 6 events in the store; the consumer has 1, and 4 arrived at
    // its third delivery: parked (a fill is not tried then).
    let Setup { runner, log } = setup(domain(), RunnerConfig::default()).await;
    let stored = append_items(&log, "o", 6).await;
    assert_eq!(
        outcomes(&run(&runner, vec![sent("o", &stored[0], 1)]).await),
        [Applied]
    );
    let report = run(&runner, vec![sent("o", &stored[3], 3)]).await;
    assert_eq!(outcomes(&report), [Parked]);
    assert!(report.filled.is_empty());

    // WHEN 6 arrives: 2 to 5 are read in and applied before it.
    let report = run(&runner, vec![sent("o", &stored[5], 1)]).await;

    // THEN it is applied, and the parked 4 is found behind the entity:
    // cleared, nothing left parked.
    assert_eq!(outcomes(&report), [Applied]);
    assert_eq!((report.filled[0].from, report.filled[0].to), (2, 5));
    assert_eq!(sequence_of(runner.store(), "o").await, Some(6));
    let inspection = runner
        .store()
        .inspect(&EntityKey::of::<Item>("o"))
        .await
        .expect("inspect");
    assert!(inspection.parked.is_empty(), "{:?}", inspection.parked);
    assert!(inspection.stored.parking.sequences.is_empty());
}

pub async fn a_fill_stops_at_an_event_the_consumer_refuses<S, L, F>(
    setup: impl Fn(Domain, RunnerConfig) -> F,
) where
    S: Store,
    L: Log,
    F: Future<Output = Setup<S, L>>,
{
    // GIVEN a store whose event 3 is of a type the consumer does not
    // know, and event 5 delivered first.
    let wider = Domain::new::<Wider>().entity::<Item>();
    let Setup { runner, log } = setup(wider, RunnerConfig::default()).await;
    log.append_item("o", "ItemCreated", 1).await;
    log.append_item("o", "ItemUpdated", 2).await;
    log.append_item("o", "ItemRenamed", 3).await;
    log.append_item("o", "ItemUpdated", 4).await;
    log.append_item("o", "ItemUpdated", 5).await;
    let stored = log.stored("o").await;

    // WHEN it is delivered: the fill applies 1 and 2, and stops at 3.
    let report = run(&runner, vec![sent("o", &stored[4], 1)]).await;
    assert_eq!(outcomes(&report), [Gap]);
    assert_eq!(report.messages[0].waiting_for, Some(3));
    assert_eq!((report.filled[0].from, report.filled[0].to), (1, 2));
    assert_eq!(sequence_of(runner.store(), "o").await, Some(2));

    // THEN at its third delivery it is parked, waiting for 3 (whose own
    // message is refused as invalid, as it always was).
    let report = run(&runner, vec![sent("o", &stored[4], 3)]).await;
    assert_eq!(outcomes(&report), [Parked]);
    let report = run(&runner, vec![sent("o", &stored[2], 1)]).await;
    assert_eq!(outcomes(&report), [Invalid]);
}

pub async fn a_gap_met_within_a_run_is_closed_there<S, L, F>(
    setup: impl Fn(Domain, RunnerConfig) -> F,
) where
    S: Store,
    L: Log,
    F: Future<Output = Setup<S, L>>,
{
    // GIVEN 30 events; the consumer has 1 to 5, and a batch brings 6 to 8
    // then 20 to 22 (two shards of a split stream read in parallel).
    let Setup { runner, log } = setup(domain(), RunnerConfig::default()).await;
    let stored = append_items(&log, "o", 30).await;
    let first = run(
        &runner,
        stored[..5]
            .iter()
            .map(|event| sent("o", event, 1))
            .collect(),
    )
    .await;
    assert_eq!(outcomes(&first), [Applied; 5]);
    let batch = stored[5..8]
        .iter()
        .chain(&stored[19..22])
        .map(|event| sent("o", event, 1))
        .collect();

    // WHEN it is delivered.
    let report = run(&runner, batch).await;

    // THEN 9 to 19 are read in just before 20: every message applied.
    assert_eq!(outcomes(&report), [Applied; 6]);
    assert_eq!((report.filled[0].from, report.filled[0].to), (9, 19));
    assert_eq!(sequence_of(runner.store(), "o").await, Some(22));
}

pub async fn parking_at_the_first_delivery_reads_the_store_first<S, L, F>(
    setup: impl Fn(Domain, RunnerConfig) -> F,
) where
    S: Store,
    L: Log,
    F: Future<Output = Setup<S, L>>,
{
    // GIVEN PARK_AFTER_RECEIVES=1 (every gap parked at once) and 5 events
    // in the store, the fifth delivered first.
    let config = RunnerConfig {
        park_after_receives: 1,
        ..RunnerConfig::default()
    };
    let Setup { runner, log } = setup(domain(), config).await;
    let stored = append_items(&log, "o", 5).await;

    // THEN its first delivery reads 1 to 4 in: applied, nothing parked.
    let report = run(&runner, vec![sent("o", &stored[4], 1)]).await;
    assert_eq!(outcomes(&report), [Applied]);
    assert_eq!(report.filled_events(), 4);
    assert!(report.parking.is_empty());
}
