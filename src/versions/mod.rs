//! Event versions: an event type's `data` changes shape while the events
//! stored keep the shape they were appended with.
//!
//! The envelope may carry `version` (an integer, 1 to 65535; absent means
//! 1). A domain declares, in its one registration ([`Events::versions`](crate::Events::versions)),
//! each type's current version and, for each older one, an upcast: a
//! function from that version's `data` to the next version's. Every reader
//! of bodies ([`Domain::parse`](crate::Domain::parse): the projector, `replay`, `rebuild`,
//! `verify`, the dispatcher's check) upcasts an older body to the current
//! version before `data` is checked and read; what is stored and sent stays
//! as it was appended. [`crate::producer`] (and so `append`) writes the
//! current version, and writes no `version` at all while it is 1.
//!
//! A body of a version newer than the domain knows is invalid, naming the
//! type, the version and the newest known; an upcast that refuses makes the
//! body invalid with its reason. Mistakes in the declaration (a type the
//! events enum does not have, a version below the current one without its
//! upcast, a type declared twice) are found when the [`Domain`](crate::Domain) is built:
//! [`Domain::check`](crate::Domain::check) names them, and no binary starts.
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

use serde_json::Value;

mod problems;
mod table;
#[cfg(test)]
mod tests;

pub use problems::problems;
pub(crate) use table::{Table, of_envelope};

/// The newest version a body may carry: `version` is 1 to 65535.
pub const MAX_VERSION: u16 = u16::MAX;

/// An upcast: one version's `data` in, the next version's out (a JSON
/// object), or why it cannot be (the body is then invalid with this reason,
/// which is logged: name fields, never quote their values).
pub type Upcast = fn(Value) -> Result<Value, String>;

/// The versions a domain declares: each type's current version and an
/// upcast from each older one to the next. Built once, in
/// [`Events::versions`](crate::Events::versions); a type declared nowhere is at version 1.
#[derive(Debug, Clone, Default)]
#[must_use = "versions declare nothing until Events::versions returns them"]
pub struct Versions {
    pub(crate) currents: Vec<(&'static str, u16)>,
    pub(crate) upcasts: Vec<(&'static str, u16, Upcast)>,
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
