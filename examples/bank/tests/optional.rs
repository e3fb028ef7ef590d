//! What an entity's `Option` field going to `None` does to its item, on
//! DynamoDB Local, through the runner: skipped when `None`
//! (`skip_serializing_if`), the attribute is removed from the item; not
//! skipped, serde_dynamo writes it as `NULL`. Both read back as `None`.

use aws_lambda_events::event::sqs::{SqsEvent, SqsMessage};
use aws_sdk_dynamodb::types::AttributeValue;
use sequence_guard::runner::{Invocation, Outcome, Runner, RunnerConfig};
use sequence_guard::store::Store;
use sequence_guard::store::dynamodb::{DynamoStore, connect, create_table};
use sequence_guard::testing::DynamoLocal;
use sequence_guard::{Decision, Domain, Entity, EntityKey, Events, Handling, Sequenced};
use serde::{Deserialize, Serialize};

/// A card, with both kinds of optional field.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Entity)]
#[serde(rename_all = "camelCase")]
#[entity(kind = "CARD")]
pub struct Card {
    pub sequence: u64,
    pub last_event_id: String,
    /// `None`: no attribute.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub blocked_reason: Option<String>,
    /// `None`: the attribute `NULL`.
    pub nickname: Option<String>,
}

/// Both fields, as the event sets them.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Fields {
    blocked_reason: Option<String>,
    nickname: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type", content = "data")]
pub enum CardEvent {
    CardIssued(Fields),
    CardChanged(Fields),
}

fn issued(card: &mut Option<Card>, event: &Sequenced<Fields>) -> Decision {
    if card.is_some() {
        return Decision::Duplicate;
    }
    *card = Some(Card {
        sequence: event.sequence,
        last_event_id: event.event_id.clone(),
        blocked_reason: event.data.blocked_reason.clone(),
        nickname: event.data.nickname.clone(),
    });
    Decision::Applied
}

fn changed(card: &mut Option<Card>, event: &Sequenced<Fields>) -> Decision {
    let Some(card) = card else {
        return Decision::NotCreated;
    };
    if card.sequence != event.sequence - 1 {
        return if card.sequence >= event.sequence {
            Decision::Duplicate
        } else {
            Decision::Gap
        };
    }
    card.blocked_reason.clone_from(&event.data.blocked_reason);
    card.nickname.clone_from(&event.data.nickname);
    card.last_event_id.clone_from(&event.event_id);
    card.sequence = event.sequence;
    Decision::Applied
}

impl Events for CardEvent {
    fn handling(self) -> Handling {
        match self {
            CardEvent::CardIssued(data) => Handling::sequenced(data, issued),
            CardEvent::CardChanged(data) => Handling::sequenced(data, changed),
        }
    }
}

fn message(sequence: u64, event_type: &str, data: &str) -> SqsMessage {
    let mut message = SqsMessage::default();
    message.message_id = Some(format!("m{sequence}"));
    message.body = Some(format!(
        r#"{{"eventId":"e{sequence}","type":"{event_type}","aggregateId":"card-1","sequence":{sequence},"data":{data}}}"#
    ));
    message
}

#[tokio::test]
async fn an_option_going_to_none_is_removed_when_skipped_and_null_when_not() {
    let local = DynamoLocal::start().expect("DynamoDB Local");
    let client = connect(Some(&local.endpoint)).await;
    let table = format!("bank-optional-{}", std::process::id());
    create_table(&client, &table).await.expect("table");
    let store = DynamoStore::new(client.clone(), table.clone());
    let domain = Domain::new::<CardEvent>(); // Card: named by both handlings
    let runner = Runner::new(domain, store.clone(), RunnerConfig::default());
    let item = || async {
        let output = client
            .get_item()
            .table_name(&table)
            .key("pk", AttributeValue::S("CARD#card-1".into()))
            .key("sk", AttributeValue::S("STATE".into()))
            .consistent_read(true)
            .send()
            .await
            .expect("get item");
        let item = output.item.unwrap_or_default();
        (
            item.get("blockedReason").cloned(),
            item.get("nickname").cloned(),
        )
    };

    let run = |event_type: &str, sequence: u64, data: &str| {
        let mut batch = SqsEvent::default();
        batch.records.push(message(sequence, event_type, data));
        let invocation = Invocation {
            deadline: None,
            now: sequence_guard::lambda::epoch_seconds(),
        };
        let runner = &runner;
        async move {
            let report = runner.run(&batch, invocation).await.expect("run");
            report
                .messages
                .iter()
                .map(|m| m.outcome)
                .collect::<Vec<_>>()
        }
    };

    // GIVEN a card issued with both fields set
    let issued = r#"{"blockedReason":"lost","nickname":"travel"}"#;
    assert_eq!(run("CardIssued", 1, issued).await, [Outcome::Applied]);
    assert_eq!(
        item().await,
        (
            Some(AttributeValue::S("lost".into())),
            Some(AttributeValue::S("travel".into()))
        )
    );
    // WHEN an update sets both to None
    let emptied = r#"{"blockedReason":null,"nickname":null}"#;
    assert_eq!(run("CardChanged", 2, emptied).await, [Outcome::Applied]);

    // THEN the skipped field's attribute is gone, the other one is NULL
    assert_eq!(item().await, (None, Some(AttributeValue::Null(true))));
    // AND both read back as None
    let key = EntityKey::of::<Card>("card-1");
    let mut loaded = store
        .load(std::slice::from_ref(&key), &[])
        .await
        .expect("load");
    let card = loaded
        .entities
        .remove(&key)
        .and_then(|entity| entity.expect("readable").get::<Card>().cloned())
        .expect("the card");
    assert_eq!(
        (card.sequence, card.blocked_reason, card.nickname),
        (2, None, None)
    );
}
