//! Products: the entity, its behaviour methods, and the handlers with the guard.

use super::Decision;
use super::event::{NewProduct, PriceChange, Sequenced};

/// The product projection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Product {
    pub id: String,
    /// The sequence of the last event applied.
    pub sequence: u64,
    pub last_event_id: String,
    pub name: String,
    pub price_cents: u64,
}

impl Product {
    /// Creates the product at the creation event's sequence.
    pub fn create(event: &Sequenced<NewProduct>) -> Self {
        Product {
            id: event.aggregate_id.clone(),
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
    product: Option<&mut Product>,
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

    fn price(sequence: u64, price_cents: u64) -> Sequenced<PriceChange> {
        Sequenced {
            event_id: format!("p{sequence}"),
            aggregate_id: "product-7".into(),
            sequence,
            data: PriceChange { price_cents },
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

    #[test]
    fn price_change_applies_then_increments_the_sequence() {
        let mut product = Product::create(&created());
        assert_eq!(
            on_product_price_changed(Some(&mut product), &price(2, 2499)),
            Decision::Applied
        );
        assert_eq!((product.sequence, product.price_cents), (2, 2499));
        assert_eq!(
            on_product_price_changed(Some(&mut product), &price(3, 2599)),
            Decision::Applied
        );
        assert_eq!(
            (
                product.sequence,
                product.price_cents,
                product.last_event_id.as_str()
            ),
            (3, 2599, "p3")
        );
    }

    #[test]
    fn price_change_guard_rows() {
        assert_eq!(
            on_product_price_changed(None, &price(2, 1)),
            Decision::NotCreated
        );
        let mut product = Product::create(&created());
        assert_eq!(
            on_product_price_changed(Some(&mut product), &price(3, 1)),
            Decision::Gap
        );
        assert_eq!(
            on_product_price_changed(Some(&mut product), &price(1, 1)),
            Decision::Duplicate
        );
        assert_eq!(product, Product::create(&created()));
    }
}
