//! The shop's process: each order's payment. It cancels an order that is
//! not paid within the window, and requests a refund of what was paid for
//! an order that ends cancelled. It subscribes to the topic like any
//! consumer (`payments-process`, its own queue and table) and appends to
//! the order's stream: its state and what it appends are one transaction.
//!
//! | on | when | state becomes | appends to the order's stream |
//! | --- | --- | --- | --- |
//! | `OrderCreated` | a total above 0 | `AWAITING_PAYMENT`, deadline now + window | |
//! | `OrderCreated` | a total of 0 | `PAID`, no deadline (nothing to pay is paid) | |
//! | `OrderUpdated` | awaiting, what was paid covers the new total | `PAID`, no deadline | |
//! | `OrderUpdated` | otherwise | `totalCents` follows | |
//! | `PaymentReceived` | awaiting, paid in full | `PAID`, no deadline | |
//! | `PaymentReceived` | `paidCents` would pass 2^63-1 | unchanged: never applied ([`crate::money`]) | |
//! | `PaymentReceived` | cancelled | `CANCELLED` | `RefundRequested` (the amount) |
//! | `OrderCancelled` | awaiting | `CANCELLED`, no deadline | `RefundRequested` (`paidCents`) if part was paid |
//! | `OrderCancelled` | paid | `CANCELLED` | `RefundRequested` (`paidCents`) |
//! | the deadline | still awaiting, not paid in full | `CANCELLING` | `OrderCancelled` ("payment not received"), at the sequence seen |
//! | the deadline | awaiting, what was paid covers the total (an earlier release's state) | `PAID` | |
//! | `RefundRequested` | | unchanged | |
//! | `PersonalDataErased` | | unchanged (a pass: it holds nothing personal) | |
//!
//! A cancel it asked for arrives as any `OrderCancelled` does, and ends it
//! `CANCELLED`. If the order's stream moved before its cancel could be
//! appended (a payment, say), nothing is written, and the event that moved
//! it decides: a payment in full ends it `PAID`; anything else leaves it
//! awaiting, and the next sweep fires the deadline again.
//!
//! Its item: `PAYMENT#<aggregateId>` / `STATE`, with `sequence`,
//! `lastEventId`, `state`, `totalCents`, `paidCents`, and `dueAt` while it
//! awaits payment (the engine's). Nothing personal: of an order's
//! `OrderCreated` and `OrderUpdated` it reads the total only ([`OrderTotal`]),
//! so it declares no personal data, never opens a sealed value and never
//! reads a key; a subject's erasure only moves its sequence.
//!
//! `PAYMENT_WINDOW_SECONDS` (default 900, 1 to 604800) sets the window.

use sequence_guard::process::{Due, DueOutbox, Outbox, Process};
use sequence_guard::{Decision, Domain, Entity, Events, Handling, Sequenced};
use serde::de::IgnoredAny;
use serde::{Deserialize, Serialize};

use sequence_guard::limits::non_negative;

use crate::events::{OrderCancellation, PaymentDetails, RefundRequest};
use crate::money;

/// The window's default, in seconds: 15 minutes.
pub const DEFAULT_WINDOW_SECONDS: u64 = 900;

/// The window's range, in seconds: a second to a week.
pub const WINDOW_RANGE: std::ops::RangeInclusive<u64> = 1..=604_800;

/// The reason of the cancels and refunds it appends.
pub const NOT_PAID: &str = "payment not received";
/// The reason of the refunds it requests for a cancelled order.
pub const CANCELLED: &str = "order cancelled";

/// `PAYMENT_WINDOW_SECONDS`, checked: the binaries refuse to start with
/// the error.
pub fn window() -> Result<u64, String> {
    window_of(std::env::var("PAYMENT_WINDOW_SECONDS").ok().as_deref())
}

/// The window from the variable's value (`None`: unset).
pub fn window_of(value: Option<&str>) -> Result<u64, String> {
    let Some(value) = value.map(str::trim).filter(|value| !value.is_empty()) else {
        return Ok(DEFAULT_WINDOW_SECONDS);
    };
    value
        .parse::<u64>()
        .ok()
        .filter(|seconds| WINDOW_RANGE.contains(seconds))
        .ok_or_else(|| {
            format!(
                "PAYMENT_WINDOW_SECONDS must be a whole number of seconds from {} to {}, got `{value}`",
                WINDOW_RANGE.start(),
                WINDOW_RANGE.end()
            )
        })
}

/// Where an order's payment stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum PaymentState {
    AwaitingPayment,
    Paid,
    /// The process appended the order's cancel; it has not arrived yet.
    Cancelling,
    Cancelled,
}

impl PaymentState {
    /// As the table stores it.
    pub fn as_str(self) -> &'static str {
        match self {
            PaymentState::AwaitingPayment => "AWAITING_PAYMENT",
            PaymentState::Paid => "PAID",
            PaymentState::Cancelling => "CANCELLING",
            PaymentState::Cancelled => "CANCELLED",
        }
    }
}

/// The process's state for one order: `PAYMENT#<aggregateId>` / `STATE`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Entity)]
#[serde(rename_all = "camelCase")]
#[entity(kind = "PAYMENT", summary = "summary_line")]
pub struct Payment {
    pub sequence: u64,
    pub last_event_id: String,
    pub state: PaymentState,
    pub total_cents: u64,
    pub paid_cents: u64,
}

impl Payment {
    fn summary_line(&self) -> String {
        format!(
            "state {:<16} totalCents {:<6} paidCents {}",
            self.state.as_str(),
            self.total_cents,
            self.paid_cents
        )
    }

    fn applied<D>(&mut self, event: &Sequenced<D>) {
        self.sequence = event.sequence;
        self.last_event_id.clone_from(&event.event_id);
    }
}

/// `OrderCreated` and `OrderUpdated` data as the process reads it: the
/// total, and none of the customer's personal fields (sealed in the store,
/// and not its to open).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OrderTotal {
    #[serde(deserialize_with = "non_negative")]
    pub total_cents: u64,
}

/// The types the process receives; those of other streams are ignored.
#[derive(Debug, Deserialize)]
#[serde(tag = "type", content = "data")]
pub enum PaymentEvent {
    OrderCreated(OrderTotal),
    OrderUpdated(OrderTotal),
    OrderCancelled(IgnoredAny),
    PaymentReceived(PaymentDetails),
    RefundRequested(IgnoredAny),
    ProductCreated(IgnoredAny),
    ProductPriceChanged(IgnoredAny),
    InventoryAdjusted(IgnoredAny),
    PersonalDataErased(IgnoredAny),
}

impl Events for PaymentEvent {
    fn handling(self) -> Handling {
        match self {
            PaymentEvent::OrderCreated(data) => Handling::process(data, on_order_created),
            PaymentEvent::OrderUpdated(data) => Handling::process(data, on_order_updated),
            PaymentEvent::OrderCancelled(data) => Handling::process(data, on_order_cancelled),
            PaymentEvent::PaymentReceived(data) => Handling::process(data, on_payment_received),
            PaymentEvent::RefundRequested(data) => Handling::process(data, on_refund_requested),
            PaymentEvent::PersonalDataErased(_) => Handling::pass::<Payment>(),
            PaymentEvent::ProductCreated(_)
            | PaymentEvent::ProductPriceChanged(_)
            | PaymentEvent::InventoryAdjusted(_) => Handling::ignore(),
        }
    }
}

/// The process, registered: its state, and its deadline; it appends to the
/// shop's event store.
pub fn domain() -> Domain {
    Domain::new::<PaymentEvent>()
        .entity::<Payment>()
        .with_process(Process::new("payments", crate::domain()).on_deadline(on_deadline))
        .with_crate_version(env!("CARGO_PKG_VERSION"))
}

/// The guard of an update: `Some` when the event is the state's next.
fn next<'a, D>(
    state: &'a mut Option<Payment>,
    event: &Sequenced<D>,
) -> Result<&'a mut Payment, Decision> {
    let Some(state) = state else {
        return Err(Decision::NotCreated);
    };
    if state.sequence != event.sequence - 1 {
        return Err(if state.sequence >= event.sequence {
            Decision::Duplicate
        } else {
            Decision::Gap
        });
    }
    Ok(state)
}

/// Asks for what was paid back, if anything was.
fn refund(outbox: &mut Outbox, order: &str, amount_cents: u64) {
    if amount_cents > 0 {
        let refund = RefundRequest {
            amount_cents,
            reason: CANCELLED.to_owned(),
        };
        outbox.append(order, "RefundRequested", &refund);
    }
}

/// Ends it paid if it awaits payment and what was paid covers the total
/// (nothing to pay is paid): `true` when it did. The caller clears the
/// deadline (a deadline that fires is cleared by the engine).
fn paid_in_full(state: &mut Payment) -> bool {
    let covered =
        state.state == PaymentState::AwaitingPayment && state.paid_cents >= state.total_cents;
    if covered {
        state.state = PaymentState::Paid;
    }
    covered
}

/// `OrderCreated`: awaiting payment, until the deadline; paid at once when
/// there is nothing to pay (a total of 0).
pub fn on_order_created(
    state: &mut Option<Payment>,
    event: &Sequenced<OrderTotal>,
    outbox: &mut Outbox,
) -> Decision {
    if state.is_some() {
        return Decision::Duplicate;
    }
    let created = state.insert(Payment {
        sequence: event.sequence,
        last_event_id: event.event_id.clone(),
        state: PaymentState::AwaitingPayment,
        total_cents: event.data.total_cents,
        paid_cents: 0,
    });
    if !paid_in_full(created) {
        let window = window().unwrap_or(DEFAULT_WINDOW_SECONDS);
        outbox.set_deadline(outbox.now().saturating_add(window));
    }
    Decision::Applied
}

/// `OrderUpdated`: the total follows; a total lowered to what was paid, or
/// below, ends it paid.
pub fn on_order_updated(
    state: &mut Option<Payment>,
    event: &Sequenced<OrderTotal>,
    outbox: &mut Outbox,
) -> Decision {
    let state = match next(state, event) {
        Ok(state) => state,
        Err(decision) => return decision,
    };
    state.total_cents = event.data.total_cents;
    if paid_in_full(state) {
        outbox.clear_deadline();
    }
    state.applied(event);
    Decision::Applied
}

/// `PaymentReceived`: paid in full while awaiting ends it paid; paid after
/// a cancel is refunded.
pub fn on_payment_received(
    state: &mut Option<Payment>,
    event: &Sequenced<PaymentDetails>,
    outbox: &mut Outbox,
) -> Decision {
    let state = match next(state, event) {
        Ok(state) => state,
        Err(decision) => return decision,
    };
    let amount = event.data.amount_cents;
    let Some(paid_cents) = money::add(state.paid_cents, amount) else {
        return money::past_the_largest_sum(
            event,
            "PaymentReceived",
            "paidCents",
            state.paid_cents,
            amount,
        );
    };
    state.paid_cents = paid_cents;
    match state.state {
        PaymentState::AwaitingPayment => {
            if paid_in_full(state) {
                outbox.clear_deadline();
            }
        }
        PaymentState::Paid => {}
        PaymentState::Cancelling | PaymentState::Cancelled => {
            refund(outbox, &event.aggregate_id, amount);
        }
    }
    state.applied(event);
    Decision::Applied
}

/// `OrderCancelled` (the customer's, or the one it asked for): cancelled,
/// and what was paid requested back.
pub fn on_order_cancelled(
    state: &mut Option<Payment>,
    event: &Sequenced<IgnoredAny>,
    outbox: &mut Outbox,
) -> Decision {
    let state = match next(state, event) {
        Ok(state) => state,
        Err(decision) => return decision,
    };
    if state.state != PaymentState::Cancelled {
        // A second cancel of a cancelled order refunds nothing more.
        refund(outbox, &event.aggregate_id, state.paid_cents);
        state.state = PaymentState::Cancelled;
        outbox.clear_deadline();
    }
    state.applied(event);
    Decision::Applied
}

/// `RefundRequested`: the state only follows the stream.
pub fn on_refund_requested(
    state: &mut Option<Payment>,
    event: &Sequenced<IgnoredAny>,
    _: &mut Outbox,
) -> Decision {
    let state = match next(state, event) {
        Ok(state) => state,
        Err(decision) => return decision,
    };
    state.applied(event);
    Decision::Applied
}

/// The deadline: an order still awaiting payment is cancelled, at the
/// sequence the process has seen (a deadline's append to its own stream
/// always is: if the stream moved, nothing happens, and the event that
/// moved it decides). One paid in full is never cancelled: a state that
/// awaits payment although what was paid covers its total (left so by an
/// earlier release, before an update that lowered the total ended it paid)
/// ends paid instead.
pub fn on_deadline(state: &mut Payment, _: &Due, outbox: &mut DueOutbox) {
    if state.state != PaymentState::AwaitingPayment || paid_in_full(state) {
        return;
    }
    let cancel = OrderCancellation {
        reason: NOT_PAID.to_owned(),
    };
    outbox.append("OrderCancelled", &cancel);
    state.state = PaymentState::Cancelling;
}

#[cfg(test)]
mod tests {
    use sequence_guard::testkit::given;

    use super::*;
    use crate::money::MAX_CENTS;

    const NOW: u64 = 1_800_000_000;

    fn payment(sequence: u64, state: PaymentState, paid_cents: u64) -> Payment {
        Payment {
            sequence,
            last_event_id: format!("e{sequence}"),
            state,
            total_cents: 1000,
            paid_cents,
        }
    }

    fn paid(amount_cents: u64) -> PaymentEvent {
        PaymentEvent::PaymentReceived(PaymentDetails { amount_cents })
    }

    #[test]
    fn an_order_created_awaits_payment_until_the_window_ends() {
        let then = given(None::<Payment>).within(&domain()).at(NOW).when(
            "e1",
            "o-1",
            1,
            PaymentEvent::OrderCreated(OrderTotal { total_cents: 1000 }),
        );
        assert_eq!(
            then.outbox().deadline(),
            Some(Some(NOW + DEFAULT_WINDOW_SECONDS))
        );
        then.appends(&[]).then(
            Decision::Applied,
            Some(payment(1, PaymentState::AwaitingPayment, 0)),
        );
    }

    #[test]
    fn paid_in_full_while_awaiting_ends_paid_and_clears_the_deadline() {
        let then = given(Some(payment(1, PaymentState::AwaitingPayment, 300)))
            .within(&domain())
            .at(NOW)
            .when("e2", "o-1", 2, paid(700));
        assert_eq!(then.outbox().deadline(), Some(None));
        then.appends(&[]).then(
            Decision::Applied,
            Some(payment(2, PaymentState::Paid, 1000)),
        );
    }

    #[test]
    fn a_payment_after_the_cancel_is_refunded() {
        given(Some(payment(2, PaymentState::Cancelled, 0)))
            .within(&domain())
            .when("e3", "o-1", 3, paid(500))
            .appends(&[("o-1", "RefundRequested")])
            .then(
                Decision::Applied,
                Some(payment(3, PaymentState::Cancelled, 500)),
            );
    }

    #[test]
    fn a_cancel_refunds_what_was_paid_and_a_duplicate_appends_nothing() {
        let cancelled = || PaymentEvent::OrderCancelled(IgnoredAny);
        given(Some(payment(2, PaymentState::Paid, 1000)))
            .within(&domain())
            .when("e3", "o-1", 3, cancelled())
            .appends(&[("o-1", "RefundRequested")])
            .then(
                Decision::Applied,
                Some(payment(3, PaymentState::Cancelled, 1000)),
            );
        given(Some(payment(1, PaymentState::AwaitingPayment, 0)))
            .within(&domain())
            .when("e2", "o-1", 2, cancelled())
            .appends(&[])
            .then(
                Decision::Applied,
                Some(payment(2, PaymentState::Cancelled, 0)),
            );
        given(Some(payment(3, PaymentState::Cancelled, 1000)))
            .within(&domain())
            .when("e3", "o-1", 3, cancelled())
            .appends(&[])
            .then(
                Decision::Duplicate,
                Some(payment(3, PaymentState::Cancelled, 1000)),
            );
    }

    #[test]
    fn the_deadline_cancels_only_an_order_still_awaiting_at_the_sequence_seen() {
        let fired = given(Some(payment(4, PaymentState::AwaitingPayment, 300)))
            .within(&domain())
            .at(NOW)
            .when_due("o-1", NOW)
            .appends(&[("o-1", "OrderCancelled")]);
        assert_eq!(
            fired.outbox().appends()[0].expected,
            sequence_guard::producer::ExpectedSequence::Exact(4)
        );
        fired.then(payment(4, PaymentState::Cancelling, 300));
        given(Some(payment(4, PaymentState::Paid, 1000)))
            .within(&domain())
            .at(NOW)
            .when_due("o-1", NOW)
            .appends(&[])
            .then(payment(4, PaymentState::Paid, 1000));
    }

    fn updated(total_cents: u64) -> PaymentEvent {
        PaymentEvent::OrderUpdated(OrderTotal { total_cents })
    }

    #[test]
    fn an_update_down_to_what_was_paid_ends_it_paid_and_clears_the_deadline() {
        for total_cents in [700, 500, 0] {
            let then = given(Some(payment(2, PaymentState::AwaitingPayment, 700)))
                .within(&domain())
                .at(NOW)
                .when("e3", "o-1", 3, updated(total_cents));
            assert_eq!(then.outbox().deadline(), Some(None), "total {total_cents}");
            let mut paid = payment(3, PaymentState::Paid, 700);
            paid.total_cents = total_cents;
            then.appends(&[]).then(Decision::Applied, Some(paid));
        }
    }

    #[test]
    fn an_update_above_what_was_paid_keeps_it_awaiting_and_its_deadline() {
        let then = given(Some(payment(2, PaymentState::AwaitingPayment, 700)))
            .within(&domain())
            .at(NOW)
            .when("e3", "o-1", 3, updated(701));
        assert_eq!(then.outbox().deadline(), None, "the deadline untouched");
        let mut awaiting = payment(3, PaymentState::AwaitingPayment, 700);
        awaiting.total_cents = 701;
        then.appends(&[]).then(Decision::Applied, Some(awaiting));
    }

    #[test]
    fn an_order_with_nothing_to_pay_is_paid_at_once_with_no_deadline() {
        let then = given(None::<Payment>).within(&domain()).at(NOW).when(
            "e1",
            "o-1",
            1,
            PaymentEvent::OrderCreated(OrderTotal { total_cents: 0 }),
        );
        assert_eq!(then.outbox().deadline(), None, "no deadline set");
        let mut paid = payment(1, PaymentState::Paid, 0);
        paid.total_cents = 0;
        then.appends(&[]).then(Decision::Applied, Some(paid));
    }

    #[test]
    fn the_deadline_of_a_state_already_paid_in_full_cancels_nothing() {
        // A state an earlier release left awaiting although what was paid
        // covers the total (an update lowered it): paid, not cancelled.
        given(Some(payment(3, PaymentState::AwaitingPayment, 1000)))
            .within(&domain())
            .at(NOW)
            .when_due("o-1", NOW)
            .appends(&[])
            .then(payment(3, PaymentState::Paid, 1000));
    }

    #[test]
    fn a_payment_past_the_largest_sum_is_refused_and_changes_nothing() {
        let near = payment(2, PaymentState::Paid, MAX_CENTS - 5);
        let then =
            given(Some(near.clone()))
                .within(&domain())
                .at(NOW)
                .when("e3", "o-1", 3, paid(6));
        assert!(then.outbox().is_empty(), "nothing appended");
        then.then(Decision::Invalid, Some(near.clone()));
        // Up to the largest sum, a payment is applied; a refund of all
        // that was paid is then an event the store accepts.
        given(Some(near.clone()))
            .within(&domain())
            .when("e3", "o-1", 3, paid(5))
            .appends(&[])
            .then(
                Decision::Applied,
                Some(payment(3, PaymentState::Paid, MAX_CENTS)),
            );
        let then = given(Some(payment(3, PaymentState::Paid, MAX_CENTS)))
            .within(&domain())
            .when("e4", "o-1", 4, PaymentEvent::OrderCancelled(IgnoredAny));
        let refund = &then.outbox().appends()[0];
        assert_eq!(refund.event.data["amountCents"], MAX_CENTS);
        assert_eq!(then.decision(), Ok(Decision::Applied));
    }

    #[test]
    fn the_window_is_checked() {
        assert_eq!(window_of(None), Ok(900));
        assert_eq!(window_of(Some(" 60 ")), Ok(60));
        for bad in ["0", "604801", "ten", "-1"] {
            let err = window_of(Some(bad)).expect_err(bad);
            assert!(err.contains("PAYMENT_WINDOW_SECONDS"), "{err}");
        }
    }
}
