//! A system on one machine: its event store (in memory, or a table on
//! DynamoDB), each consumer's runner on its own table, and what carries the
//! events between them: the dispatcher's and the queues' work done in
//! process, each consumer given the new events in stream order, a batch of
//! ten at a time, until nothing new is appended (a process's appends are
//! new events).

use std::collections::{BTreeMap, BTreeSet};
use std::io::{self, Write};
use std::sync::Arc;

use aws_lambda_events::event::sqs::{SqsEvent, SqsMessage};

use super::tables::Counters;
use crate::cli::counters::rows;
use crate::entity::EntityKey;
use crate::producer::{
    Append, AppendError, Appended, EraseError, Erased, EventStore, MemoryEvents, NewEvent,
    StoredEvent, erase,
};
use crate::runner::{BatchReport, Invocation, Outcome, Runner};
use crate::store::Store;
use crate::sweep::sweep;
use crate::table::StoreError;

/// The event store of a run.
pub(super) enum Log {
    Memory(Arc<MemoryEvents>),
    /// On DynamoDB, with each stream's last event delivered.
    Dynamo(Box<EventStore>, BTreeMap<String, u64>),
}

/// One consumer: its name, its runner, and what it was given.
pub(super) struct Consumer<S> {
    pub(super) name: String,
    pub(super) runner: Runner<S>,
    /// The entities the events it was given project onto.
    seen: BTreeSet<EntityKey>,
}

impl<S: Store> Consumer<S> {
    pub(super) fn new(name: String, runner: Runner<S>) -> Self {
        Consumer {
            name,
            runner,
            seen: BTreeSet::new(),
        }
    }
}

/// The system, as it runs.
pub(super) struct World<S> {
    pub(super) log: Log,
    pub(super) consumers: Vec<Consumer<S>>,
    pub(super) clock: u64,
    /// Where the in-memory store's events were delivered up to.
    delivered: usize,
    /// Messages that failed, appends refused.
    pub(super) failures: usize,
    /// Whether the store's domain declares personal data (else there is
    /// nothing to erase).
    personal: bool,
}

impl<S: Counters> World<S> {
    pub(super) fn new(log: Log, consumers: Vec<Consumer<S>>, clock: u64, personal: bool) -> Self {
        let world = World {
            log,
            consumers,
            clock,
            delivered: 0,
            failures: 0,
            personal,
        };
        world.set_clock(clock);
        world
    }

    pub(super) fn set_clock(&self, now: u64) {
        if let Log::Memory(events) = &self.log {
            events.set_clock(now);
        }
    }

    /// Appends one event, as `append` does.
    pub(super) async fn append(
        &mut self,
        out: &mut impl Write,
        stream: &str,
        event_type: &str,
        data: serde_json::Value,
    ) -> io::Result<()> {
        let append = Append::one(stream, NewEvent::new(event_type, data));
        let appended: Result<Appended, AppendError> = match &self.log {
            Log::Memory(events) => events.append(append).await,
            Log::Dynamo(events, _) => events.append(append).await,
        };
        match appended {
            Ok(appended) => writeln!(
                out,
                "  appended  {stream} seq {} {event_type} ({})",
                appended.sequence, appended.event_id
            ),
            Err(err) => {
                self.failures += 1;
                writeln!(out, "  refused   {stream} {event_type}: {err}")
            }
        }
    }

    /// Forgets a subject, as `erase --subject` does.
    pub(super) async fn erase(&mut self, out: &mut impl Write, subject: &str) -> io::Result<()> {
        if !self.personal {
            // As `erase` says it (there is no key to delete, nor a key
            // source to look in).
            self.failures += 1;
            return writeln!(
                out,
                "  refused   erase {subject}: the domain declares no personal data: there is nothing to erase"
            );
        }
        let erased: Result<Erased, EraseError> = match &self.log {
            Log::Memory(events) => erase(events.as_ref(), subject).await,
            Log::Dynamo(events, _) => erase(events.as_ref(), subject).await,
        };
        match erased {
            Ok(erased) if erased.already_done => {
                writeln!(out, "  erased    {subject}: nothing more to do")
            }
            Ok(erased) => {
                let told: Vec<String> = erased
                    .told
                    .iter()
                    .map(|(stream, sequence)| format!("{stream} seq {sequence}"))
                    .collect();
                writeln!(
                    out,
                    "  erased    {subject}: key deleted {}; told {}",
                    erased.key_deleted,
                    if told.is_empty() {
                        "no stream".to_owned()
                    } else {
                        told.join(", ")
                    }
                )
            }
            Err(err) => {
                self.failures += 1;
                writeln!(out, "  refused   erase {subject}: {err}")
            }
        }
    }

    /// Every consumer's sweep at the clock, its deadlines fired first.
    pub(super) async fn sweep(&mut self, out: &mut impl Write) -> io::Result<()> {
        let invocation = Invocation {
            deadline: None,
            now: self.clock,
        };
        for consumer in &self.consumers {
            match sweep(&consumer.runner, invocation).await {
                Ok(report) => {
                    let deadlines = &report.deadlines;
                    if deadlines.fired + deadlines.moved + deadlines.failed > 0 {
                        writeln!(
                            out,
                            "  {:<10} deadlines: fired {}, moved {}, failed {}",
                            consumer.name, deadlines.fired, deadlines.moved, deadlines.failed
                        )?;
                    }
                    self.failures += usize::try_from(deadlines.failed).unwrap_or(usize::MAX);
                    if report.entities > 0 {
                        writeln!(
                            out,
                            "  {:<10} {} with events parked",
                            consumer.name, report.entities
                        )?;
                    }
                }
                Err(err) => {
                    self.failures += 1;
                    writeln!(out, "  {:<10} the sweep failed: {err}", consumer.name)?;
                }
            }
        }
        Ok(())
    }

    /// The events appended since the last delivery, with their streams.
    async fn new_events(&mut self) -> Result<Vec<(String, StoredEvent)>, StoreError> {
        match &mut self.log {
            Log::Memory(events) => {
                let (new, next) = events.since(self.delivered);
                self.delivered = next;
                Ok(new)
            }
            Log::Dynamo(events, delivered) => {
                let mut new = Vec::new();
                let mut page = None;
                loop {
                    let (streams, next) = events.streams(page.take()).await?;
                    for stream in streams {
                        let after = delivered.get(&stream).copied().unwrap_or(0);
                        let stored = events.read(&stream, after, 1000).await?;
                        if let Some(last) = stored.last() {
                            delivered.insert(stream.clone(), last.sequence);
                        }
                        new.extend(stored.into_iter().map(|event| (stream.clone(), event)));
                    }
                    match next {
                        Some(next) => page = Some(next),
                        None => break,
                    }
                }
                Ok(new)
            }
        }
    }

    /// Gives every consumer the new events, until nothing new is appended.
    pub(super) async fn deliver(&mut self, out: &mut impl Write) -> io::Result<()> {
        loop {
            let new = match self.new_events().await {
                Ok(new) => new,
                Err(err) => {
                    self.failures += 1;
                    return writeln!(out, "  the event store cannot be read: {err}");
                }
            };
            if new.is_empty() {
                return Ok(());
            }
            for (stream, event) in &new {
                if let Some(by) = self.appended_by(&event.event_id) {
                    writeln!(
                        out,
                        "  {by:<10} appended {stream} seq {} {}",
                        event.sequence, event.event_type
                    )?;
                }
            }
            for index in 0..self.consumers.len() {
                for batch in new.chunks(10) {
                    self.deliver_batch(out, index, batch).await?;
                }
            }
        }
    }

    /// The consumer whose process appended an event (its id starts with
    /// `process-<name>-`; of a process `a` and a process `a-b`, the longer
    /// name that fits).
    fn appended_by(&self, event_id: &str) -> Option<String> {
        self.consumers
            .iter()
            .filter_map(|consumer| {
                let name = consumer.runner.domain().process()?.name();
                event_id
                    .starts_with(&format!("process-{name}-"))
                    .then_some((name.len(), &consumer.name))
            })
            .max_by_key(|(length, _)| *length)
            .map(|(_, consumer)| consumer.clone())
    }

    async fn deliver_batch(
        &mut self,
        out: &mut impl Write,
        index: usize,
        batch: &[(String, StoredEvent)],
    ) -> io::Result<()> {
        let mut sqs = SqsEvent::default();
        for (stream, event) in batch {
            let mut message = SqsMessage::default();
            message.message_id = Some(format!("{stream}:{}", event.sequence));
            message.body = Some(event.body.clone());
            message
                .attributes
                .insert("MessageGroupId".to_owned(), stream.clone());
            message
                .attributes
                .insert("ApproximateReceiveCount".to_owned(), "1".to_owned());
            message.attributes.insert(
                "SentTimestamp".to_owned(),
                self.clock.saturating_mul(1000).to_string(),
            );
            sqs.records.push(message);
        }
        let invocation = Invocation {
            deadline: None,
            now: self.clock,
        };
        let consumer = &mut self.consumers[index];
        let report = match consumer.runner.run(&sqs, invocation).await {
            Ok(report) => report,
            Err(err) => {
                self.failures += batch.len();
                return writeln!(out, "  {:<10} the batch failed: {err}", consumer.name);
            }
        };
        note_seen(consumer, batch);
        self.failures += print_messages(out, &consumer.name, &report)?;
        Ok(())
    }

    /// What every consumer's table holds of the entities of the events it
    /// was given (with their deadlines), and every counter it holds (an
    /// effect's too: keyed by what its handler chose).
    pub(super) async fn show(&mut self, out: &mut impl Write) -> io::Result<()> {
        for consumer in &self.consumers {
            writeln!(out, "  {}:", consumer.name)?;
            let keys: Vec<EntityKey> = consumer.seen.iter().cloned().collect();
            let loaded = match consumer.runner.store().load(&keys, &[]).await {
                Ok(loaded) => loaded,
                Err(err) => {
                    writeln!(out, "    cannot read its table: {err}")?;
                    continue;
                }
            };
            let mut any = false;
            for key in &keys {
                let Some(Ok(entity)) = loaded.entities.get(key) else {
                    continue;
                };
                any = true;
                writeln!(
                    out,
                    "    {:<8} {:<12} sequence {:<3} {}",
                    key.kind().label(),
                    key.id(),
                    entity.sequence(),
                    entity.summary()
                )?;
                if let Some(at) = loaded.due.get(key) {
                    writeln!(out, "    {:<8} {:<12} due at {at}", "", "")?;
                }
            }
            let domain = consumer.runner.domain();
            match consumer.runner.store().every_counter(domain).await {
                Ok(counters) => {
                    for [name, id, line] in rows(domain, counters) {
                        any = true;
                        writeln!(out, "    {name:<8} {id:<12} {line}")?;
                    }
                }
                Err(err) => writeln!(out, "    cannot read its counters: {err}")?,
            }
            if !any {
                writeln!(out, "    (nothing yet)")?;
            }
        }
        Ok(())
    }
}

/// Notes the entities a batch's events project onto.
fn note_seen<S: Store>(consumer: &mut Consumer<S>, batch: &[(String, StoredEvent)]) {
    for (_, event) in batch {
        let Ok(read) = consumer.runner.domain().parse(&event.body) else {
            continue;
        };
        if let Some(key) = read.entity_key() {
            consumer.seen.insert(key);
        }
    }
}

/// A row per message that was not ignored; answers how many failed.
fn print_messages(out: &mut impl Write, consumer: &str, report: &BatchReport) -> io::Result<usize> {
    let mut failed = 0;
    for message in &report.messages {
        if message.outcome == Outcome::Ignored {
            continue;
        }
        if message.outcome.is_failure() {
            failed += 1;
        }
        let reason = message
            .reason
            .as_deref()
            .map(|reason| format!(" ({reason})"))
            .unwrap_or_default();
        writeln!(
            out,
            "  {consumer:<10} {} seq {} {} {}{reason}",
            message.stream,
            message
                .sequence
                .map_or_else(|| "-".to_owned(), |sequence| sequence.to_string()),
            message.event_type.unwrap_or("?"),
            message.outcome.as_str()
        )?;
    }
    for filled in &report.filled {
        writeln!(
            out,
            "  {consumer:<10} read {} seq {}..={} from the event store (a gap closed)",
            filled.stream, filled.from, filled.to
        )?;
    }
    for parking in &report.parking {
        if !parking.drained.is_empty() {
            writeln!(
                out,
                "  {consumer:<10} drained {} event(s) parked on {}",
                parking.drained.len(),
                parking.entity
            )?;
        }
    }
    Ok(failed)
}
