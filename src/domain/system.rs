//! A crate's whole system ([`System`]): its event store's domain and each of
//! its consumers' by name, a process's included. What a run of the whole on
//! one machine needs (`cli::local`), and what can be checked of the domains
//! only together, before any message: each one's declarations; unique
//! names; every consumer declaring every type of the store (a type it does
//! not would be an invalid message, at its first delivery); a process
//! appending to this store; no two processes of one name (a process's name
//! is in the request id of every event it appends: two of one name would
//! take each other's appends for their own).

use super::{DeclarationError, Domain};

/// A crate's whole system; see the module's documentation.
///
/// ```
/// # use sequence_guard::{Decision, Domain, Entity, Events, Handling, Sequenced};
/// # use sequence_guard::domain::System;
/// # use serde::{Deserialize, Serialize};
/// # #[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Entity)]
/// # #[serde(rename_all = "camelCase")]
/// # #[entity(kind = "NOTE")]
/// # struct Note { sequence: u64, last_event_id: String }
/// # #[derive(Debug, Deserialize)]
/// # #[serde(tag = "type", content = "data")]
/// # enum NoteEvent { NoteWritten(serde::de::IgnoredAny) }
/// # fn written(note: &mut Option<Note>, event: &Sequenced<()>) -> Decision {
/// #     if note.is_some() { return Decision::Duplicate }
/// #     *note = Some(Note { sequence: event.sequence, last_event_id: event.event_id.clone() });
/// #     Decision::Applied
/// # }
/// # impl Events for NoteEvent {
/// #     fn handling(self) -> Handling { Handling::sequenced((), written) }
/// # }
/// fn system() -> System {
///     System::new(Domain::new::<NoteEvent>())
///         .consumer("notes", Domain::new::<NoteEvent>())
/// }
/// assert!(system().check().is_ok());
/// ```
#[derive(Debug, Clone)]
pub struct System {
    store: Domain,
    consumers: Vec<(String, Domain)>,
}

impl System {
    /// A system whose event store holds `store`'s events (what `append`
    /// checks and seals them by).
    pub fn new(store: Domain) -> Self {
        System {
            store,
            consumers: Vec::new(),
        }
    }

    /// A consumer of the store, named as in the template (`orders`,
    /// `status`, `payments`), projecting with `domain` (a process's too).
    #[must_use]
    pub fn consumer(mut self, name: impl Into<String>, domain: Domain) -> Self {
        self.consumers.push((name.into(), domain));
        self
    }

    /// The event store's domain.
    pub fn store(&self) -> &Domain {
        &self.store
    }

    /// The consumers, in the order given.
    pub fn consumers(&self) -> &[(String, Domain)] {
        &self.consumers
    }

    /// The store's domain with `keys` (its personal data sealed with them),
    /// and each consumer's that declares personal data with the same.
    #[must_use]
    pub fn with_keys(mut self, keys: std::sync::Arc<crate::personal::Keyring>) -> Self {
        if self.store.declares_personal() {
            self.store = self.store.with_keys(keys.clone());
        }
        for (_, domain) in &mut self.consumers {
            if domain.declares_personal() {
                *domain = domain.clone().with_keys(keys.clone());
            }
        }
        self
    }

    /// Whether the domains can work together; `Err` names every mistake,
    /// each with its fix (see the module's documentation).
    pub fn check(&self) -> Result<(), DeclarationError> {
        let mut problems = Vec::new();
        if let Err(err) = self.store.check() {
            problems.extend(
                err.problems()
                    .iter()
                    .map(|p| format!("the event store's domain: {p}")),
            );
        }
        if self.consumers.is_empty() {
            problems.push(
                "the system has no consumer: add one with .consumer(name, domain)".to_owned(),
            );
        }
        let mut processes: Vec<(&str, &str)> = Vec::new();
        for (index, (name, domain)) in self.consumers.iter().enumerate() {
            problems.extend(name_problem(name));
            if self.consumers[..index].iter().any(|(seen, _)| seen == name) {
                problems.push(format!("two consumers are named `{name}`: one name each"));
            }
            if let Err(err) = domain.check() {
                problems.extend(
                    err.problems()
                        .iter()
                        .map(|p| format!("the consumer `{name}`: {p}")),
                );
            }
            let missing: Vec<&str> = self
                .store
                .types()
                .iter()
                .copied()
                .filter(|event_type| !domain.types().contains(event_type))
                .collect();
            if !missing.is_empty() {
                problems.push(format!(
                    "the consumer `{name}` does not declare {} of the event store's types: each would be an invalid message at its first delivery; declare each (Handling::ignore() for a stream it does not project, Handling::pass for one it does)",
                    missing.join(", ")
                ));
            }
            if let Some(process) = domain.process() {
                if process.store_domain().types() != self.store.types() {
                    problems.push(format!(
                        "the process `{}` (consumer `{name}`) appends to an event store of other types than this system's: give Process::new the store's domain",
                        process.name()
                    ));
                }
                if let Some((_, other)) = processes.iter().find(|(seen, _)| *seen == process.name())
                {
                    problems.push(format!(
                        "the consumers `{other}` and `{name}` are both the process `{}`: a process's name is in the request id of every event it appends, and two of one name would take each other's appends for their own; name each process for itself",
                        process.name()
                    ));
                }
                processes.push((process.name(), name));
            }
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(DeclarationError(problems))
        }
    }
}

/// What is wrong with a consumer's name: 1 to 32 lower-case letters,
/// digits or `-`, as the template names its resources by it.
fn name_problem(name: &str) -> Option<String> {
    let fits = !name.is_empty()
        && name.len() <= 32
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    (!fits).then(|| {
        format!("the consumer name `{name}` must be 1 to 32 lower-case letters, digits or `-`")
    })
}
