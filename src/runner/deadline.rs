//! The invocation's deadline: store calls run within the time left, less
//! the margin, and none starts when there is none.

use std::future::Future;
use std::time::{Duration, Instant};

use super::{Invocation, Outcome, Runner};
use crate::store::{Store, StoreError};

/// Time left for store calls.
#[derive(Debug, Clone, Copy)]
enum Budget {
    Unlimited,
    Left(Duration),
    Exhausted,
}

/// Why a store call did not complete.
#[derive(Debug, Clone)]
pub(crate) enum CallError {
    /// Not attempted: the invocation's deadline is too near.
    Deadline,
    Store(StoreError),
}

impl CallError {
    /// The outcome of the message whose call this was, and why.
    pub(super) fn outcome(&self) -> (Outcome, String) {
        match self {
            CallError::Deadline => (Outcome::Skipped, DEADLINE_REASON.to_owned()),
            CallError::Store(err @ StoreError::Rejected { .. }) => {
                (Outcome::Rejected, format!("{err}; retrying will not help"))
            }
            CallError::Store(err) => (Outcome::StorageError, err.to_string()),
        }
    }
}

const DEADLINE_REASON: &str = "not attempted: the invocation's deadline is too near";
impl<S: Store> Runner<S> {
    fn budget(&self, invocation: &Invocation) -> Budget {
        match invocation.deadline {
            None => Budget::Unlimited,
            Some(deadline) => {
                match deadline
                    .checked_duration_since(Instant::now())
                    .and_then(|left| left.checked_sub(self.config.deadline_margin))
                {
                    Some(left) if !left.is_zero() => Budget::Left(left),
                    _ => Budget::Exhausted,
                }
            }
        }
    }

    /// The invocation cut to half the time it has left (its margin kept):
    /// what a sweep's deadlines may take, its walk of the parked events
    /// having the rest.
    pub(crate) fn first_half(&self, invocation: &Invocation) -> Invocation {
        let margin = self.config.deadline_margin;
        let deadline = invocation.deadline.map(|deadline| {
            let now = Instant::now();
            let left = deadline
                .saturating_duration_since(now)
                .saturating_sub(margin);
            now + margin + left / 2
        });
        Invocation {
            deadline,
            now: invocation.now,
        }
    }

    /// Runs a store call within the time left before the deadline; does not
    /// start it when there is none.
    pub(crate) async fn timed<T>(
        &self,
        operation: &'static str,
        invocation: &Invocation,
        call: impl Future<Output = Result<T, StoreError>>,
    ) -> Result<T, CallError> {
        match self.budget(invocation) {
            Budget::Unlimited => call.await.map_err(CallError::Store),
            Budget::Left(left) => match tokio::time::timeout(left, call).await {
                Ok(result) => result.map_err(CallError::Store),
                Err(_) => Err(CallError::Store(StoreError::Timeout {
                    operation,
                    millis: left.as_millis(),
                })),
            },
            Budget::Exhausted => Err(CallError::Deadline),
        }
    }
}
