//! Processes: consumers that react to events with events. What a process's
//! author names, gathered here: the declaration ([`Process`], in
//! [`crate::domain`]), what its handlers answer ([`Outbox`], [`Outgoing`],
//! in [`crate::answer`]) and what its deadline's handler is given ([`Due`])
//! and answers with ([`DueOutbox`]).
//!
//! A process (a saga, a process manager) is a consumer whose state is an
//! entity like any other, moved under the guard, and whose handlers also
//! answer with events to append to the event store and a deadline to set or
//! clear. The state change and the appended events are one unit: one
//! `TransactWriteItems` across the process's table and the event store, or
//! nothing (the outbox, without an outbox table: the event store's own
//! change records and dispatcher carry the events on). Each appended
//! event's request id derives from the process and what caused it (an
//! event, or a deadline), so that a retried, duplicated or raced delivery
//! appends it once.
//!
//! A deadline is the engine's, kept on the state's item (`dueAt`, and
//! `dueShard`: the sparse index `due` spread over 16 partitions). The
//! scheduled sweep fires the due ones, each once, through the same guard
//! and the same transaction ([`Process::on_deadline`]). Its precision is
//! the schedule's period. An append at an exact expected sequence
//! ([`Outbox::append_at`]; a deadline's every append to the state's own
//! stream, [`DueOutbox::append`]) that finds its stream moved writes
//! nothing, the state change included: for a deadline, nothing happened
//! (it fires again at the next sweep if the state still keeps it); for a
//! message, the message is retried.
//!
//! What a step's answer is checked for, before anything is written (a
//! handler error otherwise, with the same words in the runner and the
//! [`crate::testkit`]): one stream, at most [`MAX_OUTGOING`] events, what
//! the event store accepts and no personal value; a deadline only in a
//! process that has a deadline handler, and in epoch seconds (not more
//! than a hundred years after the step's clock).

pub use crate::answer::{Due, DueOutbox, MAX_OUTGOING, Outbox, Outgoing};
pub use crate::domain::Process;
