//! The Lambda side: from a `LambdaEvent<SqsEvent>` to the partial batch response.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use lambda_runtime::LambdaEvent;

use crate::runner::{BatchError, Invocation, Runner};
use crate::store::Store;

/// Handles one invocation. An `Err` fails the whole invocation (and so the
/// whole batch); that happens only for a record without a message id.
pub async fn handle<S: Store>(
    runner: &Runner<S>,
    event: LambdaEvent<SqsEvent>,
) -> Result<SqsBatchResponse, BatchError> {
    let invocation = Invocation {
        deadline: deadline(event.context.deadline),
        now: epoch_seconds(),
    };
    runner
        .run(&event.payload, invocation)
        .await
        .map(|report| report.response())
}

/// The invocation's deadline (epoch milliseconds, as the Runtime API gives it)
/// as an `Instant`; none when the runtime gave none.
fn deadline(deadline_ms: u64) -> Option<Instant> {
    if deadline_ms == 0 {
        return None;
    }
    let deadline = UNIX_EPOCH + Duration::from_millis(deadline_ms);
    let left = deadline
        .duration_since(SystemTime::now())
        .unwrap_or(Duration::ZERO);
    Some(Instant::now() + left)
}

/// Now, in epoch seconds.
pub fn epoch_seconds() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_secs())
}

impl From<BatchError> for lambda_runtime::Diagnostic {
    fn from(err: BatchError) -> Self {
        let error_type = match err {
            BatchError::MissingMessageId { .. } => "SequenceGuard.MissingMessageId",
        };
        lambda_runtime::Diagnostic {
            error_type: error_type.to_owned(),
            error_message: err.to_string(),
        }
    }
}
