//! LocalStack's SQS FIFO queues and SNS FIFO topic: the clients, making a
//! queue or a topic with its subscriptions, and counting what a queue holds.

use std::time::{Duration, Instant};

use aws_sdk_sqs::types::QueueAttributeName;

pub fn sqs_client(endpoint: &str) -> aws_sdk_sqs::Client {
    let config = aws_sdk_sqs::config::Builder::new()
        .behavior_version(aws_sdk_sqs::config::BehaviorVersion::latest())
        .endpoint_url(endpoint)
        .region(aws_sdk_sqs::config::Region::new("us-east-1"))
        .credentials_provider(aws_sdk_sqs::config::Credentials::new(
            "test", "test", None, None, "bench",
        ))
        .build();
    aws_sdk_sqs::Client::from_conf(config)
}

pub fn sns_client(endpoint: &str) -> aws_sdk_sns::Client {
    let config = aws_sdk_sns::config::Builder::new()
        .behavior_version(aws_sdk_sns::config::BehaviorVersion::latest())
        .endpoint_url(endpoint)
        .region(aws_sdk_sns::config::Region::new("us-east-1"))
        .credentials_provider(aws_sdk_sns::config::Credentials::new(
            "test", "test", None, None, "bench",
        ))
        .build();
    aws_sdk_sns::Client::from_conf(config)
}

/// A FIFO queue named `<name>.fifo`; its URL.
pub async fn fifo_queue(sqs: &aws_sdk_sqs::Client, name: &str) -> String {
    let created = sqs
        .create_queue()
        .queue_name(format!("{name}.fifo"))
        .attributes(QueueAttributeName::FifoQueue, "true")
        .attributes(QueueAttributeName::VisibilityTimeout, "5")
        .send()
        .await;
    match created.ok().and_then(|created| created.queue_url) {
        Some(url) => url,
        None => {
            eprintln!("cannot create the queue {name}.fifo");
            std::process::exit(1);
        }
    }
}

/// An SNS FIFO topic `<name>.fifo` (no content-based deduplication, as the
/// template's) with each queue subscribed raw and unfiltered; its ARN.
pub async fn fifo_topic(
    sns: &aws_sdk_sns::Client,
    sqs: &aws_sdk_sqs::Client,
    name: &str,
    queue_urls: &[&str],
) -> String {
    let topic_arn = sns
        .create_topic()
        .name(format!("{name}.fifo"))
        .attributes("FifoTopic", "true")
        .attributes("ContentBasedDeduplication", "false")
        .send()
        .await
        .ok()
        .and_then(|created| created.topic_arn);
    let Some(topic_arn) = topic_arn else {
        eprintln!("cannot create the topic {name}.fifo");
        std::process::exit(1);
    };
    for url in queue_urls {
        let arn = sqs
            .get_queue_attributes()
            .queue_url(*url)
            .attribute_names(QueueAttributeName::QueueArn)
            .send()
            .await
            .ok()
            .and_then(|answer| answer.attributes?.remove(&QueueAttributeName::QueueArn));
        let subscribed = match arn {
            Some(arn) => sns
                .subscribe()
                .topic_arn(&topic_arn)
                .protocol("sqs")
                .endpoint(arn)
                .attributes("RawMessageDelivery", "true")
                .send()
                .await
                .is_ok(),
            None => false,
        };
        if !subscribed {
            eprintln!("cannot subscribe {url} to {topic_arn}");
            std::process::exit(1);
        }
    }
    topic_arn
}

/// Messages in a queue, visible or in flight.
pub async fn in_queue(sqs: &aws_sdk_sqs::Client, url: &str) -> u64 {
    let attributes = sqs
        .get_queue_attributes()
        .queue_url(url)
        .attribute_names(QueueAttributeName::ApproximateNumberOfMessages)
        .attribute_names(QueueAttributeName::ApproximateNumberOfMessagesNotVisible)
        .send()
        .await
        .ok()
        .and_then(|answer| answer.attributes)
        .unwrap_or_default();
    [
        QueueAttributeName::ApproximateNumberOfMessages,
        QueueAttributeName::ApproximateNumberOfMessagesNotVisible,
    ]
    .iter()
    .filter_map(|name| attributes.get(name)?.parse::<u64>().ok())
    .sum()
}

/// Messages in a queue once SNS has stopped delivering to it (no change for
/// a second), or after 30 s.
pub async fn settled(sqs: &aws_sdk_sqs::Client, url: &str) -> u64 {
    let started = Instant::now();
    let mut last = in_queue(sqs, url).await;
    while started.elapsed() < Duration::from_secs(30) {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let now = in_queue(sqs, url).await;
        if now == last {
            break;
        }
        last = now;
    }
    last
}
