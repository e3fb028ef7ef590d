//! Entities: what a domain's handlers project events onto.
//!
//! A user declares an entity as a serde struct and implements [`Entity`]
//! for it: its kind (the key prefix of its item) and where it keeps the
//! sequence and the id of the last event applied. The engine holds entities
//! of every kind as [`AnyEntity`], and the DynamoDB item is the struct as
//! serde_dynamo writes it, under `pk` = `<KIND>#<id>` and `sk` = `STATE`.

use std::any::Any;
use std::cmp::Ordering;
use std::collections::HashMap;
use std::fmt;
use std::hash::{Hash, Hasher};

use aws_sdk_dynamodb::types::AttributeValue;
use serde::Serialize;
use serde::de::DeserializeOwned;

/// A DynamoDB item: attribute names and values.
pub type Item = HashMap<String, AttributeValue>;

/// An entity of a user's domain: a serde struct that records the sequence
/// of the last event applied to it.
///
/// The item it is stored as is the struct as serde_dynamo writes it (use
/// `#[serde(rename_all = "camelCase")]` for the contract's attribute names,
/// and `skip_serializing_if = "Option::is_none"` for optional ones). The id
/// is the item's key, not a field. The sequence must be written as the
/// attribute `sequence` (the guard's conditional write reads it there: a
/// domain whose entity does not is refused when it is registered). The
/// attributes of [`ENGINE_ATTRIBUTES`] are the engine's: an entity with a
/// field of one of those names is refused when it is registered
/// ([`crate::Domain::check`]). `MESSAGE` and `PARKED` are not kinds (the
/// dedup records' and the parked index's keys).
///
/// ```
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
/// #[serde(rename_all = "camelCase")]
/// struct Account {
///     sequence: u64,
///     last_event_id: String,
///     balance_cents: i64,
/// }
///
/// impl sequence_guard::Entity for Account {
///     const KIND: &'static str = "ACCOUNT";
///     fn sequence(&self) -> u64 {
///         self.sequence
///     }
///     fn last_event_id(&self) -> &str {
///         &self.last_event_id
///     }
/// }
/// ```
pub trait Entity:
    Serialize + DeserializeOwned + Clone + PartialEq + fmt::Debug + Send + Sync + 'static
{
    /// The kind: the prefix of the item's `pk` (`ORDER` for `ORDER#<id>`).
    /// Upper-case letters, digits and `_`; no `#`.
    const KIND: &'static str;

    /// The sequence of the last event applied.
    fn sequence(&self) -> u64;

    /// The `eventId` of the last event applied (the one at [`Entity::sequence`]).
    fn last_event_id(&self) -> &str;

    /// Moves the entity to `sequence` with `event_id` as its last event,
    /// changing nothing else: what a pass ([`crate::Handling::pass`]) does.
    /// By default through serde: the attributes `sequence` and `lastEventId`
    /// set, the struct read back; implement it when your entity names them
    /// otherwise. `Err` says why it cannot.
    fn advance(&mut self, sequence: u64, event_id: &str) -> Result<(), String> {
        let mut value = serde_json::to_value(&*self).map_err(|err| err.to_string())?;
        let serde_json::Value::Object(fields) = &mut value else {
            return Err("it is not serialized as a map".to_owned());
        };
        fields.insert("sequence".to_owned(), sequence.into());
        fields.insert("lastEventId".to_owned(), event_id.into());
        *self = serde_json::from_value(value)
            .map_err(|err| crate::reason::without_value(&err.to_string()).naming("it"))?;
        Ok(())
    }

    /// The attributes that hold personal data (as serde names them):
    /// erasure ([`crate::Handling::erasure`]) replaces each with
    /// [`Entity::PLACEHOLDER`], keeping every other attribute.
    /// `#[entity(personal("customerName", "email"))]` declares them.
    const PERSONAL: &'static [&'static str] = &[];

    /// What an erased personal attribute holds: the domain's placeholder
    /// ([`crate::personal::Personal::placeholder`]), by default
    /// [`crate::personal::PLACEHOLDER`].
    const PLACEHOLDER: &'static str = PLACEHOLDER;

    /// Replaces each of [`Entity::PERSONAL`] with [`Entity::PLACEHOLDER`],
    /// through serde as [`Entity::advance`]. `Err` says why it cannot.
    fn erase_personal(&mut self) -> Result<(), String> {
        if Self::PERSONAL.is_empty() {
            return Ok(());
        }
        let mut value = serde_json::to_value(&*self).map_err(|err| err.to_string())?;
        let serde_json::Value::Object(fields) = &mut value else {
            return Err("it is not serialized as a map".to_owned());
        };
        for field in Self::PERSONAL {
            if fields.get(*field).is_some_and(|value| !value.is_null()) {
                fields.insert((*field).to_owned(), Self::PLACEHOLDER.into());
            }
        }
        *self = serde_json::from_value(value)
            .map_err(|err| crate::reason::without_value(&err.to_string()).naming("it"))?;
        Ok(())
    }

    /// One line for `replay` and `inspect`: the fields an operator looks at
    /// (by default, every attribute but `sequence` and `lastEventId`, each
    /// of [`Entity::PERSONAL`] by its name only: `customerName (personal)`,
    /// or, once its subject is erased, `customerName (erased)`, the
    /// placeholder, which is no one's). A summary of your own should show
    /// no personal value either: those lines go to terminals and tickets.
    fn summary(&self) -> String {
        match serde_json::to_value(self) {
            Ok(serde_json::Value::Object(fields)) => fields
                .iter()
                .filter(|(name, _)| *name != "sequence" && *name != "lastEventId")
                .map(|(name, value)| {
                    if Self::PERSONAL.contains(&name.as_str()) {
                        if value.as_str() == Some(Self::PLACEHOLDER) {
                            format!("{name} {}", Self::PLACEHOLDER)
                        } else {
                            format!("{name} (personal)")
                        }
                    } else {
                        format!("{name} {value}")
                    }
                })
                .collect::<Vec<_>>()
                .join(" "),
            Ok(other) => other.to_string(),
            Err(err) => format!("(cannot show: {err})"),
        }
    }
}

/// What a personal value reads as once its subject is erased, unless the
/// domain declares another ([`crate::personal::Personal::placeholder`],
/// [`Entity::PLACEHOLDER`]).
pub const PLACEHOLDER: &str = "(erased)";

/// The attributes of an entity's item that are the engine's, not the
/// entity's: its keys, the parked events it records, and the table's TTL
/// attribute (an entity that wrote `expiresAt` would have DynamoDB delete
/// its item, and the guard's `sequence` with it, when that time passes).
pub const ENGINE_ATTRIBUTES: [&str; 7] = [
    "pk",
    "sk",
    "parked",
    "parkedSince",
    "expiresAt",
    "dueAt",
    "dueShard",
];

/// A kind of entity: its name and how its item is read.
pub struct Kind {
    /// [`Entity::KIND`].
    pub name: &'static str,
    decode: fn(Item) -> Result<AnyEntity, String>,
    /// The attribute names serde's derive declares for the struct (its
    /// fields as renamed); `None` when it cannot tell (a flattened struct,
    /// a hand-written `Deserialize`).
    fields: fn() -> Option<&'static [&'static str]>,
    /// The struct's Rust name, for errors.
    type_name: fn() -> &'static str,
    /// [`Entity::PERSONAL`].
    personal: &'static [&'static str],
    /// [`Entity::PLACEHOLDER`].
    placeholder: &'static str,
}

impl Kind {
    /// The kind of `T`.
    pub fn of<T: Entity>() -> &'static Kind {
        KindOf::<T>::KIND
    }

    /// Reads an entity item of this kind; `Err` says which attribute is
    /// wrong and how, never its value (the reason is logged, and a stored
    /// value may be personal data).
    pub fn decode(&self, item: Item) -> Result<AnyEntity, String> {
        (self.decode)(item)
    }

    /// The entity struct's Rust name (`shop::order::Order`).
    pub fn type_name(&self) -> &'static str {
        (self.type_name)()
    }

    /// The attribute names serde declares for the struct, when it can tell.
    pub(crate) fn fields(&self) -> Option<&'static [&'static str]> {
        (self.fields)()
    }

    /// The attributes that hold personal data ([`Entity::PERSONAL`]).
    pub fn personal(&self) -> &'static [&'static str] {
        self.personal
    }

    /// What an erased personal attribute holds ([`Entity::PLACEHOLDER`]).
    pub fn placeholder(&self) -> &'static str {
        self.placeholder
    }

    /// How people name it (`order` for `ORDER`): in `replay` and `inspect`.
    pub fn label(&self) -> String {
        self.name.to_ascii_lowercase()
    }

    /// What is wrong with the kind's declaration, each with its fix: a
    /// field serialized as one of the [`ENGINE_ATTRIBUTES`], or no field
    /// serialized as `sequence`. Empty when nothing is, or when serde's
    /// derive does not list the fields (those are checked at each write).
    pub(crate) fn problems(&self) -> Vec<String> {
        let type_name = (self.type_name)();
        let Some(fields) = (self.fields)() else {
            return Vec::new();
        };
        let mut problems: Vec<String> = fields
            .iter()
            .filter(|field| ENGINE_ATTRIBUTES.contains(field))
            .map(|field| {
                format!(
                    "the entity {type_name} (kind {}) has a field serialized as `{field}`, an attribute of the engine's own{}: rename it (#[serde(rename = \"...\")])",
                    self.name,
                    if *field == "expiresAt" {
                        " (the table's TTL attribute: DynamoDB would delete the entity when that time passes)"
                    } else {
                        ""
                    }
                )
            })
            .collect();
        if !fields.contains(&"sequence") {
            problems.push(format!(
                "the entity {type_name} (kind {}) has no field serialized as `sequence`: the guard's conditional write reads the sequence there (name the field `sequence`, or #[serde(rename = \"sequence\")])",
                self.name
            ));
        }
        problems
    }
}

/// The field names serde's derive declares for `T`: a derived struct asks
/// its deserializer for a struct with these fields, and this one answers
/// with them as its error.
fn declared_fields<T: DeserializeOwned>() -> Option<&'static [&'static str]> {
    match T::deserialize(FieldNames) {
        Err(Fields(fields)) => fields,
        Ok(_) => None,
    }
}

pub(crate) struct FieldNames;

#[derive(Debug)]
pub(crate) struct Fields(pub(crate) Option<&'static [&'static str]>);

impl fmt::Display for Fields {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("not a struct")
    }
}

impl std::error::Error for Fields {}

impl serde::de::Error for Fields {
    fn custom<T: fmt::Display>(_: T) -> Self {
        Fields(None)
    }
}

impl<'de> serde::Deserializer<'de> for FieldNames {
    type Error = Fields;

    fn deserialize_any<V: serde::de::Visitor<'de>>(self, _: V) -> Result<V::Value, Fields> {
        Err(Fields(None))
    }

    fn deserialize_struct<V: serde::de::Visitor<'de>>(
        self,
        _: &'static str,
        fields: &'static [&'static str],
        _: V,
    ) -> Result<V::Value, Fields> {
        Err(Fields(Some(fields)))
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf option unit unit_struct newtype_struct seq tuple
        tuple_struct map enum identifier ignored_any
    }
}

struct KindOf<T>(std::marker::PhantomData<T>);

impl<T: Entity> KindOf<T> {
    const KIND: &'static Kind = &Kind {
        name: T::KIND,
        decode: decode::<T>,
        fields: declared_fields::<T>,
        type_name: std::any::type_name::<T>,
        personal: T::PERSONAL,
        placeholder: T::PLACEHOLDER,
    };
}

fn decode<T: Entity>(item: Item) -> Result<AnyEntity, String> {
    let item = serde_dynamo::Item::from(item);
    let input = serde_dynamo::Deserializer::from_attribute_value(serde_dynamo::AttributeValue::M(
        item.into(),
    ));
    match serde_path_to_error::deserialize::<_, T>(input) {
        Ok(entity) => Ok(AnyEntity::new(entity)),
        Err(err) => {
            let path = crate::reason::path_from("", err.path());
            let refusal = crate::reason::without_value(&err.into_inner().to_string());
            Err(if path.is_empty() {
                refusal.naming("the item")
            } else {
                refusal.naming(&format!("attribute `{path}`"))
            })
        }
    }
}

impl fmt::Debug for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name)
    }
}

impl PartialEq for Kind {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
    }
}

impl Eq for Kind {}

impl Hash for Kind {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.name.hash(state);
    }
}

impl PartialOrd for Kind {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Kind {
    fn cmp(&self, other: &Self) -> Ordering {
        self.name.cmp(other.name)
    }
}

/// Identifies one projected entity: its kind and its aggregate id.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EntityKey {
    kind: &'static Kind,
    id: String,
}

impl EntityKey {
    /// The key of the entity of `kind` with the aggregate id `id`.
    pub fn new(kind: &'static Kind, id: impl Into<String>) -> Self {
        EntityKey {
            kind,
            id: id.into(),
        }
    }

    /// The key of the `T` with this id.
    pub fn of<T: Entity>(id: impl Into<String>) -> Self {
        EntityKey::new(Kind::of::<T>(), id)
    }

    /// The entity's kind.
    pub fn kind(&self) -> &'static Kind {
        self.kind
    }

    /// The aggregate id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The item's partition key: `<KIND>#<id>`.
    pub fn pk(&self) -> String {
        format!("{}#{}", self.kind.name, self.id)
    }
}

impl fmt::Display for EntityKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.kind.label(), self.id)
    }
}

/// An entity of any kind, as the engine holds it.
pub struct AnyEntity(Box<dyn Held>);

trait Held: Send + Sync {
    fn sequence(&self) -> u64;
    fn last_event_id(&self) -> &str;
    fn kind(&self) -> &'static Kind;
    fn clone_box(&self) -> Box<dyn Held>;
    fn eq_dyn(&self, other: &dyn Held) -> bool;
    fn as_any(&self) -> &dyn Any;
    /// Moves the entity into `out` when it is an `Option<Self>`; itself
    /// back otherwise.
    fn move_into(self: Box<Self>, out: &mut dyn Any) -> Result<(), Box<dyn Held>>;
    fn to_item(&self) -> Result<Item, serde_dynamo::Error>;
    fn to_json(&self) -> serde_json::Value;
    fn summary(&self) -> String;
    fn debug(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result;
    fn erase_personal(&mut self) -> Result<(), String>;
    fn advance(&mut self, sequence: u64, event_id: &str) -> Result<(), String>;
}

impl<T: Entity> Held for T {
    fn sequence(&self) -> u64 {
        Entity::sequence(self)
    }
    fn last_event_id(&self) -> &str {
        Entity::last_event_id(self)
    }
    fn kind(&self) -> &'static Kind {
        Kind::of::<T>()
    }
    fn clone_box(&self) -> Box<dyn Held> {
        Box::new(self.clone())
    }
    fn eq_dyn(&self, other: &dyn Held) -> bool {
        other.as_any().downcast_ref::<T>() == Some(self)
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn move_into(self: Box<Self>, out: &mut dyn Any) -> Result<(), Box<dyn Held>> {
        match out.downcast_mut::<Option<T>>() {
            Some(out) => {
                *out = Some(*self);
                Ok(())
            }
            None => Err(self),
        }
    }
    fn to_item(&self) -> Result<Item, serde_dynamo::Error> {
        serde_dynamo::aws_sdk_dynamodb_1::to_item(self)
    }
    fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or(serde_json::Value::Null)
    }
    fn summary(&self) -> String {
        Entity::summary(self)
    }
    fn debug(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
    fn erase_personal(&mut self) -> Result<(), String> {
        Entity::erase_personal(self)
    }
    fn advance(&mut self, sequence: u64, event_id: &str) -> Result<(), String> {
        Entity::advance(self, sequence, event_id)
    }
}

impl AnyEntity {
    /// Holds `entity` as an entity of any kind.
    pub fn new<T: Entity>(entity: T) -> Self {
        AnyEntity(Box::new(entity))
    }

    /// The sequence of the last event applied.
    pub fn sequence(&self) -> u64 {
        self.0.sequence()
    }

    /// The id of the last event applied (the one at [`AnyEntity::sequence`]).
    pub fn last_event_id(&self) -> &str {
        self.0.last_event_id()
    }

    /// The entity's kind.
    pub fn kind(&self) -> &'static Kind {
        self.0.kind()
    }

    /// The entity, if it is a `T`.
    pub fn get<T: Entity>(&self) -> Option<&T> {
        self.0.as_any().downcast_ref()
    }

    /// The slot's entity as a `T`, moved out (`None` when the slot is
    /// empty); `Err` when it holds another kind, left in the slot.
    pub(crate) fn take<T: Entity>(
        slot: &mut Option<AnyEntity>,
    ) -> Result<Option<T>, &'static Kind> {
        let Some(entity) = slot.take() else {
            return Ok(None);
        };
        let mut out: Option<T> = None;
        match entity.0.move_into(&mut out) {
            Ok(()) => Ok(out),
            Err(back) => {
                let kind = back.kind();
                *slot = Some(AnyEntity(back));
                Err(kind)
            }
        }
    }

    /// The item's attributes, keys aside.
    pub fn to_item(&self) -> Result<Item, serde_dynamo::Error> {
        self.0.to_item()
    }

    /// The entity as JSON (for `inspect --json` and tests).
    pub fn to_json(&self) -> serde_json::Value {
        self.0.to_json()
    }

    /// [`Entity::summary`].
    pub fn summary(&self) -> String {
        self.0.summary()
    }

    /// [`Entity::erase_personal`].
    pub(crate) fn erase_personal(&mut self) -> Result<(), String> {
        self.0.erase_personal()
    }

    /// [`Entity::advance`].
    pub(crate) fn advance(&mut self, sequence: u64, event_id: &str) -> Result<(), String> {
        self.0.advance(sequence, event_id)
    }
}

impl Clone for AnyEntity {
    fn clone(&self) -> Self {
        AnyEntity(self.0.clone_box())
    }
}

impl PartialEq for AnyEntity {
    fn eq(&self, other: &Self) -> bool {
        self.0.eq_dyn(other.0.as_ref())
    }
}

impl Eq for AnyEntity {}

impl fmt::Debug for AnyEntity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.debug(f)
    }
}
