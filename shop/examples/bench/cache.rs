//! A warm entity cache across invocations (not built): what it could save at
//! best on the mix.

use sequence_guard::EntityKey;
use sequence_guard::envelope::{Event, Record};

use crate::figure_files::{Figure, Tables};
use crate::workloads::{Workload, realistic_mix};

/// For a workload on one warm instance: batches whose every entity was read
/// or written by an earlier batch and that need no dedup record (a cache could
/// skip their read), and the requests the runner makes at most (one read per
/// batch that needs one, one write per stream; duplicates write nothing).
fn cache_upper_bound(workload: &Workload) -> (u64, u64) {
    let domain = shop::domain();
    let mut seen = std::collections::HashSet::new();
    let (mut skippable, mut requests) = (0u64, 0u64);
    for event in &workload.batches {
        let records: Vec<Record> = event
            .records
            .iter()
            .filter_map(|message| Record::read(message, &domain))
            .collect();
        let events: Vec<&Event> = records
            .iter()
            .filter_map(|record| record.event.as_ref().ok())
            .collect();
        let keys: Vec<EntityKey> = events
            .iter()
            .filter_map(|event| event.entity_key())
            .collect();
        let stock = events.iter().any(|event| event.deduplicated().is_some());
        if !keys.is_empty() || stock {
            requests += 1;
            if !stock && keys.iter().all(|key| seen.contains(key)) {
                skippable += 1;
            }
        }
        let mut writes: Vec<String> = events
            .iter()
            .map(|event| event.stream().to_owned())
            .collect();
        writes.sort();
        writes.dedup();
        requests += writes.len() as u64;
        seen.extend(keys);
    }
    (skippable, requests)
}

/// What a warm entity cache could save at best on the mix (d).
pub fn print_cache(tables: &mut Tables) {
    println!("\n== A warm entity cache across invocations (not built): what it could save at best");
    let mix = realistic_mix(3000, 7);
    let (skippable, requests) = cache_upper_bound(&mix);
    println!(
        "(d): {skippable} of {} batches touch only entities seen before and no dedup record: \
         at best {:.3} requests/message instead of at most {:.3}; (b) warm: 1.000 instead of 1.100",
        mix.batches.len(),
        (requests - skippable) as f64 / 3000.0,
        requests as f64 / 3000.0
    );
    tables.start(
        "cache",
        "A warm entity cache across invocations (not built): what it could save at best on \
         the skewed mix",
        "scripts/bench",
        "figure",
        &[],
    );
    let figure = Figure::new(
        "requests a message with a warm cache, at best",
        (requests - skippable) as f64 / 3000.0,
        3,
        "",
    );
    let figure = figure.baseline("without", requests as f64 / 3000.0);
    tables.record("cache", figure);
}
