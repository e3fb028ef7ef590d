//! `rebuild --erasures --table NAME [--check]`: every erasure the event
//! store records, applied again to a table: each entity of an erased
//! subject's streams that still holds a personal value has it replaced by
//! the placeholder, its sequence unchanged, and its conflict records
//! deleted. For a table restored from a backup taken before an erasure
//! (point-in-time recovery brings the plain values back); with `--check`,
//! nothing is written and each entity that holds one is named: a check of
//! any table.
//!
//! One JSON line per entity that held a value (`{"pk": ..., "sk":
//! "STATE", "attributes": [names], "erased": true}`; names, never values),
//! then `{"subjects": n, "streams": n, "entities": n, "held": n}`. Exit 0
//! when no entity holds a value of an erased subject any more (or, with
//! `--check`, when none did); 1 when one still does, or on a storage error
//! (safe to run again); 2 for bad arguments.

use std::io::{self, Write};
use std::process::ExitCode;

use serde_json::{Value, json};

use crate::domain::Domain;
use crate::entity::{AnyEntity, EntityKey};
use crate::lambda::epoch_seconds;
use crate::personal::{ErasedSubject, erased_subjects};
use crate::producer::EventStore;
use crate::store::dynamodb::DynamoStore;
use crate::store::{Commit, Committed, Expected, Store, StoreError};

/// How often an entity's write is tried again after another writer moved
/// it meanwhile.
const TRIES: usize = 4;

/// What became of the erasures applied again.
#[derive(Debug, Default)]
struct Reapplied {
    subjects: usize,
    streams: usize,
    entities: usize,
    held: usize,
    still_held: usize,
}

/// Applies every recorded erasure to `store`'s table again (`check`:
/// writes nothing); see the module's documentation.
pub(super) async fn reapply(
    name: &str,
    events: &EventStore,
    domain: &Domain,
    store: &DynamoStore,
    check: bool,
) -> ExitCode {
    let erased = match erased_subjects(events.client(), events.table()).await {
        Ok(erased) => erased,
        Err(err) => {
            eprintln!("{name}: reading the erased subjects: {err}");
            return ExitCode::FAILURE;
        }
    };
    let mut done = Reapplied {
        subjects: erased.len(),
        ..Reapplied::default()
    };
    let mut out = io::stdout().lock();
    for ErasedSubject { streams, .. } in &erased {
        for stream in streams {
            done.streams += 1;
            let key = match entity_of(events, domain, stream).await {
                Ok(Some(key)) => key,
                Ok(None) => continue,
                Err(err) => {
                    eprintln!("{name}: reading the stream {stream}: {err}");
                    return ExitCode::FAILURE;
                }
            };
            done.entities += 1;
            match erase_one(store, &key, check).await {
                Ok(None) => {}
                Ok(Some((attributes, erased))) => {
                    done.held += 1;
                    if !erased {
                        done.still_held += 1;
                    }
                    let line = json!({
                        "pk": key.pk(),
                        "sk": "STATE",
                        "attributes": attributes,
                        "erased": erased,
                    });
                    if writeln!(out, "{line}").is_err() {
                        return ExitCode::FAILURE;
                    }
                }
                Err(err) => {
                    eprintln!("{name}: {key}: {err}");
                    return ExitCode::FAILURE;
                }
            }
        }
    }
    let summary = json!({
        "subjects": done.subjects,
        "streams": done.streams,
        "entities": done.entities,
        "held": done.held,
    });
    if writeln!(out, "{summary}").is_err() {
        return ExitCode::FAILURE;
    }
    if done.still_held == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// The entity `stream` projects onto in this domain: the one its first
/// event's handling names (`None`: a stream it does not project).
async fn entity_of(
    events: &EventStore,
    domain: &Domain,
    stream: &str,
) -> Result<Option<EntityKey>, StoreError> {
    let first = events.read(stream, 0, 1).await?;
    Ok(first
        .first()
        .and_then(|event| domain.parse_unopened(&event.body).ok())
        .and_then(|event| event.entity_key()))
}

/// The personal attributes `entity` holds a value in (not the placeholder).
fn held(entity: &AnyEntity) -> Vec<&'static str> {
    let kind = entity.kind();
    let json = entity.to_json();
    kind.personal()
        .iter()
        .copied()
        .filter(|attribute| match json.get(*attribute) {
            Some(Value::String(value)) => value != kind.placeholder(),
            Some(Value::Null) | None => false,
            Some(_) => true,
        })
        .collect()
}

/// The entity's personal values replaced, its sequence kept, on the
/// condition that it is as read; `Some((attributes, erased))` when it held
/// any.
async fn erase_one(
    store: &DynamoStore,
    key: &EntityKey,
    check: bool,
) -> Result<Option<(Vec<&'static str>, bool)>, StoreError> {
    for _ in 0..TRIES {
        let mut loaded = store.load(std::slice::from_ref(key), &[]).await?;
        let Some(entity) = loaded.entities.remove(key).transpose()? else {
            return Ok(None);
        };
        let attributes = held(&entity);
        if attributes.is_empty() {
            return Ok(None);
        }
        if check {
            return Ok(Some((attributes, false)));
        }
        let mut erased = entity.clone();
        erased
            .erase_personal()
            .map_err(|reason| StoreError::Corrupt {
                key: key.pk(),
                message: format!("its personal attributes cannot be replaced: {reason}"),
            })?;
        let commit = Commit {
            key: key.clone(),
            expected: Expected {
                sequence: Some(entity.sequence()),
                parked: loaded.parking.remove(key).unwrap_or_default().sequences,
                entity: Some(entity),
                due_at: loaded.due.remove(key),
            },
            entity: Some(erased),
            park: Vec::new(),
            drain: Vec::new(),
            conflicts: Vec::new(),
            now: epoch_seconds(),
            deadline: None,
            outbox: None,
        };
        match store.commit(&commit).await? {
            Committed::Written => {
                store.forget_conflicts(key).await?;
                return Ok(Some((attributes, true)));
            }
            Committed::LostRace { .. } | Committed::Moved { .. } => continue,
        }
    }
    Err(StoreError::Request {
        operation: "TransactWriteItems",
        message: format!("the entity kept moving: {TRIES} tries"),
    })
}
