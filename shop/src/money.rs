//! Amounts of money: an order's sums of payments and of refunds, kept
//! within the contract's integers.
//!
//! A sum stops at [`MAX_CENTS`], 2^63-1 cents: the largest integer of the
//! contract, so that every reader of `paidCents` and `refundCents` reads
//! it as a 64-bit integer, and a refund of all that was paid is an event
//! the event store accepts (`amountCents` is at most 2^63-1 too). An event
//! that would take a sum past it is never applied: its handler leaves the
//! state as it was, logs why (naming the order, the event, the field and
//! both amounts) and answers [`Decision::Invalid`], so that the runner fails
//! the message as invalid (nothing written, and retrying will not help). It
//! goes to the dead-letter queue as an invalid message does, and its stream
//! waits behind it. `append` cannot refuse it beforehand: each amount is
//! valid, only the order's sum is not, and `append` does not add up a
//! stream.

use sequence_guard::{Decision, Sequenced};

/// The largest sum of an order's payments, or of its refunds: 2^63-1
/// cents, the largest integer of the contract.
pub const MAX_CENTS: u64 = i64::MAX as u64;

/// `sum + amount`, if it is at most [`MAX_CENTS`].
pub fn add(sum: u64, amount: u64) -> Option<u64> {
    sum.checked_add(amount).filter(|total| *total <= MAX_CENTS)
}

/// The answer to an event whose amount would take the sum `field` of its
/// order past [`MAX_CENTS`]: logged, and answered [`Decision::Invalid`],
/// which the runner fails as an invalid message, nothing written. The log
/// line names the order, the event and the amounts (no personal data:
/// amounts and ids).
pub fn past_the_largest_sum<D>(
    event: &Sequenced<D>,
    event_type: &str,
    field: &str,
    sum: u64,
    amount: u64,
) -> Decision {
    tracing::error!(
        order = %event.aggregate_id,
        event_id = %event.event_id,
        sequence = event.sequence,
        event_type,
        field,
        sum,
        amount_cents = amount,
        max_cents = MAX_CENTS,
        "{event_type} not applied: its amountCents {amount} would take the order's {field} of {sum} past 2^63-1 cents; retrying will not help (the message goes to the dead-letter queue, and the order's later events wait behind it)"
    );
    Decision::Invalid
}
