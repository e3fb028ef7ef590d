//! The sending of a batch: waves, order, refusals, reports.

use std::collections::HashMap;
use std::sync::Mutex;

use super::*;

fn outgoing(stream: &str, sequence: u64) -> Outgoing {
    Outgoing {
        sequence_number: format!("{sequence:021}"),
        stream: stream.to_owned(),
        group_id: stream.to_owned(),
        deduplication_id: format!("{stream}:{sequence}"),
        body: format!("{{\"aggregateId\":\"{stream}\",\"sequence\":{sequence}}}"),
        trace_header: None,
    }
}

/// Streams `a` (hot: every other record) and `s0`, `s1`, ... (one event
/// each), interleaved as a shard delivers them.
fn interleaved(hot: u64, others: u64) -> Pending {
    let mut pending = Vec::new();
    let (mut a, mut other) = (0, 0);
    while a < hot || other < others {
        if a < hot {
            a += 1;
            pending.push((pending.len(), outgoing("a", a)));
        }
        if other < others {
            pending.push((pending.len(), outgoing(&format!("s{other}"), 1)));
            other += 1;
        }
    }
    pending
}

/// A queue that takes everything, slowly, and checks that no stream is
/// in two requests in flight.
#[derive(Default)]
struct SlowQueue {
    in_flight: Mutex<(HashSet<String>, usize)>,
    most_in_flight: Mutex<usize>,
    taken: Mutex<Vec<Outgoing>>,
}

impl Queue for SlowQueue {
    async fn send(&self, entries: &[Outgoing]) -> Result<Vec<Refused>, SendError> {
        {
            let mut in_flight = self.in_flight.lock().unwrap();
            for entry in entries {
                let fresh = in_flight.0.insert(entry.stream.clone())
                    || entries.iter().filter(|e| e.stream == entry.stream).count() > 1;
                assert!(fresh, "{} in two requests at once", entry.stream);
            }
            in_flight.1 += 1;
            let mut most = self.most_in_flight.lock().unwrap();
            *most = (*most).max(in_flight.1);
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
        {
            let mut in_flight = self.in_flight.lock().unwrap();
            for entry in entries {
                in_flight.0.remove(&entry.stream);
            }
            in_flight.1 -= 1;
        }
        self.taken.lock().unwrap().extend(entries.iter().cloned());
        Ok(Vec::new())
    }

    async fn report(&self, _report: &str) -> Result<(), SendError> {
        Ok(())
    }
}

#[test]
fn a_wave_holds_each_stream_in_one_request() {
    let mut rest: VecDeque<(usize, Outgoing)> = interleaved(30, 30).into();
    let mut round = Round::default();
    let wave = next_wave(&mut rest, &mut round, &HashSet::new());
    assert!(wave.len() > 1, "other streams go beside the hot one");
    assert!(wave.len() <= MAX_IN_FLIGHT);
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for (at, (_, entries)) in wave.iter().enumerate() {
        assert!(entries.len() <= MAX_ENTRIES);
        for entry in entries {
            assert_eq!(*seen.entry(entry.stream.as_str()).or_insert(at), at);
        }
    }
    // What is left of `a` starts where the wave's `a` entries end.
    let sent_a = wave
        .iter()
        .flat_map(|(_, entries)| entries)
        .filter(|entry| entry.stream == "a")
        .count();
    let next_a = rest.iter().find(|(_, entry)| entry.stream == "a");
    assert_eq!(
        next_a.map(|(_, entry)| entry.deduplication_id.clone()),
        Some(format!("a:{}", sent_a + 1))
    );
}

#[tokio::test]
async fn requests_go_at_once_and_each_stream_stays_in_order() {
    let queue = SlowQueue::default();
    let mut batch = Batch {
        records: &[],
        queue: &queue,
        settings: Settings::default(),
        deadline: None,
        dispatch: Dispatch::default(),
        unfinished: Vec::new(),
        troubled: HashSet::new(),
    };
    batch.send_all(interleaved(40, 60)).await;
    assert_eq!(batch.dispatch.dispatched, 100);
    assert!(batch.unfinished.is_empty());
    assert!(
        *queue.most_in_flight.lock().unwrap() > 1,
        "more than one request in flight"
    );
    assert!(batch.dispatch.requests <= 12, "{}", batch.dispatch.requests);
    let taken = queue.taken.lock().unwrap();
    let a: Vec<&str> = taken
        .iter()
        .filter(|entry| entry.stream == "a")
        .map(|entry| entry.deduplication_id.as_str())
        .collect();
    let expected: Vec<String> = (1..=40).map(|n| format!("a:{n}")).collect();
    assert_eq!(a, expected);
}
