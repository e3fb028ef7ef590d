//! A DynamoDB call's failure, as every store tells it: [`StoreError`] (a
//! refusal for good told apart from what may heal), and the SDK's errors
//! read as one, in a line, not the SDK's dump of the response.

use aws_sdk_dynamodb::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use aws_sdk_dynamodb::types::CancellationReason;

pub(crate) fn request_error<E, R>(operation: &'static str, err: &SdkError<E, R>) -> StoreError
where
    E: std::error::Error + ProvideErrorMetadata + 'static,
    R: std::fmt::Debug,
{
    match err.as_service_error() {
        Some(service) => service_error(operation, service),
        None => StoreError::Request {
            operation,
            message: readable(&DisplayErrorContext(err).to_string()).to_owned(),
        },
    }
}

/// A service error other than the ones the caller answers, as its code and
/// message (not the SDK's whole dump of the response).
pub(crate) fn service_error<E>(operation: &'static str, err: &E) -> StoreError
where
    E: std::error::Error + ProvideErrorMetadata,
{
    let code = err.code().unwrap_or("unknown error");
    let message = match err.message() {
        Some(text) => format!("{code}: {text}"),
        None => code.to_owned(),
    };
    if code == VALIDATION {
        StoreError::Rejected { operation, message }
    } else {
        StoreError::Request { operation, message }
    }
}

/// The readable part of an SDK error's full text: the chain of causes,
/// without the debug dump of the request and response that follows it.
pub(crate) fn readable(full: &str) -> &str {
    [
        " (DispatchFailure",
        " (TimeoutError",
        " (ResponseError",
        " (ConstructionFailure",
        " (ServiceError",
    ]
    .iter()
    .filter_map(|dump| full.find(dump))
    .min()
    .map_or(full, |end| &full[..end])
}

/// DynamoDB's error code for a request it will never take (an item over
/// 400 KB, an expression it refuses).
pub(super) const VALIDATION: &str = "ValidationException";

/// A transaction cancelled for reasons other than the conditions the caller
/// answers (a conflicting transaction, throttling, a validation error).
pub(super) fn cancelled(reasons: &[CancellationReason]) -> StoreError {
    let codes: Vec<&str> = reasons.iter().filter_map(|reason| reason.code()).collect();
    let message = format!("transaction cancelled: {codes:?}");
    let operation = "TransactWriteItems";
    if codes.contains(&"ValidationError") {
        StoreError::Rejected { operation, message }
    } else {
        StoreError::Request { operation, message }
    }
}

pub(crate) fn build_error(operation: &'static str, err: impl std::fmt::Display) -> StoreError {
    StoreError::Request {
        operation,
        message: err.to_string(),
    }
}

/// A store operation that did not complete. The table may or may not hold
/// its effect (a timeout, a lost answer): the caller reports the messages
/// failed, and the guard sorts it out on redelivery.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// A request failed: an error from the service or the SDK (throttling, a
    /// network error).
    #[error("{operation} failed: {message}")]
    Request {
        /// The operation, as DynamoDB names it (`BatchGetItem`,
        /// `TransactWriteItems`, ...).
        operation: &'static str,
        /// What went wrong, in one line.
        message: String,
    },
    /// The call was cut off when the time left before the invocation's deadline
    /// (less the margin) ran out.
    #[error("{operation} did not answer within {millis} ms")]
    Timeout {
        /// The operation that was cut off.
        operation: &'static str,
        /// The time it was given, in milliseconds.
        millis: u128,
    },
    /// An item exists but cannot be read (an attribute of the wrong type, an
    /// entity its type cannot decode).
    #[error("item {key} cannot be read: {message}")]
    Corrupt {
        /// Names the item: its key, or what it is (`a parked event`).
        key: String,
        /// Why it cannot be read.
        message: String,
    },
    /// The table refused the request for good (DynamoDB's
    /// `ValidationException`: an item over 400 KB, say): nothing was
    /// written, and the same request will be refused again.
    #[error("{operation} refused by the table: {message}")]
    Rejected {
        /// The operation refused.
        operation: &'static str,
        /// What the table answered, in one line.
        message: String,
    },
}
