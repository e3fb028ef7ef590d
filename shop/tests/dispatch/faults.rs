//! Faults on SQS and DynamoDB together: nothing lost, nothing applied twice.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn faults_on_sqs_and_dynamodb_together_lose_nothing_and_apply_nothing_twice() {
    let sqs_upstream = localstack()
        .endpoint
        .trim_start_matches("http://")
        .to_owned();
    let dynamodb_upstream = dynamodb_local()
        .endpoint
        .trim_start_matches("http://")
        .to_owned();
    let faults = Faults {
        sqs: Some(Arc::new(
            FaultProxy::start(
                sqs_upstream,
                17,
                20,
                vec![Fault::Throttle, Fault::ServerError, Fault::LostAnswer],
            )
            .await,
        )),
        dynamodb: Some(Arc::new(
            FaultProxy::start(
                dynamodb_upstream,
                29,
                20,
                vec![Fault::Throttle, Fault::ServerError, Fault::LostAnswer],
            )
            .await,
        )),
    };
    let mut p = pipeline("faults", &faults).await;
    orders(&p.events, &names("order", 3), 9).await;
    for sku in ["SKU-A", "SKU-B"] {
        for delta in [5, -2, 7, 1, -3] {
            append(
                &p.events,
                Append::one(
                    sku,
                    NewEvent::new("InventoryAdjusted", json!({ "sku": sku, "delta": delta })),
                ),
            )
            .await;
        }
    }
    p.settle().await;
    let items = p.assert_projection_is_the_fold().await;
    // Stock is an ADD: applied twice, it would be off.
    for sku in ["SKU-A", "SKU-B"] {
        let stock = items
            .iter()
            .find(|((pk, _), _)| pk == &format!("SKU#{sku}"))
            .map(|(_, attributes)| attributes.clone())
            .unwrap_or_default();
        assert!(stock.contains("onHand=N(\"8\")"), "{sku}: {stock}");
    }
    let injected =
        |faults: &Option<Arc<FaultProxy>>| faults.as_ref().map_or(0, |proxy| proxy.counts.faults());
    assert!(injected(&faults.sqs) > 0, "SQS faults were injected");
    assert!(
        injected(&faults.dynamodb) > 0,
        "DynamoDB faults were injected"
    );
    assert!(
        p.projected("Applied") + p.projected("Duplicate") >= 40.0,
        "{}",
        p.projector.output()
    );
    assert_eq!(p.failures().await.len(), 0, "nothing given up");
}
