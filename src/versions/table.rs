//! The versions resolved for reading: each type's current version and its
//! upcasts in order, the plan a body of an older version needs, and the
//! envelope's `version` read.

use std::collections::BTreeMap;

use serde_json::Value;

use super::{MAX_VERSION, Upcast, Versions, problems};
use crate::reason::InvalidMessage;

/// The versions of a domain, resolved: for each type above version 1, its
/// current version and its upcasts in order (`steps[v - 1]` takes version
/// `v` to `v + 1`). Empty for a domain whose types are all at version 1.
#[derive(Debug, Clone, Default)]
pub(crate) struct Table {
    types: Vec<Entry>,
    /// The types this consumer passes or ignores: it reads neither their
    /// `data` nor their `version`.
    unread: Vec<&'static str>,
}

/// One type above version 1.
#[derive(Debug, Clone)]
struct Entry {
    event_type: &'static str,
    current: u16,
    steps: Box<[Upcast]>,
}

/// What reading a body of an older version takes: its upcasts, in order.
pub(crate) struct Plan<'a> {
    event_type: &'static str,
    from: u16,
    steps: &'a [Upcast],
}

impl Table {
    /// The table of `versions`, and the mistakes in them (see [`problems()`]);
    /// a type whose declaration is wrong is left at version 1.
    pub(crate) fn new(versions: &Versions, types: &[&str]) -> (Table, Vec<String>) {
        let problems = problems(versions, types);
        let mut table = Table::default();
        if !problems.is_empty() {
            return (table, problems);
        }
        let upcasts: BTreeMap<(&str, u16), Upcast> = versions
            .upcasts
            .iter()
            .map(|&(name, from, upcast)| ((name, from), upcast))
            .collect();
        for &(event_type, current) in &versions.currents {
            if current <= 1 {
                continue;
            }
            // Each is there: `problems` found none missing.
            let steps = (1..current)
                .filter_map(|from| upcasts.get(&(event_type, from)).copied())
                .collect();
            table.types.push(Entry {
                event_type,
                current,
                steps,
            });
        }
        (table, problems)
    }

    /// The types whose `version` is not read (passed or ignored).
    pub(crate) fn leave_unread(&mut self, types: Vec<&'static str>) {
        self.unread = types;
    }

    /// Whether `event_type` is one whose `version` is not read.
    pub(crate) fn is_unread(&self, event_type: &str) -> bool {
        self.unread.contains(&event_type)
    }

    /// The current version of `event_type`: 1 when it declares none.
    pub(crate) fn current(&self, event_type: &str) -> u16 {
        self.entry(event_type).map_or(1, |entry| entry.current)
    }

    fn entry(&self, event_type: &str) -> Option<&Entry> {
        // Most domains have no entry; those that do, a few.
        self.types
            .iter()
            .find(|entry| entry.event_type == event_type)
    }

    /// What a body of `event_type` at `version` needs: nothing (`None`: it is
    /// at the current version), its upcasts, or, newer than the current
    /// version, to be refused.
    pub(crate) fn plan(
        &self,
        event_type: &str,
        version: u16,
    ) -> Result<Option<Plan<'_>>, InvalidMessage> {
        let Some(entry) = self.entry(event_type) else {
            return match version {
                1 => Ok(None),
                _ => Err(newer(event_type, version, 1)),
            };
        };
        if version == entry.current {
            return Ok(None);
        }
        if version > entry.current {
            return Err(newer(entry.event_type, version, entry.current));
        }
        Ok(Some(Plan {
            event_type: entry.event_type,
            from: version,
            steps: &entry.steps[usize::from(version - 1)..],
        }))
    }
}

impl Plan<'_> {
    /// `data`, upcast step by step to the current version; a refusal, or an
    /// upcast that does not answer an object, makes the body invalid.
    pub(crate) fn run(&self, mut data: Value) -> Result<Value, InvalidMessage> {
        for (step, upcast) in (u32::from(self.from)..).zip(self.steps) {
            data = upcast(data).map_err(|reason| InvalidMessage::Invalid {
                field: "data".to_owned(),
                problem: format!(
                    "of {} version {step} cannot be upcast to version {}: {reason}",
                    self.event_type,
                    step + 1
                ),
            })?;
            if !data.is_object() {
                return Err(InvalidMessage::Invalid {
                    field: "data".to_owned(),
                    problem: format!(
                        "of {} version {step}, upcast to version {}, is not an object (the upcast's answer must be one)",
                        self.event_type,
                        step + 1
                    ),
                });
            }
        }
        Ok(data)
    }
}

/// A body of a version newer than `newest`, the newest known, is invalid.
fn newer(event_type: &str, version: u16, newest: u16) -> InvalidMessage {
    InvalidMessage::Invalid {
        field: "version".to_owned(),
        problem: format!(
            "names {event_type} version {version}, newer than this consumer knows ({newest})"
        ),
    }
}

/// The envelope's `version`: 1 when absent; an integer from 1 to 65535
/// otherwise (`null`, a string, a fraction are invalid).
pub(crate) fn of_envelope(
    envelope: &serde_json::Map<String, Value>,
) -> Result<u16, InvalidMessage> {
    let problem = match envelope.get("version") {
        None => return Ok(1),
        Some(Value::Number(number)) => match number.as_u64().map(u16::try_from) {
            Some(Ok(version @ 1..)) => return Ok(version),
            _ => format!("must be an integer from 1 to {MAX_VERSION}, got {number}"),
        },
        Some(Value::Null) => {
            format!("must be an integer from 1 to {MAX_VERSION} (or absent, for 1), got null")
        }
        Some(Value::String(_)) => "must be an integer, got a string".to_owned(),
        Some(Value::Bool(_)) => "must be an integer, got a boolean".to_owned(),
        Some(Value::Array(_)) => "must be an integer, got an array".to_owned(),
        Some(Value::Object(_)) => "must be an integer, got an object".to_owned(),
    };
    Err(InvalidMessage::Invalid {
        field: "version".to_owned(),
        problem,
    })
}
