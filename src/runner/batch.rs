//! A batch's phases around its streams: its records read, grouped into
//! streams, the one load split into each stream's share, and the verdicts
//! put back into batch order as the report's lines.

use std::collections::HashMap;
use std::ops::Range;

use aws_lambda_events::event::sqs::SqsEvent;

use super::additions::dedup_key;
use super::deadline::CallError;
use super::verdict::{Verdict, skipped_one};
use super::{BatchError, MessageReport};
use crate::domain::Domain;
use crate::entity::EntityKey;
use crate::envelope::{Event, Record};
use crate::store::{DedupKey, Loaded, Parking, Stored};

/// Every record of the batch, read; `Err` names the first without a
/// message id.
pub(super) fn read_records(event: &SqsEvent, domain: &Domain) -> Result<Vec<Record>, BatchError> {
    let mut records = Vec::with_capacity(event.records.len());
    for (index, message) in event.records.iter().enumerate() {
        records.push(Record::read(message, domain).ok_or(BatchError::MissingMessageId { index })?);
    }
    Ok(records)
}

/// A batch's streams, in the order of their first message: the batch
/// positions of their records in one list, stream after stream, each
/// stream's in batch order. (One list, not one per stream: most of a
/// batch's streams are one message, and a list each was most of a batch's
/// allocations.)
pub(super) struct Streams {
    order: Vec<usize>,
    /// Where each stream ends in `order`.
    ends: Vec<usize>,
}

impl Streams {
    /// How many streams the batch has.
    pub(super) fn len(&self) -> usize {
        self.ends.len()
    }

    /// The batch positions, stream after stream.
    pub(super) fn order(&self) -> &[usize] {
        &self.order
    }

    /// The stream's place in [`Streams::order`] (and in every list laid out
    /// like it).
    pub(super) fn range(&self, stream: usize) -> Range<usize> {
        let start = match stream.checked_sub(1) {
            Some(before) => self.ends.get(before).copied().unwrap_or(0),
            None => 0,
        };
        start..self.ends.get(stream).copied().unwrap_or(start)
    }

    /// Each stream's place in [`Streams::order`], in order.
    pub(super) fn ranges(&self) -> impl Iterator<Item = Range<usize>> + '_ {
        self.ends.iter().scan(0, |start, &end| {
            let range = *start..end;
            *start = end;
            Some(range)
        })
    }
}

/// The batch's streams.
pub(super) fn streams_of(records: &[Record]) -> Streams {
    // The first position of each stream, and each record's stream.
    let mut firsts: Vec<usize> = Vec::new();
    let mut stream_at: Vec<usize> = Vec::with_capacity(records.len());
    // A FIFO batch holds at most 10 records: looked up among the streams
    // found so far, its names are not hashed; a larger batch is indexed.
    let mut index: Option<HashMap<&str, usize>> =
        (records.len() > SMALL_BATCH).then(|| HashMap::with_capacity(records.len()));
    for (position, record) in records.iter().enumerate() {
        let name = record.stream.as_str();
        let known = match &index {
            Some(index) => index.get(name).copied(),
            None => firsts
                .iter()
                .position(|&first| records[first].stream == name),
        };
        let stream = match known {
            Some(stream) => stream,
            None => {
                if let Some(index) = &mut index {
                    index.insert(name, firsts.len());
                }
                firsts.push(position);
                firsts.len() - 1
            }
        };
        stream_at.push(stream);
    }
    // Each stream's end: the sizes of the streams up to it.
    let mut ends = vec![0; firsts.len()];
    for &stream in &stream_at {
        ends[stream] += 1;
    }
    let mut end = 0;
    for slot in &mut ends {
        end += *slot;
        *slot = end;
    }
    // Filled from the back: each stream's records keep their batch order.
    let mut next = firsts;
    next.copy_from_slice(&ends);
    let mut order = vec![0; records.len()];
    for (position, &stream) in stream_at.iter().enumerate().rev() {
        next[stream] -= 1;
        order[next[stream]] = position;
    }
    Streams { order, ends }
}

/// The most records a batch's streams are found in without an index.
const SMALL_BATCH: usize = 16;

/// What the batch reads in its one load: the entities of its events (one
/// key per event, in batch order; `at` gives each record's key, if it has
/// one) and its deduplication records.
pub(super) struct Wanted {
    pub(super) keys: Vec<EntityKey>,
    /// The sequence of each key's event, beside `keys`.
    pub(super) sequences: Vec<Option<u64>>,
    pub(super) at: Vec<Option<usize>>,
    pub(super) dedup: Vec<DedupKey>,
}

pub(super) fn wanted(records: &[Record]) -> Wanted {
    let mut keys = Vec::with_capacity(records.len());
    let mut sequences = Vec::with_capacity(records.len());
    let mut at = Vec::with_capacity(records.len());
    let mut dedup = Vec::new();
    for event in records.iter().map(|record| record.event.as_ref().ok()) {
        match event.and_then(Event::entity_key) {
            Some(key) => {
                at.push(Some(keys.len()));
                keys.push(key);
                sequences.push(event.and_then(Event::sequence));
            }
            None => at.push(None),
        }
        dedup.extend(event.and_then(dedup_key));
    }
    Wanted {
        keys,
        sequences,
        at,
        dedup,
    }
}

/// One entity's item as the batch found it.
pub(super) type Base = (EntityKey, Result<Stored, CallError>);

/// The batch's load split by stream: each entity's item, stream after
/// stream, each taken out by the stream's dry run (an entity belongs to one
/// stream: its aggregate id is the stream).
pub(super) struct Shares {
    bases: Vec<Option<Base>>,
    /// Where each stream's items end in `bases`.
    ends: Vec<usize>,
}

impl Shares {
    /// Each stream's share, in stream order.
    pub(super) fn each(&mut self) -> impl Iterator<Item = Share<'_>> {
        let mut rest: &mut [Option<Base>] = &mut self.bases;
        let mut start = 0;
        self.ends.iter().map(move |&end| {
            let (bases, tail) = std::mem::take(&mut rest).split_at_mut(end - start);
            rest = tail;
            start = end;
            Share { bases }
        })
    }
}

/// A stream's share of the batch's load: each of its entities' items.
pub(super) struct Share<'a> {
    bases: &'a mut [Option<Base>],
}

impl Share<'_> {
    /// The stream's one entity, when it has exactly one and its item was
    /// loaded.
    pub(super) fn lone(&self) -> Option<&EntityKey> {
        match &*self.bases {
            [Some((key, Ok(_)))] => Some(key),
            _ => None,
        }
    }

    /// The item of the entity `event` is projected onto, taken out of the
    /// share; `None` when it is not one of the stream's.
    pub(super) fn take(&mut self, event: &Event) -> Option<Base> {
        self.bases
            .iter_mut()
            .find(|base| base.as_ref().is_some_and(|(key, _)| event.is_on(key)))
            .and_then(Option::take)
    }
}

/// The deduplication records a batch found: the stream each was written
/// for (`None`: by an earlier release).
pub(super) type Handled = HashMap<DedupKey, Option<String>>;

/// The load split into each stream's share, with the items known warm
/// (beside `wanted.keys`, see `warm.rs`) as if read, and the deduplication
/// records found (empty when the load failed: then every share is that
/// failure).
pub(super) fn shares(
    loaded: Result<Loaded, CallError>,
    wanted: Wanted,
    mut warm: Vec<Option<Stored>>,
    streams: &Streams,
) -> (Shares, Handled) {
    let (mut loaded, failure) = match loaded {
        Ok(loaded) => (loaded, None),
        Err(err) => (Loaded::default(), Some(err)),
    };
    let mut keys = wanted.keys;
    let mut shares = Shares {
        bases: Vec::with_capacity(keys.len()),
        ends: Vec::with_capacity(streams.len()),
    };
    for range in streams.ranges() {
        let first = shares.bases.len();
        for &position in &streams.order()[range] {
            let Some(index) = wanted.at[position] else {
                continue;
            };
            // Each key is one record's: moved out, an empty one (which
            // allocates nothing) left in its place.
            let Some(slot) = keys.get_mut(index) else {
                continue;
            };
            let key = std::mem::replace(slot, EntityKey::new(slot.kind(), String::new()));
            let known = shares.bases[first..]
                .iter()
                .flatten()
                .any(|(known, _)| *known == key);
            if known {
                continue;
            }
            let warm = warm.get_mut(index).and_then(Option::take);
            let base = match (&failure, warm) {
                (Some(err), _) => Err(err.clone()),
                (None, Some(stored)) => Ok(stored),
                (None, None) => take_stored(&mut loaded, &key),
            };
            shares.bases.push(Some((key, base)));
        }
        shares.ends.push(shares.bases.len());
    }
    (shares, std::mem::take(&mut loaded.handled))
}

/// An entity's item, moved out of the load.
fn take_stored(loaded: &mut Loaded, key: &EntityKey) -> Result<Stored, CallError> {
    let entity = loaded
        .entities
        .remove(key)
        .transpose()
        .map_err(CallError::Store)?;
    // Most items have nothing parked: the key is hashed only when some do.
    let parking = if loaded.parking.is_empty() {
        Parking::default()
    } else {
        loaded.parking.remove(key).unwrap_or_default()
    };
    let due_at = if loaded.due.is_empty() {
        None
    } else {
        loaded.due.remove(key)
    };
    Ok(Stored {
        entity,
        parking,
        due_at,
    })
}

/// The report's lines, in batch order: each record with its verdict (a
/// record no stream answered for, which cannot happen, as not attempted).
pub(super) fn message_reports(
    records: Vec<Record>,
    verdicts: Vec<Option<Verdict>>,
) -> Vec<MessageReport> {
    records
        .into_iter()
        .zip(verdicts)
        .map(|(record, verdict)| report(record, verdict.unwrap_or_else(skipped_one)))
        .collect()
}

/// One message's line of the report, its record's fields moved into it.
fn report(record: Record, verdict: Verdict) -> MessageReport {
    let event = record.event.as_ref().ok();
    MessageReport {
        event_type: event.map(Event::type_name),
        sequence: event.and_then(Event::sequence),
        message_id: record.message_id,
        stream: record.stream,
        outcome: verdict.outcome,
        reason: verdict.reason,
        waiting_for: verdict.waiting_for,
        parking_full: verdict.parking_full,
        trace_id: record.trace_id,
    }
}
