//! Drains on both stores: a long drain in bounded transactions, large bodies
//! parked and drained in steps bounded by bytes.

use super::*;
use Outcome::*;

pub async fn a_long_drain_goes_in_bounded_steps<S: Store>(store: S) {
    let runner = Runner::new(domain(), store, RunnerConfig::default());
    let store = runner.store();
    run(&runner, vec![event("l", 1, 1)]).await;
    let gaps: Vec<SqsMessage> = (3..=152).map(|sequence| event("l", sequence, 3)).collect();
    let report = run(&runner, gaps).await;
    assert_eq!(report.count(Parked), 150);
    assert!(report.parking.len() >= 2, "more than one transaction");
    assert_eq!(parked_sequences(&inspect(store, "l").await).len(), 150);

    let report = run(&runner, vec![event("l", 2, 1)]).await;
    assert_eq!(outcomes(&report), [Applied]);
    assert_eq!(report.drained(), 150);
    assert!(report.parking.len() >= 2, "more than one transaction");
    let drained: Vec<u64> = report
        .parking
        .iter()
        .flat_map(|parking| parking.drained.iter().map(|parked| parked.sequence))
        .collect();
    assert_eq!(drained, (3..=152).collect::<Vec<_>>(), "in item");
    assert_eq!(sequence(store, "l").await, Some(152));
    let inspection = inspect(store, "l").await;
    assert!(inspection.parked.is_empty());
    assert!(inspection.stored.parking.sequences.is_empty());
}

/// Large bodies (padded with a field the consumer ignores) are parked
/// and drained in steps bounded by bytes as well as by count: a step
/// holds at most MAX_COMMIT_BYTES plus one body, so a transaction stays
/// under DynamoDB's 4 MB and a drain does not hold a hundred bodies.
pub async fn large_bodies_park_and_drain_in_steps_bounded_by_bytes<S: Store>(store: S) {
    use sequence_guard::store::{MAX_COMMIT_BYTES, MAX_STORED_BODY};

    const SIZE: usize = 250 * 1024;
    let padded = |sequence: u64| {
        let mut message = event("big", sequence, 3);
        let mut body: serde_json::Value =
            serde_json::from_str(message.body.as_deref().unwrap_or_default()).expect("json");
        body["padding"] = serde_json::json!("");
        let length = body.to_string().len();
        body["padding"] = serde_json::json!("p".repeat(SIZE - length));
        message.body = Some(body.to_string());
        assert_eq!(message.body.as_ref().map(String::len), Some(SIZE));
        message
    };
    let bound = MAX_COMMIT_BYTES + MAX_STORED_BODY;
    let runner = Runner::new(domain(), store, RunnerConfig::default());
    let store = runner.store();
    run(&runner, vec![event("big", 1, 1)]).await;
    let mut commits = Vec::new();
    for sequences in [3..=12, 13..=14] {
        let report = run(&runner, sequences.map(padded).collect()).await;
        assert!(failed_ids(&report).is_empty(), "{report:?}");
        commits.extend(report.parking);
    }
    assert!(
        commits.len() >= 3,
        "ten large parks take two steps: {}",
        commits.len()
    );
    for commit in &commits {
        assert!(commit.parked.len() * SIZE <= bound, "{:?}", commit.parked);
    }

    let report = run(&runner, vec![event("big", 2, 1)]).await;
    assert_eq!(outcomes(&report), [Applied]);
    assert_eq!(report.drained(), 12);
    assert!(report.parking.len() >= 2, "more than one step");
    for commit in &report.parking {
        let bytes: usize = commit.drained.iter().map(|parked| parked.body_bytes).sum();
        assert!(bytes <= bound, "a step drained {bytes} bytes");
    }
    assert_eq!(sequence(store, "big").await, Some(14));
    assert!(inspect(store, "big").await.parked.is_empty());
}
