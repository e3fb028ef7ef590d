//! What DynamoDB bills, measured: an SDK interceptor on a client that counts
//! its requests and asks each one for its consumed capacity
//! (`ReturnConsumedCapacity: TOTAL`, which changes nothing else), then adds
//! up the read and write units DynamoDB (here DynamoDB Local) answers.
//!
//! DynamoDB Local answers a transactional write at the standard rate (one
//! unit per KB and item); DynamoDB bills two, so the meter counts a
//! transaction's units twice.
//!
//! A request that fails (a condition not met, a transaction cancelled)
//! answers no capacity; it is counted apart (`failed`): DynamoDB bills a
//! failed conditional write its units too, so the cost adds one write unit
//! for each (items here are under 1 KB).

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use aws_sdk_dynamodb::config::interceptors::{
    BeforeSerializationInterceptorContextMut, FinalizerInterceptorContextRef,
};
use aws_sdk_dynamodb::config::{ConfigBag, Intercept, RuntimeComponents};
use aws_sdk_dynamodb::error::BoxError;
use aws_sdk_dynamodb::operation::{
    batch_get_item::{BatchGetItemInput, BatchGetItemOutput},
    batch_write_item::{BatchWriteItemInput, BatchWriteItemOutput},
    delete_item::{DeleteItemInput, DeleteItemOutput},
    get_item::{GetItemInput, GetItemOutput},
    put_item::{PutItemInput, PutItemOutput},
    query::{QueryInput, QueryOutput},
    transact_write_items::{TransactWriteItemsInput, TransactWriteItemsOutput},
    update_item::{UpdateItemInput, UpdateItemOutput},
};
use aws_sdk_dynamodb::types::{ConsumedCapacity, ReturnConsumedCapacity};

/// What one metered client has sent and been billed.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct Usage {
    /// Requests (SDK calls, whatever their retries).
    pub requests: u64,
    /// Requests that failed (no capacity answered).
    pub failed: u64,
    /// Read units answered.
    pub read_units: f64,
    /// Write units answered.
    pub write_units: f64,
}

/// The counts of a metered client. Cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct Meter {
    requests: Arc<AtomicU64>,
    failed: Arc<AtomicU64>,
    /// (read units, write units).
    units: Arc<Mutex<(f64, f64)>>,
}

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
    pub fn usage(&self) -> Usage {
        let (read_units, write_units) = self.units.lock().map(|units| *units).unwrap_or_default();
        Usage {
            requests: self.requests.load(Ordering::Relaxed),
            failed: self.failed.load(Ordering::Relaxed),
            read_units,
            write_units,
        }
    }

    fn add_write(&self, consumed: &[ConsumedCapacity]) {
        // A write's total is write units.
        let total: f64 = consumed
            .iter()
            .map(|one| {
                one.write_capacity_units()
                    .or(one.capacity_units())
                    .unwrap_or(0.0)
            })
            .sum();
        if let Ok(mut units) = self.units.lock() {
            units.1 += total;
        }
    }

    fn add_read(&self, consumed: &[ConsumedCapacity]) {
        let total: f64 = consumed
            .iter()
            .map(|one| {
                one.read_capacity_units()
                    .or(one.capacity_units())
                    .unwrap_or(0.0)
            })
            .sum();
        if let Ok(mut units) = self.units.lock() {
            units.0 += total;
        }
    }
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
        "pipeline-meter"
    }

    fn modify_before_serialization(
        &self,
        context: &mut BeforeSerializationInterceptorContextMut<'_>,
        _runtime_components: &RuntimeComponents,
        _cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        self.0.requests.fetch_add(1, Ordering::Relaxed);
        let input = context.input_mut();
        ask!(
            input,
            BatchGetItemInput,
            BatchWriteItemInput,
            DeleteItemInput,
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
        let meter = &self.0;
        let Some(Ok(output)) = context.output_or_error() else {
            meter.failed.fetch_add(1, Ordering::Relaxed);
            return Ok(());
        };
        if let Some(out) = output.downcast_ref::<BatchGetItemOutput>() {
            meter.add_read(out.consumed_capacity());
        } else if let Some(out) = output.downcast_ref::<GetItemOutput>() {
            meter.add_read(out.consumed_capacity.as_slice());
        } else if let Some(out) = output.downcast_ref::<QueryOutput>() {
            meter.add_read(out.consumed_capacity.as_slice());
        } else if let Some(out) = output.downcast_ref::<TransactWriteItemsOutput>() {
            // DynamoDB Local answers a transaction's writes at the standard
            // rate; DynamoDB bills them twice that (2 units per KB).
            meter.add_write(out.consumed_capacity());
            meter.add_write(out.consumed_capacity());
        } else if let Some(out) = output.downcast_ref::<BatchWriteItemOutput>() {
            meter.add_write(out.consumed_capacity());
        } else if let Some(out) = output.downcast_ref::<PutItemOutput>() {
            meter.add_write(out.consumed_capacity.as_slice());
        } else if let Some(out) = output.downcast_ref::<UpdateItemOutput>() {
            meter.add_write(out.consumed_capacity.as_slice());
        } else if let Some(out) = output.downcast_ref::<DeleteItemOutput>() {
            meter.add_write(out.consumed_capacity.as_slice());
        }
        Ok(())
    }
}
