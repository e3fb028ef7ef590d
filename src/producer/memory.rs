//! [`MemoryEvents`]: the event store in memory, for a whole system run on
//! one machine (`cli::local`) and for tests. An append is checked, sealed
//! and refused as [`EventStore::append`](super::EventStore::append) checks,
//! seals and refuses it (the same words): the domain's rules, one kind a
//! stream, an update that cannot open a stream, the expected sequence, a
//! request id answered once. Its clock is the run's ([`MemoryEvents::set_clock`]):
//! each event's `appendedAt`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use super::check::{Checked, append_kind, cannot_open, check, sealed_sizes};
use super::kind::same_kind;
use super::sealing::seal;
use super::{Append, AppendError, Appended, EventLog, ExpectedSequence, StoredEvent};
use crate::domain::Domain;
use crate::table::StoreError;

/// An event store in memory; see the module's documentation.
#[derive(Debug)]
pub struct MemoryEvents {
    domain: Domain,
    log: Mutex<Log>,
    now: AtomicU64,
}

#[derive(Debug, Default)]
struct Log {
    streams: HashMap<String, Vec<StoredEvent>>,
    /// The kind each stream's events project onto.
    kinds: HashMap<String, String>,
    /// The first answer to each request id.
    requests: HashMap<String, Appended>,
    /// Every event, in the order appended: (stream, sequence).
    order: Vec<(String, u64)>,
}

impl Log {
    fn head(&self, stream: &str) -> u64 {
        self.streams
            .get(stream)
            .and_then(|events| events.last())
            .map_or(0, |event| event.sequence)
    }
}

impl MemoryEvents {
    /// An empty event store of `domain`'s events (its keyring, if any,
    /// seals their personal values).
    pub fn new(domain: Domain) -> Self {
        MemoryEvents {
            domain,
            log: Mutex::new(Log::default()),
            now: AtomicU64::new(crate::clock::epoch_seconds()),
        }
    }

    fn log(&self) -> MutexGuard<'_, Log> {
        // Every change completes before the lock is let go.
        self.log.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The domain of the events it holds.
    pub fn domain(&self) -> &Domain {
        &self.domain
    }

    /// Sets the clock: what later events record as `appendedAt`.
    pub fn set_clock(&self, now: u64) {
        self.now.store(now, Ordering::Relaxed);
    }

    /// Appends the events, sealed, at the stream's next sequences; see the
    /// module's documentation.
    pub async fn append(&self, append: Append) -> Result<Appended, AppendError> {
        let mut events = check(&self.domain, &append)?;
        refuse_writes(&append)?;
        // One process: no erasure runs between the key's read and the write.
        seal(&self.domain, &append.stream_id, &mut events, &[]).await?;
        sealed_sizes(&append, &events)?;
        self.write(&append, &events)
    }

    /// What a process's step appends (checked, carrying no personal value:
    /// a step appends none), written now or not at all.
    pub fn append_now(&self, append: &Append) -> Result<Appended, AppendError> {
        let events = check(&self.domain, append)?;
        refuse_writes(append)?;
        self.write(append, &events)
    }

    fn write(&self, append: &Append, events: &[Checked]) -> Result<Appended, AppendError> {
        let stream = &append.stream_id;
        let mut log = self.log();
        if let Some(first) = append
            .request_id
            .as_ref()
            .and_then(|request| log.requests.get(request))
        {
            return Ok(Appended {
                duplicate_request: true,
                ..first.clone()
            });
        }
        let head = log.head(stream);
        if let ExpectedSequence::Exact(expected) = append.expected
            && expected != head
        {
            return Err(AppendError::ExpectedSequence {
                expected,
                current: head,
            });
        }
        let (kind, event_type) = append_kind(events).unzip();
        same_kind(
            stream,
            event_type.unwrap_or_default(),
            kind,
            log.kinds.get(stream).map(String::as_str),
        )?;
        if let Some(first) = events.first().filter(|first| head == 0 && !first.opens) {
            return Err(cannot_open(stream, first));
        }
        let now = self.now.load(Ordering::Relaxed);
        let mut sequence = head;
        for event in events {
            sequence += 1;
            let stored = StoredEvent {
                sequence,
                event_id: event.event_id.clone(),
                event_type: event.event_type.clone(),
                body: event.body(stream, sequence),
                appended_at: now,
            };
            log.streams.entry(stream.clone()).or_default().push(stored);
            log.order.push((stream.clone(), sequence));
        }
        if let Some(kind) = kind {
            log.kinds.insert(stream.clone(), kind.to_owned());
        }
        let appended = Appended {
            stream_id: stream.clone(),
            sequence,
            event_id: events
                .last()
                .map(|event| event.event_id.clone())
                .unwrap_or_default(),
            duplicate_request: false,
            first_sequence: head + 1,
        };
        if let Some(request) = &append.request_id {
            log.requests.insert(request.clone(), appended.clone());
        }
        Ok(appended)
    }

    /// The stream's events after `after`, in order, at most `limit`.
    pub fn read(&self, stream: &str, after: u64, limit: usize) -> Vec<StoredEvent> {
        self.log()
            .streams
            .get(stream)
            .map(|events| {
                events
                    .iter()
                    .filter(|event| event.sequence > after)
                    .take(limit)
                    .cloned()
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The stream's last sequence (0: no event).
    pub fn last_sequence(&self, stream: &str) -> u64 {
        self.log().head(stream)
    }

    /// Every event appended from the `from`th on (0: the first), in the
    /// order appended, each with its stream: what a dispatcher sends, and
    /// where the next call goes on.
    pub fn since(&self, from: usize) -> (Vec<(String, StoredEvent)>, usize) {
        let log = self.log();
        let events = log
            .order
            .iter()
            .skip(from)
            .filter_map(|(stream, sequence)| {
                let event = log
                    .streams
                    .get(stream)?
                    .get(usize::try_from(*sequence).ok()?.checked_sub(1)?)?;
                Some((stream.clone(), event.clone()))
            })
            .collect();
        (events, log.order.len())
    }
}

/// The caller's own writes are DynamoDB's: a store in memory cannot make
/// them one transaction with the events, and says so.
fn refuse_writes(append: &Append) -> Result<(), AppendError> {
    if append.writes.is_empty() {
        Ok(())
    } else {
        Err(AppendError::Refused(
            "the caller's own writes go in a DynamoDB transaction with the events: an event store in memory takes none (append them on DynamoDB Local)"
                .to_owned(),
        ))
    }
}

impl EventLog for MemoryEvents {
    fn domain(&self) -> &Domain {
        &self.domain
    }

    async fn append(&self, append: Append) -> Result<Appended, AppendError> {
        MemoryEvents::append(self, append).await
    }

    async fn read(
        &self,
        stream: &str,
        after: u64,
        limit: i32,
    ) -> Result<Vec<StoredEvent>, StoreError> {
        let limit = usize::try_from(limit.max(1)).unwrap_or(1);
        Ok(MemoryEvents::read(self, stream, after, limit))
    }
}
