//! One try sent: a conditional `PutItem` or a `TransactWriteItems`, with
//! its capacity counted, and DynamoDB's answer told as the append reads it.

use aws_sdk_dynamodb::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_dynamodb::operation::put_item::PutItemError;
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::{
    ReturnConsumedCapacity, ReturnValuesOnConditionCheckFailure, TransactWriteItem,
};

use super::capacity::{item_bytes, transaction_units, write_units};
use super::store::EventStore;
use crate::entity::Item;
use crate::table::StoreError;
use crate::table::{request_error, service_error};

/// Service errors that sending again will not heal.
const PERMANENT: [&str; 5] = [
    "ResourceNotFoundException",
    "AccessDeniedException",
    "UnrecognizedClientException",
    "MissingAuthenticationTokenException",
    "ValidationException",
];

pub(super) const CONDITION_FAILED: &str = "ConditionalCheckFailed";

/// One try: one conditional put, or one transaction.
pub(super) enum Plan {
    Put(Item),
    Transaction {
        items: Vec<TransactWriteItem>,
        token: String,
    },
}

/// The reason one item of a refused try gives, with the item it found.
pub(super) struct Refusal {
    pub(super) code: Option<String>,
    pub(super) item: Option<Item>,
}

/// What DynamoDB answered to one try.
pub(super) enum Answer {
    Written,
    /// A condition failed (or the transaction was cancelled): a reason for
    /// each item of the try, in order.
    Refused(Vec<Refusal>),
    /// The token was used before with other parameters.
    Mismatch(StoreError),
    /// Will fail again (a missing table, no permission, a refused request).
    Permanent(StoreError),
    /// It may or may not have been written (a timeout, a 5xx, throttling).
    Unknown(StoreError),
}

impl EventStore {
    /// Sends one try, counting the request and its units.
    pub(super) async fn send(&self, plan: Plan) -> Answer {
        self.sent();
        match plan {
            Plan::Put(item) => self.put(item).await,
            Plan::Transaction { items, token } => self.transact(items, &token).await,
        }
    }

    /// The event put on the condition that its slot is empty; a failed
    /// condition answers with the event found there (`ALL_OLD`).
    async fn put(&self, item: Item) -> Answer {
        let bytes = item_bytes(&item);
        let result = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(item))
            .condition_expression("attribute_not_exists(pk)")
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .return_consumed_capacity(ReturnConsumedCapacity::Total)
            .send()
            .await;
        let err = match result {
            Ok(output) => {
                let reported = output.consumed_capacity.iter();
                self.meter.write(reported, write_units(bytes));
                return Answer::Written;
            }
            Err(err) => err,
        };
        match err.as_service_error() {
            Some(PutItemError::ConditionalCheckFailedException(failed)) => {
                // Billed by the larger of the item found and the one put.
                let found = failed.item.as_ref().map_or(0, item_bytes);
                self.meter.write([], write_units(bytes.max(found)));
                Answer::Refused(vec![Refusal {
                    code: Some(CONDITION_FAILED.to_owned()),
                    item: failed.item.clone(),
                }])
            }
            Some(other) => failure("PutItem", other),
            None => Answer::Unknown(request_error("PutItem", &err)),
        }
    }

    async fn transact(&self, items: Vec<TransactWriteItem>, token: &str) -> Answer {
        let units = transaction_units(&items);
        let result = self
            .client
            .transact_write_items()
            .set_transact_items(Some(items))
            .client_request_token(token)
            .return_consumed_capacity(ReturnConsumedCapacity::Total)
            .send()
            .await;
        let err: SdkError<TransactWriteItemsError, _> = match result {
            Ok(output) => {
                let reported = output.consumed_capacity.iter().flatten();
                self.meter.write(reported, units);
                return Answer::Written;
            }
            Err(err) => err,
        };
        match err.as_service_error() {
            Some(TransactWriteItemsError::TransactionCanceledException(cancelled)) => {
                self.meter.write([], units);
                let reasons = cancelled.cancellation_reasons.iter().flatten();
                Answer::Refused(
                    reasons
                        .map(|reason| Refusal {
                            code: reason.code.clone(),
                            item: reason.item.clone().filter(|item| !item.is_empty()),
                        })
                        .collect(),
                )
            }
            Some(TransactWriteItemsError::IdempotentParameterMismatchException(_)) => {
                Answer::Mismatch(request_error("TransactWriteItems", &err))
            }
            // Still running under this token: its outcome is unknown.
            Some(TransactWriteItemsError::TransactionInProgressException(_)) => {
                Answer::Unknown(request_error("TransactWriteItems", &err))
            }
            Some(other) => failure("TransactWriteItems", other),
            // No answer (a timeout, a connection lost): unknown.
            None => Answer::Unknown(request_error("TransactWriteItems", &err)),
        }
    }
}

/// A service error other than the ones the append answers: permanent, or
/// an unknown outcome.
fn failure<E>(operation: &'static str, err: &E) -> Answer
where
    E: std::error::Error + ProvideErrorMetadata,
{
    let error = service_error(operation, err);
    let permanent = matches!(error, StoreError::Rejected { .. })
        || err.code().is_some_and(|code| PERMANENT.contains(&code));
    if permanent {
        Answer::Permanent(error)
    } else {
        Answer::Unknown(error)
    }
}
