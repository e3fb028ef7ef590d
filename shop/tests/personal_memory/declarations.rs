//! What `Domain::check` asks of the shop's domains and refuses of a
//! personal declaration that cannot work.

use super::*;

#[test]
fn the_shops_domains_pass_their_checks_and_only_the_orders_declares_personal_data() {
    for (name, domain) in [
        ("shop", shop::domain()),
        ("status", shop::status::domain()),
        ("payments", shop::payments::domain()),
    ] {
        if let Err(err) = domain.check() {
            panic!("{name}: {err}");
        }
    }
    assert!(shop::domain().declares_personal());
    assert!(!shop::status::domain().declares_personal());
    assert!(!shop::payments::domain().declares_personal());
    assert_eq!(Order::PERSONAL, ["customerName", "email"]);
    assert_eq!(Order::PLACEHOLDER, PLACEHOLDER);
    assert!(Status::PERSONAL.is_empty() && Payment::PERSONAL.is_empty());
}

/// `OrderCreated` data that lacks one of the fields declared personal
/// (only its declaration is checked: nothing reads it).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
#[allow(dead_code)]
struct NameOnly {
    customer_name: String,
}

#[derive(Debug, Deserialize)]
#[allow(dead_code)]
#[serde(tag = "type", content = "data")]
enum Misdeclared {
    OrderCreated(NameOnly),
    PersonalDataErased(Erasure),
}

impl Events for Misdeclared {
    fn handling(self) -> Handling {
        match self {
            Misdeclared::OrderCreated(_) => Handling::ignore(),
            Misdeclared::PersonalDataErased(data) => Handling::erase::<Order>(data),
        }
    }

    fn personal() -> Personal {
        Personal::new().fields("OrderCreated", &["customerName", "email"])
    }
}

/// Personal data declared, and no erasure to forget it by.
#[derive(Debug, Deserialize)]
#[serde(tag = "type", content = "data")]
enum Unforgettable {
    OrderCreated(OrderDetails),
}

impl Events for Unforgettable {
    fn handling(self) -> Handling {
        match self {
            Unforgettable::OrderCreated(data) => {
                Handling::sequenced(data, shop::order::on_order_created)
            }
        }
    }

    fn personal() -> Personal {
        Personal::new().fields("OrderCreated", &["customerName", "email"])
    }
}

#[test]
fn check_refuses_a_personal_field_the_data_lacks_and_a_domain_that_cannot_forget() {
    let err = Domain::new::<Misdeclared>()
        .entity::<Order>()
        .check()
        .expect_err("email is not a field of its data");
    assert!(
        err.problems()
            .iter()
            .any(|problem| problem.contains("OrderCreated's data has no field `email`")),
        "{err}"
    );
    assert_eq!(err.problems().len(), 1, "{err}");

    let err = Domain::new::<Unforgettable>()
        .entity::<Order>()
        .check()
        .expect_err("no erasure");
    assert!(
        err.problems()
            .iter()
            .any(|problem| problem.contains("PersonalDataErased")),
        "{err}"
    );
}
