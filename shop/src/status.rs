//! The shop's second consumer: the status of each order, and no personal
//! data. It receives every event of the shop's event store (its own queue,
//! subscribed to the same topic), projects the orders' status, passes the
//! order events that change nothing it keeps, and ignores the streams it does
//! not project.
//!
//! | event                 | handled as |
//! | --------------------- | ---------- |
//! | `OrderCreated`        | creation: `status` = `OPEN` ([`on_order_created`]) |
//! | `OrderUpdated`        | pass: the sequence moves, nothing else |
//! | `OrderCancelled`      | update: `status` = `CANCELLED`, `cancelReason` ([`on_order_cancelled`]) |
//! | `PaymentReceived`, `RefundRequested` | pass: the sequence moves, nothing else |
//! | `PersonalDataErased`  | pass: it holds nothing personal to erase |
//! | `ProductCreated`, `ProductPriceChanged`, `InventoryAdjusted` | ignored |
//!
//! It declares no personal data: it reads none (`IgnoredAny`), so it never
//! opens a sealed value and never reads a key (its role has no KMS right).
//!
//! Its item: `STATUS#<aggregateId>` / `STATE`, with `sequence`,
//! `lastEventId`, `status` and `cancelReason` (once cancelled).
//!
//! Its binaries (`src/bin/status-*.rs`, one line each) are the first
//! consumer's, on this domain: `status-projector` (the Lambda function),
//! `status-replay`, and the tools `status-rebuild`, `status-verify` and
//! `status-inspect` (a consumer added to a live system catches up with its
//! rebuild, docs/event-store.md).

use sequence_guard::{Decision, Domain, Entity, Events, Handling, Sequenced};
use serde::de::IgnoredAny;
use serde::{Deserialize, Serialize};

use crate::OrderStatus;
use crate::events::OrderCancellation;

/// An order's status, as the status consumer keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Entity)]
#[serde(rename_all = "camelCase")]
#[entity(kind = "STATUS")]
pub struct Status {
    /// The sequence of the last event of the order applied (or passed).
    pub sequence: u64,
    pub last_event_id: String,
    pub status: OrderStatus,
    /// Once cancelled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cancel_reason: Option<String>,
}

/// The types the status consumer receives. The ones it does not project
/// read no `data` (`IgnoredAny`): it is not held to their shape.
#[derive(Debug, Deserialize)]
#[serde(tag = "type", content = "data")]
pub enum StatusEvent {
    OrderCreated(IgnoredAny),
    OrderUpdated(IgnoredAny),
    OrderCancelled(OrderCancellation),
    PaymentReceived(IgnoredAny),
    RefundRequested(IgnoredAny),
    ProductCreated(IgnoredAny),
    ProductPriceChanged(IgnoredAny),
    InventoryAdjusted(IgnoredAny),
    PersonalDataErased(IgnoredAny),
}

impl Events for StatusEvent {
    fn handling(self) -> Handling {
        match self {
            StatusEvent::OrderCreated(data) => Handling::sequenced(data, on_order_created),
            StatusEvent::OrderUpdated(_)
            | StatusEvent::PaymentReceived(_)
            | StatusEvent::RefundRequested(_)
            | StatusEvent::PersonalDataErased(_) => Handling::pass::<Status>(),
            StatusEvent::OrderCancelled(data) => Handling::sequenced(data, on_order_cancelled),
            StatusEvent::ProductCreated(_)
            | StatusEvent::ProductPriceChanged(_)
            | StatusEvent::InventoryAdjusted(_) => Handling::ignore(),
        }
    }
}

/// The status consumer, registered.
pub fn domain() -> Domain {
    Domain::new::<StatusEvent>()
        .entity::<Status>()
        .with_crate_version(env!("CARGO_PKG_VERSION"))
}

/// `OrderCreated`: a creation checks existence.
pub fn on_order_created(status: &mut Option<Status>, event: &Sequenced<IgnoredAny>) -> Decision {
    if status.is_some() {
        return Decision::Duplicate;
    }
    *status = Some(Status {
        sequence: event.sequence,
        last_event_id: event.event_id.clone(),
        status: OrderStatus::Open,
        cancel_reason: None,
    });
    Decision::Applied
}

/// `OrderCancelled`: the guard, then the status.
pub fn on_order_cancelled(
    status: &mut Option<Status>,
    event: &Sequenced<OrderCancellation>,
) -> Decision {
    let Some(status) = status else {
        return Decision::NotCreated;
    };
    if status.sequence != event.sequence - 1 {
        return if status.sequence >= event.sequence {
            Decision::Duplicate
        } else {
            Decision::Gap
        };
    }
    status.status = OrderStatus::Cancelled;
    status.cancel_reason = Some(event.data.reason.clone());
    status.sequence = event.sequence;
    status.last_event_id.clone_from(&event.event_id);
    Decision::Applied
}

#[cfg(test)]
mod tests {
    use sequence_guard::testkit::{given, is_ignored};

    use super::*;

    fn at(sequence: u64) -> Status {
        Status {
            sequence,
            last_event_id: format!("e{sequence}"),
            status: OrderStatus::Open,
            cancel_reason: None,
        }
    }

    fn update(sequence: u64) -> String {
        format!(
            r#"{{"eventId":"e{sequence}","type":"OrderUpdated","aggregateId":"o-1","sequence":{sequence},"data":{{"whatever":["the status consumer does not read it"]}}}}"#
        )
    }

    #[test]
    fn an_update_passes_moving_only_the_sequence() {
        let domain = domain();
        given(Some(at(1)))
            .when_body(&domain, &update(2))
            .expect("valid")
            .then(Decision::Applied, Some(at(2)));
        given(Some(at(3)))
            .when_body(&domain, &update(3))
            .expect("valid")
            .then(Decision::Duplicate, Some(at(3)));
        given(Some(at(1)))
            .when_body(&domain, &update(3))
            .expect("valid")
            .then(Decision::Gap, Some(at(1)));
        given(None::<Status>)
            .when_body(&domain, &update(2))
            .expect("valid")
            .then(Decision::NotCreated, None);
    }

    fn order_event(event_type: &str, sequence: u64) -> String {
        format!(
            r#"{{"eventId":"e{sequence}","type":"{event_type}","aggregateId":"o-1","sequence":{sequence},"data":{{"amountCents":"not read"}}}}"#
        )
    }

    #[test]
    fn payments_and_refunds_pass_with_the_exact_guard_also_once_cancelled() {
        let domain = domain();
        let mut cancelled = at(2);
        cancelled.status = OrderStatus::Cancelled;
        cancelled.cancel_reason = Some("payment not received".into());
        for event_type in ["PaymentReceived", "RefundRequested"] {
            given(Some(at(1)))
                .when_body(&domain, &order_event(event_type, 2))
                .expect("valid")
                .then(Decision::Applied, Some(at(2)));
            given(Some(at(3)))
                .when_body(&domain, &order_event(event_type, 2))
                .expect("valid")
                .then(Decision::Duplicate, Some(at(3)));
            given(Some(at(1)))
                .when_body(&domain, &order_event(event_type, 3))
                .expect("valid")
                .then(Decision::Gap, Some(at(1)));
            given(None::<Status>)
                .when_body(&domain, &order_event(event_type, 2))
                .expect("valid")
                .then(Decision::NotCreated, None);
            let mut passed = cancelled.clone();
            passed.sequence = 3;
            passed.last_event_id = "e3".into();
            given(Some(cancelled.clone()))
                .when_body(&domain, &order_event(event_type, 3))
                .expect("valid")
                .then(Decision::Applied, Some(passed));
        }
    }

    #[test]
    fn a_cancellation_keeps_the_reason_and_no_other_order_field() {
        let cancelled = given(Some(at(2))).when(
            "e3",
            "o-1",
            3,
            StatusEvent::OrderCancelled(OrderCancellation {
                reason: "changed my mind".into(),
            }),
        );
        let mut expected = at(3);
        expected.status = OrderStatus::Cancelled;
        expected.cancel_reason = Some("changed my mind".into());
        cancelled.then(Decision::Applied, Some(expected));
    }

    #[test]
    fn product_and_stock_events_are_ignored_and_order_events_are_not() {
        assert!(is_ignored(StatusEvent::ProductCreated(IgnoredAny)));
        assert!(is_ignored(StatusEvent::ProductPriceChanged(IgnoredAny)));
        assert!(is_ignored(StatusEvent::InventoryAdjusted(IgnoredAny)));
        assert!(!is_ignored(StatusEvent::OrderUpdated(IgnoredAny)));
        assert!(!is_ignored(StatusEvent::PaymentReceived(IgnoredAny)));
        assert!(!is_ignored(StatusEvent::RefundRequested(IgnoredAny)));
        assert!(!is_ignored(StatusEvent::PersonalDataErased(IgnoredAny)));
        // Their data is not read; the envelope still is.
        let domain = domain();
        assert!(
            domain
                .parse(r#"{"eventId":"e","type":"InventoryAdjusted","data":{"sku":7}}"#)
                .is_ok()
        );
        let err = domain
            .parse(r#"{"eventId":"e","type":"ProductCreated","aggregateId":"p","sequence":0,"data":{}}"#)
            .expect_err("sequence 0");
        assert!(err.to_string().contains("sequence"), "{err}");
        assert_eq!(
            domain
                .parse(r#"{"eventId":"e","type":"OrderShipped","aggregateId":"o","sequence":2,"data":{}}"#)
                .expect_err("neither handled nor declared")
                .to_string(),
            "unknown event type `OrderShipped`"
        );
    }
}
