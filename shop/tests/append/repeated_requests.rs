//! A request repeated appends once and answers as the first: in the same
//! store, with the first call's expected sequence, and from the `append`
//! binary in a new process.

use super::*;

#[tokio::test]
async fn a_request_repeated_appends_once_and_answers_as_the_first() {
    let local = dynamodb_local();
    let store = fresh_store(&local.endpoint).await;
    let append = Append {
        request_id: Some("req-twice".into()),
        ..Append::one("order-7", created(1))
    };
    let first = store.append(append.clone()).await.expect("first");
    let mut again = append.clone();
    // The retried command may carry a new event id: the request id decides.
    again.events = vec![created(999)];
    let second = store.append(again).await.expect("second");
    assert!(second.duplicate_request);
    assert_eq!(
        (second.sequence, second.event_id.as_str()),
        (first.sequence, first.event_id.as_str())
    );
    assert_eq!(assert_contiguous(&store, "order-7").await.len(), 1);
    // With the expected sequence of the first call (the stream has moved since).
    let exact = Append {
        expected: ExpectedSequence::Exact(0),
        ..append.clone()
    };
    let third = store.append(exact).await.expect("third");
    assert!(third.duplicate_request);
    assert_eq!(third.event_id, first.event_id);
    // From another process: the binary, with the same request id.
    let output = append_binary(
        &local.endpoint,
        store.table(),
        &[
            "--stream",
            "order-7",
            "--type",
            "OrderUpdated",
            "--data",
            r#"{"customerName":"Ada","email":"ada@example.com","totalCents":5}"#,
            "--request-id",
            "req-twice",
        ],
    );
    assert_eq!(output.0, 0, "{}", output.2);
    let answer: Value = serde_json::from_str(output.1.trim()).expect("one JSON line");
    assert_eq!(
        answer,
        json!({"streamId": "order-7", "sequence": 1, "eventId": first.event_id, "duplicateRequest": true})
    );
    assert_eq!(assert_contiguous(&store, "order-7").await.len(), 1);
    // The binary twice, as the README's first append, expected sequence 0.
    let args = [
        "--stream",
        "order-8",
        "--type",
        "OrderCreated",
        "--data",
        r#"{"customerName":"Ada","email":"ada@example.com","totalCents":5}"#,
        "--request-id",
        "create-order-8",
        "--expected-sequence",
        "0",
    ];
    let (code, first, stderr) = append_binary(&local.endpoint, store.table(), &args);
    assert_eq!(code, 0, "{stderr}");
    let (code, again, stderr) = append_binary(&local.endpoint, store.table(), &args);
    assert_eq!(code, 0, "{stderr}");
    let (first, again): (Value, Value) = (
        serde_json::from_str(first.trim()).expect("json"),
        serde_json::from_str(again.trim()).expect("json"),
    );
    assert_eq!(
        (again["eventId"].clone(), again["duplicateRequest"].clone()),
        (first["eventId"].clone(), json!(true))
    );
    assert_eq!(assert_contiguous(&store, "order-8").await.len(), 1);
}
