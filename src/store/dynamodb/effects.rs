//! A commit's effects on counters of other keys: one update per item in
//! the commit's transaction (the deltas on each of its counters summed:
//! a transaction touches an item once), each counter kept in the 64-bit
//! range, and what a cancellation on one of them means.

use aws_sdk_dynamodb::types::{
    AttributeValue, CancellationReason, ReturnValuesOnConditionCheckFailure, TransactWriteItem,
    Update,
};

use super::DynamoStore;
use super::expression::Expression;
use super::items::counter_key;
use crate::handling::{Counter, Effect};
use crate::store::StoreError;
use crate::store::memory::effects::out_of_range;
use crate::table::build_error;

/// The effects on one item: each counter's summed delta, in the order
/// first given.
pub(super) struct OnItem<'a> {
    pub(super) id: &'a str,
    pub(super) sums: Vec<(&'static Counter, i128)>,
}

/// The effects merged by item (`<kind>#<id>`, `sort_key`), in the order
/// each item was first given.
pub(super) fn merged(effects: &[Effect]) -> Vec<OnItem<'_>> {
    let mut items: Vec<OnItem<'_>> = Vec::new();
    for effect in effects {
        let counter = effect.counter;
        let same_item = |item: &&mut OnItem<'_>| {
            item.id == effect.id
                && item.sums.first().is_some_and(|(first, _)| {
                    first.kind == counter.kind && first.sort_key == counter.sort_key
                })
        };
        let delta = i128::from(effect.delta);
        match items.iter_mut().find(same_item) {
            Some(item) => match item.sums.iter_mut().find(|(at, _)| *at == counter) {
                Some((_, sum)) => *sum += delta,
                None => item.sums.push((counter, delta)),
            },
            None => items.push(OnItem {
                id: &effect.id,
                sums: vec![(counter, delta)],
            }),
        }
    }
    items
}

impl DynamoStore {
    /// One update per item: `ADD` of each counter's sum, on the condition
    /// that each stays in the 64-bit range (an absent number counts as 0).
    pub(super) fn effect_items(
        &self,
        merged: &[OnItem<'_>],
    ) -> Result<Vec<TransactWriteItem>, StoreError> {
        merged.iter().map(|item| self.effect_update(item)).collect()
    }

    fn effect_update(&self, item: &OnItem<'_>) -> Result<TransactWriteItem, StoreError> {
        let Some((first, _)) = item.sums.first() else {
            return Err(build_error("TransactWriteItems", "an item with no effect"));
        };
        let mut expression = Expression::default();
        let mut adds = Vec::with_capacity(item.sums.len());
        for (counter, delta) in &item.sums {
            let name = expression.name(counter.attribute);
            let value = expression.value(AttributeValue::N(delta.to_string()));
            adds.push(format!("{name} {value}"));
            let (bound, limit) = if *delta >= 0 {
                ("<=", i128::from(i64::MAX) - delta)
            } else {
                (">=", i128::from(i64::MIN) - delta)
            };
            let limit = expression.value(AttributeValue::N(limit.to_string()));
            expression
                .conditions
                .push(if i64::try_from(*delta).is_ok() {
                    format!("(attribute_not_exists({name}) OR {name} {bound} {limit})")
                } else {
                    // Even from 0 the sum leaves the range.
                    format!("{name} {bound} {limit}")
                });
        }
        let update = Update::builder()
            .table_name(&self.table)
            .set_key(Some(counter_key(first, item.id)))
            .update_expression(format!("ADD {}", adds.join(", ")))
            .set_condition_expression(expression.condition())
            .set_expression_attribute_names(Some(expression.names.clone()))
            .set_expression_attribute_values(expression.values())
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .build()
            .map_err(|err| build_error("TransactWriteItems", err))?;
        Ok(TransactWriteItem::builder().update(update).build())
    }
}

/// The refusal when a cancellation names an effect's item (`reasons` after
/// the commit's own `written` items): a counter that would leave the range.
pub(super) fn refused_effect(
    merged: &[OnItem<'_>],
    written: usize,
    reasons: &[CancellationReason],
) -> Option<StoreError> {
    let failed = |reason: &CancellationReason| reason.code() == Some("ConditionalCheckFailed");
    let (item, _) = merged
        .iter()
        .zip(reasons.iter().skip(written))
        .find(|(_, reason)| failed(reason))?;
    let (counter, _) = item.sums.first()?;
    Some(out_of_range(counter, item.id))
}

#[cfg(test)]
mod tests {
    use super::merged;
    use crate::handling::{Counter, Effects};

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

    #[test]
    fn effects_on_one_item_are_one_update_with_each_counters_sum() {
        let mut effects = Effects::default();
        effects.add(&ON_LOAN, "ada", 1);
        effects.add(&LENT, "ada", 1);
        effects.add(&ON_LOAN, "bob", 1);
        effects.add(&ON_LOAN, "ada", -1);
        effects.add(&LENT, "ada", i64::MAX);
        let merged = merged(effects.effects());
        assert_eq!(merged.len(), 2);
        assert_eq!(merged[0].id, "ada");
        assert_eq!(
            merged[0].sums,
            vec![(&ON_LOAN, 0), (&LENT, 1 + i128::from(i64::MAX))]
        );
        assert_eq!(merged[1].id, "bob");
        assert_eq!(merged[1].sums, vec![(&ON_LOAN, 1)]);
    }
}
