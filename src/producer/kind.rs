//! A stream is one kind's: the kind of items its events project onto (an
//! entity kind, or a counter), recorded on each event item as `kind`, and
//! an append refused when the stream holds events of another kind.
//!
//! A stream's kind is checked against its last event, as an append finds it
//! anyway: read (the stream's last event), checked in the transaction (the
//! expected event's `kind`), or found in the slot a lost race was for. An
//! event item of an earlier release has no `kind`: its body says it when it
//! is read; a `ConditionCheck` accepts it.

use super::AppendError;
use super::items::text;
use crate::domain::Domain;
use crate::entity::Item;
use crate::envelope::Event;

/// The event item's attribute that names its kind.
pub(super) const KIND: &str = "kind";

/// The kind an event projects onto, as an event item records it: an entity
/// kind's name (`ORDER`), or a counter's `<kind>#<sort key>` (`SKU#STOCK`;
/// an entity kind holds no `#`); `None` for a type the domain ignores.
pub(super) fn kind_of(event: &Event) -> Option<String> {
    if let Some(kind) = event.kind() {
        return Some(kind.name.to_owned());
    }
    event
        .deduplicated()
        .map(|effect| format!("{}#{}", effect.counter.kind, effect.counter.sort_key))
}

/// The kind an event item records, or (an earlier release's, without one)
/// its body says; `None` when neither does.
pub(super) fn recorded(domain: &Domain, item: &Item) -> Option<String> {
    if let Some(kind) = text(item, KIND) {
        return Some(kind.to_owned());
    }
    let event = domain.parse(text(item, "body")?).ok()?;
    kind_of(&event)
}

/// A kind as an error names it.
fn described(kind: &str) -> String {
    match kind.split_once('#') {
        Some(_) => format!("the counter {kind}"),
        None => format!("the entity kind {kind}"),
    }
}

/// The append's events (`event_type` the first of them) project onto
/// `appending`; the stream holds events of `found`. `Ok` when either is
/// unknown or they are one.
pub(super) fn same_kind(
    stream_id: &str,
    event_type: &str,
    appending: Option<&str>,
    found: Option<&str>,
) -> Result<(), AppendError> {
    match (appending, found) {
        (Some(appending), Some(found)) if appending != found => Err(AppendError::OtherKind {
            stream: stream_id.to_owned(),
            found: described(found),
            event_type: event_type.to_owned(),
            appending: described(appending),
        }),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_differ_only_when_both_are_known() {
        assert!(same_kind("s", "T", Some("ORDER"), Some("ORDER")).is_ok());
        assert!(same_kind("s", "T", None, Some("ORDER")).is_ok());
        assert!(same_kind("s", "T", Some("ORDER"), None).is_ok());
        let err = same_kind(
            "SKU-1",
            "InventoryAdjusted",
            Some("SKU#STOCK"),
            Some("PRODUCT"),
        )
        .expect_err("two kinds");
        assert_eq!(
            err.to_string(),
            "the stream `SKU-1` holds events of the entity kind PRODUCT, and InventoryAdjusted projects onto the counter SKU#STOCK: a stream is one kind's"
        );
    }
}
