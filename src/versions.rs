//! Event versions: an event type's `data` changes shape while the events
//! stored keep the shape they were appended with.
//!
//! The envelope may carry `version` (an integer, 1 to 65535; absent means
//! 1). A domain declares, in its one registration ([`Events::versions`]),
//! each type's current version and, for each older one, an upcast: a
//! function from that version's `data` to the next version's. Every reader
//! of bodies ([`Domain::parse`]: the projector, `replay`, `rebuild`,
//! `verify`, the dispatcher's check) upcasts an older body to the current
//! version before `data` is checked and read; what is stored and sent stays
//! as it was appended. [`crate::producer`] (and so `append`) writes the
//! current version, and writes no `version` at all while it is 1.
//!
//! A body of a version newer than the domain knows is invalid, naming the
//! type, the version and the newest known; an upcast that refuses makes the
//! body invalid with its reason. Mistakes in the declaration (a type the
//! events enum does not have, a version below the current one without its
//! upcast, a type declared twice) are found when the [`Domain`] is built:
//! [`Domain::check`] names them, and no binary starts.
//!
//! ```
//! use sequence_guard::versions::Versions;
//! use sequence_guard::{Decision, Domain, Entity, Events, Handling, Sequenced};
//! use serde::{Deserialize, Serialize};
//! use serde_json::Value;
//!
//! #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
//! #[serde(rename_all = "camelCase")]
//! pub struct Account {
//!     sequence: u64,
//!     last_event_id: String,
//!     owner: String,
//!     currency: String,
//! }
//!
//! impl Entity for Account {
//!     const KIND: &'static str = "ACCOUNT";
//!     fn sequence(&self) -> u64 { self.sequence }
//!     fn last_event_id(&self) -> &str { &self.last_event_id }
//! }
//!
//! /// `AccountOpened` data, version 2: version 1 had no `currency`.
//! #[derive(Debug, Deserialize)]
//! pub struct Opening {
//!     owner: String,
//!     currency: String,
//! }
//!
//! #[derive(Debug, Deserialize)]
//! #[serde(tag = "type", content = "data")]
//! pub enum AccountEvent {
//!     AccountOpened(Opening),
//! }
//!
//! /// Version 1 to 2: the accounts opened before currencies were in euros.
//! fn opened_v1_to_v2(mut data: Value) -> Result<Value, String> {
//!     let Value::Object(fields) = &mut data else {
//!         return Err("is not an object".into()); // never: `data` is checked to be one
//!     };
//!     fields.insert("currency".into(), "EUR".into());
//!     Ok(data)
//! }
//!
//! fn on_opened(account: &mut Option<Account>, event: &Sequenced<Opening>) -> Decision {
//!     if account.is_some() {
//!         return Decision::Duplicate;
//!     }
//!     *account = Some(Account {
//!         sequence: event.sequence,
//!         last_event_id: event.event_id.clone(),
//!         owner: event.data.owner.clone(),
//!         currency: event.data.currency.clone(),
//!     });
//!     Decision::Applied
//! }
//!
//! impl Events for AccountEvent {
//!     fn handling(self) -> Handling {
//!         match self {
//!             AccountEvent::AccountOpened(data) => Handling::sequenced(data, on_opened),
//!         }
//!     }
//!
//!     /// The current version of each type that has more than one, and the
//!     /// upcast from each older one to the next.
//!     fn versions() -> Versions {
//!         Versions::none()
//!             .current("AccountOpened", 2)
//!             .upcast("AccountOpened", 1, opened_v1_to_v2)
//!     }
//! }
//!
//! let domain = Domain::new::<AccountEvent>().entity::<Account>();
//! assert_eq!(domain.check(), Ok(()));
//! assert_eq!(domain.version("AccountOpened"), 2);
//!
//! // A body appended before version 2 (no `version`: version 1) is upcast.
//! let mut account = None;
//! let v1 = r#"{"eventId":"e1","type":"AccountOpened","aggregateId":"a-1","sequence":1,"data":{"owner":"Ada"}}"#;
//! assert_eq!(domain.parse(v1).unwrap().decide(&mut account), Ok(Decision::Applied));
//! let currency = |account: &Option<sequence_guard::AnyEntity>| {
//!     account.as_ref().and_then(|a| a.get::<Account>()).map(|a| a.currency.clone())
//! };
//! assert_eq!(currency(&account).as_deref(), Some("EUR"));
//!
//! // A version-2 body is read as it is.
//! let mut account = None;
//! let v2 = r#"{"eventId":"e1","type":"AccountOpened","aggregateId":"a-1","sequence":1,"version":2,"data":{"owner":"Ada","currency":"GBP"}}"#;
//! assert_eq!(domain.parse(v2).unwrap().decide(&mut account), Ok(Decision::Applied));
//! assert_eq!(currency(&account).as_deref(), Some("GBP"));
//!
//! // A version this consumer does not know yet is invalid, and says so.
//! let v3 = r#"{"eventId":"e1","type":"AccountOpened","aggregateId":"a-1","sequence":1,"version":3,"data":{"owner":"Ada"}}"#;
//! assert_eq!(
//!     domain.parse(v3).unwrap_err().to_string(),
//!     "field `version` names AccountOpened version 3, newer than this consumer knows (2)"
//! );
//!
//! // A mistake in a declaration is found when the domain is built (here
//! // asked of the declaration alone: Domain::check reports the same lines).
//! let misspelled = Versions::none().current("AcountOpened", 2);
//! let problems = sequence_guard::versions::problems(&misspelled, domain.types());
//! assert!(problems[0].contains("`AcountOpened`, a type the events enum does not have"));
//! ```

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use crate::envelope::InvalidMessage;

#[cfg(doc)]
use crate::domain::{Domain, Events};

/// The newest version a body may carry: `version` is 1 to 65535.
pub const MAX_VERSION: u16 = u16::MAX;

/// An upcast: one version's `data` in, the next version's out (a JSON
/// object), or why it cannot be (the body is then invalid with this reason,
/// which is logged: name fields, never quote their values).
pub type Upcast = fn(Value) -> Result<Value, String>;

/// The versions a domain declares: each type's current version and an
/// upcast from each older one to the next. Built once, in
/// [`Events::versions`]; a type declared nowhere is at version 1.
#[derive(Debug, Clone, Default)]
#[must_use = "versions declare nothing until Events::versions returns them"]
pub struct Versions {
    currents: Vec<(&'static str, u16)>,
    upcasts: Vec<(&'static str, u16, Upcast)>,
}

impl Versions {
    /// Every type at version 1, no upcast: what a domain has until its
    /// first change of shape.
    pub fn none() -> Self {
        Versions::default()
    }

    /// `event_type` (as the envelope's `type` names it) is at `version`:
    /// what [`crate::producer`] writes, and what every older body is upcast
    /// to. Every version from 1 up to it needs its [`Versions::upcast`].
    pub fn current(mut self, event_type: &'static str, version: u16) -> Self {
        self.currents.push((event_type, version));
        self
    }

    /// How a body of `event_type` at version `from` becomes one at
    /// `from + 1`. Keep it as long as the event store holds events of
    /// version `from` (`rebuild --versions` counts them).
    pub fn upcast(mut self, event_type: &'static str, from: u16, upcast: Upcast) -> Self {
        self.upcasts.push((event_type, from, upcast));
        self
    }
}

/// The mistakes in `versions` for a domain whose events enum has `types`,
/// one line each with its fix: what [`Domain::check`] reports.
pub fn problems(versions: &Versions, types: &[&str]) -> Vec<String> {
    let mut problems = Vec::new();
    let known = |name: &str| types.contains(&name);
    let mut unknown: Vec<&str> = Vec::new();
    let mut unknown_type = |name: &'static str, problems: &mut Vec<String>| {
        if !known(name) && !unknown.contains(&name) {
            unknown.push(name);
            problems.push(format!(
                "versions are declared for `{name}`, a type the events enum does not have (it has {}): name the type as the envelope's `type` does",
                types.join(", ")
            ));
        }
    };
    for (index, &(name, version)) in versions.currents.iter().enumerate() {
        unknown_type(name, &mut problems);
        if versions.currents[..index]
            .iter()
            .any(|(seen, _)| *seen == name)
        {
            problems.push(format!(
                "the current version of {name} is declared twice: declare it once, in Versions::current"
            ));
        }
        if version == 0 {
            problems.push(format!(
                "{name} is declared at version 0: versions start at 1"
            ));
        }
    }
    let mut upcasts = BTreeSet::new();
    for &(name, from, _) in &versions.upcasts {
        unknown_type(name, &mut problems);
        let current = current_of(versions, name);
        if !upcasts.insert((name, from)) {
            problems.push(format!(
                "two upcasts of {name} from version {from}: keep one"
            ));
        }
        if from == 0 || from >= current {
            problems.push(format!(
                "an upcast of {name} from version {from}, whose current version is {current}: an upcast goes from a version below the current one to the next (declare the current version with Versions::current)"
            ));
        }
    }
    for (index, &(name, current)) in versions.currents.iter().enumerate() {
        if !known(name)
            || versions.currents[..index]
                .iter()
                .any(|(seen, _)| *seen == name)
        {
            continue; // named above
        }
        let missing: Vec<String> = (1..current)
            .filter(|from| !upcasts.contains(&(name, *from)))
            .map(|from| from.to_string())
            .collect();
        if !missing.is_empty() {
            problems.push(format!(
                "{name} is at version {current} and has no upcast from version {}: add .upcast(\"{name}\", {}, ...) for each, from that version's data to the next's",
                missing.join(", "),
                missing[0]
            ));
        }
    }
    problems
}

/// The current version `versions` declares for `name` (the first, if
/// declared twice), 1 when none.
fn current_of(versions: &Versions, name: &str) -> u16 {
    versions
        .currents
        .iter()
        .find(|(seen, _)| *seen == name)
        .map_or(1, |(_, version)| *version)
}

/// The versions of a domain, resolved: for each type above version 1, its
/// current version and its upcasts in order (`steps[v - 1]` takes version
/// `v` to `v + 1`). Empty for a domain whose types are all at version 1.
#[derive(Debug, Clone, Default)]
pub(crate) struct Table {
    types: Vec<Entry>,
}

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
    /// The table of `versions`, and the mistakes in them (see [`problems`]);
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

#[cfg(test)]
mod tests {
    use super::*;

    const TYPES: &[&str] = &["Opened", "Closed"];

    fn same(data: Value) -> Result<Value, String> {
        Ok(data)
    }

    fn refuse(_: Value) -> Result<Value, String> {
        Err("`owner` is missing".to_owned())
    }

    #[test]
    fn a_complete_declaration_has_no_problem() {
        let versions = Versions::none()
            .current("Opened", 3)
            .upcast("Opened", 2, same)
            .upcast("Opened", 1, same)
            .current("Closed", 1);
        assert_eq!(problems(&versions, TYPES), Vec::<String>::new());
        let (table, _) = Table::new(&versions, TYPES);
        assert_eq!((table.current("Opened"), table.current("Closed")), (3, 1));
        assert_eq!(table.current("Other"), 1);
    }

    #[test]
    fn each_mistake_is_named_with_its_fix() {
        let versions = Versions::none()
            .current("Openned", 2)
            .current("Opened", 3)
            .current("Opened", 3)
            .upcast("Opened", 2, same)
            .upcast("Opened", 2, same)
            .upcast("Opened", 3, same)
            .upcast("Closed", 1, same)
            .current("Closed", 0);
        let problems = problems(&versions, TYPES);
        let expected = [
            "versions are declared for `Openned`, a type the events enum does not have (it has Opened, Closed)",
            "the current version of Opened is declared twice",
            "Closed is declared at version 0: versions start at 1",
            "two upcasts of Opened from version 2: keep one",
            "an upcast of Opened from version 3, whose current version is 3",
            "an upcast of Closed from version 1, whose current version is 0",
            "Opened is at version 3 and has no upcast from version 1: add .upcast(\"Opened\", 1, ...)",
        ];
        assert_eq!(problems.len(), expected.len(), "{problems:#?}");
        for (problem, expected) in problems.iter().zip(expected) {
            assert!(problem.starts_with(expected), "{problem}\n  !~ {expected}");
        }
    }

    #[test]
    fn a_plan_runs_the_upcasts_from_the_bodys_version() {
        fn add(name: &'static str) -> impl Fn(Value) -> Value {
            move |mut data| {
                if let Value::Object(fields) = &mut data {
                    fields.insert(name.to_owned(), Value::Bool(true));
                }
                data
            }
        }
        fn one(data: Value) -> Result<Value, String> {
            Ok(add("one")(data))
        }
        fn two(data: Value) -> Result<Value, String> {
            Ok(add("two")(data))
        }
        let versions = Versions::none()
            .current("Opened", 3)
            .upcast("Opened", 1, one)
            .upcast("Opened", 2, two);
        let (table, _) = Table::new(&versions, TYPES);
        let run = |version| {
            let plan = table.plan("Opened", version)?;
            plan.map(|plan| plan.run(serde_json::json!({}))).transpose()
        };
        assert_eq!(
            run(1),
            Ok(Some(serde_json::json!({"one": true, "two": true})))
        );
        assert_eq!(run(2), Ok(Some(serde_json::json!({"two": true}))));
        assert_eq!(run(3), Ok(None), "the current version: nothing to do");
        assert_eq!(
            run(4).map_err(|err| err.to_string()),
            Err(
                "field `version` names Opened version 4, newer than this consumer knows (3)"
                    .to_owned()
            )
        );
        assert_eq!(
            table.plan("Closed", 2).err().map(|err| err.to_string()),
            Some(
                "field `version` names Closed version 2, newer than this consumer knows (1)"
                    .to_owned()
            )
        );
    }

    #[test]
    fn a_refusing_upcast_and_one_that_answers_no_object_are_named() {
        fn scalar(_: Value) -> Result<Value, String> {
            Ok(Value::Null)
        }
        for (upcast, expected) in [
            (
                refuse as Upcast,
                "field `data` of Opened version 1 cannot be upcast to version 2: `owner` is missing",
            ),
            (
                scalar as Upcast,
                "field `data` of Opened version 1, upcast to version 2, is not an object (the upcast's answer must be one)",
            ),
        ] {
            let versions = Versions::none()
                .current("Opened", 2)
                .upcast("Opened", 1, upcast);
            let (table, _) = Table::new(&versions, TYPES);
            let plan = table.plan("Opened", 1).ok().flatten();
            let answer = plan.map(|plan| plan.run(serde_json::json!({})));
            assert_eq!(
                answer.and_then(Result::err).map(|err| err.to_string()),
                Some(expected.to_owned())
            );
        }
    }
}
