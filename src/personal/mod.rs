//! Personal data: declared per event type and per entity, encrypted by
//! `append` with a data key of its subject, decrypted only by the consumers
//! that project it, and forgotten for ever by deleting the subject's key
//! (docs/personal-data.md).
//!
//! ```
//! use sequence_guard::personal::Personal;
//!
//! // In `impl Events for ShopEvent`: the personal fields of each type, and
//! // whose they are (the event's aggregate, unless a field of `data` is named).
//! fn personal() -> Personal {
//!     Personal::new()
//!         .fields("OrderCreated", &["customerName", "email"])
//!         .fields("OrderUpdated", &["customerName", "email"])
//! }
//! # let _ = personal();
//! ```
//!
//! | file | what it does |
//! | --- | --- |
//! | `mod.rs` | the declarations ([`Personal`], [`Erasure`]) and what a stored value looks like |
//! | `cipher.rs` | a subject's data key; one value sealed and opened (AES-256-GCM, aws-lc-rs) |
//! | `keys.rs` | the [`Keyring`]: the keys a process used, for a bounded time, over a [`KeySource`] |
//! | `local.rs` | [`LocalKeys`]: a key source in memory, for the embedded store and tests |
//! | `dynamodb.rs` | [`DynamoKeys`]: the key items in the event store's table, wrapped under a KMS key |
//! | `reading.rs` | a body's sealed values opened (or replaced by the placeholder) as it is read |
//! | `writing.rs` | an append's personal values sealed before it is written |
//! | `fields.rs` | the fields a type declares, as serde knows them, for [`crate::Domain::check`] |
//! | `erase.rs` | [`erase`]: a subject's key deleted, and every consumer told |

mod cipher;
mod dynamodb;
mod erase;
pub(crate) mod fields;
mod keys;
mod local;
pub(crate) mod reading;
pub(crate) mod writing;

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

pub use cipher::{CipherError, DataKey, KEY_LEN};
pub use dynamodb::DynamoKeys;
pub use erase::{EraseError, Erased, erase};
pub use keys::{DEFAULT_TTL, KeyError, KeySource, Keyring, MAX_KEPT, Stored};
pub use local::LocalKeys;
pub use writing::seal_data;

/// The event type `erase` appends to each of a subject's streams: every
/// consumer of those streams registers it ([`crate::Handling::erase`]).
pub const ERASURE_TYPE: &str = "PersonalDataErased";

/// What a personal value reads as once its subject is erased, unless the
/// domain declares another ([`Personal::placeholder`]).
pub const PLACEHOLDER: &str = "(erased)";

/// How a sealed value starts: `sg:pd1:` and the base64 (URL alphabet, no
/// padding) of a nonce, the ciphertext and its tag.
pub const SEALED_PREFIX: &str = "sg:pd1:";

/// Whether a stored value is sealed (a producer that does not encrypt
/// sends plain values, read as they are).
pub fn is_sealed(value: &str) -> bool {
    value.starts_with(SEALED_PREFIX)
}

/// The `data` of a [`ERASURE_TYPE`] event: whose data was forgotten.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Erasure {
    /// The subject.
    #[serde(deserialize_with = "crate::limits::text::<_, 1, 256>")]
    pub subject: String,
}

/// Whose a type's personal values are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Subject {
    /// The event's `aggregateId`: the stream's own.
    Aggregate,
    /// A string field of `data` (`customerId`).
    Field(&'static str),
}

/// One type's personal fields and their subject.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TypeFields {
    /// The event type.
    pub event_type: &'static str,
    /// The fields of `data` that are personal, as serde names them.
    pub fields: Vec<&'static str>,
    /// Whose they are.
    pub subject: Subject,
}

/// A domain's personal data ([`crate::Events::personal`]): which fields
/// of which event types are personal, whose they are, and what they read as
/// once forgotten.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Personal {
    placeholder: &'static str,
    types: Vec<TypeFields>,
}

impl Default for Personal {
    fn default() -> Self {
        Personal::new()
    }
}

impl Personal {
    /// No personal data: what a domain declares by default.
    pub fn new() -> Self {
        Personal {
            placeholder: PLACEHOLDER,
            types: Vec::new(),
        }
    }

    /// `fields` of `event_type`'s `data` are personal, and the subject's
    /// is the event's aggregate (its `aggregateId`).
    #[must_use]
    pub fn fields(mut self, event_type: &'static str, fields: &[&'static str]) -> Self {
        self.types.push(TypeFields {
            event_type,
            fields: fields.to_vec(),
            subject: Subject::Aggregate,
        });
        self
    }

    /// `fields` of `event_type`'s `data` are personal, and their subject
    /// is named by the string field `subject` of the same `data`.
    #[must_use]
    pub fn fields_of(
        mut self,
        event_type: &'static str,
        subject: &'static str,
        fields: &[&'static str],
    ) -> Self {
        self.types.push(TypeFields {
            event_type,
            fields: fields.to_vec(),
            subject: Subject::Field(subject),
        });
        self
    }

    /// What a forgotten value reads as (by default [`PLACEHOLDER`]); the
    /// entities' [`crate::Entity::PLACEHOLDER`] is the same.
    #[must_use]
    pub fn placeholder(mut self, placeholder: &'static str) -> Self {
        self.placeholder = placeholder;
        self
    }

    /// The placeholder.
    pub fn placeholder_text(&self) -> &'static str {
        self.placeholder
    }

    /// Each type's declaration, in the order given.
    pub fn types(&self) -> &[TypeFields] {
        &self.types
    }

    /// Whether anything is declared.
    pub fn is_empty(&self) -> bool {
        self.types.is_empty()
    }
}

/// The declaration resolved for reading and writing: by type.
#[derive(Debug, Clone, Default)]
pub(crate) struct Declared {
    pub(crate) placeholder: &'static str,
    by_type: HashMap<&'static str, TypeFields>,
}

impl Declared {
    pub(crate) fn new(personal: &Personal) -> Self {
        Declared {
            placeholder: personal.placeholder,
            by_type: personal
                .types
                .iter()
                .map(|fields| (fields.event_type, fields.clone()))
                .collect(),
        }
    }

    pub(crate) fn of(&self, event_type: &str) -> Option<&TypeFields> {
        self.by_type.get(event_type)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.by_type.is_empty()
    }
}

/// The associated data a value is sealed with: the event's id and the
/// field's name, so that no value can be moved to another event or field.
pub(crate) fn associated_data(event_id: &str, field: &str) -> Vec<u8> {
    let mut aad = Vec::with_capacity(event_id.len() + field.len() + 1);
    aad.extend_from_slice(event_id.as_bytes());
    aad.push(0);
    aad.extend_from_slice(field.as_bytes());
    aad
}
