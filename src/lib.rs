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
//!   events to append and the deadline ([`process::Outbox`]; a deadline
//!   handler's, [`process::DueOutbox`], appends to its state's stream at
//!   the sequence the process has seen), written with the state in one
//!   transaction. No table of its own.
//! - **subject**: the person a personal value is about, by an id (the
//!   aggregate's, or a field of `data`); each has a data key, and **erasure**
//!   deletes it and tells every consumer ([`personal`]).
//! - **deadline**: a time kept by the engine on a process's state (`dueAt`,
//!   in the index `due`), fired once by the scheduled sweep through the
//!   same guard; its precision is the sweep's period.
//!
//! # Layers
//!
//! The modules in layers, the lowest first: each module imports only the
//! modules listed before it (on its own line, or on a line above), never
//! one after it. `tests/layers.rs` checks every `crate::` path in `src/`
//! against this list, and names the import that breaks it.
//!
//! 0. **Words every layer shares**, no domain in them: `reason` (why a body
//!    is refused: [`envelope::InvalidMessage`]), [`limits`] (what data
//!    types may declare), `digest`, [`clock`], [`sqs`] (what SQS takes),
//!    [`trace`] (the X-Ray header), [`sdk`] (the AWS clients' TLS),
//!    [`table`] (a DynamoDB call's errors: [`table::StoreError`]).
//! 1. **What a handler answers and asks for**: [`answer`] ([`Decision`],
//!    [`Sequenced`], [`answer::Outbox`], [`answer::Effects`],
//!    [`answer::NewEvent`]).
//! 2. **What a team declares**, each on those before it: [`entity`]
//!    ([`Entity`], its kinds), [`personal`] (personal fields, the cipher and
//!    the keys), [`versions`], [`handling`] ([`Handling`]: how a type is
//!    handled, and the checks of every answer), [`domain`] ([`Domain`],
//!    [`Events`], [`Process`]), [`process`] (a process's names, gathered).
//! 3. **Reading a message**: [`envelope`] (a record read into an
//!    [`envelope::Event`], its sealed values opened, [`Domain::parse`]).
//! 4. **The stores**: [`producer`] (the event store: appending, with a
//!    sequence in one transaction; its items; sealing; erasing a subject),
//!    [`store`] (projections: the [`store::Store`] trait, an entity
//!    committed with its effects and a process's appends, on DynamoDB and
//!    in memory).
//! 5. **The engine**: [`runner`] (the batch runner: streams, the guard's
//!    plan, parking, commits, what is reported failed), [`sweep`] (the
//!    scheduled look at parked events, a process's deadlines fired first),
//!    [`dispatcher`] (the event store's change records to the queue or
//!    topic, in stream order), [`testkit`] (a domain's handlers tested as
//!    the runner runs them).
//! 6. **The function around them**: [`config`] (the environment, read in
//!    one place), [`metrics`], [`logging`], [`lambda`] (an invocation to
//!    its answer), `testing` (what tests need, the `test-support` feature).
//! 7. **The binaries**: [`cli`] (`projector`, `dispatcher`, `replay`,
//!    `inspect`, `append`, `rebuild`, `verify`, `resend`, `erase`, `local`,
//!    each a one-line `main`).
//!
//! Each module's own documentation says what its files hold.

#![warn(missing_docs)]
#![warn(unreachable_pub)]
#![recursion_limit = "256"]

// `#[derive(Entity)]` names `::sequence_guard::Entity`, in this crate too.
extern crate self as sequence_guard;

pub mod answer;
pub mod cli;
pub mod clock;
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
pub mod table;
#[cfg(feature = "test-support")]
pub mod testing;
pub mod testkit;
pub mod trace;
pub mod versions;

pub use answer::{Counter, Decision, Sequenced};
pub use domain::{Domain, Events, Process};
pub use entity::{AnyEntity, Entity, EntityKey};
pub use handling::Handling;
/// `#[derive(Entity)]`: `KIND`, `sequence` and `last_event_id` from
/// `#[entity(kind = "...")]` and the fields `sequence` and `last_event_id`
/// (see [`Entity`]).
pub use sequence_guard_derive::Entity;
