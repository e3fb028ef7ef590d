//! Orders: the entity, its behaviour methods, and the handlers with the guard.

use sequence_guard::{Decision, Entity, Sequenced};
use serde::{Deserialize, Serialize};

use crate::events::{OrderCancellation, OrderDetails};

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

/// The order projection: the item `ORDER#<aggregateId>` / `STATE`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Entity)]
#[serde(rename_all = "camelCase")]
#[entity(kind = "ORDER", summary = "summary_line")]
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
}

impl Order {
    /// The line `replay` and `inspect` show.
    fn summary_line(&self) -> String {
        format!(
            "totalCents {:<6} status {}",
            self.total_cents,
            self.status.as_str()
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
