//! Invoking the function with a batch and applying its answer: complete,
//! retry, bisect or discard, and the on-failure record of a discarded batch.

use super::*;

/// How the function answered a batch.
pub(super) enum Verdict {
    Complete,
    /// Completed before this index of the batch; retry from it.
    FailedFrom(usize),
    /// The response named no usable record: the whole batch failed.
    Invalid,
    /// The invocation failed (error, timeout, crash).
    FunctionError,
}

impl StreamSource {
    /// Sends the first planned batch of a shard and applies the answer.
    pub(super) async fn deliver(&mut self, index: usize) -> StreamPoll {
        let mut batch = self.shards[index]
            .plan
            .pop_front()
            .expect("a planned batch");
        let shard_id = self.shards[index].id.clone();
        let records: Vec<Record> = self.shards[index]
            .buffer
            .iter()
            .take(batch.len)
            .cloned()
            .collect();
        let sent: Vec<String> = records.iter().map(sequence).collect();
        let lambda: Vec<Value> = records
            .iter()
            .map(|record| lambda_record(record, &self.stream_arn))
            .collect();
        let answer = StreamSource::invoke(&self.api, &lambda).await;
        batch.invokes += 1;
        let (failures, verdict) = verdict(&answer, &sent);
        let mut poll = StreamPoll {
            shard_id,
            sent: sent.clone(),
            answer: answer.clone(),
            failures,
            retry: batch.sent_before,
            retries: batch.retries,
            completed: Vec::new(),
            bisected: false,
            retried: false,
            discarded: Vec::new(),
            on_failure: None,
        };
        let (done, rest) = match verdict {
            Verdict::Complete => (batch.len, None),
            Verdict::FailedFrom(first) => (first, Some(batch.len - first)),
            Verdict::Invalid | Verdict::FunctionError => (0, Some(batch.len)),
        };
        let shard = &mut self.shards[index];
        poll.completed = shard
            .buffer
            .drain(..done)
            .map(|record| sequence(&record))
            .collect();
        let Some(rest) = rest else { return poll };
        let rest_records: Vec<Record> = shard.buffer.iter().take(rest).cloned().collect();
        if matches!(verdict, Verdict::FunctionError) && self.bisect_on_error && rest > 1 {
            // Splitting does not use up a retry.
            let first = rest.div_ceil(2);
            let half = |len| Batch {
                len,
                sent_before: true,
                ..batch.clone()
            };
            shard.plan.push_front(half(rest - first));
            shard.plan.push_front(half(first));
            poll.bisected = true;
        } else if batch.retries < self.max_retry_attempts {
            shard.plan.push_front(Batch {
                len: rest,
                retries: batch.retries + 1,
                invokes: batch.invokes,
                sent_before: true,
            });
            poll.retried = true;
        } else {
            poll.discarded = shard
                .buffer
                .drain(..rest)
                .map(|record| sequence(&record))
                .collect();
            if let Some((sqs, queue_url)) = &self.on_failure {
                let shard_id = poll.shard_id.clone();
                let record = on_failure_record(
                    &self.stream_arn,
                    &shard_id,
                    &rest_records,
                    batch.invokes,
                    &answer,
                );
                sqs.send_message()
                    .queue_url(queue_url)
                    .message_body(record.to_string())
                    .send()
                    .await
                    .expect("send the on-failure record");
                poll.on_failure = Some(record);
            }
        }
        poll
    }
}

/// The `itemIdentifier`s an answer lists, and what it means for a batch of
/// these sequence numbers.
fn verdict(answer: &Answer, sent: &[String]) -> (Vec<Option<String>>, Verdict) {
    let body = match answer {
        Answer::Error(_) => return (Vec::new(), Verdict::FunctionError),
        Answer::Response(body) => body,
    };
    // An empty or null response, or one without a list: complete success.
    let response: Value = serde_json::from_str(body).unwrap_or(Value::Null);
    let failures = match response.get("batchItemFailures") {
        None | Some(Value::Null) => return (Vec::new(), Verdict::Complete),
        Some(Value::Array(failures)) => failures,
        Some(_) => return (Vec::new(), Verdict::Invalid),
    };
    let identifiers: Vec<Option<String>> = failures
        .iter()
        .map(|failure| {
            failure
                .get("itemIdentifier")
                .and_then(Value::as_str)
                .filter(|id| !id.is_empty())
                .map(str::to_owned)
        })
        .collect();
    if identifiers.is_empty() {
        return (identifiers, Verdict::Complete);
    }
    let positions: Option<Vec<usize>> = identifiers
        .iter()
        .map(|id| sent.iter().position(|seq| Some(seq) == id.as_ref()))
        .collect();
    match positions.and_then(|positions| positions.into_iter().min()) {
        Some(first) => (identifiers, Verdict::FailedFrom(first)),
        None => (identifiers, Verdict::Invalid),
    }
}

static REQUESTS: AtomicU64 = AtomicU64::new(0);

/// The record Lambda sends to an on-failure destination for a discarded
/// batch of a DynamoDB stream.
fn on_failure_record(
    stream_arn: &str,
    shard_id: &str,
    records: &[Record],
    invokes: u32,
    last: &Answer,
) -> Value {
    let arrival = |record: Option<&Record>| {
        record
            .and_then(|record| record.dynamodb.as_ref())
            .and_then(|change| change.approximate_creation_date_time)
            .map(|at| {
                DateTime::from_secs(at.secs())
                    .fmt(DateTimeFormat::DateTime)
                    .expect("a timestamp")
            })
    };
    let mut response_context = json!({ "statusCode": 200, "executedVersion": "$LATEST" });
    if matches!(last, Answer::Error(_)) {
        response_context["functionError"] = json!("Unhandled");
    }
    let request = REQUESTS.fetch_add(1, Ordering::Relaxed);
    json!({
        "requestContext": {
            "requestId": format!("00000000-0000-4000-8000-{:012x}", request),
            "functionArn": FUNCTION_ARN,
            "condition": "RetryAttemptsExhausted",
            "approximateInvokeCount": invokes,
        },
        "responseContext": response_context,
        "version": "1.0",
        "timestamp": DateTime::from_millis(DateTime::from(std::time::SystemTime::now()).to_millis().expect("now in milliseconds"))
            .fmt(DateTimeFormat::DateTime)
            .expect("a timestamp"),
        "DDBStreamBatchInfo": {
            "shardId": shard_id,
            "startSequenceNumber": records.first().map(sequence),
            "endSequenceNumber": records.last().map(sequence),
            "approximateArrivalOfFirstRecord": arrival(records.first()),
            "approximateArrivalOfLastRecord": arrival(records.last()),
            "batchSize": records.len(),
            "streamArn": stream_arn,
        },
    })
}
