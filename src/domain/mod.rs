//! A user's domain, registered: its events, how each is handled, its
//! entity kinds and counters. The engine knows a domain only through this.
//!
//! ```
//! use sequence_guard::{Decision, Domain, Entity, Events, Handling, Sequenced};
//! use serde::{Deserialize, Serialize};
//!
//! #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
//! #[serde(rename_all = "camelCase")]
//! pub struct Note {
//!     sequence: u64,
//!     last_event_id: String,
//!     text: String,
//! }
//!
//! impl Entity for Note {
//!     const KIND: &'static str = "NOTE";
//!     fn sequence(&self) -> u64 { self.sequence }
//!     fn last_event_id(&self) -> &str { &self.last_event_id }
//! }
//!
//! #[derive(Debug, Deserialize)]
//! pub struct Text {
//!     #[serde(deserialize_with = "sequence_guard::limits::text::<_, 0, 1024>")]
//!     text: String,
//! }
//!
//! /// The events, tagged by the envelope's `type`, with their `data`.
//! #[derive(Debug, Deserialize)]
//! #[serde(tag = "type", content = "data")]
//! pub enum NoteEvent {
//!     NoteWritten(Text),
//!     NoteEdited(Text),
//! }
//!
//! fn on_written(note: &mut Option<Note>, event: &Sequenced<Text>) -> Decision {
//!     if note.is_some() {
//!         return Decision::Duplicate;
//!     }
//!     *note = Some(Note {
//!         sequence: event.sequence,
//!         last_event_id: event.event_id.clone(),
//!         text: event.data.text.clone(),
//!     });
//!     Decision::Applied
//! }
//!
//! fn on_edited(note: &mut Option<Note>, event: &Sequenced<Text>) -> Decision {
//!     let Some(note) = note else { return Decision::NotCreated };
//!     if note.sequence != event.sequence - 1 {
//!         return if note.sequence >= event.sequence { Decision::Duplicate } else { Decision::Gap };
//!     }
//!     note.text.clone_from(&event.data.text);
//!     note.last_event_id.clone_from(&event.event_id);
//!     note.sequence = event.sequence;
//!     Decision::Applied
//! }
//!
//! /// The one registration: each event type and its handler.
//! impl Events for NoteEvent {
//!     fn handling(self) -> Handling {
//!         match self {
//!             NoteEvent::NoteWritten(data) => Handling::sequenced(data, on_written),
//!             NoteEvent::NoteEdited(data) => Handling::sequenced(data, on_edited),
//!         }
//!     }
//! }
//!
//! // Note is registered by the handlings that name it: no `.entity::<Note>()`.
//! let domain = Domain::new::<NoteEvent>();
//! assert_eq!(domain.kinds()[0].name, "NOTE");
//! let event = domain
//!     .parse(r#"{"eventId":"e2","type":"NoteEdited","aggregateId":"n-1","sequence":2,"data":{"text":"hi"}}"#)
//!     .unwrap();
//! assert_eq!((event.stream(), event.sequence()), ("n-1", Some(2)));
//! let mut note = Some(sequence_guard::AnyEntity::new(Note {
//!     sequence: 1,
//!     last_event_id: "e1".into(),
//!     text: String::new(),
//! }));
//! assert_eq!(event.decide(&mut note), Ok(Decision::Applied));
//! assert_eq!(note.as_ref().and_then(|n| n.get::<Note>()).map(|n| n.text.as_str()), Some("hi"));
//! ```

mod names;
mod payload;
mod process;
mod sample;
mod shape;
mod system;

use std::fmt;
use std::sync::Arc;

use serde::de::DeserializeOwned;

use crate::entity::{ENGINE_ATTRIBUTES, Entity, EntityKey, Kind};
use crate::handling::{Counter, Handling};
use crate::personal::{self, Declared, Keyring, Personal};
use crate::reason::InvalidMessage;
use crate::versions::Table;
use crate::versions::Versions;
pub(crate) use names::short_name;
use names::{type_names, type_problems};
pub(crate) use payload::ReadData;
use payload::{payload, unread_types};
use sample::Named;

pub(crate) use process::Cause;
pub use process::Process;
pub use system::System;

/// A domain's events: a serde enum tagged by the envelope's `type`, with the
/// event's `data` as content (`#[serde(tag = "type", content = "data")]`),
/// and the one registration of how each is handled.
pub trait Events: DeserializeOwned + 'static {
    /// How this event is handled: [`Handling::sequenced`] with its handler,
    /// [`Handling::snapshot`], or [`Handling::add`]. One arm per event type.
    /// The entity kinds and counters the arms name are registered by
    /// [`Domain::new`], which asks each arm with made-up data.
    fn handling(self) -> Handling;

    /// Each type's current version and the upcast from each older one
    /// ([`Versions`]); by default every type is at version 1.
    fn versions() -> Versions {
        Versions::none()
    }

    /// Which fields of which types are personal data, and whose
    /// ([`Personal`]); by default none. `append` seals them with their
    /// subject's key, and a consumer that declares them opens them.
    fn personal() -> Personal {
        Personal::new()
    }
}

/// A registered domain: how messages are read, and which entity kinds and
/// counters its items hold.
#[derive(Clone)]
pub struct Domain {
    pub(crate) read: ReadData,
    /// The event type names, as serde knows them: the one list.
    pub(crate) types: &'static [&'static str],
    pub(crate) kinds: Vec<&'static Kind>,
    pub(crate) counters: Vec<&'static Counter>,
    /// The types passed ([`Handling::pass`]), as their handling says.
    pub(crate) passes: Vec<&'static str>,
    /// What each type's handling projects its stream onto: an entity kind,
    /// or nothing (a counter's, an ignored type); a type whose data cannot
    /// be made up is absent. How an erasure finds its entity.
    streams: Vec<(&'static str, Option<&'static Kind>)>,
    /// How the erasure type is handled, as its registration answered.
    erasure: Option<Named>,
    /// Mistakes in the declarations, found as they were registered.
    problems: Vec<String>,
    /// The domain crate's version, for the binaries' `--version`.
    crate_version: Option<&'static str>,
    /// Each type's current version and upcasts ([`Events::versions`]).
    pub(crate) versions: Table,
    /// The process its handlers belong to, for a process's domain.
    process: Option<Process>,
    /// Its personal fields, by type ([`Events::personal`]).
    pub(crate) personal: Arc<Declared>,
    /// The keys its personal data is sealed with ([`Domain::with_keys`]).
    pub(crate) keys: Option<Arc<Keyring>>,
}

/// A domain whose declarations cannot work, with what is wrong and how to
/// fix it (one line per mistake). Every binary refuses to start with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the domain's declarations cannot work: {}", .0.join("; "))]
pub struct DeclarationError(Vec<String>);

impl DeclarationError {
    /// Each mistake, with its fix.
    pub fn problems(&self) -> &[String] {
        &self.0
    }
}

impl Domain {
    /// A domain of the events `E`.
    pub fn new<E: Events>() -> Self {
        let types = type_names::<E>();
        let declared = E::personal();
        let mut problems = match shape::problem::<E>(std::any::type_name::<E>()) {
            Some(problem) => vec![problem],
            None => type_problems(std::any::type_name::<E>(), types),
        };
        problems.extend(personal::fields::problems::<E>(types, &declared));
        Domain {
            read: payload::<E>,
            types,
            kinds: Vec::new(),
            counters: Vec::new(),
            passes: Vec::new(),
            streams: Vec::new(),
            erasure: None,
            problems,
            versions: Table::default(),
            crate_version: None,
            process: None,
            personal: Arc::new(Declared::new(&declared)),
            keys: None,
        }
        .versions_of::<E>()
        .named_by::<E>()
    }

    /// Registers what each type's handling names (its entity kind, its
    /// counter), as `.entity::<T>()` and `.counter(&...)` would: found by
    /// asking the handling of made-up data (`sample.rs`). A type whose data
    /// cannot be made up registers nothing here.
    fn named_by<E: Events>(mut self) -> Self {
        for event_type in self.types {
            let named = sample::named::<E>(event_type);
            if *event_type == personal::ERASURE_TYPE {
                self.erasure = named.clone();
            } else {
                match &named {
                    Some(Named::Entity(kind) | Named::Pass(kind)) => {
                        self.streams.push((event_type, Some(*kind)));
                    }
                    Some(Named::Counter(_) | Named::Nothing) => {
                        self.streams.push((event_type, None));
                    }
                    Some(Named::Erasure) | None => {}
                }
            }
            self = match named {
                Some(Named::Entity(kind)) => self.register(kind),
                Some(Named::Pass(kind)) => {
                    self.passes.push(event_type);
                    self.register(kind)
                }
                Some(Named::Counter(counter)) => self.counter(counter),
                Some(Named::Nothing | Named::Erasure) | None => self,
            };
        }
        self
    }

    /// The versions `E` declares, resolved; their mistakes among the
    /// problems [`Domain::check`] reports.
    fn versions_of<E: Events>(mut self) -> Self {
        let (mut table, problems) = Table::new(&E::versions(), self.types);
        table.leave_unread(unread_types::<E>(self.types));
        self.versions = table;
        self.problems.extend(problems);
        self
    }

    /// Whether the declarations can work: `Err` names every mistake found
    /// as they were registered (an entity or counter that would write one
    /// of the engine's attributes, an entity without `sequence`; a process
    /// that does not declare every type of its event store's). The
    /// binaries call it before anything else, and [`crate::runner::Runner::new`]
    /// refuses such a domain.
    pub fn check(&self) -> Result<(), DeclarationError> {
        let mut problems = self.problems.clone();
        problems.extend(self.personal_problems());
        if let Some(process) = &self.process {
            problems.extend(process.problems());
            problems.extend(process.unheard(self.types));
            if let Some(kind) = process.deadline_kind()
                && !self.kinds.iter().any(|known| known.name == kind.name)
            {
                problems.push(format!(
                    "the process {} handles deadlines of {} states: register the entity (`.entity::<{}>()`)",
                    process.name(),
                    kind.name,
                    kind.type_name()
                ));
            }
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(DeclarationError(problems))
        }
    }

    /// What the personal declarations of the events and the entities
    /// need of each other: the erasure event registered, one placeholder.
    fn personal_problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        let personal_kinds: Vec<&Kind> = self
            .kinds
            .iter()
            .copied()
            .filter(|kind| !kind.personal().is_empty())
            .collect();
        let holds = if !self.personal.is_empty() {
            Some("the domain declares personal data".to_owned())
        } else {
            personal_kinds
                .first()
                .map(|kind| format!("the entity {} declares personal fields", kind.type_name()))
        };
        if let Some(holds) = holds {
            problems.extend(personal::fields::erasure_problem(self.types, &holds));
        }
        problems.extend(self.erasure_on_one_kind());
        for kind in personal_kinds {
            problems.extend(personal::fields::entity_problems(kind));
            if kind.placeholder() != self.personal.placeholder && !self.personal.is_empty() {
                problems.push(format!(
                    "the entity {} erases to {:?} and the events to {:?}: one placeholder, or rebuild and verify disagree (Entity::PLACEHOLDER, Personal::placeholder)",
                    kind.type_name(),
                    kind.placeholder(),
                    self.personal.placeholder
                ));
            }
        }
        problems
    }

    /// An erasure registered on one kind ([`Handling::erase`],
    /// [`Handling::pass`]) in a domain whose personal data is on another
    /// kind too: the erasures of that kind's streams could never be applied
    /// (nor appended: a stream is one kind's).
    fn erasure_on_one_kind(&self) -> Option<String> {
        let one = match &self.erasure {
            Some(Named::Entity(kind) | Named::Pass(kind)) => *kind,
            _ => return None,
        };
        let other = self
            .personal_kinds()
            .into_iter()
            .find(|kind| kind.name != one.name)?;
        Some(format!(
            "{} is handled on {} entities alone, and {} entities hold personal data too: the erasures of their streams could never be applied; register it with Handling::erasure(data), which erases whichever kind its stream projects onto",
            personal::ERASURE_TYPE,
            one.name,
            other.name
        ))
    }

    /// The kinds that hold personal data: those of the streams of the
    /// types declared personal, and the entities that declare personal
    /// attributes.
    fn personal_kinds(&self) -> Vec<&'static Kind> {
        let declared = self.personal.types().filter_map(|event_type| {
            self.streams
                .iter()
                .find(|(name, _)| *name == event_type)
                .and_then(|(_, kind)| *kind)
        });
        let entities = self
            .kinds
            .iter()
            .copied()
            .filter(|kind| !kind.personal().is_empty());
        declared.chain(entities).collect()
    }

    /// The keys the domain's personal data is sealed and opened with: a
    /// consumer that declares personal fields, and an event store that
    /// appends them, need one (the binaries give it from
    /// `PERSONAL_DATA_KEY`); one that declares none never reads a key.
    #[must_use]
    pub fn with_keys(mut self, keys: Arc<Keyring>) -> Self {
        self.keys = Some(keys);
        self
    }

    /// The keyring given with [`Domain::with_keys`].
    pub fn keys(&self) -> Option<&Arc<Keyring>> {
        self.keys.as_ref()
    }

    /// Whether the domain declares personal fields of its events (and so
    /// needs keys to read and append them).
    pub fn declares_personal(&self) -> bool {
        !self.personal.is_empty()
    }

    pub(crate) fn personal(&self) -> &Declared {
        &self.personal
    }

    /// Declares the domain a process's ([`crate::process`]): its handlers
    /// registered with [`crate::Handling::process`] append to the event
    /// store `process` names, and its deadlines are fired by the sweep.
    #[must_use]
    pub fn with_process(mut self, process: Process) -> Self {
        self.process = Some(process);
        self
    }

    /// The process declared with [`Domain::with_process`], if any.
    pub fn process(&self) -> Option<&Process> {
        self.process.as_ref()
    }

    /// Registers an entity kind (so that the sweep, `replay` and `inspect`
    /// know its items). A kind that a handling names is registered by
    /// [`Domain::new`] already; this is for one it cannot find (a type
    /// whose data it cannot make up). Registering a kind twice is harmless.
    pub fn entity<T: Entity>(self) -> Self {
        self.register(Kind::of::<T>())
    }

    fn register(mut self, kind: &'static Kind) -> Self {
        match self.kinds.iter().find(|known| known.name == kind.name) {
            None => {
                self.problems.extend(kind.problems());
                self.kinds.push(kind);
            }
            Some(known) if known.type_name() != kind.type_name() => {
                self.problems.push(format!(
                    "the entities {} and {} share the kind {}: a kind is the prefix of an entity's key, so each entity type needs its own (change one's Entity::KIND)",
                    known.type_name(),
                    kind.type_name(),
                    kind.name
                ));
            }
            Some(_) => {} // the same type, registered again
        }
        self
    }

    /// The version of the crate that declares the domain, which every
    /// binary's `--version` prints beside the library's: pass your crate's,
    /// `.with_crate_version(env!("CARGO_PKG_VERSION"))`.
    #[must_use]
    pub fn with_crate_version(mut self, version: &'static str) -> Self {
        self.crate_version = Some(version);
        self
    }

    /// The version given with [`Domain::with_crate_version`].
    pub fn crate_version(&self) -> Option<&'static str> {
        self.crate_version
    }

    /// Registers a counter that deduplicated effects add to. A counter
    /// that a handling names is registered by [`Domain::new`] already, as
    /// [`Domain::entity`] says; registering it twice is harmless.
    pub fn counter(mut self, counter: &'static Counter) -> Self {
        if !self.counters.contains(&counter) {
            if ENGINE_ATTRIBUTES.contains(&counter.attribute) {
                self.problems.push(format!(
                    "the counter {} keeps its number in `{}`, an attribute of the engine's own: choose another attribute",
                    counter.label(),
                    counter.attribute
                ));
            }
            self.counters.push(counter);
        }
        self
    }

    /// An erasure registered with [`Handling::erasure`], on the entity
    /// kind this domain projects its stream onto: the kind its handling of
    /// the erasure's `streamType` names, or, for an erasure that names none
    /// (an earlier release's), the one kind the domain projects streams
    /// onto. A stream this domain does not project: ignored.
    pub(crate) fn erasure_of(
        &self,
        data: personal::Erasure,
    ) -> Result<crate::handling::How, InvalidMessage> {
        let field = || "data.streamType".to_owned();
        let named = match data.stream_type.as_deref() {
            Some(stream_type) => match self.streams.iter().find(|(name, _)| *name == stream_type) {
                Some((_, kind)) => Some(*kind),
                None if !self.types.contains(&stream_type) => {
                    return Err(InvalidMessage::Invalid {
                        field: field(),
                        problem: "names a type this domain does not declare".to_owned(),
                    });
                }
                // A type whose data cannot be made up: as if it named none.
                None => None,
            },
            None => None,
        };
        let kind = match named {
            Some(kind) => kind,
            None => {
                // An earlier release erased one kind: the one holding
                // personal data, or the only one.
                let mut personal = self.personal_kinds();
                personal.sort();
                personal.dedup();
                let mut kinds: Vec<&'static Kind> =
                    self.streams.iter().filter_map(|(_, kind)| *kind).collect();
                kinds.sort();
                kinds.dedup();
                if let [kind] = personal.as_slice() {
                    kinds = vec![*kind];
                }
                match kinds.as_slice() {
                    [] => None,
                    [kind] => Some(*kind),
                    several => {
                        let names: Vec<&str> = several.iter().map(|kind| kind.name).collect();
                        return Err(InvalidMessage::Invalid {
                            field: field(),
                            problem: format!(
                                "is missing (an erasure appended by an earlier release), and this consumer projects streams onto {}: which one it erases cannot be told; run `erase` for the subject again with this release",
                                names.join(", ")
                            ),
                        });
                    }
                }
            }
        };
        Ok(crate::handling::erasure_on(data, kind))
    }

    /// The current version of `event_type` ([`Events::versions`]): what
    /// an append writes; 1 for a type that declares none.
    pub fn version(&self, event_type: &str) -> u16 {
        self.versions.current(event_type)
    }

    /// The event type names, in the order the events enum declares them.
    pub fn types(&self) -> &'static [&'static str] {
        self.types
    }

    /// The entity kinds registered: those the handlings name, in the order
    /// of their types, then those registered with [`Domain::entity`].
    pub fn kinds(&self) -> &[&'static Kind] {
        &self.kinds
    }

    /// The counters registered: those the handlings name, in the order of
    /// their types, then those registered with [`Domain::counter`].
    pub fn counters(&self) -> &[&'static Counter] {
        &self.counters
    }

    /// The entity kind by its name (`ORDER`) or label (`order`).
    pub fn kind(&self, name: &str) -> Option<&'static Kind> {
        self.kinds
            .iter()
            .copied()
            .find(|kind| kind.name == name || kind.label() == name)
    }

    /// The key of an entity item's `pk` (`ORDER#order-42`), if its kind is
    /// registered.
    pub fn key_of_pk(&self, pk: &str) -> Option<EntityKey> {
        let (name, id) = pk.split_once('#')?;
        Some(EntityKey::new(self.kind(name)?, id))
    }

    /// How `inspect` names a counter's item (the counters that share it
    /// share the name): its kind in lower case (`sku`), or its label
    /// (`fees`) when an entity kind has that name already, or when the
    /// domain keeps counters of that kind on several items (a member's
    /// `activity` and `recalls`).
    pub fn counter_name(&self, counter: &Counter) -> String {
        let kind = counter.kind.to_ascii_lowercase();
        let several_items = self
            .counters
            .iter()
            .any(|other| other.kind == counter.kind && other.sort_key != counter.sort_key);
        if self.kind(&kind).is_some() || several_items {
            counter.label()
        } else {
            kind
        }
    }

    /// The counter by its name ([`Domain::counter_name`]) or label: the
    /// first registered, where several share its item.
    pub fn counter_named(&self, name: &str) -> Option<&'static Counter> {
        self.counters
            .iter()
            .copied()
            .find(|counter| self.counter_name(counter) == name || counter.label() == name)
    }
}

impl fmt::Debug for Domain {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Domain")
            .field("types", &self.types)
            .field("kinds", &self.kinds)
            .field("counters", &self.counters)
            .finish()
    }
}
