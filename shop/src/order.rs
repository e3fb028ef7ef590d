//! Orders: the entity, its behaviour methods, and the handlers with the guard.

use sequence_guard::{Decision, Entity, Sequenced};
use serde::{Deserialize, Serialize};

use crate::events::{OrderCancellation, OrderDetails, PaymentDetails, RefundRequest};
#[cfg(doc)]
use crate::money::MAX_CENTS;
use crate::money::{self, past_the_largest_sum};

/// As the table stores it: `OPEN` or `CANCELLED`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum OrderStatus {
    Open,
    Cancelled,
}

impl OrderStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            OrderStatus::Open => "OPEN",
            OrderStatus::Cancelled => "CANCELLED",
        }
    }
}

/// The order projection: the item `ORDER#<aggregateId>` / `STATE`. Its
/// `customerName` and `email` are personal: once the order's subject is
/// erased (`PersonalDataErased`) they hold `(erased)`, and every other
/// attribute is kept.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Entity)]
#[serde(rename_all = "camelCase")]
#[entity(
    kind = "ORDER",
    summary = "summary_line",
    personal("customerName", "email")
)]
pub struct Order {
    /// The sequence of the last event applied.
    pub sequence: u64,
    pub last_event_id: String,
    pub customer_name: String,
    pub email: String,
    pub total_cents: u64,
    pub status: OrderStatus,
    /// Once cancelled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cancel_reason: Option<String>,
    /// The sum of the `PaymentReceived` amounts, also those received after a
    /// cancellation, at most [`MAX_CENTS`]. Not written while 0, and 0 when
    /// absent: the items of an earlier release read, and stay, as they were.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub paid_cents: u64,
    /// The sum of the `RefundRequested` amounts; as `paid_cents`, at most
    /// [`MAX_CENTS`].
    #[serde(default, skip_serializing_if = "is_zero")]
    pub refund_cents: u64,
}

fn is_zero(cents: &u64) -> bool {
    *cents == 0
}

impl Order {
    /// The line `replay` and `inspect` show; the amounts once there are any.
    fn summary_line(&self) -> String {
        let line = format!(
            "totalCents {:<6} status {}",
            self.total_cents,
            self.status.as_str()
        );
        if self.paid_cents == 0 && self.refund_cents == 0 {
            return line;
        }
        format!(
            "{line:<34} paidCents {:<6} refundCents {}",
            self.paid_cents, self.refund_cents
        )
    }

    /// Creates the order at the creation event's sequence.
    pub fn create(event: &Sequenced<OrderDetails>) -> Self {
        Order {
            sequence: event.sequence,
            last_event_id: event.event_id.clone(),
            customer_name: event.data.customer_name.clone(),
            email: event.data.email.clone(),
            total_cents: event.data.total_cents,
            status: OrderStatus::Open,
            cancel_reason: None,
            paid_cents: 0,
            refund_cents: 0,
        }
    }

    /// Applies `OrderUpdated`; sets `sequence` to the event's.
    pub fn update(&mut self, event: &Sequenced<OrderDetails>) {
        self.customer_name.clone_from(&event.data.customer_name);
        self.email.clone_from(&event.data.email);
        self.total_cents = event.data.total_cents;
        self.last_event_id.clone_from(&event.event_id);
        self.sequence = event.sequence;
    }

    /// Applies `OrderCancelled`; sets `sequence` to the event's.
    pub fn cancel(&mut self, event: &Sequenced<OrderCancellation>) {
        self.status = OrderStatus::Cancelled;
        self.cancel_reason = Some(event.data.reason.clone());
        self.last_event_id.clone_from(&event.event_id);
        self.sequence = event.sequence;
    }

    /// Applies `PaymentReceived`, on an open or a cancelled order (a payment
    /// that arrives after the cancellation is recorded: the payments process
    /// asks for it back); sets `sequence` to the event's. `false`, and
    /// nothing changed, when `paidCents` would pass [`MAX_CENTS`].
    #[must_use = "a payment past the largest sum is not applied"]
    pub fn receive_payment(&mut self, event: &Sequenced<PaymentDetails>) -> bool {
        let Some(paid_cents) = money::add(self.paid_cents, event.data.amount_cents) else {
            return false;
        };
        self.paid_cents = paid_cents;
        self.last_event_id.clone_from(&event.event_id);
        self.sequence = event.sequence;
        true
    }

    /// Applies `RefundRequested`; sets `sequence` to the event's. `false`,
    /// and nothing changed, when `refundCents` would pass [`MAX_CENTS`].
    #[must_use = "a refund past the largest sum is not applied"]
    pub fn request_refund(&mut self, event: &Sequenced<RefundRequest>) -> bool {
        let Some(refund_cents) = money::add(self.refund_cents, event.data.amount_cents) else {
            return false;
        };
        self.refund_cents = refund_cents;
        self.last_event_id.clone_from(&event.event_id);
        self.sequence = event.sequence;
        true
    }
}

/// `OrderCreated`: a creation checks existence instead of the sequence.
pub fn on_order_created(order: &mut Option<Order>, event: &Sequenced<OrderDetails>) -> Decision {
    if order.is_some() {
        return Decision::Duplicate;
    }
    *order = Some(Order::create(event));
    Decision::Applied
}

/// `OrderUpdated`.
pub fn on_order_updated(order: &mut Option<Order>, event: &Sequenced<OrderDetails>) -> Decision {
    let Some(order) = order else {
        return Decision::NotCreated;
    };
    if order.sequence != event.sequence - 1 {
        return if order.sequence >= event.sequence {
            Decision::Duplicate
        } else {
            Decision::Gap
        };
    }
    order.update(event);
    Decision::Applied
}

/// `OrderCancelled`.
pub fn on_order_cancelled(
    order: &mut Option<Order>,
    event: &Sequenced<OrderCancellation>,
) -> Decision {
    let Some(order) = order else {
        return Decision::NotCreated;
    };
    if order.sequence != event.sequence - 1 {
        return if order.sequence >= event.sequence {
            Decision::Duplicate
        } else {
            Decision::Gap
        };
    }
    order.cancel(event);
    Decision::Applied
}

/// `PaymentReceived`: the guard, whatever the order's status; a payment
/// that would take `paidCents` past [`MAX_CENTS`] is refused (nothing
/// changed, the message failed: [`crate::money`]).
pub fn on_payment_received(
    order: &mut Option<Order>,
    event: &Sequenced<PaymentDetails>,
) -> Decision {
    let Some(order) = order else {
        return Decision::NotCreated;
    };
    if order.sequence != event.sequence - 1 {
        return if order.sequence >= event.sequence {
            Decision::Duplicate
        } else {
            Decision::Gap
        };
    }
    if !order.receive_payment(event) {
        let amount = event.data.amount_cents;
        return past_the_largest_sum(
            event,
            "PaymentReceived",
            "paidCents",
            order.paid_cents,
            amount,
        );
    }
    Decision::Applied
}

/// `RefundRequested`: the guard, whatever the order's status; refused as a
/// payment is, past [`MAX_CENTS`].
pub fn on_refund_requested(
    order: &mut Option<Order>,
    event: &Sequenced<RefundRequest>,
) -> Decision {
    let Some(order) = order else {
        return Decision::NotCreated;
    };
    if order.sequence != event.sequence - 1 {
        return if order.sequence >= event.sequence {
            Decision::Duplicate
        } else {
            Decision::Gap
        };
    }
    if !order.request_refund(event) {
        let amount = event.data.amount_cents;
        return past_the_largest_sum(
            event,
            "RefundRequested",
            "refundCents",
            order.refund_cents,
            amount,
        );
    }
    Decision::Applied
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::money::MAX_CENTS;

    fn details(event_id: &str, sequence: u64, total_cents: u64) -> Sequenced<OrderDetails> {
        Sequenced {
            event_id: event_id.into(),
            aggregate_id: "order-42".into(),
            sequence,
            data: OrderDetails {
                customer_name: "Ada Lovelace".into(),
                email: "ada@example.com".into(),
                total_cents,
            },
        }
    }

    fn order_at(sequence: u64) -> Order {
        let mut order = Order::create(&details("e1", 1, 100));
        order.sequence = sequence;
        order
    }

    #[test]
    fn creation_when_missing_creates_at_the_event_sequence() {
        let mut order = None;
        assert_eq!(
            on_order_created(&mut order, &details("e1", 1, 100)),
            Decision::Applied
        );
        let order = order.expect("created");
        assert_eq!(
            (order.sequence, order.total_cents, order.status),
            (1, 100, OrderStatus::Open)
        );
        assert_eq!(order.last_event_id, "e1");
    }

    #[test]
    fn creation_when_existing_is_not_applied_again() {
        let mut order = Some(order_at(3));
        assert_eq!(
            on_order_created(&mut order, &details("e9", 1, 999)),
            Decision::Duplicate
        );
        assert_eq!(order, Some(order_at(3)));
    }

    #[test]
    fn update_of_a_missing_order_is_not_created() {
        assert_eq!(
            on_order_updated(&mut None, &details("e2", 2, 1)),
            Decision::NotCreated
        );
    }

    #[test]
    fn update_next_in_line_is_applied_and_moves_the_sequence() {
        let mut order = Some(order_at(1));
        assert_eq!(
            on_order_updated(&mut order, &details("e2", 2, 1250)),
            Decision::Applied
        );
        let order = order.expect("kept");
        assert_eq!((order.sequence, order.total_cents), (2, 1250));
        assert_eq!(order.last_event_id, "e2");
    }

    #[test]
    fn update_at_or_behind_the_entity_is_a_duplicate_and_changes_nothing() {
        for sequence in [1, 2, 3] {
            let mut order = Some(order_at(3));
            let decision = on_order_updated(&mut order, &details("eX", sequence, 7));
            assert_eq!(decision, Decision::Duplicate, "sequence {sequence}");
            assert_eq!(order, Some(order_at(3)));
        }
    }

    #[test]
    fn update_past_the_next_is_a_gap_and_changes_nothing() {
        let mut order = Some(order_at(1));
        assert_eq!(
            on_order_updated(&mut order, &details("e3", 3, 7)),
            Decision::Gap
        );
        assert_eq!(order, Some(order_at(1)));
    }

    #[test]
    fn cancellation_follows_the_same_guard() {
        let cancel = |sequence| Sequenced {
            event_id: "c".into(),
            aggregate_id: "order-42".into(),
            sequence,
            data: OrderCancellation {
                reason: "changed mind".into(),
            },
        };
        assert_eq!(
            on_order_cancelled(&mut None, &cancel(2)),
            Decision::NotCreated
        );
        let mut order = Some(order_at(1));
        assert_eq!(on_order_cancelled(&mut order, &cancel(3)), Decision::Gap);
        assert_eq!(
            on_order_cancelled(&mut order, &cancel(1)),
            Decision::Duplicate
        );
        assert_eq!(order, Some(order_at(1)));
        assert_eq!(
            on_order_cancelled(&mut order, &cancel(2)),
            Decision::Applied
        );
        let order = order.expect("kept");
        assert_eq!(order.sequence, 2);
        assert_eq!(order.status, OrderStatus::Cancelled);
        assert_eq!(order.cancel_reason.as_deref(), Some("changed mind"));
    }

    fn payment(sequence: u64, amount_cents: u64) -> Sequenced<PaymentDetails> {
        Sequenced {
            event_id: format!("p{sequence}"),
            aggregate_id: "order-42".into(),
            sequence,
            data: PaymentDetails { amount_cents },
        }
    }

    fn refund(sequence: u64, amount_cents: u64) -> Sequenced<RefundRequest> {
        Sequenced {
            event_id: format!("r{sequence}"),
            aggregate_id: "order-42".into(),
            sequence,
            data: RefundRequest {
                amount_cents,
                reason: "order cancelled".into(),
            },
        }
    }

    #[test]
    fn a_new_order_has_nothing_paid_or_refunded() {
        let order = Order::create(&details("e1", 1, 100));
        assert_eq!((order.paid_cents, order.refund_cents), (0, 0));
    }

    #[test]
    fn payments_follow_the_guard_and_add_up() {
        assert_eq!(
            on_payment_received(&mut None, &payment(2, 100)),
            Decision::NotCreated
        );
        let mut order = Some(order_at(1));
        assert_eq!(
            on_payment_received(&mut order, &payment(3, 100)),
            Decision::Gap
        );
        assert_eq!(
            on_payment_received(&mut order, &payment(1, 100)),
            Decision::Duplicate
        );
        assert_eq!(order, Some(order_at(1)), "nothing changed");
        assert_eq!(
            on_payment_received(&mut order, &payment(2, 60)),
            Decision::Applied
        );
        assert_eq!(
            on_payment_received(&mut order, &payment(3, 40)),
            Decision::Applied
        );
        let order = order.expect("kept");
        assert_eq!((order.sequence, order.paid_cents), (3, 100));
        assert_eq!(order.last_event_id, "p3");
        assert_eq!((order.status, order.refund_cents), (OrderStatus::Open, 0));
    }

    #[test]
    fn a_payment_after_the_cancellation_is_recorded_and_the_order_stays_cancelled() {
        let mut order = Some(order_at(1));
        let cancel = Sequenced {
            event_id: "c2".into(),
            aggregate_id: "order-42".into(),
            sequence: 2,
            data: OrderCancellation {
                reason: "payment not received".into(),
            },
        };
        assert_eq!(on_order_cancelled(&mut order, &cancel), Decision::Applied);
        assert_eq!(
            on_payment_received(&mut order, &payment(3, 1250)),
            Decision::Applied
        );
        assert_eq!(
            on_refund_requested(&mut order, &refund(4, 1250)),
            Decision::Applied
        );
        let order = order.expect("kept");
        assert_eq!(order.status, OrderStatus::Cancelled);
        assert_eq!(order.cancel_reason.as_deref(), Some("payment not received"));
        assert_eq!((order.sequence, order.last_event_id.as_str()), (4, "r4"));
        assert_eq!((order.paid_cents, order.refund_cents), (1250, 1250));
    }

    #[test]
    fn refunds_follow_the_guard_and_add_up() {
        assert_eq!(
            on_refund_requested(&mut None, &refund(2, 5)),
            Decision::NotCreated
        );
        let mut order = Some(order_at(2));
        assert_eq!(
            on_refund_requested(&mut order, &refund(4, 5)),
            Decision::Gap
        );
        assert_eq!(
            on_refund_requested(&mut order, &refund(2, 5)),
            Decision::Duplicate
        );
        assert_eq!(order, Some(order_at(2)), "nothing changed");
        assert_eq!(
            on_refund_requested(&mut order, &refund(3, 5)),
            Decision::Applied
        );
        assert_eq!(
            on_refund_requested(&mut order, &refund(4, 7)),
            Decision::Applied
        );
        let order = order.expect("kept");
        assert_eq!((order.sequence, order.refund_cents), (4, 12));
        assert_eq!((order.paid_cents, order.status), (0, OrderStatus::Open));
    }

    #[test]
    fn a_sum_past_the_largest_amount_is_refused_and_changes_nothing() {
        use crate::ShopEvent;
        use sequence_guard::testkit::given;

        let mut near = order_at(1);
        near.paid_cents = MAX_CENTS - 5;
        near.refund_cents = MAX_CENTS;
        let paid = |amount_cents| ShopEvent::PaymentReceived(PaymentDetails { amount_cents });
        given(Some(near.clone()))
            .when("p2", "order-42", 2, paid(6))
            .then(Decision::Invalid, Some(near.clone()));
        let refund = ShopEvent::RefundRequested(RefundRequest {
            amount_cents: 1,
            reason: "order cancelled".into(),
        });
        given(Some(near.clone()))
            .when("r2", "order-42", 2, refund)
            .then(Decision::Invalid, Some(near.clone()));
        // Up to the largest sum, a payment is applied.
        let mut full = near.clone();
        full.paid_cents = MAX_CENTS;
        full.sequence = 2;
        full.last_event_id = "p2".into();
        given(Some(near))
            .when("p2", "order-42", 2, paid(5))
            .then(Decision::Applied, Some(full));
    }

    #[test]
    fn an_item_without_the_amounts_reads_as_zero_and_zeros_are_not_written() {
        let earlier: Order = serde_json::from_value(serde_json::json!({
            "sequence": 3, "lastEventId": "e3", "customerName": "Ada",
            "email": "ada@example.com", "totalCents": 100, "status": "OPEN"
        }))
        .expect("an item of an earlier release");
        assert_eq!((earlier.paid_cents, earlier.refund_cents), (0, 0));
        let written = serde_json::to_value(&earlier).expect("json");
        assert!(written.get("paidCents").is_none(), "{written}");
        assert!(written.get("refundCents").is_none(), "{written}");

        let mut paid = earlier;
        assert!(paid.receive_payment(&payment(4, 100)));
        assert!(paid.request_refund(&refund(5, 30)));
        let written = serde_json::to_value(&paid).expect("json");
        assert_eq!(written["paidCents"], 100);
        assert_eq!(written["refundCents"], 30);
        let read: Order = serde_json::from_value(written).expect("read back");
        assert_eq!(read, paid);
    }

    #[test]
    fn the_summary_shows_the_amounts_once_there_are_any() {
        let mut order = order_at(1);
        assert_eq!(
            Entity::summary(&order),
            "totalCents 100    status OPEN",
            "as before payments"
        );
        order.paid_cents = 1250;
        assert_eq!(
            Entity::summary(&order),
            "totalCents 100    status OPEN      paidCents 1250   refundCents 0"
        );
    }
}
