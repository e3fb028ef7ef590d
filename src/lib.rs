//! # sequence-guard
//!
//! An AWS Lambda that consumes SQS FIFO batches and projects ordered domain
//! events into DynamoDB: exactly once in effect, in order per aggregate,
//! without losing a message.
//!
//! # Layout
//!
//! - [`envelope`]: reads one SQS record into a typed [`domain::Event`], or an
//!   [`envelope::InvalidMessage`] that names what was wrong; the event's data
//!   through serde ([`domain::event::Payload`]) and the limits its types
//!   declare ([`limits`]).
//! - [`domain`]: events, entities, and one handler per event type holding the
//!   guard (`domain/order.rs`, `domain/product.rs`, `domain/inventory.rs`);
//!   [`domain::decide`] routes an event to its handler. Knows nothing of SQS
//!   or DynamoDB.
//! - [`runner`]: the batch runner. Groups records into streams, runs them,
//!   persists each entity with one conditional write and each stream's stock
//!   adjustments with one transaction, and decides which messages are reported
//!   failed; parks gaps that keep coming back and drains them when the gap
//!   closes (`runner/entity.rs`). Knows nothing of orders.
//! - [`store`]: what touches the table. The [`store::Store`] trait, with a
//!   DynamoDB adapter ([`store::dynamodb`]) and an in-memory one
//!   ([`store::memory`]) of the same semantics. Knows nothing of SQS.
//! - [`config`]: the environment, read in one place.
//! - [`lambda`]: from a Lambda invocation to the partial batch response (an
//!   SQS batch) or to a [`sweep`] (the schedule).
//! - [`sweep`]: the scheduled look at parked events, for the alarm.
//! - [`metrics`]: the CloudWatch metrics of each invocation (EMF).
//! - [`logging`]: the log subscriber; no level prints an event's data.
//! - `testing` (the `test-support` feature): what tests need and the
//!   function does not (a conditional save of one entity).
//! - `src/bin/projector.rs`: the Lambda function; `src/bin/replay.rs`: runs
//!   sample events through the same runner locally.

pub mod config;
pub mod domain;
pub mod envelope;
pub mod lambda;
pub mod limits;
pub mod logging;
pub mod metrics;
pub mod runner;
pub mod store;
pub mod sweep;
#[cfg(feature = "test-support")]
pub mod testing;
