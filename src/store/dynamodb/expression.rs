//! Update and condition expressions: attribute names and values by
//! placeholder, and the entity's conditional update of a commit.

use std::collections::HashMap;
use std::fmt::Write as _;

use aws_sdk_dynamodb::types::AttributeValue;

use super::Item;
use super::items::{DUE_AT, DUE_SHARD, PARKED, PARKED_SINCE, due_shard_key, entity_attributes};
use crate::store::{Commit, StoreError};

/// An update and condition expression under construction, with the names
/// and values they use.
#[derive(Debug, Default)]
pub(super) struct Expression {
    pub(super) sets: Vec<String>,
    pub(super) removes: Vec<String>,
    pub(super) conditions: Vec<String>,
    pub(super) names: HashMap<String, String>,
    pub(super) values: Item,
}

impl Expression {
    /// The placeholder of an attribute name (one per name).
    pub(super) fn name(&mut self, attribute: &str) -> String {
        if let Some((alias, _)) = self.names.iter().find(|(_, name)| *name == attribute) {
            return alias.clone();
        }
        let alias = format!("#n{}", self.names.len());
        self.names.insert(alias.clone(), attribute.to_owned());
        alias
    }

    pub(super) fn value(&mut self, value: AttributeValue) -> String {
        let alias = format!(":v{}", self.values.len());
        self.values.insert(alias.clone(), value);
        alias
    }

    pub(super) fn set(&mut self, attribute: &str, value: AttributeValue) {
        let name = self.name(attribute);
        let value = self.value(value);
        self.sets.push(format!("{name} = {value}"));
    }

    /// `SET attribute = if_not_exists(attribute, value)`: keeps what is there.
    pub(super) fn set_if_absent(&mut self, attribute: &str, value: AttributeValue) {
        let name = self.name(attribute);
        let value = self.value(value);
        self.sets
            .push(format!("{name} = if_not_exists({name}, {value})"));
    }

    pub(super) fn remove(&mut self, attribute: &str) {
        let name = self.name(attribute);
        self.removes.push(name);
    }

    pub(super) fn update(&self) -> String {
        let mut update = String::new();
        if !self.sets.is_empty() {
            let _ = write!(update, "SET {}", self.sets.join(", "));
        }
        if !self.removes.is_empty() {
            if !update.is_empty() {
                update.push(' ');
            }
            let _ = write!(update, "REMOVE {}", self.removes.join(", "));
        }
        update
    }

    pub(super) fn condition(&self) -> Option<String> {
        (!self.conditions.is_empty()).then(|| self.conditions.join(" AND "))
    }

    pub(super) fn values(&self) -> Option<Item> {
        (!self.values.is_empty()).then(|| self.values.clone())
    }
}

/// The conditional update of an entity's item for a commit: the entity's
/// attributes (`REMOVE` for those the loaded entity had and it lacks), the parked set as
/// the commit leaves it, and the condition that the item is as expected.
pub(super) fn entity_update(commit: &Commit) -> Result<Expression, StoreError> {
    let mut expression = Expression::default();
    if let Some(entity) = &commit.entity {
        let mut attributes: Vec<(String, AttributeValue)> =
            entity_attributes(entity)?.into_iter().collect();
        attributes.sort_by(|a, b| a.0.cmp(&b.0));
        // What the entity had and has no more (an optional field emptied).
        if let Some(before) = &commit.expected.entity {
            let mut gone: Vec<String> = entity_attributes(before)?
                .into_keys()
                .filter(|name| !attributes.iter().any(|(present, _)| present == name))
                .collect();
            gone.sort();
            for name in gone {
                expression.remove(&name);
            }
        }
        for (name, value) in attributes {
            expression.set(&name, value);
        }
    }
    if !commit.park.is_empty() || !commit.drain.is_empty() {
        let parked = commit.parked_after();
        if parked.is_empty() {
            expression.remove(PARKED);
            expression.remove(PARKED_SINCE);
        } else {
            let numbers = parked.iter().map(u64::to_string).collect();
            expression.set(PARKED, AttributeValue::Ns(numbers));
            expression.set_if_absent(PARKED_SINCE, AttributeValue::N(commit.now.to_string()));
        }
    }
    match commit.deadline {
        Some(Some(at)) => {
            expression.set(DUE_AT, AttributeValue::N(at.to_string()));
            expression.set(
                DUE_SHARD,
                AttributeValue::S(due_shard_key(&commit.key.pk())),
            );
        }
        Some(None) => {
            expression.remove(DUE_AT);
            expression.remove(DUE_SHARD);
        }
        None => {}
    }
    // A deadline fired changes the state without moving its sequence.
    let due = expression.name(DUE_AT);
    let condition = match commit.expected.due_at {
        None => format!("attribute_not_exists({due})"),
        Some(at) => {
            let at = expression.value(AttributeValue::N(at.to_string()));
            format!("{due} = {at}")
        }
    };
    expression.conditions.push(condition);
    let sequence = expression.name("sequence");
    let condition = match commit.expected.sequence {
        None => format!("attribute_not_exists({sequence})"),
        Some(loaded) => {
            let loaded = expression.value(AttributeValue::N(loaded.to_string()));
            format!("{sequence} = {loaded}")
        }
    };
    expression.conditions.push(condition);
    // The very set as loaded: the commit writes the set it computed from it.
    let parked = expression.name(PARKED);
    let condition = if commit.expected.parked.is_empty() {
        format!("attribute_not_exists({parked})")
    } else {
        let numbers = commit.expected.parked.iter().map(u64::to_string).collect();
        let loaded = expression.value(AttributeValue::Ns(numbers));
        format!("{parked} = {loaded}")
    };
    expression.conditions.push(condition);
    Ok(expression)
}
