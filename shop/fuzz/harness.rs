//! What the fuzz targets run, shared with `tests/fuzz_seeds.rs` (which feeds
//! them the committed seeds in every `cargo test`).

use aws_lambda_events::event::sqs::{SqsEvent, SqsMessage};
use sequence_guard::EntityKey;

use sequence_guard::runner::{BatchError, Invocation, Runner, RunnerConfig};
use sequence_guard::store::Inspection;
use sequence_guard::store::memory::MemoryStore;

/// Any bytes as a message body: parsing answers, never panics.
pub fn body(data: &[u8]) {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = shop::domain().parse(text);
    }
}

/// Any bytes as a batch: records separated by `\n--\n`, each `group|id|body`
/// (missing parts left out). The runner answers for every record exactly once,
/// lists only records of the batch, and fails the invocation only for a record
/// without an id. Run twice on one store, the second run applies nothing new
/// and parks nothing new; it may find conflicts the first could not see (an
/// event for a sequence the entity reached later in the batch), and keeps
/// every one recorded. Gaps park from the first delivery, so that parking,
/// draining and conflicts are fuzzed too.
pub fn batch(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let mut event = SqsEvent::default();
    for (index, part) in text.split("\n--\n").take(10).enumerate() {
        let mut fields = part.splitn(3, '|');
        let (group, id, body) = (fields.next(), fields.next(), fields.next());
        let mut message = SqsMessage::default();
        message.message_id = id.map(|id| {
            if id == "#" {
                format!("m{index}")
            } else {
                id.to_owned()
            }
        });
        message.body = body.map(str::to_owned);
        if let Some(group) = group.filter(|group| !group.is_empty()) {
            message
                .attributes
                .insert("MessageGroupId".to_owned(), group.to_owned());
        }
        event.records.push(message);
    }
    let Ok(runtime) = tokio::runtime::Builder::new_current_thread().build() else {
        return;
    };
    let runner = Runner::new(
        shop::domain(),
        MemoryStore::new(),
        RunnerConfig {
            park_after_receives: 1,
            ..RunnerConfig::default()
        },
    );
    let invocation = Invocation {
        deadline: None,
        now: 1_700_000_000,
    };
    let first = runtime.block_on(runner.run(&event, invocation));
    let unidentified = event
        .records
        .iter()
        .position(|record| record.message_id.as_deref().is_none_or(str::is_empty));
    match (first, unidentified) {
        (Err(BatchError::MissingMessageId { index }), Some(expected)) => {
            assert_eq!(index, expected)
        }
        (Err(err), None) => panic!("failed the invocation without cause: {err}"),
        (Err(err), Some(index)) => panic!("record {index} has no id, yet the batch failed: {err}"),
        (Ok(_), Some(index)) => panic!("record {index} has no id, yet the batch was answered"),
        (Ok(report), None) => {
            assert_eq!(
                report.messages.len(),
                event.records.len(),
                "one report per record"
            );
            for (message, record) in report.messages.iter().zip(&event.records) {
                assert_eq!(
                    Some(&message.message_id),
                    record.message_id.as_ref(),
                    "reports in batch order"
                );
            }
            let ids: Vec<&String> = event
                .records
                .iter()
                .filter_map(|r| r.message_id.as_ref())
                .collect();
            for failure in report.response().batch_item_failures {
                assert!(
                    ids.contains(&&failure.item_identifier),
                    "lists only records of the batch"
                );
            }
            let before = runner.store().entities();
            let parked_before = runner.store().parking();
            let again = runtime
                .block_on(runner.run(&event, invocation))
                .expect("the same batch again");
            assert!(
                again
                    .messages
                    .iter()
                    .all(|m| m.outcome != sequence_guard::runner::Outcome::Applied),
                "a redelivered batch applies nothing new"
            );
            assert_eq!(runner.store().entities(), before);
            let parked = |inspections: Vec<(EntityKey, Inspection)>| {
                inspections
                    .into_iter()
                    .map(|(key, inspection)| (key, inspection.stored, inspection.parked))
                    .filter(|(_, stored, _)| !stored.parking.sequences.is_empty())
                    .collect::<Vec<_>>()
            };
            let conflicts = |inspections: &[(EntityKey, Inspection)]| {
                inspections
                    .iter()
                    .flat_map(|(key, inspection)| {
                        inspection
                            .conflicts
                            .iter()
                            .map(move |conflict| (key.clone(), conflict.clone()))
                    })
                    .collect::<Vec<_>>()
            };
            let after = runner.store().parking();
            let (seen, now_seen) = (conflicts(&parked_before), conflicts(&after));
            assert!(
                seen.iter().all(|conflict| now_seen.contains(conflict)),
                "a conflict record changed or vanished"
            );
            assert_eq!(parked(after), parked(parked_before), "parked nothing new");
        }
    }
}
