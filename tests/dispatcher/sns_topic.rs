//! `SnsTopic` on a fake SNS: its `PublishBatch` requests and how it reads
//! the answers.

use super::*;

/// A fake SNS on a local port: answers every request with `status` and
/// `answer` (an awsQuery XML document) and keeps each request's form fields.
struct FakeSns {
    endpoint: String,
    requests: std::sync::Arc<Mutex<Vec<HashMap<String, String>>>>,
}

fn fake_sns(status: u16, answer: &'static str) -> FakeSns {
    use std::io::{BufRead, BufReader, Read as _, Write as _};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    let requests = std::sync::Arc::new(Mutex::new(Vec::new()));
    let kept = requests.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut length = 0;
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 {
                    break;
                }
                let line = line.trim_end();
                if line.is_empty() {
                    break;
                }
                if let Some((name, value)) = line.split_once(':')
                    && name.eq_ignore_ascii_case("content-length")
                {
                    length = value.trim().parse().unwrap();
                }
            }
            let mut body = vec![0; length];
            reader.read_exact(&mut body).unwrap();
            let fields: HashMap<String, String> =
                form_urlencoded(&String::from_utf8(body).unwrap());
            kept.lock().unwrap().push(fields);
            let response = format!(
                "HTTP/1.1 {status} Status\r\nContent-Type: text/xml\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{answer}",
                answer.len()
            );
            stream.write_all(response.as_bytes()).unwrap();
        }
    });
    FakeSns { endpoint, requests }
}

/// `a=b&c=d`, percent-decoded, `+` as a space.
fn form_urlencoded(body: &str) -> HashMap<String, String> {
    let decode = |text: &str| {
        let bytes = text.replace('+', " ").into_bytes();
        let mut out = Vec::new();
        let mut i = 0;
        while i < bytes.len() {
            if bytes[i] == b'%' {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap();
                out.push(u8::from_str_radix(hex, 16).unwrap());
                i += 3;
            } else {
                out.push(bytes[i]);
                i += 1;
            }
        }
        String::from_utf8(out).unwrap()
    };
    body.split('&')
        .filter_map(|pair| pair.split_once('='))
        .map(|(name, value)| (decode(name), decode(value)))
        .collect()
}

fn topic_on(endpoint: &str) -> SnsTopic {
    let credentials = aws_sdk_sns::config::Credentials::new("test", "test", None, None, "test");
    let sns = aws_sdk_sns::Client::from_conf(
        aws_sdk_sns::config::Builder::new()
            .behavior_version(aws_sdk_sns::config::BehaviorVersion::latest())
            .endpoint_url(endpoint)
            .region(aws_sdk_sns::config::Region::new("us-east-1"))
            .credentials_provider(credentials.clone())
            .build(),
    );
    let sqs = aws_sdk_sqs::Client::from_conf(
        aws_sdk_sqs::config::Builder::new()
            .behavior_version(aws_sdk_sqs::config::BehaviorVersion::latest())
            .endpoint_url(endpoint)
            .region(aws_sdk_sqs::config::Region::new("us-east-1"))
            .credentials_provider(credentials)
            .build(),
    );
    SnsTopic::new(
        sns,
        "arn:aws:sns:us-east-1:123456789012:events.fifo",
        sqs,
        format!("{endpoint}/123456789012/failures"),
    )
}

const PUBLISH_BATCH_ANSWER: &str = r#"<PublishBatchResponse xmlns="http://sns.amazonaws.com/doc/2010-03-31/">
  <PublishBatchResult>
    <Successful>
      <member><Id>0</Id><MessageId>m-0</MessageId><SequenceNumber>10000000000000000001</SequenceNumber></member>
      <member><Id>2</Id><MessageId>m-2</MessageId><SequenceNumber>10000000000000000002</SequenceNumber></member>
    </Successful>
    <Failed>
      <member><Id>1</Id><Code>InvalidParameter</Code><Message>Invalid parameter: Message too long</Message><SenderFault>true</SenderFault></member>
    </Failed>
  </PublishBatchResult>
  <ResponseMetadata><RequestId>r-1</RequestId></ResponseMetadata>
</PublishBatchResponse>"#;

#[tokio::test]
async fn sns_topic_publishes_each_entry_with_the_queues_ids_and_body_in_order() {
    let sns = fake_sns(200, PUBLISH_BATCH_ANSWER);
    let topic = topic_on(&sns.endpoint);
    let records: Vec<Value> = (1..=4).map(|n| insert(n, "a", n)).collect();
    let entries: Vec<Message> = records
        .iter()
        .map(|record| match read(record, &domain()) {
            Read::Send(outgoing) => outgoing,
            other => panic!("{other:?}"),
        })
        .collect();
    // The fake answers three of four: the fourth is not known to be sent.
    let refused = topic.send(&entries).await.expect("answered");
    assert_eq!(refused.len(), 2, "{refused:?}");
    assert_eq!(
        refused[0],
        Refused {
            index: 1,
            code: "InvalidParameter".to_owned(),
            message: "Invalid parameter: Message too long".to_owned(),
            sender_fault: true,
        }
    );
    assert!(topic.blames_message(&refused[0]));
    assert_eq!(
        (refused[1].index, refused[1].code.as_str()),
        (3, "NoAnswer")
    );
    assert!(!topic.blames_message(&refused[1]));
    assert_eq!(topic.service(), "SNS");

    let requests = sns.requests.lock().unwrap();
    assert_eq!(requests.len(), 1);
    let fields = &requests[0];
    assert_eq!(fields["Action"], "PublishBatch");
    assert_eq!(
        fields["TopicArn"],
        "arn:aws:sns:us-east-1:123456789012:events.fifo"
    );
    for (n, entry) in entries.iter().enumerate() {
        let field = |name: &str| {
            fields
                .get(&format!(
                    "PublishBatchRequestEntries.member.{}.{name}",
                    n + 1
                ))
                .cloned()
                .unwrap_or_else(|| panic!("entry {n}: no {name} in {fields:?}"))
        };
        assert_eq!(field("Id"), n.to_string());
        assert_eq!(field("MessageGroupId"), entry.group_id);
        assert_eq!(field("MessageDeduplicationId"), entry.deduplication_id);
        assert_eq!(field("Message"), entry.body, "the body byte for byte");
        assert_eq!(field("MessageDeduplicationId"), format!("a:{}", n + 1));
    }
    assert!(
        !fields.keys().any(|name| name.contains("MessageAttributes")),
        "no attributes: {fields:?}"
    );
}

#[tokio::test]
async fn a_publish_batch_refused_as_a_whole_is_sent_again_then_names_its_first_record() {
    let sns = fake_sns(
        400,
        r#"<ErrorResponse xmlns="http://sns.amazonaws.com/doc/2010-03-31/"><Error><Type>Sender</Type><Code>BatchRequestTooLong</Code><Message>The batch request is too long.</Message></Error><RequestId>r-2</RequestId></ErrorResponse>"#,
    );
    let topic = topic_on(&sns.endpoint);
    let records: Vec<Value> = (1..=10).map(|n| insert(n, "b", n)).collect();
    let outcome = dispatch(&records, &domain(), &topic, quick(), None).await;
    assert_eq!(outcome.dispatched, 0);
    assert_eq!(outcome.failure, Some(sequence_number(1)));
    assert_eq!(outcome.requests, 4, "one try and three retries");
    let requests = sns.requests.lock().unwrap();
    assert_eq!(requests.len(), 4, "the SDK does not retry a sender's error");
    assert_eq!(
        requests[0]["PublishBatchRequestEntries.member.10.MessageDeduplicationId"], "b:10",
        "ten entries in the first request"
    );
    for again in &requests[1..] {
        assert!(
            !again.contains_key("PublishBatchRequestEntries.member.2.Id"),
            "the troubled stream's head alone: {again:?}"
        );
    }
}
