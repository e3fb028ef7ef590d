//! The event store in memory (what `local` runs on) is the DynamoDB one's
//! twin: the same appends, on each, answer the same (sequences, duplicate
//! requests, every refusal in the same words) and leave the same streams.

use sequence_guard::producer::{Appended, MemoryEvents};

use super::*;

/// An answer, without what differs by design (the event ids each store
/// makes).
fn answer(result: Result<Appended, AppendError>) -> String {
    match result {
        Ok(appended) => format!(
            "{} {}..={} duplicate {}",
            appended.stream_id,
            appended.first_sequence,
            appended.sequence,
            appended.duplicate_request
        ),
        Err(err) => format!("refused: {err}"),
    }
}

fn exact(mut append: Append, sequence: u64) -> Append {
    append.expected = ExpectedSequence::Exact(sequence);
    append
}

fn request(mut append: Append, id: &str) -> Append {
    append.request_id = Some(id.to_owned());
    append
}

/// The appends, in order: each answer is compared.
fn appends() -> Vec<Append> {
    let stock = |sku: &str, delta: i64| {
        NewEvent::new("InventoryAdjusted", json!({"sku": sku, "delta": delta}))
    };
    vec![
        Append::one("order-1", created(100)),
        Append::one("order-1", updated(200)),
        // An update cannot open a stream.
        Append::one("order-9", updated(1)),
        exact(Append::one("order-1", updated(3)), 0),
        exact(Append::one("order-1", updated(3)), 2),
        exact(Append::one("order-2", created(5)), 0),
        // A request answered once, the same the second time.
        request(Append::one("order-3", created(7)), "r-1"),
        request(Append::one("order-3", updated(8)), "r-1"),
        request(Append::one("order-3", updated(8)), "r-2"),
        // One kind a stream.
        Append::one("SKU-A", stock("SKU-A", 4)),
        Append::one("SKU-A", updated(1)),
        Append::one("order-1", stock("order-1", 1)),
        Append::one("SKU-A", stock("SKU-B", 1)),
        Append::one("order-1", NewEvent::new("OrderShipped", json!({}))),
        Append::one(
            "order-1",
            NewEvent::new(
                "OrderUpdated",
                json!({"customerName": "Ada", "totalCents": 1}),
            ),
        ),
        Append::one("", created(1)),
        Append::one(
            "order-1",
            NewEvent::new(
                "OrderUpdated",
                json!({"customerName": "sg:pd1:xyz", "email": "a@example.com", "totalCents": 1}),
            ),
        ),
        Append {
            events: (0..101).map(updated).collect(),
            ..Append::one("order-1", updated(0))
        },
        exact(Append::one("order-1", updated(2)), i64::MAX as u64),
        Append {
            events: vec![updated(9), updated(10), updated(11)],
            ..Append::one("order-2", updated(0))
        },
        exact(Append::one("order-2", updated(12)), 4),
    ]
}

#[tokio::test]
async fn the_same_appends_answer_the_same_in_memory_and_on_dynamodb() {
    let local = dynamodb_local();
    let dynamo = fresh_store(&local.endpoint).await;
    let memory = MemoryEvents::new(dynamo.domain().clone());
    let mut streams = HashSet::new();
    for (index, append) in appends().into_iter().enumerate() {
        streams.insert(append.stream_id.clone());
        let on_dynamo = answer(dynamo.append(append.clone()).await);
        let in_memory = answer(memory.append(append).await);
        assert_eq!(in_memory, on_dynamo, "append {index}");
    }
    for stream in streams {
        let on_dynamo: Vec<(u64, String)> = events(&dynamo, &stream)
            .await
            .into_iter()
            .map(|event| (event.sequence, event.event_type))
            .collect();
        let in_memory: Vec<(u64, String)> = memory
            .read(&stream, 0, 1000)
            .into_iter()
            .map(|event| (event.sequence, event.event_type))
            .collect();
        assert_eq!(in_memory, on_dynamo, "{stream}");
    }

    // The caller's own writes: DynamoDB's, refused in memory with the way out.
    let with_write = Append {
        writes: vec![TransactWriteItem::builder().build()],
        ..Append::one("order-7", created(1))
    };
    assert!(answer(memory.append(with_write).await).contains("append them on DynamoDB Local"),);
}
