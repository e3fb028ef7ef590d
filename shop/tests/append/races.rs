//! Appenders racing: on a few streams, and on one hot stream, each stream
//! ends at 1..n, no gap, no duplicate, and no append gives up.

use super::*;

/// A store of its own on the same table, and a keyring of its own (its own
/// turns: it races the others, as another process would).
fn own_store(store: &EventStore) -> EventStore {
    EventStore::new(
        store.client().clone(),
        store.table().to_owned(),
        personal_data::keyed_domain(store.client(), store.table()),
    )
}

/// Many appenders on a few streams, each appending wherever the stream
/// stands: every stream ends at 1..n, no gap, no duplicate, and every
/// answer names its own event.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_appenders_leave_no_gap_and_no_duplicate() {
    let local = dynamodb_local();
    let store = Arc::new(fresh_store(&local.endpoint).await);
    let writers = (0..8).map(|writer| {
        // A store each, as in processes of their own: they race.
        let store = own_store(&store);
        tokio::spawn(async move {
            let mut answers = Vec::new();
            for n in 0..6 {
                let stream = format!("order-{}", n % 3);
                let mut event = created(writer * 100 + n);
                event.event_id = Some(format!("w{writer}-{n}"));
                let append = Append {
                    request_id: Some(format!("w{writer}-{n}")),
                    ..Append::one(stream.clone(), event)
                };
                let appended = store.append(append).await.expect("append");
                answers.push((stream, appended.sequence, appended.event_id));
            }
            answers
        })
    });
    let mut answers = Vec::new();
    for writer in futures::future::join_all(writers).await {
        answers.extend(writer.expect("writer"));
    }
    let mut seen = HashSet::new();
    for stream in ["order-0", "order-1", "order-2"] {
        let stored = assert_contiguous(&store, stream).await;
        assert_eq!(stored.len(), 16, "{stream}");
        for event in stored {
            assert!(
                seen.insert(event.event_id.clone()),
                "{} twice",
                event.event_id
            );
            assert!(
                answers.contains(&(stream.to_owned(), event.sequence, event.event_id.clone())),
                "{stream} {} {}",
                event.sequence,
                event.event_id
            );
        }
    }
    assert_eq!(seen.len(), 48);
}

/// Eight and thirty-two writers on one stream, each appending wherever it
/// stands, half of them sharing a store (taking turns), half with a store
/// each (racing): none gives up (the retry budget, not a count of tries),
/// and the stream ends at 1..n.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writers_on_one_hot_stream_never_give_up() {
    let local = dynamodb_local();
    let store = Arc::new(fresh_store(&local.endpoint).await);
    for (writers, each) in [(8u64, 10u64), (32, 3)] {
        let stream = format!("hot-{writers}");
        let tasks = (0..writers).map(|writer| {
            let store = if writer % 2 == 0 {
                store.clone()
            } else {
                Arc::new(own_store(&store))
            };
            let stream = stream.clone();
            tokio::spawn(async move {
                let mut outcomes = Vec::new();
                for n in 0..each {
                    let append = Append::one(stream.clone(), created(writer * 100 + n));
                    outcomes.push(store.append(append).await.map(|appended| appended.sequence));
                }
                outcomes
            })
        });
        let mut sequences = Vec::new();
        for writer in futures::future::join_all(tasks).await {
            for outcome in writer.expect("writer") {
                sequences.push(outcome.expect("no append gives up"));
            }
        }
        sequences.sort();
        assert_eq!(sequences, (1..=writers * each).collect::<Vec<_>>());
        assert_eq!(
            assert_contiguous(&store, &stream).await.len() as u64,
            writers * each
        );
    }
}
