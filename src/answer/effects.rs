//! Numbers on items of their own: a [`Counter`], the deduplicated
//! [`Addition`] of an unsequenced event, and the [`Effects`] a sequenced
//! handler adds to counters of other keys (written with its stream's
//! entity, once per event: [`crate::handling::Handling::sequenced_with_effects`]).

/// A number on an item of its own that deduplicated effects add to: the
/// item `pk` = `<kind>#<id>`, `sk` = `sort_key`, the number in `attribute`
/// (the worked example's stock: `SKU#<sku>`, `STOCK`, `onHand`). Counters
/// of the same `kind` and `sort_key` share the item, each in its own
/// `attribute` (a member's `onLoan` and `loans`); `inspect` and `verify`
/// read each.
#[derive(Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Counter {
    /// The prefix of the item's `pk` (`SKU`).
    pub kind: &'static str,
    /// The item's `sk` (`STOCK`).
    pub sort_key: &'static str,
    /// The attribute that holds the number (`onHand`).
    pub attribute: &'static str,
}

impl Counter {
    /// The item's partition key for this id.
    pub fn pk(&self, id: &str) -> String {
        format!("{}#{id}", self.kind)
    }

    /// The id of the item keyed `(pk, sk)` when it is this counter's item
    /// (the reverse of [`Counter::pk`]), else `None`.
    pub fn id_of<'a>(&self, pk: &'a str, sk: &str) -> Option<&'a str> {
        pk.strip_prefix(self.kind)
            .and_then(|rest| rest.strip_prefix('#'))
            .filter(|_| sk == self.sort_key)
    }

    /// How people name it (`stock` for the sort key `STOCK`).
    pub fn label(&self) -> String {
        self.sort_key.to_ascii_lowercase()
    }
}

/// A deduplicated effect: `delta` added to a counter, at most once per
/// event and handler, atomically with the deduplication record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Addition {
    /// The handler name the deduplication record is kept under
    /// (`HANDLER#<name>`).
    pub handler: &'static str,
    /// The counter `delta` is added to.
    pub counter: &'static Counter,
    /// The counter's id; also the event's stream (its ordering key).
    pub id: String,
    /// The amount added (negative to subtract).
    pub delta: i64,
}

/// The most items of other keys one event's effects touch (a transaction
/// holds 100 items: the stream's entity, what the step parks and drains,
/// and these).
pub const MAX_EFFECT_ITEMS: usize = 50;

/// The longest id an effect's counter takes, in bytes (a DynamoDB
/// partition key holds 2,048).
pub const MAX_EFFECT_ID: usize = 1024;

/// One effect on an item of another key: `delta` added to the counter
/// `id` (the item `<kind>#<id>`, `sort_key`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Effect {
    /// The counter added to (registered in the domain).
    pub counter: &'static Counter,
    /// The counter's id: the key of the item, other than the stream.
    pub id: String,
    /// The amount added (negative to subtract).
    pub delta: i64,
}

/// What a handler of [`crate::handling::Handling::sequenced_with_effects`] does to
/// items of other keys, besides moving its stream's entity. Written with
/// the entity's write, once per event; only an `Applied` answer may fill it.
///
/// ```
/// use sequence_guard::handling::{Counter, Effects};
///
/// static ON_LOAN: Counter = Counter { kind: "MEMBER", sort_key: "LOANS", attribute: "onLoan" };
///
/// let mut effects = Effects::default();
/// effects.add(&ON_LOAN, "ada", 1);
/// assert_eq!(effects.effects()[0].delta, 1);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Effects {
    effects: Vec<Effect>,
}

impl Effects {
    /// Adds `delta` to the counter `id` (negative to subtract), in the same
    /// write as the event's entity.
    pub fn add(&mut self, counter: &'static Counter, id: impl Into<String>, delta: i64) {
        self.effects.push(Effect {
            counter,
            id: id.into(),
            delta,
        });
    }

    /// The effects so far, in the order given.
    pub fn effects(&self) -> &[Effect] {
        &self.effects
    }

    /// The effects, taken.
    pub(crate) fn into_effects(self) -> Vec<Effect> {
        self.effects
    }

    /// Whether nothing was added.
    pub fn is_empty(&self) -> bool {
        self.effects.is_empty()
    }

    /// The items they touch: one per counter's item (`<kind>#<id>`,
    /// `sort_key`), however many attributes or additions.
    pub fn items(&self) -> usize {
        items(&self.effects)
    }

    /// What is wrong with them, if anything.
    pub(crate) fn problem(&self) -> Option<String> {
        if let Some(effect) = self.effects.iter().find(|effect| effect.id.is_empty()) {
            return Some(format!(
                "added to the counter {} with an empty id",
                effect.counter.label()
            ));
        }
        if let Some(effect) = self.effects.iter().find(|e| e.id.len() > MAX_EFFECT_ID) {
            return Some(format!(
                "added to the counter {} with an id of {} bytes: at most {MAX_EFFECT_ID}",
                effect.counter.label(),
                effect.id.len()
            ));
        }
        let items = self.items();
        (items > MAX_EFFECT_ITEMS).then(|| {
            format!(
                "added to {items} items of other keys for one event: at most {MAX_EFFECT_ITEMS} (one transaction)"
            )
        })
    }
}

/// The items `effects` touch: one per counter's item.
pub fn items(effects: &[Effect]) -> usize {
    let mut keys: Vec<(&str, &str, &str)> = effects
        .iter()
        .map(|effect| {
            (
                effect.counter.kind,
                effect.id.as_str(),
                effect.counter.sort_key,
            )
        })
        .collect();
    keys.sort_unstable();
    keys.dedup();
    keys.len()
}

#[cfg(test)]
mod tests {
    use super::Counter;
    use super::{Effects, MAX_EFFECT_ITEMS, items};

    static ON_LOAN: Counter = Counter {
        kind: "MEMBER",
        sort_key: "LOANS",
        attribute: "onLoan",
    };
    static LENT: Counter = Counter {
        kind: "MEMBER",
        sort_key: "LOANS",
        attribute: "lent",
    };
    static DAILY: Counter = Counter {
        kind: "DAY",
        sort_key: "LOANS",
        attribute: "lent",
    };

    #[test]
    fn counters_on_one_item_are_one_item() {
        let mut effects = Effects::default();
        effects.add(&ON_LOAN, "ada", 1);
        effects.add(&LENT, "ada", 1);
        effects.add(&ON_LOAN, "ada", -1);
        effects.add(&DAILY, "2026-12-03", 1);
        effects.add(&ON_LOAN, "bob", 1);
        assert_eq!(effects.items(), 3);
        assert_eq!(items(&[]), 0);
        assert_eq!(effects.problem(), None);
    }

    #[test]
    fn an_empty_id_or_too_many_items_is_a_problem() {
        let mut effects = Effects::default();
        effects.add(&ON_LOAN, "", 1);
        let problem = effects.problem().unwrap_or_default();
        assert!(problem.contains("empty id"), "{problem}");

        let mut effects = Effects::default();
        for member in 0..=MAX_EFFECT_ITEMS {
            effects.add(&ON_LOAN, member.to_string(), 1);
        }
        let problem = effects.problem().unwrap_or_default();
        assert!(problem.contains("51 items"), "{problem}");
    }
}
