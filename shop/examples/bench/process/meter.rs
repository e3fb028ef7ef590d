//! The capacity of a step, per client: an SDK interceptor that asks every
//! request for `ReturnConsumedCapacity: TOTAL` (the table's and its
//! indexes', which changes nothing else) and adds up what DynamoDB Local
//! answers, and counts each transaction's write units by AWS's rules from
//! its items (`transaction_units`: 2 per KB and item).
//!
//! DynamoDB Local (10.3.0) reports single-item writes, reads and queries
//! as AWS bills them, an index's writes included; but not a transaction
//! across two tables: it reports fewer units than the items it wrote (two
//! puts to one table and an update to another: 2 units for the first
//! table). So a transaction is counted by the rules, and Local's report of
//! it kept apart. A request that fails reports nothing: counted in
//! `failed`.

use std::sync::Arc;
use std::sync::Mutex;

use aws_sdk_dynamodb::config::interceptors::{
    BeforeSerializationInterceptorContextMut, FinalizerInterceptorContextRef,
};
use aws_sdk_dynamodb::config::{ConfigBag, Intercept, RuntimeComponents};
use aws_sdk_dynamodb::error::BoxError;
use aws_sdk_dynamodb::operation::{
    batch_get_item::{BatchGetItemInput, BatchGetItemOutput},
    get_item::{GetItemInput, GetItemOutput},
    put_item::{PutItemInput, PutItemOutput},
    query::{QueryInput, QueryOutput},
    transact_write_items::{TransactWriteItemsInput, TransactWriteItemsOutput},
    update_item::{UpdateItemInput, UpdateItemOutput},
};
use aws_sdk_dynamodb::types::{ConsumedCapacity, ReturnConsumedCapacity};
use sequence_guard::producer::capacity::transaction_units;

/// What the metered clients sent, and their units.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct Reported {
    /// Requests that failed (they report no units).
    pub failed: u64,
    /// Read units, as DynamoDB Local reported them.
    pub read_units: f64,
    /// Write units of the requests other than transactions, as DynamoDB
    /// Local reported them (an index's writes included).
    pub write_units: f64,
    /// Transactions sent.
    pub transactions: u64,
    /// Their write units by AWS's rules (their items only, not an index's).
    pub transaction_units: f64,
    /// Their write units as DynamoDB Local reported them.
    pub transaction_reported: f64,
}

impl Reported {
    /// The difference since `earlier`.
    pub fn since(&self, earlier: &Reported) -> Reported {
        Reported {
            failed: self.failed - earlier.failed,
            read_units: self.read_units - earlier.read_units,
            write_units: self.write_units - earlier.write_units,
            transactions: self.transactions - earlier.transactions,
            transaction_units: self.transaction_units - earlier.transaction_units,
            transaction_reported: self.transaction_reported - earlier.transaction_reported,
        }
    }

    /// The sum of both.
    pub fn plus(&self, other: &Reported) -> Reported {
        Reported {
            failed: self.failed + other.failed,
            read_units: self.read_units + other.read_units,
            write_units: self.write_units + other.write_units,
            transactions: self.transactions + other.transactions,
            transaction_units: self.transaction_units + other.transaction_units,
            transaction_reported: self.transaction_reported + other.transaction_reported,
        }
    }
}

/// The sums of the clients it wraps. Cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct Meter(Arc<Mutex<Reported>>);

impl Meter {
    /// `client` with this meter on it.
    pub fn wrap(&self, client: &aws_sdk_dynamodb::Client) -> aws_sdk_dynamodb::Client {
        let config = client
            .config()
            .to_builder()
            .interceptor(Metering(self.clone()))
            .build();
        aws_sdk_dynamodb::Client::from_conf(config)
    }

    /// Everything counted so far.
    pub fn reported(&self) -> Reported {
        self.0.lock().map(|sums| *sums).unwrap_or_default()
    }

    fn add(&self, change: impl FnOnce(&mut Reported)) {
        if let Ok(mut sums) = self.0.lock() {
            change(&mut sums);
        }
    }
}

fn total<'a>(consumed: impl IntoIterator<Item = &'a ConsumedCapacity>) -> f64 {
    consumed
        .into_iter()
        .filter_map(ConsumedCapacity::capacity_units)
        .sum()
}

#[derive(Debug)]
struct Metering(Meter);

/// Sets `return_consumed_capacity` on the inputs of the calls it knows.
macro_rules! ask {
    ($input:expr, $($kind:ty),+) => {
        $(if let Some(input) = $input.downcast_mut::<$kind>() {
            input.return_consumed_capacity = Some(ReturnConsumedCapacity::Total);
        })+
    };
}

impl Intercept for Metering {
    fn name(&self) -> &'static str {
        "process-step-meter"
    }

    fn modify_before_serialization(
        &self,
        context: &mut BeforeSerializationInterceptorContextMut<'_>,
        _runtime_components: &RuntimeComponents,
        _cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let input = context.input_mut();
        if let Some(transaction) = input.downcast_ref::<TransactWriteItemsInput>() {
            // Billed whether it succeeds or is cancelled (an upper bound, as
            // the event store's meter counts it).
            let units = transaction_units(transaction.transact_items());
            self.0.add(|sums| {
                sums.transactions += 1;
                sums.transaction_units += units;
            });
        }
        ask!(
            input,
            BatchGetItemInput,
            GetItemInput,
            PutItemInput,
            QueryInput,
            TransactWriteItemsInput,
            UpdateItemInput
        );
        Ok(())
    }

    fn read_after_execution(
        &self,
        context: &FinalizerInterceptorContextRef<'_>,
        _runtime_components: &RuntimeComponents,
        _cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let Some(Ok(output)) = context.output_or_error() else {
            self.0.add(|sums| sums.failed += 1);
            return Ok(());
        };
        if let Some(out) = output.downcast_ref::<TransactWriteItemsOutput>() {
            let reported = total(out.consumed_capacity());
            self.0.add(|sums| sums.transaction_reported += reported);
            return Ok(());
        }
        let (read, write) = if let Some(out) = output.downcast_ref::<BatchGetItemOutput>() {
            (total(out.consumed_capacity()), 0.0)
        } else if let Some(out) = output.downcast_ref::<GetItemOutput>() {
            (total(out.consumed_capacity.iter()), 0.0)
        } else if let Some(out) = output.downcast_ref::<QueryOutput>() {
            (total(out.consumed_capacity.iter()), 0.0)
        } else if let Some(out) = output.downcast_ref::<PutItemOutput>() {
            (0.0, total(out.consumed_capacity.iter()))
        } else if let Some(out) = output.downcast_ref::<UpdateItemOutput>() {
            (0.0, total(out.consumed_capacity.iter()))
        } else {
            (0.0, 0.0)
        };
        self.0.add(|sums| {
            sums.read_units += read;
            sums.write_units += write;
        });
        Ok(())
    }
}
