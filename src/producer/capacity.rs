//! Capacity units: what DynamoDB bills. Every request of the event store
//! asks for `ReturnConsumedCapacity=TOTAL`; [`Consumed`] keeps both what the
//! service reported and what AWS's documented rules bill for the same
//! requests, the failed ones included (a failed condition is billed, and
//! reported nowhere).
//!
//! The rules (DynamoDB Developer Guide, "Read and write operations" and
//! "Capacity management for transactions"):
//!
//! - a write costs 1 write unit per KB (1,024 bytes, rounded up) of the item,
//!   the larger of the item before and after; a failed condition costs as
//!   much;
//! - a strongly consistent read costs 1 read unit per 4 KB, rounded up: a
//!   `GetItem` per item (1 when there is none), a `Query` per page, over the
//!   sum of the items read (at least 1);
//! - in `TransactWriteItems` every item costs twice (a prepare and a commit
//!   write), a `ConditionCheck` too (billed as a write of its item); a
//!   cancelled transaction is counted here at the same price (an upper
//!   bound: AWS does not document a cancelled transaction's price).
//!
//! An item's size is the sum of its attribute names' and values' lengths: a
//! string or binary its bytes, a number 1 byte per two significant digits
//! plus 1, a boolean or null 1, a list or map 3 plus 1 per element plus its
//! elements.

use std::sync::{Arc, Mutex};

use aws_sdk_dynamodb::types::{AttributeValue, ConsumedCapacity, TransactWriteItem};

use crate::entity::Item;

/// Capacity units, write and read.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Units {
    /// Write capacity units (on demand: write request units).
    pub write: f64,
    /// Read capacity units (on demand: read request units).
    pub read: f64,
}

impl Units {
    /// The difference since `earlier`.
    pub fn since(&self, earlier: &Units) -> Units {
        Units {
            write: self.write - earlier.write,
            read: self.read - earlier.read,
        }
    }
}

/// The capacity an event store's requests consumed so far.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Consumed {
    /// As DynamoDB reported it (`ConsumedCapacity`), for the requests that
    /// succeeded: a failed one reports nothing. DynamoDB Local reports
    /// single-item requests and queries as AWS bills them, but 2 units for
    /// any transaction, whatever its items.
    pub reported: Units,
    /// By AWS's documented rules (see the module), for every request sent,
    /// the failed ones included.
    pub by_rules: Units,
}

impl Consumed {
    /// The difference since `earlier`.
    pub fn since(&self, earlier: &Consumed) -> Consumed {
        Consumed {
            reported: self.reported.since(&earlier.reported),
            by_rules: self.by_rules.since(&earlier.by_rules),
        }
    }
}

/// The running sums, shared by an event store's clones.
#[derive(Debug, Clone, Default)]
pub(super) struct Meter(Arc<Mutex<Consumed>>);

impl Meter {
    pub(super) fn total(&self) -> Consumed {
        *self
            .0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn add(&self, change: impl FnOnce(&mut Consumed)) {
        change(
            &mut self
                .0
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner()),
        );
    }

    /// A write: what DynamoDB reported (if anything), and `units` by the rules.
    pub(super) fn write<'a>(
        &self,
        reported: impl IntoIterator<Item = &'a ConsumedCapacity>,
        units: f64,
    ) {
        let reported = sum(reported);
        self.add(|consumed| {
            consumed.reported.write += reported;
            consumed.by_rules.write += units;
        });
    }

    /// A read: what DynamoDB reported (if anything), and `units` by the rules.
    pub(super) fn read<'a>(
        &self,
        reported: impl IntoIterator<Item = &'a ConsumedCapacity>,
        units: f64,
    ) {
        let reported = sum(reported);
        self.add(|consumed| {
            consumed.reported.read += reported;
            consumed.by_rules.read += units;
        });
    }
}

fn sum<'a>(reported: impl IntoIterator<Item = &'a ConsumedCapacity>) -> f64 {
    reported
        .into_iter()
        .filter_map(ConsumedCapacity::capacity_units)
        .sum()
}

/// An item's size in bytes, by AWS's rules.
pub fn item_bytes(item: &Item) -> usize {
    item.iter()
        .map(|(name, value)| name.len() + value_bytes(value))
        .sum()
}

fn value_bytes(value: &AttributeValue) -> usize {
    match value {
        AttributeValue::S(text) => text.len(),
        AttributeValue::N(number) => number_bytes(number),
        AttributeValue::B(blob) => blob.as_ref().len(),
        AttributeValue::Ss(texts) => texts.iter().map(String::len).sum(),
        AttributeValue::Ns(numbers) => numbers.iter().map(|n| number_bytes(n)).sum(),
        AttributeValue::Bs(blobs) => blobs.iter().map(|blob| blob.as_ref().len()).sum(),
        AttributeValue::L(values) => 3 + values.iter().map(|v| 1 + value_bytes(v)).sum::<usize>(),
        AttributeValue::M(fields) => {
            3 + fields
                .iter()
                .map(|(name, v)| 1 + name.len() + value_bytes(v))
                .sum::<usize>()
        }
        _ => 1,
    }
}

fn number_bytes(number: &str) -> usize {
    let digits = number
        .chars()
        .filter(char::is_ascii_digit)
        .collect::<String>();
    let significant = digits.trim_start_matches('0').trim_end_matches('0').len();
    significant.div_ceil(2) + 1
}

/// The write units of an item of `bytes` (at least 1).
pub fn write_units(bytes: usize) -> f64 {
    bytes.div_ceil(1024).max(1) as f64
}

/// The read units of a strongly consistent read of `bytes` (at least 1).
pub fn read_units(bytes: usize) -> f64 {
    bytes.div_ceil(4096).max(1) as f64
}

/// The write units of a transaction, by the rules: twice each item's (a
/// `Put` by its item; an `Update`, a `Delete` or a `ConditionCheck`, whose
/// item is not known here, at the least: 1 KB).
pub fn transaction_units(items: &[TransactWriteItem]) -> f64 {
    items
        .iter()
        .map(|item| {
            let bytes = item.put().map_or(0, |put| item_bytes(put.item()));
            2.0 * write_units(bytes)
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_units_follow_the_documented_rules() {
        let item: Item = [
            ("pk".to_owned(), AttributeValue::S("STREAM#o-1".to_owned())),
            ("sequence".to_owned(), AttributeValue::N("1200".to_owned())),
        ]
        .into_iter()
        .collect();
        // "pk" 2 + 10; "sequence" 8 + (2 significant digits: 1) + 1.
        assert_eq!(item_bytes(&item), 12 + 10);
        assert_eq!(write_units(0), 1.0);
        assert_eq!(write_units(1024), 1.0);
        assert_eq!(write_units(1025), 2.0);
        assert_eq!(read_units(4096), 1.0);
        assert_eq!(read_units(4097), 2.0);
    }
}
