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
//! [`domain`] for a whole, runnable example, and the repository's
//! `docs/guide.md` for the way from an empty crate to a deployed function.
//!
//! # Glossary
//!
//! One word, one meaning, in the code and in the docs:
//!
//! - **stream**: one aggregate's events, in order: its id is the
//!   `aggregateId` (for an unsequenced type such as the shop's
//!   `InventoryAdjusted`, the stream its handler names: the `sku`). It is
//!   the queue's message group and the event store's `STREAM#<id>`
//!   partition. Streams run concurrently; a stream's messages in order.
//! - **sequence**: an event's place in its stream, from 1, without gaps;
//!   an entity's `sequence` is that of the last event applied to it.
//! - **entity**: a projected item: a user's struct with a kind
//!   ([`Entity::KIND`]), stored as `<KIND>#<id>` / `STATE`.
//! - **the guard**: the handler's check of the entity's sequence against the
//!   event's; its answer is a [`Decision`]. What became of a message is its
//!   **outcome** ([`runner::Outcome`]).
//! - **commit**: the one conditional write of an entity a batch makes,
//!   conditioned on the sequence it was decided from. A commit that finds the
//!   entity moved by another invocation has **lost a race**: it is decided
//!   again from what the table holds.
//! - **conflict**: a different event (another `eventId`) for a sequence
//!   already applied or parked: recorded as a `CONFLICT#` item, never
//!   applied. Nothing else is called a conflict.
//! - **park**, **drain**: a gap that keeps coming back is parked (stored
//!   under its entity, its message completed); when the missing event
//!   lands, the parked events that follow are drained (applied in order, in
//!   the same commit). The **sweep** is the scheduled look at what stays
//!   parked.
//! - **addition**: a deduplicated effect ([`Handling::add`]): a number added
//!   to a [`Counter`] item once per event and handler, atomically with its
//!   dedup record; a stream's additions are one transaction.
//! - **snapshot**: an event that carries an entity's whole state
//!   ([`Handling::snapshot`]), applied only if newer.
//! - **append**: the producer's write of events to the event store, each at
//!   the next sequence of its stream; a **request id** makes a retried
//!   command append once.
//! - **change record**: an entry of the event store table's DynamoDB stream
//!   (AWS's log of the table's writes), which the dispatcher reads; the
//!   word "stream" alone never means it.
//! - **dispatch**: the dispatcher's sending of appended events to the queue
//!   (or the topic), in stream order. Only the dispatcher dispatches.
//! - **process**: a consumer whose handlers, besides moving its own state
//!   (an entity, under the guard), append events to the event store and set
//!   or clear a deadline ([`process`]). A **step** of a process is one
//!   commit of its state with what it appends.
//! - **outbox**: what a process's handler answers besides its decision: the
//!   events to append and the deadline ([`process::Outbox`]), written with
//!   the state in one transaction. No table of its own.
//! - **subject**: the person a personal value is about, by an id (the
//!   aggregate's, or a field of `data`); each has a data key, and **erasure**
//!   deletes it and tells every consumer ([`personal`]).
//! - **deadline**: a time kept by the engine on a process's state (`dueAt`,
//!   in the index `due`), fired once by the scheduled sweep through the
//!   same guard; its precision is the sweep's period.
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
//! - [`process`]: processes: what a domain declares ([`process::Process`]),
//!   what a handler answers ([`process::Outbox`]) and what a deadline's
//!   handler is given ([`process::Due`]); the runner writes a step's state
//!   and appends in one transaction, and the sweep fires due deadlines.
//! - [`personal`]: personal data: what a domain declares
//!   ([`personal::Personal`], `#[entity(personal(...))]`), the values
//!   sealed by `append` and opened by the consumers that project them
//!   ([`personal::Keyring`], [`personal::DynamoKeys`]), and
//!   [`personal::erase`].
//! - [`metrics`], [`logging`]: CloudWatch metrics (EMF) and the log
//!   subscriber; no level prints an event's data.
//! - [`producer`]: the producer's half: events appended to an event store
//!   with gapless sequences, each with its sequence in one transaction, a
//!   request id making a retried command safe.
//! - [`sqs`]: what SQS takes (a body's size and characters, ids, the
//!   trace header), for the producer and the dispatcher alike.
//! - [`dispatcher`]: the producer's other half: appended events from the
//!   event store's DynamoDB stream to the FIFO queue, in stream order.
//! - [`cli`]: the binaries of any domain, each a one-line `main`: the
//!   two Lambda functions (`projector`, `dispatcher`), `replay`, `inspect`,
//!   `append`, `rebuild`, `verify` and `resend` (find and mend a hole), and
//!   `erase` (forget a subject).
//! - [`testkit`]: given an entity, when an event, then a decision and a
//!   state: a domain's handlers tested without a store.
//! - [`versions`]: an event type's current version and the upcasts from
//!   older ones, applied to every body read (a stored event keeps its shape).
//! - `testing` (the `test-support` feature): what the engine's own tests
//!   need and the function does not.

#![warn(missing_docs)]
#![warn(unreachable_pub)]
#![recursion_limit = "256"]

// `#[derive(Entity)]` names `::sequence_guard::Entity`, in this crate too.
extern crate self as sequence_guard;

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
pub mod personal;
pub mod process;
pub mod producer;
mod reason;
pub mod runner;
pub mod sdk;
pub mod sqs;
pub mod store;
pub mod sweep;
#[cfg(feature = "test-support")]
pub mod testing;
pub mod testkit;
pub mod trace;
pub mod versions;

pub use domain::{Domain, Events};
pub use entity::{AnyEntity, Entity, EntityKey};
pub use handling::{Counter, Decision, Handling, Sequenced};
/// `#[derive(Entity)]`: `KIND`, `sequence` and `last_event_id` from
/// `#[entity(kind = "...")]` and the fields `sequence` and `last_event_id`
/// (see [`Entity`]).
pub use sequence_guard_derive::Entity;
