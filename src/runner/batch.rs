//! A batch's phases around its streams: its records read, grouped into
//! streams, the one load split into each stream's share, and the verdicts
//! put back into batch order as the report's lines.

use std::collections::HashMap;

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

/// The streams, in the order of their first message; each holds the batch
/// positions of its records.
pub(super) fn streams_of(records: &[Record]) -> Vec<Vec<usize>> {
    let mut streams: Vec<Vec<usize>> = Vec::new();
    // A FIFO batch holds at most 10 records: looked up among the streams
    // found so far, its names are not hashed; a larger batch is indexed.
    let mut stream_of: Option<HashMap<&str, usize>> =
        (records.len() > SMALL_BATCH).then(|| HashMap::with_capacity(records.len()));
    for (position, record) in records.iter().enumerate() {
        let name = record.stream.as_str();
        let known = match &stream_of {
            Some(index) => index.get(name).copied(),
            None => streams.iter().position(|positions| {
                positions
                    .first()
                    .is_some_and(|&first| records[first].stream == name)
            }),
        };
        match known {
            Some(index) => streams[index].push(position),
            None => {
                if let Some(index) = &mut stream_of {
                    index.insert(name, streams.len());
                }
                streams.push(vec![position]);
            }
        }
    }
    streams
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

/// A stream's share of the batch's load: each of its entities' items, moved
/// out of the load (an entity belongs to one stream: its aggregate id is
/// the stream).
pub(super) struct Share {
    pub(super) bases: Vec<(EntityKey, Result<Stored, CallError>)>,
}

impl Share {
    /// The stream's one entity, when it has exactly one and its item was
    /// loaded.
    pub(super) fn lone(&self) -> Option<&EntityKey> {
        match self.bases.as_slice() {
            [(key, Ok(_))] => Some(key),
            _ => None,
        }
    }

    /// The item of the entity `event` is projected onto, taken out of the
    /// share; `None` when it is not one of the stream's.
    pub(super) fn take(&mut self, event: &Event) -> Option<(EntityKey, Result<Stored, CallError>)> {
        let index = self.bases.iter().position(|(key, _)| event.is_on(key))?;
        Some(self.bases.swap_remove(index))
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
    streams: &[Vec<usize>],
) -> (Vec<Share>, Handled) {
    let (mut loaded, failure) = match loaded {
        Ok(loaded) => (loaded, None),
        Err(err) => (Loaded::default(), Some(err)),
    };
    let mut keys: Vec<Option<EntityKey>> = wanted.keys.into_iter().map(Some).collect();
    let shares = streams
        .iter()
        .map(|positions| {
            let mut bases: Vec<(EntityKey, Result<Stored, CallError>)> = Vec::new();
            for index in positions.iter().filter_map(|&position| wanted.at[position]) {
                let Some(key) = keys[index].take() else {
                    continue;
                };
                if bases.iter().any(|(known, _)| *known == key) {
                    continue;
                }
                let known = warm.get_mut(index).and_then(Option::take);
                let base = match (&failure, known) {
                    (Some(err), _) => Err(err.clone()),
                    (None, Some(stored)) => Ok(stored),
                    (None, None) => take_stored(&mut loaded, &key),
                };
                bases.push((key, base));
            }
            Share { bases }
        })
        .collect();
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
