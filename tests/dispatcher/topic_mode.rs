//! Topic mode on the recording queue: SNS's codes for what blames the
//! message.

use super::*;

/// The test queue as a topic: SNS's rules for what blames the message.
struct TestTopic(TestQueue);

impl Queue for TestTopic {
    async fn send(&self, entries: &[Message]) -> Result<Vec<Refused>, SendError> {
        self.0.send(entries).await
    }

    async fn report(&self, report: &str) -> Result<(), SendError> {
        self.0.report(report).await
    }

    fn blames_message(&self, refusal: &Refused) -> bool {
        topic_blames_message(refusal)
    }

    fn service(&self) -> &'static str {
        "SNS"
    }
}

fn refused_with(code: &'static str) -> Refused {
    Refused {
        index: 0,
        code: code.to_owned(),
        message: "injected".to_owned(),
        sender_fault: true,
    }
}

#[tokio::test]
async fn an_entry_sns_blames_on_itself_is_reported_and_its_stream_goes_on() {
    let refuse: Rule = Box::new(|entry, _| match entry.deduplication_id.as_str() {
        "a:2" => Some(refused_with("InvalidParameter")),
        "b:2" => Some(refused_with("ParameterValueInvalid")),
        _ => None,
    });
    let topic = TestTopic(TestQueue {
        refuse: Some(refuse),
        ..TestQueue::default()
    });
    let records: Vec<Value> = (1..=3)
        .flat_map(|n| [insert(2 * n - 1, "a", n), insert(2 * n, "b", n)])
        .collect();
    let outcome = dispatch(&records, &domain(), &topic, quick(), None).await;
    assert_eq!(outcome.failure, None);
    assert_eq!(of_stream(&taken(&topic.0), "a"), vec![1, 3]);
    assert_eq!(of_stream(&taken(&topic.0), "b"), vec![1, 3]);
    let reports = topic.0.reports.lock().unwrap();
    assert_eq!(reports.len(), 2);
    let reason = reports[0]["reason"].as_str().unwrap();
    assert!(
        reason.starts_with("SNS refused the message: InvalidParameter"),
        "{reason}"
    );
}

#[tokio::test]
async fn a_topic_sends_again_what_only_sqs_would_blame_and_names_its_first_record() {
    // SQS's code for a bad body is not SNS's: a topic sends it again, first
    // of its stream, and names it for redelivery when it keeps failing.
    let refuse: Rule = Box::new(|entry, _| {
        (entry.deduplication_id == "a:2").then(|| refused_with("InvalidMessageContents"))
    });
    let topic = TestTopic(TestQueue {
        refuse: Some(refuse),
        ..TestQueue::default()
    });
    let mut records: Vec<Value> = (1..=3).map(|n| insert(n, "a", n)).collect();
    records.push(insert(4, "b", 1));
    let outcome = dispatch(&records, &domain(), &topic, quick(), None).await;
    assert_eq!(outcome.failure, Some(sequence_number(2)));
    assert!(
        outcome
            .failure_reason
            .as_deref()
            .unwrap_or_default()
            .contains("SNS did not take it"),
        "{:?}",
        outcome.failure_reason
    );
    assert!(
        topic.0.reports.lock().unwrap().is_empty(),
        "nothing reported"
    );
    // a:3 went in a:2's first request; after it, a:2 alone, three times.
    let requests: Vec<Vec<String>> = topic
        .0
        .requests
        .lock()
        .unwrap()
        .iter()
        .map(|r| r.iter().map(|o| o.deduplication_id.clone()).collect())
        .collect();
    assert_eq!(requests.len(), 4, "{requests:?}");
    for again in &requests[1..] {
        assert_eq!(again, &["a:2"]);
    }
    assert_eq!(of_stream(&taken(&topic.0), "b"), vec![1]);
}
