//! What reaches the queue: the producer's trace as the message's
//! `AWSTraceHeader`; the sample stream batch's one event.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_producers_trace_rides_on_the_message() {
    let mut p = pipeline("trace", &Faults::default()).await;
    let trace = "Root=1-6a1b2c3d-0123456789abcdef01234567;Parent=53995c3f42cd8ad8;Sampled=1";
    // `append` run where the Lambda runtime set the caller's trace.
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_append"))
        .args(["--endpoint-url", &dynamodb_local().endpoint])
        .args(["--stream", "order-traced", "--type", "OrderCreated"])
        .args(["--data", &details(5).to_string()])
        .env("EVENTS_TABLE", &p.events_table)
        .env("PERSONAL_DATA_KEY", personal_data::personal_data_key())
        .env("AWS_ACCESS_KEY_ID", "local")
        .env("AWS_SECRET_ACCESS_KEY", "local")
        .env("AWS_REGION", "us-east-1")
        .env("_X_AMZN_TRACE_ID", trace)
        .output()
        .expect("append");
    assert!(output.status.success(), "{output:?}");
    p.source.drain(Duration::from_secs(30)).await;
    let received = p
        .poller
        .sqs
        .receive_message()
        .queue_url(&p.queues.url)
        .message_system_attribute_names(MessageSystemAttributeName::AwsTraceHeader)
        .wait_time_seconds(2)
        .send()
        .await
        .expect("receive");
    let message = received
        .messages
        .unwrap_or_default()
        .into_iter()
        .next()
        .expect("the event is on the queue");
    assert_eq!(
        message
            .attributes
            .unwrap_or_default()
            .get(&MessageSystemAttributeName::AwsTraceHeader)
            .map(String::as_str),
        Some(trace),
        "the producer's trace header, as the message's AWSTraceHeader"
    );
    // Left in flight: it comes back after its visibility timeout.
    p.settle().await;
    p.assert_projection_is_the_fold().await;
    assert_eq!(p.projected("Applied"), 1.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_sample_stream_batch_sends_its_one_event() {
    let p = pipeline("sample", &Faults::default()).await;
    // events/dispatcher/stream-batch.json: a 0.2 table's head, an event, a
    // request.
    let sample = include_str!("../../../events/dispatcher/stream-batch.json");
    let answer = p.source.api.invoke(sample).await;
    assert_eq!(
        answer,
        Answer::Response(r#"{"batchItemFailures":[]}"#.to_owned())
    );
    p.poller.drain(Duration::from_secs(30)).await;
    let items = projection(&dynamodb_local().endpoint, &p.table).await;
    let order = items
        .get(&("ORDER#order-42".to_owned(), "STATE".to_owned()))
        .expect("order-42 projected");
    assert!(order.contains("totalCents=N(\"1250\")"), "{order}");
    assert_eq!(
        (
            p.dispatched("Records"),
            p.dispatched("Dispatched"),
            p.dispatched("SendRequests")
        ),
        (3.0, 1.0, 1.0),
        "{}",
        p.dispatcher.output()
    );
}
