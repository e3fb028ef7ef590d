//! What became of each message, and of each write that parked or drained:
//! the reports the response, the logs and the metrics are made from.

use aws_lambda_events::event::sqs::SqsBatchResponse;

use crate::entity::EntityKey;
use crate::handling::Decision;
use crate::store::ParkedEvent;

/// What became of one message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Outcome {
    /// The event was applied to its entity, or its effect added to its
    /// counter: completed.
    Applied,
    /// Done already (applied before, parked already, or an older snapshot):
    /// completed, nothing written.
    Duplicate,
    /// A gap, parked in the table: completed, applied when the gap closes.
    Parked,
    /// A type this consumer declares it does not project
    /// ([`Handling::ignore`](crate::Handling::ignore)): completed, nothing
    /// read or written.
    Ignored,
    /// A different event for a sequence applied or parked: recorded, completed.
    Conflict,
    /// An earlier event of the aggregate has not been applied, and the message
    /// was not parked: reported failed, to be retried.
    Gap,
    /// The entity has not been created yet, and the message was not parked:
    /// reported failed, to be retried.
    NotCreated,
    /// The body could not be read
    /// ([`InvalidMessage`](crate::envelope::InvalidMessage)), or a conflicting
    /// body is too large to record: reported failed.
    Invalid,
    /// Not attempted: an earlier message of its stream failed, or the
    /// invocation's deadline was too near.
    Skipped,
    /// A store call failed or timed out, or a conditional write kept losing
    /// races: reported failed, to be retried.
    StorageError,
    /// Refused for good by the table (DynamoDB's `ValidationException`, a
    /// counter leaving the 64-bit range): retrying will not help; the
    /// message goes on to the dead-letter queue.
    Rejected,
    /// The event's handler broke the rule its answer must keep (`Applied`
    /// moves the entity to the event's sequence, any other answer changes
    /// nothing): nothing was written; retried, as a fixed handler may take it.
    HandlerError,
}

impl Outcome {
    /// Every outcome, once each.
    pub const ALL: [Outcome; 12] = [
        Outcome::Applied,
        Outcome::Duplicate,
        Outcome::Parked,
        Outcome::Ignored,
        Outcome::Conflict,
        Outcome::Gap,
        Outcome::NotCreated,
        Outcome::Invalid,
        Outcome::Skipped,
        Outcome::StorageError,
        Outcome::Rejected,
        Outcome::HandlerError,
    ];

    /// Whether the message is listed in `batchItemFailures`.
    pub fn is_failure(self) -> bool {
        !matches!(
            self,
            Outcome::Applied
                | Outcome::Duplicate
                | Outcome::Parked
                | Outcome::Ignored
                | Outcome::Conflict
        )
    }

    /// The outcome as logs name it (`not created`).
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Applied => "applied",
            Outcome::Duplicate => "duplicate",
            Outcome::Parked => "parked",
            Outcome::Ignored => "ignored",
            Outcome::Conflict => "conflict",
            Outcome::Gap => "gap",
            Outcome::NotCreated => "not created",
            Outcome::Invalid => "invalid",
            Outcome::Skipped => "skipped",
            Outcome::StorageError => "storage error",
            Outcome::Rejected => "rejected",
            Outcome::HandlerError => "handler error",
        }
    }
}

impl From<Decision> for Outcome {
    fn from(decision: Decision) -> Self {
        match decision {
            Decision::Applied => Outcome::Applied,
            Decision::Duplicate => Outcome::Duplicate,
            Decision::Gap => Outcome::Gap,
            Decision::NotCreated => Outcome::NotCreated,
            Decision::Invalid => Outcome::Invalid,
        }
    }
}

/// One message's line of the report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessageReport {
    /// The SQS message id.
    pub message_id: String,
    /// The stream the message belongs to
    /// ([`Record::stream`](crate::envelope::Record::stream)).
    pub stream: String,
    /// The envelope's `type`; `None` when the body could not be read.
    pub event_type: Option<&'static str>,
    /// The event's sequence; `None` for a deduplicated effect, or when the body
    /// could not be read.
    pub sequence: Option<u64>,
    /// What became of the message.
    pub outcome: Outcome,
    /// Why, in one line (for logs); `None` when the outcome says it all.
    pub reason: Option<String>,
    /// For a gap: the sequence the entity waits for (the missing event).
    pub waiting_for: Option<u64>,
    /// A gap that was not parked because `max_parked_per_entity` events are
    /// parked on its entity already.
    pub parking_full: bool,
    /// The producer's trace root (`AWSTraceHeader`), when SQS carried one.
    pub trace_id: Option<String>,
}

/// What one commit parked on an entity and drained from it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParkingReport {
    /// The stream whose commit this was.
    pub stream: String,
    /// The entity the events were parked on or drained from.
    pub entity: EntityKey,
    /// Sequences parked.
    pub parked: Vec<u64>,
    /// Parked events applied, in order (without their bodies: a long drain
    /// of large bodies is not held in memory by its report).
    pub drained: Vec<DrainedEvent>,
    /// Events parked on the entity once written.
    pub parked_now: usize,
    /// The sequence the entity waits for, while events are parked on it.
    pub waiting_for: Option<u64>,
    /// How long the oldest event parked on the entity (or drained from it
    /// now) has waited, in seconds.
    pub oldest_parked_age_seconds: Option<u64>,
    /// Parked sequences the entity got past another way (a creation at a
    /// later sequence): removed without being applied.
    pub cleared: Vec<u64>,
    /// Of those, the ones that were another event than the one applied at
    /// their sequence: recorded as conflicts.
    pub conflicts: Vec<u64>,
    /// The parked event that follows the entity and could not be applied
    /// (it stays parked), if any.
    pub stuck: Option<StuckEvent>,
}

/// A parked event that follows its entity and could not be applied: it
/// stays parked, and is tried again by the next event of its stream or the
/// next sweep.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StuckEvent {
    /// Its sequence.
    pub sequence: u64,
    /// Why, in one line, without data values.
    pub reason: String,
    /// Whether its handler broke its rule or panicked (counted as
    /// `HandlerError`).
    pub handler_error: bool,
}

/// Parked events whose handler broke its rule (or panicked) while being
/// drained.
pub(crate) fn stuck_handler_errors(parking: &[ParkingReport]) -> usize {
    parking
        .iter()
        .filter(|parking| {
            parking
                .stuck
                .as_ref()
                .is_some_and(|stuck| stuck.handler_error)
        })
        .count()
}

/// A parked event that was applied: what identifies it, not its body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DrainedEvent {
    /// The event's sequence.
    pub sequence: u64,
    /// The event's `eventId`.
    pub event_id: String,
    /// The envelope's `type`.
    pub event_type: String,
    /// The message that brought it.
    pub message_id: String,
    /// Epoch seconds.
    pub parked_at: u64,
    /// The body's size, in bytes.
    pub body_bytes: usize,
}

impl From<&ParkedEvent> for DrainedEvent {
    fn from(parked: &ParkedEvent) -> Self {
        DrainedEvent {
            sequence: parked.sequence,
            event_id: parked.event_id.clone(),
            event_type: parked.event_type.clone(),
            message_id: parked.message_id.clone(),
            parked_at: parked.parked_at,
            body_bytes: parked.body.len(),
        }
    }
}

/// What became of every message of a batch, in batch order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BatchReport {
    /// One report per message, in batch order.
    pub messages: Vec<MessageReport>,
    /// Requests the batch sent to the table.
    pub requests: u64,
    /// Events parked and drained, per commit.
    pub parking: Vec<ParkingReport>,
    /// Gaps closed from the event store: the events read from it and
    /// applied before the messages that waited for them, per entity.
    pub filled: Vec<FilledReport>,
}

/// The events of a gap read from the event store and applied before the
/// message that waited for them (`fill.rs`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilledReport {
    /// The stream.
    pub stream: String,
    /// The entity they were applied to.
    pub entity: EntityKey,
    /// The first sequence applied.
    pub from: u64,
    /// The last sequence applied.
    pub to: u64,
}

impl FilledReport {
    /// How many events it applied.
    pub fn events(&self) -> u64 {
        self.to.saturating_sub(self.from).saturating_add(1)
    }
}

impl BatchReport {
    /// Events read from the event store and applied, in all.
    pub fn filled_events(&self) -> u64 {
        self.filled.iter().map(FilledReport::events).sum()
    }

    /// The SQS partial batch response: exactly the failed messages.
    pub fn response(&self) -> SqsBatchResponse {
        let mut response = SqsBatchResponse::default();
        for message in self
            .messages
            .iter()
            .filter(|message| message.outcome.is_failure())
        {
            response.add_failure(message.message_id.clone());
        }
        response
    }

    /// How many messages had `outcome`.
    pub fn count(&self, outcome: Outcome) -> usize {
        self.messages
            .iter()
            .filter(|message| message.outcome == outcome)
            .count()
    }

    /// Parked events applied.
    pub fn drained(&self) -> usize {
        self.parking
            .iter()
            .map(|parking| parking.drained.len())
            .sum()
    }

    /// Conflicts recorded: messages, and parked events found to differ from
    /// the event applied at their sequence.
    pub fn conflicts(&self) -> usize {
        self.count(Outcome::Conflict)
            + self
                .parking
                .iter()
                .map(|parking| parking.conflicts.len())
                .sum::<usize>()
    }

    /// Handler errors: messages whose handler broke its rule (or panicked),
    /// and parked events whose handler did so while being drained.
    pub fn handler_errors(&self) -> usize {
        self.count(Outcome::HandlerError) + stuck_handler_errors(&self.parking)
    }

    /// Gaps not parked because their entity had no room left.
    pub fn parking_full(&self) -> usize {
        self.messages
            .iter()
            .filter(|message| message.parking_full)
            .count()
    }

    /// The longest wait of a parked event seen by the batch, in seconds.
    pub fn oldest_parked_age_seconds(&self) -> Option<u64> {
        self.parking
            .iter()
            .filter_map(|parking| parking.oldest_parked_age_seconds)
            .max()
    }
}
