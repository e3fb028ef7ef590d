//! Products: the entity, its behaviour methods, and the handlers with the guard.

use sequence_guard::{Decision, Entity, Sequenced};
use serde::{Deserialize, Serialize};

use crate::events::{NewProduct, PriceChange};

/// The product projection: the item `PRODUCT#<aggregateId>` / `STATE`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Entity)]
#[serde(rename_all = "camelCase")]
#[entity(kind = "PRODUCT", summary = "summary_line")]
pub struct Product {
    /// The sequence of the last event applied.
    pub sequence: u64,
    pub last_event_id: String,
    pub name: String,
    pub price_cents: u64,
}

impl Product {
    /// The line `replay` and `inspect` show.
    fn summary_line(&self) -> String {
        format!("priceCents {}", self.price_cents)
    }

    /// Creates the product at the creation event's sequence.
    pub fn create(event: &Sequenced<NewProduct>) -> Self {
        Product {
            sequence: event.sequence,
            last_event_id: event.event_id.clone(),
            name: event.data.name.clone(),
            price_cents: event.data.price_cents,
        }
    }

    /// Applies `ProductPriceChanged`, then increments `sequence` (the guard
    /// has checked that the event is the next one, so this lands on the
    /// event's sequence).
    pub fn change_price(&mut self, event: &Sequenced<PriceChange>) {
        self.price_cents = event.data.price_cents;
        self.last_event_id.clone_from(&event.event_id);
        self.sequence += 1;
    }
}

/// `ProductCreated`: a creation checks existence instead of the sequence.
pub fn on_product_created(
    product: &mut Option<Product>,
    event: &Sequenced<NewProduct>,
) -> Decision {
    if product.is_some() {
        return Decision::Duplicate;
    }
    *product = Some(Product::create(event));
    Decision::Applied
}

/// `ProductPriceChanged`.
pub fn on_product_price_changed(
    product: &mut Option<Product>,
    event: &Sequenced<PriceChange>,
) -> Decision {
    let Some(product) = product else {
        return Decision::NotCreated;
    };
    if product.sequence != event.sequence - 1 {
        return if product.sequence >= event.sequence {
            Decision::Duplicate
        } else {
            Decision::Gap
        };
    }
    product.change_price(event);
    Decision::Applied
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ShopEvent;
    use sequence_guard::testkit::given;

    fn created() -> Sequenced<NewProduct> {
        Sequenced {
            event_id: "p1".into(),
            aggregate_id: "product-7".into(),
            sequence: 1,
            data: NewProduct {
                name: "Lamp".into(),
                price_cents: 1999,
            },
        }
    }

    #[test]
    fn creation_when_missing_creates_and_when_existing_does_nothing() {
        let mut product = None;
        assert_eq!(
            on_product_created(&mut product, &created()),
            Decision::Applied
        );
        assert_eq!(
            product.as_ref().map(|p| (p.sequence, p.price_cents)),
            Some((1, 1999))
        );
        let before = product.clone();
        assert_eq!(
            on_product_created(&mut product, &created()),
            Decision::Duplicate
        );
        assert_eq!(product, before);
    }

    /// With sequence-guard's test kit: through the registration and the
    /// runner's check of the answer, as in the function.
    #[test]
    fn price_change_applies_then_increments_the_sequence() {
        let at = |sequence: u64, price_cents, last: &str| Product {
            sequence,
            last_event_id: last.into(),
            name: "Lamp".into(),
            price_cents,
        };
        let change = |price_cents| ShopEvent::ProductPriceChanged(PriceChange { price_cents });
        given(Some(at(1, 1999, "p1")))
            .when("p2", "product-7", 2, change(2499))
            .then(Decision::Applied, Some(at(2, 2499, "p2")));
        given(Some(at(2, 2499, "p2")))
            .when("p3", "product-7", 3, change(2599))
            .then(Decision::Applied, Some(at(3, 2599, "p3")));
    }

    #[test]
    fn price_change_guard_rows() {
        let change = ShopEvent::ProductPriceChanged(PriceChange { price_cents: 1 });
        given(None::<Product>)
            .when("p2", "product-7", 2, change.clone())
            .then(Decision::NotCreated, None);
        let created = Product::create(&created());
        given(Some(created.clone()))
            .when("p3", "product-7", 3, change.clone())
            .then(Decision::Gap, Some(created.clone()));
        given(Some(created.clone()))
            .when("p1", "product-7", 1, change)
            .then(Decision::Duplicate, Some(created));
    }
}
