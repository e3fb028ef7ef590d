//! Faults between the appender and the table (throttling, 500s, answers lost
//! after the write): each request appended once, with a request id or without.

use super::*;

/// Throttling, 500s and answers lost after the write, between the appender
/// and the table: a caller retrying each failed request with its request id
/// ends with each request appended exactly once, without a gap.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn faults_leave_no_gap_and_no_duplicate() {
    let local = dynamodb_local();
    let upstream = local.endpoint.trim_start_matches("http://").to_owned();
    let proxy = FaultProxy::start(
        upstream,
        0x00A1_1CE5,
        0,
        vec![Fault::Throttle, Fault::ServerError, Fault::LostAnswer],
    )
    .await;
    let table = fresh_store(&local.endpoint).await.table().to_owned();
    // Its subjects' keys read and written through the faults too.
    let client = connect(Some(&proxy.endpoint)).await;
    let domain = personal_data::keyed_domain(&client, &table);
    let store = EventStore::new(client, table, domain);
    proxy.set_percent(33);
    let mut requests = 0;
    for n in 0..30u64 {
        let stream = format!("order-{}", n % 3);
        let mut event = created(n);
        event.event_id = Some(format!("event-{n}"));
        let append = Append {
            request_id: Some(format!("request-{n}")),
            ..Append::one(stream, event)
        };
        let mut tries = 0;
        loop {
            tries += 1;
            requests += 1;
            match store.append(append.clone()).await {
                Ok(_) => break,
                Err(AppendError::Store(_) | AppendError::Contention { .. }) if tries < 20 => {}
                Err(err) => panic!("request-{n}: {err}"),
            }
        }
    }
    proxy.set_percent(0);
    eprintln!("{requests} calls; proxy: {}", proxy.counts.summary());
    assert!(
        proxy
            .counts
            .lost_answers
            .load(std::sync::atomic::Ordering::Relaxed)
            > 0
            && proxy.counts.faults() >= 10,
        "too few faults to prove anything: {}",
        proxy.counts.summary()
    );
    let mut ids = Vec::new();
    for stream in ["order-0", "order-1", "order-2"] {
        for event in assert_contiguous(&store, stream).await {
            ids.push(event.event_id);
        }
    }
    ids.sort();
    let mut expected: Vec<String> = (0..30).map(|n| format!("event-{n}")).collect();
    expected.sort();
    assert_eq!(ids, expected, "each request appended exactly once");
}

/// Answers lost after the write, and 500s, without a request id: the
/// store's own retries never append an event twice, and every answer names
/// the event stored at its sequence.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_outcomes_without_a_request_id_append_once() {
    let local = dynamodb_local();
    let upstream = local.endpoint.trim_start_matches("http://").to_owned();
    let proxy = FaultProxy::start(
        upstream,
        0x5EED_0001,
        0,
        vec![Fault::LostAnswer, Fault::ServerError],
    )
    .await;
    let table = fresh_store(&local.endpoint).await.table().to_owned();
    // Its subjects' keys read and written through the faults too.
    let client = connect(Some(&proxy.endpoint)).await;
    let domain = personal_data::keyed_domain(&client, &table);
    let store = EventStore::new(client, table, domain);
    proxy.set_percent(40);
    let mut answers = Vec::new();
    for n in 0..24u64 {
        let mut event = created(n);
        event.event_id = Some(format!("event-{n}"));
        let mut append = Append::one(format!("order-{}", n % 2), event);
        if n % 3 == 0 {
            // Two events in one transaction.
            let mut second = created(n);
            second.event_id = Some(format!("event-{n}-b"));
            append.events.push(second);
        }
        if let Ok(appended) = store.append(append).await {
            answers.push(appended);
        }
    }
    proxy.set_percent(0);
    assert!(
        proxy
            .counts
            .lost_answers
            .load(std::sync::atomic::Ordering::Relaxed)
            > 0,
        "no answer lost: {}",
        proxy.counts.summary()
    );
    let mut ids = HashSet::new();
    for stream in ["order-0", "order-1"] {
        let stored = assert_contiguous(&store, stream).await;
        for event in &stored {
            assert!(
                ids.insert(event.event_id.clone()),
                "{} twice",
                event.event_id
            );
        }
        for answer in answers.iter().filter(|answer| answer.stream_id == stream) {
            let at = &stored[answer.sequence as usize - 1];
            assert_eq!(at.event_id, answer.event_id, "{stream} {}", answer.sequence);
        }
    }
    assert!(answers.len() >= 12, "{} of 24 answered", answers.len());
}
