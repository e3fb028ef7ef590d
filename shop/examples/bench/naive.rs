//! The naive handler the runner is measured against: the literal reading of
//! the guard.

use aws_lambda_events::event::sqs::SqsEvent;
use sequence_guard::envelope::Record;
use sequence_guard::runner::addition;
use sequence_guard::store::Store;
use sequence_guard::testing::Keyed;
use sequence_guard::testing::{SaveExt, Saved};
use sequence_guard::{Decision, Domain};

/// The naive handler: each message in order, one read and (when it applies)
/// one conditional write; a stock adjustment is its own transaction.
pub async fn naive<S: Store>(domain: &Domain, store: &S, event: &SqsEvent, now: u64) {
    let mut failed_streams: Vec<String> = Vec::new();
    for message in &event.records {
        let Some(record) = Record::read(message, domain) else {
            continue;
        };
        if failed_streams.contains(&record.stream) {
            continue;
        }
        let ok = match &record.event {
            Err(_) => false,
            Ok(event) if event.deduplicated().is_some() => {
                let Some(addition) = addition(event, now, 604_800) else {
                    continue;
                };
                store.add(std::slice::from_ref(&addition)).await.is_ok()
            }
            Ok(event) => {
                let Some(key) = event.entity_key() else {
                    continue;
                };
                match store.load(std::slice::from_ref(&key), &[]).await {
                    Err(_) => false,
                    Ok(mut loaded) => {
                        let base = loaded.entities.remove(&key).and_then(Result::ok);
                        let mut slot = base.clone();
                        let decision = event.decide(&mut slot);
                        match (decision, slot) {
                            (Ok(Decision::Applied), Some(entity)) => {
                                let expected = base.as_ref().map(|entity| entity.sequence());
                                let keyed = Keyed { key, entity };
                                matches!(store.save(&keyed, expected).await, Ok(Saved::Written))
                            }
                            (decision, _) => decision.is_ok_and(Decision::is_done),
                        }
                    }
                }
            }
        };
        if !ok {
            failed_streams.push(record.stream.clone());
        }
    }
}
