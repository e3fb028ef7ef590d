//! Bad bodies, drawn at random: every one is answered with a reason that
//! names what was wrong, none panics, and no reason repeats a string the
//! message carried (reasons are logged; strings may be personal data), but
//! for an unknown `type`, which is named.

mod support;

use proptest::prelude::*;

use serde_json::{Map, Value, json};

const PLANTED: &str = "planted-7f3a@example.org";

/// A JSON value of any kind, strings planted with personal data.
fn any_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<u64>().prop_map(|n| json!(n)),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(|f| json!(f)),
        Just(json!(PLANTED)),
        Just(json!(format!("{PLANTED}, expected a string"))),
        "[a-zA-Z ,`\"]{0,12}".prop_map(|s| json!(format!("{PLANTED}{s}"))),
    ];
    leaf.prop_recursive(2, 8, 3, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..3).prop_map(Value::Array),
            prop::collection::btree_map("[a-z]{1,6}", inner, 0..3)
                .prop_map(|map| Value::Object(map.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

const TYPES: [&str; 12] = [
    "ItemCreated",
    "ItemUpdated",
    "ItemClosed",
    "ItemTouched",
    "TagCreated",
    "TagWeighed",
    "TagSnapshot",
    "LevelAdjusted",
    "Elsewhere",
    "PersonalDataErased",
    "ItemShipped",
    "",
];

const DATA_FIELDS: [&str; 9] = [
    "name", "amount", "reason", "label", "weight", "gauge", "delta", "subject", "notes",
];

/// A body: a valid-looking envelope whose fields are each kept, dropped or
/// replaced by any value.
fn any_body() -> impl Strategy<Value = String> {
    (
        prop::sample::select(TYPES.to_vec()),
        prop::collection::vec(prop::option::of(any_value()), 5),
        prop::collection::vec(
            (prop::sample::select(DATA_FIELDS.to_vec()), any_value()),
            0..6,
        ),
        any::<bool>(),
    )
        .prop_map(|(event_type, envelope, data_fields, data_is_object)| {
            let mut body = Map::new();
            let defaults = [
                ("eventId", json!("e-1")),
                ("type", json!(event_type)),
                ("aggregateId", json!("item-1")),
                ("sequence", json!(2)),
                ("data", json!({})),
            ];
            for ((name, default), replacement) in defaults.into_iter().zip(envelope) {
                body.insert(name.to_owned(), replacement.unwrap_or(default));
            }
            if data_is_object {
                let data: Map<String, Value> = data_fields
                    .into_iter()
                    .map(|(name, value)| (name.to_owned(), value))
                    .collect();
                body.insert("data".to_owned(), Value::Object(data));
            }
            Value::Object(body).to_string()
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, ..ProptestConfig::default() })]

    #[test]
    fn bad_bodies_get_a_reason_that_repeats_no_string(body in any_body()) {
        if let Err(reason) = support::domain().parse(&body) {
            let reason = reason.to_string();
            prop_assert!(!reason.is_empty());
            // The one value named back is an unknown `type` (64 characters
            // at most): it says which type the producer sent.
            if !reason.starts_with("unknown event type") {
                prop_assert!(!reason.contains("planted"), "{reason}\nfor {body}");
            }
        }
    }

    /// Not even valid JSON: no panic, a reason.
    #[test]
    fn any_text_is_answered(text in ".{0,200}") {
        if let Err(reason) = support::domain().parse(&text) {
            prop_assert!(!reason.to_string().is_empty());
        }
    }
}
