//! # sequence-guard
//!
//! Ordered, exactly-once-in-effect projections of domain events from SQS
//! FIFO into DynamoDB, on AWS Lambda, for any domain: bring your events,
//! entities and handlers; the engine brings the batch runner, the guard's
//! conditional writes, parking of gaps, deduplication, the sweep, metrics,
//! and the Lambda function around them.
//!
//! A domain is three declarations and one registration: events (a serde
//! enum tagged by `type`), entities (serde structs implementing [`Entity`]),
//! handlers (functions holding the guard), and [`Events::handling`], which
//! says for each event type how it is handled ([`Handling`]). See
//! [`domain`] for a whole, runnable example, and the README's "Bring your
//! own events" for the way from an empty crate to a deployed function.
//!
//! # Layout
//!
//! - [`domain`], [`entity`], [`handling`]: what a user declares and
//!   registers: [`Domain`], [`Entity`], [`Handling`], [`Decision`],
//!   [`Sequenced`], [`Counter`].
//! - [`envelope`]: reads one SQS record into an [`envelope::Event`] (the
//!   envelope's fields, and the domain's handling of its `data`), or an
//!   [`envelope::InvalidMessage`] that names what was wrong; the limits data
//!   types declare are in [`limits`].
//! - [`runner`]: the batch runner. Groups records into streams, runs them,
//!   persists each entity with one conditional write and each stream's
//!   deduplicated effects with one transaction, checks every handler's
//!   answer, and decides which messages are reported failed; parks gaps that
//!   keep coming back and drains them when the gap closes. Knows no domain.
//! - [`store`]: what touches the table. The [`store::Store`] trait, with a
//!   DynamoDB adapter ([`store::dynamodb`]) and an in-memory one
//!   ([`store::memory`]) of the same semantics. Knows nothing of SQS.
//! - [`config`]: the environment, read in one place.
//! - [`lambda`]: from a Lambda invocation to the partial batch response (an
//!   SQS batch) or to a [`sweep`] (the schedule).
//! - [`sweep`]: the scheduled look at parked events, for the alarm.
//! - [`metrics`], [`logging`]: CloudWatch metrics (EMF) and the log
//!   subscriber; no level prints an event's data.
//! - [`producer`]: the producer's half: events appended to an event store
//!   with gapless sequences, each with its sequence in one transaction, a
//!   request id making a retried command safe.
//! - [`dispatcher`]: the producer's other half: appended events from the
//!   event store's DynamoDB stream to the FIFO queue, in stream order.
//! - [`cli`]: the binaries of any domain, each a one-line `main`: the
//!   two Lambda functions (`projector`, `dispatcher`), `replay`, `inspect`,
//!   `append`, `rebuild`, and `verify` and `resend` (find and mend a hole).
//! - [`testkit`]: given an entity, when an event, then a decision and a
//!   state: a domain's handlers tested without a store.
//! - [`versions`]: an event type's current version and the upcasts from
//!   older ones, applied to every body read (a stored event keeps its shape).
//! - `testing` (the `test-support` feature): what the engine's own tests
//!   need and the function does not.

#![warn(missing_docs)]

pub mod cli;
pub mod config;
mod digest;
pub mod dispatcher;
pub mod domain;
pub mod entity;
pub mod envelope;
pub mod handling;
pub mod lambda;
pub mod limits;
pub mod logging;
pub mod metrics;
pub mod producer;
mod reason;
pub mod runner;
pub mod sdk;
pub mod store;
pub mod sweep;
#[cfg(feature = "test-support")]
pub mod testing;
pub mod testkit;
pub mod versions;

pub use domain::{Domain, Events};
pub use entity::{AnyEntity, Entity, EntityKey};
pub use handling::{Counter, Decision, Handling, Sequenced};
