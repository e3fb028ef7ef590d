//! What the projector says about its work: DynamoDB requests per message,
//! no event data at any log level, trace and request ids on log lines,
//! Powertools' metric names, and X-Ray subsegments.

use super::*;

/// The `dynamodb_requests` of each "batch done" log line, in order.
fn requests_logged(output: &str) -> Vec<u64> {
    output
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|line| line["fields"]["message"] == "batch done")
        .filter_map(|line| line["fields"]["dynamodb_requests"].as_u64())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dynamodb_requests_per_message() {
    let store = fresh_table().await;
    let api = RuntimeApi::start().await;
    let function = start(&api, Some(store.table()));
    let json = |event: &aws_lambda_events::event::sqs::SqsEvent| {
        serde_json::to_string(event).expect("json")
    };

    // (a) one new aggregate, 10 events in one batch
    let mut messages = vec![message("a1", "product-a", &product_created("product-a"))];
    messages.extend((2..=10).map(|n| {
        message(
            &format!("a{n}"),
            "product-a",
            &price_changed("product-a", n),
        )
    }));
    assert_eq!(
        failures(&api.invoke(&json(&batch(messages))).await),
        Vec::<String>::new()
    );

    // (b) 10 existing aggregates, one update each (after a batch creating them)
    let products: Vec<String> = (0..10).map(|n| format!("product-b{n}")).collect();
    let created = batch(
        products
            .iter()
            .map(|p| message(&format!("{p}-1"), p, &product_created(p)))
            .collect(),
    );
    assert_eq!(
        failures(&api.invoke(&json(&created)).await),
        Vec::<String>::new()
    );
    let updates = batch(
        products
            .iter()
            .map(|p| message(&format!("{p}-2"), p, &price_changed(p, 2)))
            .collect(),
    );
    assert_eq!(
        failures(&api.invoke(&json(&updates)).await),
        Vec::<String>::new()
    );

    // (c) a batch of 10 duplicates: the same batch redelivered
    assert_eq!(
        failures(&api.invoke(&json(&updates)).await),
        Vec::<String>::new()
    );

    tokio::time::sleep(Duration::from_millis(200)).await;
    let requests = requests_logged(&function.output());
    let [a, _, b, c] = requests[..] else {
        panic!("four batch summaries expected: {requests:?}")
    };
    eprintln!(
        "DynamoDB requests per message: (a) one new aggregate, 10 events: {a}/10 = {:.2}; \
         (b) 10 aggregates, one update each: {b}/10 = {:.2}; (c) 10 duplicates: {c}/10 = {:.2}",
        a as f64 / 10.0,
        b as f64 / 10.0,
        c as f64 / 10.0
    );
    // One consistent BatchGetItem for a batch of streams this process has not
    // written, one conditional write per stream; the streams it wrote are
    // known (WARM_ENTITIES): their update is its write alone, and their
    // duplicates cost nothing.
    assert_eq!((a, b, c), (2, 10, 0));
}

/// No level prints an event's data: at TRACE, through either variable and
/// in either format, a planted e-mail address and name appear nowhere in the
/// function's output, while the function's own TRACE lines do (the level
/// took effect). The sample story runs too: gaps, parking, a drain, invalid
/// messages, stock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_log_level_prints_event_data() {
    const PLANTED_EMAIL: &str = "planted.5f3a@example.org";
    const PLANTED_NAME: &str = "Planted Ninetynine";
    let planted = |order: &str, sequence: u64| {
        body(
            if sequence == 1 {
                "OrderCreated"
            } else {
                "OrderUpdated"
            },
            order,
            sequence,
            serde_json::json!({
                "customerName": PLANTED_NAME,
                "email": PLANTED_EMAIL,
                "totalCents": 100,
            }),
        )
    };
    for variables in [
        [("RUST_LOG", "trace"), ("AWS_LAMBDA_LOG_FORMAT", "JSON")],
        [
            ("AWS_LAMBDA_LOG_LEVEL", "TRACE"),
            ("AWS_LAMBDA_LOG_FORMAT", "TEXT"),
        ],
    ] {
        let store = fresh_table().await;
        let api = RuntimeApi::start().await;
        let function = support::function::start_with(&api, Some(store.table()), &variables);
        for (_, sample) in samples::ALL {
            api.invoke(sample).await;
        }
        let json = |event: &aws_lambda_events::event::sqs::SqsEvent| {
            serde_json::to_string(event).expect("json")
        };
        // Created, a gap parked at its third delivery, then the gap closed.
        let created = batch(vec![message("p1", "planted", &planted("planted", 1))]);
        assert_eq!(
            failures(&api.invoke(&json(&created)).await),
            Vec::<String>::new()
        );
        let gap = batch(vec![delivered(
            message("p3", "planted", &planted("planted", 3)),
            3,
        )]);
        assert_eq!(
            failures(&api.invoke(&json(&gap)).await),
            Vec::<String>::new()
        );
        let closed = batch(vec![message("p2", "planted", &planted("planted", 2))]);
        assert_eq!(
            failures(&api.invoke(&json(&closed)).await),
            Vec::<String>::new()
        );
        assert_eq!(
            entity(&store, EntityKey::of::<shop::Order>("planted"))
                .await
                .map(|entity| entity.sequence()),
            Some(3)
        );

        tokio::time::sleep(Duration::from_millis(200)).await;
        let output = function.output();
        assert!(
            output.contains("batch read"),
            "the function's own TRACE lines are missing, so TRACE was not on ({variables:?}):\n{output}"
        );
        for personal in [
            PLANTED_EMAIL,
            PLANTED_NAME,
            "ada@example.com",
            "Ada Lovelace",
        ] {
            assert!(
                !output.contains(personal),
                "{variables:?}: the logs leak `{personal}`:\n{output}"
            );
        }
    }
}

/// Following one message: its log lines carry the producer's trace root
/// (SQS's `AWSTraceHeader`) and the invocation's request id; metrics go to
/// Powertools' namespace and service when those are set, and `ColdStart` is
/// 1 in the first invocation's document only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn log_lines_carry_the_trace_and_request_ids_and_metrics_powertools_names() {
    const ROOT: &str = "1-5759e988-bd862e3fe1be46a994272793";
    let store = fresh_table().await;
    let api = RuntimeApi::start().await;
    let function = support::function::start_with(
        &api,
        Some(store.table()),
        &[
            ("POWERTOOLS_METRICS_NAMESPACE", "TeamOrders"),
            ("POWERTOOLS_SERVICE_NAME", "order-projection"),
        ],
    );
    let traced = |mut message: aws_lambda_events::event::sqs::SqsMessage| {
        message.attributes.insert(
            "AWSTraceHeader".to_owned(),
            format!("Root={ROOT};Parent=53995c3f42cd8ad8;Sampled=1"),
        );
        message
    };
    let json = |event: &aws_lambda_events::event::sqs::SqsEvent| {
        serde_json::to_string(event).expect("json")
    };
    // A gap: its "message failed" line is about that message.
    let gap = batch(vec![traced(message(
        "t-3",
        "traced",
        &order_event("OrderUpdated", "traced", 3, "traced-3"),
    ))]);
    assert_eq!(failures(&api.invoke(&json(&gap)).await), ["t-3"]);
    let created = batch(vec![message(
        "t-1",
        "traced",
        &order_event("OrderCreated", "traced", 1, "traced-1"),
    )]);
    assert_eq!(
        failures(&api.invoke(&json(&created)).await),
        Vec::<String>::new()
    );

    tokio::time::sleep(Duration::from_millis(200)).await;
    let output = function.output();
    let lines: Vec<serde_json::Value> = output
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect();
    let failed = lines
        .iter()
        .find(|line| line["fields"]["message"] == "message failed")
        .unwrap_or_else(|| panic!("no `message failed` line:\n{output}"));
    assert_eq!(failed["fields"]["trace_id"], ROOT, "{failed}");
    assert_eq!(failed["fields"]["message_id"], "t-3", "{failed}");
    assert!(
        failed["spans"]
            .to_string()
            .contains("\"request_id\":\"request-1\""),
        "the invocation's request id: {failed}"
    );
    let documents: Vec<&serde_json::Value> = lines
        .iter()
        .filter(|line| line.get("_aws").is_some())
        .collect();
    assert_eq!(documents.len(), 2, "{output}");
    for document in &documents {
        let directive = &document["_aws"]["CloudWatchMetrics"][0];
        assert_eq!(directive["Namespace"], "TeamOrders", "{document}");
        assert_eq!(document["Service"], "order-projection", "{document}");
    }
    assert_eq!(documents[0]["ColdStart"], 1, "{}", documents[0]);
    assert_eq!(documents[1]["ColdStart"], 0, "{}", documents[1]);
}

/// With X-Ray on (`Tracing: Active`: Lambda runs a daemon and names it in
/// AWS_XRAY_DAEMON_ADDRESS), each DynamoDB call of a batch is a subsegment
/// of the invocation's trace, sent to the daemon as UDP datagrams.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_dynamodb_call_is_a_subsegment_of_the_invocations_trace() {
    subsegments_of_the_invocations_trace(&[]).await;
}

/// Under Lambda Managed Instances (`AWS_LAMBDA_MAX_CONCURRENCY` above 1)
/// `lambda_runtime` serves several invocations at once and sets no
/// `_X_AMZN_TRACE_ID`: the trace still comes from the invocation's context.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_managed_instances_the_subsegments_keep_the_invocations_trace() {
    subsegments_of_the_invocations_trace(&[("AWS_LAMBDA_MAX_CONCURRENCY", "4")]).await;
}

async fn subsegments_of_the_invocations_trace(more: &[(&str, &str)]) {
    let daemon = tokio::net::UdpSocket::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let address = daemon.local_addr().expect("address").to_string();
    let store = fresh_table().await;
    let api = RuntimeApi::start().await;
    let mut variables = vec![("AWS_XRAY_DAEMON_ADDRESS", address.as_str())];
    variables.extend_from_slice(more);
    let _function = support::function::start_with(&api, Some(store.table()), &variables);
    // The local Runtime API hands out Root=1-5bef4de7-...;Parent=9a9197af755a6419;Sampled=1.
    assert_eq!(
        failures(&api.invoke(samples::ORDER_CREATED_AND_UPDATED).await),
        Vec::<String>::new()
    );
    let mut subsegments = Vec::new();
    let mut buffer = vec![0u8; 65_536];
    while subsegments.len() < 2 {
        let received =
            tokio::time::timeout(Duration::from_secs(10), daemon.recv(&mut buffer)).await;
        let Ok(Ok(length)) = received else {
            panic!(
                "{} subsegments received: {subsegments:?}",
                subsegments.len()
            )
        };
        let datagram = String::from_utf8_lossy(&buffer[..length]).into_owned();
        let (header, document) = datagram.split_once('\n').expect("header and document");
        assert_eq!(header, r#"{"format": "json", "version": 1}"#);
        let document: serde_json::Value = serde_json::from_str(document).expect("JSON");
        subsegments.push(document);
    }
    let operations: Vec<&str> = subsegments
        .iter()
        .filter_map(|document| document["aws"]["operation"].as_str())
        .collect();
    assert_eq!(
        operations,
        ["BatchGetItem", "UpdateItem"],
        "{subsegments:?}"
    );
    for document in &subsegments {
        assert_eq!(document["name"], "DynamoDB");
        assert_eq!(document["namespace"], "aws");
        assert_eq!(document["type"], "subsegment");
        assert_eq!(document["trace_id"], "1-5bef4de7-ad49b0e87f6ef6c87fc2e700");
        assert_eq!(document["parent_id"], "9a9197af755a6419");
        assert_eq!(document["aws"]["table_name"], store.table());
        assert_eq!(document["id"].as_str().map(str::len), Some(16));
        assert!(
            document["end_time"].as_f64() >= document["start_time"].as_f64(),
            "{document}"
        );
    }
}
