//! What the projector answers: the sample batches and the table after them,
//! a record without a message id, `TABLE_NAME` missing, a local master key
//! on Lambda, the schedule's event, and the binary run by hand.

use super::*;

fn ids(json: &str, indices: &[usize]) -> Vec<String> {
    let event = sample(json);
    indices
        .iter()
        .map(|&index| event.records[index].message_id.clone().expect("id"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_projector_answers_sample_batches_with_their_failures_and_projects_them() {
    let store = fresh_table().await;
    let api = RuntimeApi::start().await;
    let function = start(&api, Some(store.table()));

    let answer = api.invoke(samples::ORDER_CREATED_AND_UPDATED).await;
    assert_eq!(failures(&answer), Vec::<String>::new());
    let first_call = api.first_next().expect("the function asked for work");
    eprintln!(
        "projector: process start to first call for work: {:?}",
        first_call - function.started
    );

    assert_eq!(
        failures(&api.invoke(samples::SAME_BATCH_REDELIVERED).await),
        Vec::<String>::new()
    );
    assert_eq!(
        failures(&api.invoke(samples::GAP).await),
        ids(samples::GAP, &[0, 1])
    );
    assert_eq!(
        failures(&api.invoke(samples::GAP_FILLED).await),
        Vec::<String>::new()
    );
    assert_eq!(
        failures(&api.invoke(samples::TWO_STREAMS_ONE_FAILING).await),
        ids(samples::TWO_STREAMS_ONE_FAILING, &[3, 5])
    );
    assert_eq!(
        failures(&api.invoke(samples::UNREADABLE_AND_INVALID).await),
        ids(samples::UNREADABLE_AND_INVALID, &[0, 1, 2, 3, 4, 5, 6])
    );
    assert_eq!(
        failures(&api.invoke(samples::INVENTORY).await),
        Vec::<String>::new()
    );

    let key = EntityKey::of::<shop::Order>("order-42");
    let loaded = store
        .load(std::slice::from_ref(&key), &[])
        .await
        .expect("load")
        .entities;
    match loaded
        .get(&key)
        .and_then(|entity| entity.as_ref().ok())
        .and_then(|entity| entity.get::<Order>())
    {
        Some(order) => {
            assert_eq!(
                (order.sequence, order.total_cents, order.status),
                (6, 2000, OrderStatus::Cancelled)
            )
        }
        other => panic!("order-42: {other:?}"),
    }
    assert_eq!(
        store.counter(&shop::STOCK, "SKU-LAMP").await.expect("read"),
        Some(7)
    );

    // Logs: JSON lines; the invalid message named with its reason; no personal data.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let output = function.output();
    let lines: Vec<serde_json::Value> = output
        .lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| {
            serde_json::from_str(line)
                .unwrap_or_else(|err| panic!("not a JSON log line ({err}): {line}"))
        })
        .collect();
    let invalid_id = &ids(samples::UNREADABLE_AND_INVALID, &[2])[0];
    assert!(
        lines
            .iter()
            .any(|line| line.to_string().contains(invalid_id.as_str())
                && line.to_string().contains("OrderShipped")),
        "no log line names the invalid message and its reason:\n{output}"
    );
    // Metrics: one EMF document per invocation, in the configured namespace.
    let documents: Vec<&serde_json::Value> = lines
        .iter()
        .filter(|line| line.get("_aws").is_some())
        .collect();
    assert_eq!(
        documents.len(),
        7,
        "one EMF document per invocation:\n{output}"
    );
    for document in &documents {
        let directive = &document["_aws"]["CloudWatchMetrics"][0];
        assert_eq!(directive["Namespace"], "SequenceGuardTest");
        assert_eq!(directive["Dimensions"][0][0], "Service");
        assert_eq!(document["Service"], "projector-test");
        let names: Vec<&str> = directive["Metrics"]
            .as_array()
            .expect("metrics")
            .iter()
            .filter_map(|m| m["Name"].as_str())
            .collect();
        for name in [
            "Applied",
            "Gap",
            "Invalid",
            "Messages",
            "DynamoDbRequests",
            "BatchDuration",
        ] {
            assert!(names.contains(&name), "{name} missing from {document}");
        }
    }
    // The sixth invocation: 07-unreadable-and-invalid.json.
    let invalid = documents[5];
    assert_eq!(
        (
            &invalid["Messages"],
            &invalid["Invalid"],
            &invalid["Skipped"],
            &invalid["Applied"]
        ),
        (
            &serde_json::json!(8),
            &serde_json::json!(6),
            &serde_json::json!(1),
            &serde_json::json!(1)
        )
    );
    assert_eq!(documents[2]["Gap"], 1, "03-gap.json");
    assert_eq!(
        documents[0]["DynamoDbRequests"], 2,
        "one load and one write"
    );

    for personal in ["ada@example.com", "Ada Lovelace", "bob@example.com"] {
        assert!(
            !output.contains(personal),
            "the logs leak `{personal}`:\n{output}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_without_a_message_id_fails_the_whole_invocation() {
    let store = fresh_table().await;
    let api = RuntimeApi::start().await;
    let _function = start(&api, Some(store.table()));
    let mut event: serde_json::Value =
        serde_json::from_str(samples::ORDER_CREATED_AND_UPDATED).expect("json");
    event["Records"][1]
        .as_object_mut()
        .expect("record")
        .remove("messageId");
    match api.invoke(&event.to_string()).await {
        Answer::Error(body) => assert!(body.contains("messageId"), "{body}"),
        other => panic!("expected an invocation error, got {other:?}"),
    }
    let key = EntityKey::of::<shop::Order>("order-42");
    assert!(
        store
            .load(std::slice::from_ref(&key), &[])
            .await
            .expect("load")
            .entities
            .is_empty(),
        "nothing was applied"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_table_name_the_projector_stops_at_start_naming_it() {
    let api = RuntimeApi::start().await;
    let mut function = start(&api, None);
    let status = tokio::time::timeout(Duration::from_secs(30), function.child.wait())
        .await
        .expect("the projector stopped")
        .expect("exit status");
    assert!(!status.success());
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(
        function.output().contains("TABLE_NAME"),
        "{}",
        function.output()
    );
    assert!(api.first_next().is_none(), "it never asked for work");
}

/// `PERSONAL_DATA_KEY=local:...` holds the master key itself: on Lambda
/// (which sets `LAMBDA_TASK_ROOT` for every function) the projector refuses
/// to start, naming the variable and not the key; under a local runtime,
/// as here without it, the same configuration starts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_lambda_a_local_master_key_stops_the_projector_at_start_naming_it() {
    let store = fresh_table().await;
    let key = support::personal_data::personal_data_key();
    let events = format!("{}-events", store.table());
    let variables = [
        ("PERSONAL_DATA_KEY", key.as_str()),
        ("EVENT_STORE_TABLE", events.as_str()),
    ];
    let api = RuntimeApi::start().await;
    let on_lambda = [
        variables[0],
        variables[1],
        ("LAMBDA_TASK_ROOT", "/var/task"),
    ];
    let mut function = start_with(&api, Some(store.table()), &on_lambda);
    let status = tokio::time::timeout(Duration::from_secs(30), function.child.wait())
        .await
        .expect("the projector stopped")
        .expect("exit status");
    assert!(!status.success());
    tokio::time::sleep(Duration::from_millis(100)).await;
    let output = function.output();
    let secret = key.trim_start_matches("local:");
    assert!(
        output.contains("PERSONAL_DATA_KEY")
            && output.contains("local:")
            && !output.contains(secret),
        "{output}"
    );
    assert!(api.first_next().is_none(), "it never asked for work");

    // The same, under a local runtime: it starts and asks for work.
    let api = RuntimeApi::start().await;
    let _function = start_with(&api, Some(store.table()), &variables);
    let started = std::time::Instant::now();
    while api.first_next().is_none() {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "it asked for work"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The schedule's event (as EventBridge sends it) makes the function look at
/// parked events and record how long the oldest has waited; an event of
/// another kind fails the invocation with a name for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scheduled_event_sweeps_parked_events_into_metrics() {
    let store = fresh_table().await;
    let api = RuntimeApi::start().await;
    let function = start(&api, Some(store.table()));
    let scheduled = serde_json::json!({
        "version": "0",
        "id": "53dc4d37-cffa-4f76-80c9-8b7d4a4d2eaa",
        "detail-type": "Scheduled Event",
        "source": "aws.events",
        "account": "123456789012",
        "time": "2026-11-30T12:00:00Z",
        "region": "us-east-1",
        "resources": ["arn:aws:events:us-east-1:123456789012:rule/sequence-guard-ParkedSweep"],
        "detail": {}
    })
    .to_string();

    let answer = |answer: Answer| match answer {
        Answer::Response(body) => serde_json::from_str::<serde_json::Value>(&body).expect("JSON"),
        other => panic!("expected a response, got {other:?}"),
    };
    let nothing = answer(api.invoke(&scheduled).await);
    assert_eq!(nothing["parkedEntities"], 0, "{nothing}");

    // order-100: created, then events 5 and 6 parked while 4 is missing.
    api.invoke(samples::TWO_STREAMS_ONE_FAILING).await;
    let order = EntityKey::of::<shop::Order>("order-100");
    assert_eq!(
        entity(&store, order).await.map(|entity| entity.sequence()),
        Some(3)
    );
    assert_eq!(
        failures(&api.invoke(samples::GAP_PARKED).await),
        Vec::<String>::new()
    );
    let parked = answer(api.invoke(&scheduled).await);
    assert_eq!(parked["parkedEntities"], 1, "{parked}");
    assert!(
        parked["oldestParkedAgeSeconds"].as_u64().is_some(),
        "{parked}"
    );

    // A sweep that arrives with its deadline already past reads nothing: it
    // says so, and records SweepIncomplete instead of counts that would
    // clear the parked-too-long alarm.
    api.set_deadline_in_ms(-1_000);
    let late = answer(api.invoke(&scheduled).await);
    assert_eq!(late["complete"], false, "{late}");
    api.set_deadline_in_ms(30_000);

    match api.invoke(r#"{"detail-type": "Object Created"}"#).await {
        Answer::Error(body) => assert!(
            body.contains("SequenceGuard.UnsupportedEvent") && body.contains("detail-type"),
            "{body}"
        ),
        other => panic!("expected an invocation error, got {other:?}"),
    }

    tokio::time::sleep(Duration::from_millis(200)).await;
    let output = function.output();
    let documents: Vec<serde_json::Value> = output
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|line| line.get("_aws").is_some())
        .collect();
    let sweeps: Vec<&serde_json::Value> = documents
        .iter()
        .filter(|document| document.get("ParkedEntities").is_some())
        .collect();
    assert_eq!(sweeps.len(), 2, "{output}");
    let incomplete: Vec<&serde_json::Value> = documents
        .iter()
        .filter(|document| {
            document
                .get("SweepIncomplete")
                .is_some_and(|count| count == 1)
        })
        .collect();
    assert_eq!(incomplete.len(), 1, "{output}");
    assert!(incomplete[0].get("ParkedEntities").is_none(), "{output}");
    assert_eq!(sweeps[0]["ParkedEntities"], serde_json::json!([0.0]));
    assert_eq!(sweeps[0]["OldestParkedAge"], serde_json::json!([0.0]));
    assert_eq!(sweeps[1]["ParkedEntities"], serde_json::json!([1.0]));
    assert!(
        output.contains("events still parked") && output.contains("order-100"),
        "{output}"
    );
    // The batch that parked wrote its own OldestParkedAge.
    assert!(
        documents
            .iter()
            .any(|document| document["Parked"] == 2 && document.get("OldestParkedAge").is_some()),
        "{output}"
    );
}

/// Run by hand, outside a Lambda runtime, the projector says in one line
/// what it is and how to run it locally, and stops (no panic, no IMDS).
#[test]
fn run_by_hand_the_projector_says_how_to_run_it() {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_projector"))
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .output()
        .expect("run projector");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("AWS_LAMBDA_RUNTIME_API")
            && stderr.contains("cargo lambda watch")
            && stderr.contains("replay")
            && !stderr.contains("panicked"),
        "{stderr}"
    );
}
