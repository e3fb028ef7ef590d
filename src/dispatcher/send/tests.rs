//! The sending of a batch: waves, order, refusals, reports.

use std::collections::HashMap;
use std::sync::Mutex;

use super::*;

fn outgoing(stream: &str, sequence: u64) -> Message {
    Message {
        sequence_number: format!("{sequence:021}"),
        stream: stream.to_owned(),
        sequence,
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
    taken: Mutex<Vec<Message>>,
}

impl Queue for SlowQueue {
    async fn send(&self, entries: &[Message]) -> Result<Vec<Refused>, SendError> {
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
    let mut rest: VecDeque<(usize, Message)> = interleaved(30, 30).into();
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

/// Every wave of `pending`, until nothing is left.
fn waves(pending: Pending, troubled: &HashSet<String>) -> Vec<Vec<Request>> {
    let mut rest: VecDeque<(usize, Message)> = pending.into();
    let mut round = Round::default();
    let mut waves = Vec::new();
    while !rest.is_empty() {
        let wave = next_wave(&mut rest, &mut round, troubled);
        assert!(
            !wave.is_empty(),
            "a wave sends something while entries are left"
        );
        waves.push(wave);
    }
    waves
}

/// A drain's batch of 100 records: one hot stream in 17 of them, spread
/// through the batch, and 83 streams of one event.
fn hot_in_a_hundred() -> Pending {
    (0..100)
        .scan((0, 0), |(hot, other), index| {
            Some(if index % 6 == 3 {
                *hot += 1;
                (index, outgoing("hot", *hot))
            } else {
                *other += 1;
                (index, outgoing(&format!("s{other}"), 1))
            })
        })
        .collect()
}

#[test]
fn a_hot_stream_starts_its_chain_in_the_first_wave() {
    let waves = waves(hot_in_a_hundred(), &HashSet::new());
    // 17 entries of one stream need two requests one after the other, and
    // no more: its first ten go in the first wave.
    assert_eq!(
        waves.len(),
        2,
        "{:?}",
        waves.iter().map(Vec::len).collect::<Vec<_>>()
    );
    let first_hot: Vec<&str> = waves[0]
        .iter()
        .flat_map(|(_, entries)| entries)
        .filter(|entry| entry.stream == "hot")
        .map(|entry| entry.deduplication_id.as_str())
        .collect();
    let expected: Vec<String> = (1..=10).map(|n| format!("hot:{n}")).collect();
    assert_eq!(first_hot, expected);
}

#[test]
fn a_troubled_stream_sends_its_first_entry_alone() {
    let troubled: HashSet<String> = ["hot".to_owned()].into();
    let mut rest: VecDeque<(usize, Message)> = hot_in_a_hundred().into();
    let wave = next_wave(&mut rest, &mut Round::default(), &troubled);
    let hot: Vec<&Message> = wave
        .iter()
        .flat_map(|(_, entries)| entries)
        .filter(|entry| entry.stream == "hot")
        .collect();
    assert_eq!(hot.len(), 1);
    assert_eq!(hot[0].deduplication_id, "hot:1");
    assert_eq!(
        rest.iter()
            .find(|(_, entry)| entry.stream == "hot")
            .map(|(index, _)| *index),
        Some(9),
        "what is left stays in record order"
    );
}

#[test]
fn a_held_stream_goes_to_the_next_round() {
    let mut round = Round::default();
    round.held.insert("hot".to_owned());
    let mut rest: VecDeque<(usize, Message)> = hot_in_a_hundred().into();
    let wave = next_wave(&mut rest, &mut round, &HashSet::new());
    assert!(
        wave.iter()
            .flat_map(|(_, entries)| entries)
            .all(|entry| entry.stream != "hot")
    );
    assert_eq!(round.again.len(), 17);
}

proptest::proptest! {
    /// Any batch (streams, their lengths, body sizes past SQS's limit):
    /// every entry sent once, each stream in order and in one request of a
    /// wave, requests within SQS's limits, and (small bodies) no more waves
    /// than the longest stream needs plus those the entries fill (a loose
    /// bound; the exact count is `a_hot_stream_starts_its_chain_in_the_first_wave`'s).
    #[test]
    fn waves_keep_every_promise(
        shape in proptest::collection::vec((0usize..12, 1usize..40_000), 1..160),
        troubled_streams in proptest::collection::hash_set(0usize..12, 0..3),
    ) {
        let mut counts: HashMap<String, u64> = HashMap::new();
        let pending: Pending = shape
            .iter()
            .enumerate()
            .map(|(index, (stream, size))| {
                let name = format!("s{stream}");
                let sequence = counts.entry(name.clone()).or_default();
                *sequence += 1;
                let mut entry = outgoing(&name, *sequence);
                entry.body = "x".repeat(size * 7);
                (index, entry)
            })
            .collect();
        let troubled: HashSet<String> =
            troubled_streams.iter().map(|stream| format!("s{stream}")).collect();
        let all = waves(pending.clone(), &troubled);
        let mut sent: Vec<usize> = Vec::new();
        let mut next: HashMap<String, u64> = HashMap::new();
        for wave in &all {
            proptest::prop_assert!(wave.len() <= MAX_IN_FLIGHT);
            let mut streams: HashSet<&str> = HashSet::new();
            for (indexes, entries) in wave {
                proptest::prop_assert!(entries.len() <= MAX_ENTRIES && !entries.is_empty());
                let bytes: usize = entries.iter().map(|entry| entry.body.len()).sum();
                proptest::prop_assert!(entries.len() == 1 || bytes <= MAX_REQUEST_BYTES);
                let mine: HashSet<&str> = entries.iter().map(|e| e.stream.as_str()).collect();
                for stream in &mine {
                    proptest::prop_assert!(streams.insert(stream), "{} in two requests", stream);
                    let of_it = entries.iter().filter(|e| e.stream == *stream).count();
                    proptest::prop_assert!(!troubled.contains(*stream) || of_it == 1);
                }
                for (index, entry) in indexes.iter().zip(entries) {
                    proptest::prop_assert_eq!(&pending[*index].1, entry);
                    let expected = next.entry(entry.stream.clone()).or_insert(0);
                    *expected += 1;
                    proptest::prop_assert_eq!(
                        &entry.deduplication_id,
                        &format!("{}:{}", entry.stream, expected)
                    );
                    sent.push(*index);
                }
            }
        }
        sent.sort_unstable();
        proptest::prop_assert_eq!(sent, (0..pending.len()).collect::<Vec<_>>());
        let longest = counts
            .iter()
            .map(|(stream, count)| {
                if troubled.contains(stream) { *count as usize } else { count.div_ceil(10) as usize }
            })
            .max()
            .unwrap_or(0);
        let small = shape.iter().all(|(_, size)| size * 7 * MAX_ENTRIES <= MAX_REQUEST_BYTES);
        if small {
            proptest::prop_assert!(
                all.len() <= longest + pending.len().div_ceil(MAX_ENTRIES * MAX_IN_FLIGHT),
                "{} waves for a longest chain of {}", all.len(), longest
            );
        }
    }
}

/// `a` 3, `b` 2, `a` 1, `b` 1, `a` 2, `c` 1: two streams out of order, as
/// a transaction's events or a split partition's may come.
fn out_of_order() -> Pending {
    [("a", 3), ("b", 2), ("a", 1), ("b", 1), ("a", 2), ("c", 1)]
        .into_iter()
        .enumerate()
        .map(|(index, (stream, sequence))| (index, outgoing(stream, sequence)))
        .collect()
}

#[test]
fn each_stream_goes_in_sequence_order_in_its_own_places_with_its_records() {
    let sorted: Vec<(usize, String)> = in_stream_order(out_of_order())
        .into_iter()
        .map(|(index, entry)| (index, entry.deduplication_id))
        .collect();
    let expected = [
        (2, "a:1"),
        (3, "b:1"),
        (4, "a:2"),
        (1, "b:2"),
        (0, "a:3"),
        (5, "c:1"),
    ]
    .map(|(index, id)| (index, id.to_owned()));
    assert_eq!(sorted, expected);
    // In order already: as it was.
    let ordered = interleaved(5, 5);
    let ids = |pending: &Pending| -> Vec<(usize, String)> {
        pending
            .iter()
            .map(|(index, entry)| (index.to_owned(), entry.deduplication_id.clone()))
            .collect()
    };
    assert_eq!(ids(&in_stream_order(ordered.clone())), ids(&ordered));
}

/// A queue that refuses every entry of one stream, and takes the rest.
struct Refusing(&'static str, Mutex<Vec<Message>>);

impl Queue for Refusing {
    async fn send(&self, entries: &[Message]) -> Result<Vec<Refused>, SendError> {
        let mut refused = Vec::new();
        for (index, entry) in entries.iter().enumerate() {
            if entry.stream == self.0 {
                refused.push(Refused {
                    index,
                    code: "ThrottlingException".to_owned(),
                    message: "slow down".to_owned(),
                    sender_fault: false,
                });
            } else {
                self.1.lock().unwrap().push(entry.clone());
            }
        }
        Ok(refused)
    }

    async fn report(&self, _report: &str) -> Result<(), SendError> {
        Ok(())
    }
}

fn records(count: usize) -> Vec<Value> {
    (0..count)
        .map(|index| serde_json::json!({"dynamodb": {"SequenceNumber": format!("{index:021}")}}))
        .collect()
}

#[tokio::test]
async fn a_stream_that_came_out_of_order_is_sent_in_order_and_redelivered_from_its_first_record() {
    // Taken: each stream in sequence order.
    let queue = SlowQueue::default();
    let records = records(6);
    let mut batch = Batch {
        records: &records,
        queue: &queue,
        settings: Settings::default(),
        deadline: None,
        dispatch: Dispatch::default(),
        unfinished: Vec::new(),
        troubled: HashSet::new(),
    };
    batch.send_all(in_stream_order(out_of_order())).await;
    let taken: Vec<String> = queue
        .taken
        .lock()
        .unwrap()
        .iter()
        .filter(|entry| entry.stream == "a")
        .map(|entry| entry.deduplication_id.clone())
        .collect();
    assert_eq!(taken, ["a:1", "a:2", "a:3"]);

    // `a` refused: its first record (the one that brought `a` 3) is where
    // the redelivery starts, so none of its events is lost.
    let queue = Refusing("a", Mutex::new(Vec::new()));
    let mut batch = Batch {
        records: &records,
        queue: &queue,
        settings: Settings {
            retries: 1,
            backoff: Duration::from_millis(1),
            ..Settings::default()
        },
        deadline: None,
        dispatch: Dispatch::default(),
        unfinished: Vec::new(),
        troubled: HashSet::new(),
    };
    batch.send_all(in_stream_order(out_of_order())).await;
    batch.name_failure();
    assert_eq!(
        batch.dispatch.failure.as_deref(),
        Some(format!("{:021}", 0).as_str())
    );
    let others: Vec<String> = queue
        .1
        .lock()
        .unwrap()
        .iter()
        .map(|entry| entry.deduplication_id.clone())
        .collect();
    assert_eq!(others, ["b:1", "b:2", "c:1"]);
}
