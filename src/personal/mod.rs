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
//! | `fields.rs` | the fields a type declares, as serde knows them, for [`crate::Domain::check`] |
//! | `key_item.rs` | a subject's key item as DynamoDB holds it, read back |
//! | `erased.rs` | [`erased_subjects`]: the subjects an event store records as erased, for re-applying their erasures |

mod cipher;
mod dynamodb;
mod erased;
pub(crate) mod fields;
mod key_item;
mod keys;
mod local;

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

pub use cipher::{CipherError, DataKey, KEY_LEN};
pub use dynamodb::DynamoKeys;
pub use erased::{ErasedSubject, erased_subjects};
pub(crate) use keys::Known;
pub use keys::{DEFAULT_TTL, KeyError, KeyItem, KeySource, Keyring, MAX_KEPT};
pub use local::LocalKeys;

/// The event type `erase` appends to each of a subject's streams: every
/// consumer of those streams registers it ([`crate::Handling::erasure`]).
pub const ERASURE_TYPE: &str = "PersonalDataErased";

pub use crate::entity::PLACEHOLDER;

/// How a value sealed now starts: `sg:pd2:` and the base64 (URL alphabet,
/// no padding) of a nonce, the ciphertext and its tag. Sealed for its event,
/// its field, its stream and its subject ([`Binding`]).
pub const SEALED_PREFIX: &str = "sg:pd2:";

/// How a value sealed by an earlier release starts: sealed for its event
/// and its field only. Still opened; never written.
pub const SEALED_PREFIX_V1: &str = "sg:pd1:";

/// What every sealed format starts with: a personal value given to `append`
/// that starts so is refused (it would be stored as sealed, unsealed by it).
pub const SEALED_FAMILY: &str = "sg:pd";

/// Whether a stored value is sealed, in either format (a producer that
/// does not encrypt sends plain values, read as they are).
pub fn is_sealed(value: &str) -> bool {
    value.starts_with(SEALED_PREFIX) || value.starts_with(SEALED_PREFIX_V1)
}

/// Whether a value looks sealed: it starts as every sealed format does
/// ([`SEALED_FAMILY`]), whether or not it is one.
pub fn looks_sealed(value: &str) -> bool {
    value.starts_with(SEALED_FAMILY)
}

/// The `data` of a [`ERASURE_TYPE`] event: whose data was forgotten, and
/// a type of the stream it is appended to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Erasure {
    /// The subject.
    #[serde(deserialize_with = "crate::limits::text::<_, 1, 256>")]
    pub subject: String,
    /// The type of the stream's first event: each consumer erases the
    /// entity its handling of that type names ([`crate::Handling::erasure`]).
    /// `None` in an erasure appended by an earlier release.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::limits::optional_text::<_, 1, 256>"
    )]
    pub stream_type: Option<String>,
}

impl Erasure {
    /// The erasure of `subject` on a stream whose first event is of
    /// `stream_type`.
    pub fn new(subject: impl Into<String>, stream_type: impl Into<String>) -> Self {
        Erasure {
            subject: subject.into(),
            stream_type: Some(stream_type.into()),
        }
    }
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

    /// The types declared personal.
    pub(crate) fn types(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.by_type.keys().copied()
    }
}

/// Where a value is sealed for: it opens only where all four are the same,
/// so that no value can be moved to another event, field, stream or subject.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Binding<'a> {
    /// The event's `eventId`.
    pub(crate) event_id: &'a str,
    /// The field of `data`, as serde names it.
    pub(crate) field: &'a str,
    /// The body's `aggregateId` (the stream of a sequenced event); empty
    /// for a type whose body carries none (its `eventId` binds it).
    pub(crate) stream: &'a str,
    /// Whose value it is.
    pub(crate) subject: &'a str,
}

impl Binding<'_> {
    /// The associated data of a value sealed now ([`SEALED_PREFIX`]): a
    /// format tag, then each part with its length, so that no two bindings
    /// read alike.
    pub(crate) fn associated_data(&self) -> Vec<u8> {
        let parts = [self.event_id, self.field, self.stream, self.subject];
        let mut aad =
            Vec::with_capacity(8 + parts.iter().map(|part| part.len() + 4).sum::<usize>());
        aad.extend_from_slice(b"sg:pd2\0");
        for part in parts {
            let len = u32::try_from(part.len()).unwrap_or(u32::MAX);
            aad.extend_from_slice(&len.to_be_bytes());
            aad.extend_from_slice(part.as_bytes());
        }
        aad
    }

    /// The associated data `sealed` was sealed with, by its format: an
    /// earlier release's ([`SEALED_PREFIX_V1`]) bound the event's id and
    /// the field's name only.
    pub(crate) fn associated_data_of(&self, sealed: &str) -> Vec<u8> {
        if !sealed.starts_with(SEALED_PREFIX_V1) {
            return self.associated_data();
        }
        let mut aad = Vec::with_capacity(self.event_id.len() + self.field.len() + 1);
        aad.extend_from_slice(self.event_id.as_bytes());
        aad.push(0);
        aad.extend_from_slice(self.field.as_bytes());
        aad
    }
}
