//! The Lambda side: from a `LambdaEvent<SqsEvent>` to the partial batch response.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use lambda_runtime::LambdaEvent;

use crate::metrics::{self, Emf};
use crate::runner::{BatchError, Invocation, Runner};
use crate::store::Store;

/// Handles one invocation: runs the batch, records its metrics (written
/// as one EMF document when `emf` is given) and answers with the partial batch
/// response. An `Err` fails the whole invocation (and so the whole batch);
/// that happens only for a record without a message id.
pub async fn handle<S: Store>(
    runner: &Runner<S>,
    emf: Option<&Emf>,
    event: LambdaEvent<SqsEvent>,
) -> Result<SqsBatchResponse, BatchError> {
    let started = Instant::now();
    let invocation = Invocation {
        deadline: deadline(event.context.deadline),
        now: epoch_seconds(),
    };
    let report = runner.run(&event.payload, invocation).await?;
    metrics::record(&report, started.elapsed());
    if let Some(emf) = emf {
        emf.flush();
    }
    Ok(report.response())
}

/// The invocation's deadline (epoch milliseconds, as the Runtime API gives
/// it) as an `Instant`. Lambda's deadline is always ahead when an invocation
/// arrives; one already behind is not a real deadline (`cargo lambda watch`
/// sends its timeout, 600000, here): then the batch runs without one.
fn deadline(deadline_ms: u64) -> Option<Instant> {
    let deadline = UNIX_EPOCH + Duration::from_millis(deadline_ms);
    match deadline.duration_since(SystemTime::now()) {
        Ok(left) => Some(Instant::now() + left),
        Err(_) => {
            tracing::warn!(
                deadline_ms,
                "the invocation's deadline had passed when it arrived: running without one"
            );
            None
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deadline_ahead_becomes_an_instant_and_one_behind_none() {
        let now_ms = u64::try_from(
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_millis()),
        )
        .unwrap_or(u64::MAX);
        let ahead = deadline(now_ms + 60_000).expect("a deadline ahead");
        let left = ahead.duration_since(Instant::now());
        assert!(
            left > Duration::from_secs(55) && left <= Duration::from_secs(60),
            "{left:?}"
        );
        assert_eq!(
            deadline(600_000),
            None,
            "cargo lambda watch's relative value"
        );
        assert_eq!(deadline(0), None);
    }
}
