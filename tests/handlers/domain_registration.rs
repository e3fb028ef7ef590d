//! What a domain learns from its declarations, and the declarations refused
//! when a domain is registered or a runner is made.

use super::*;

#[test]
fn the_domain_knows_its_types_and_kinds_from_the_declarations() {
    let domain = domain();
    assert_eq!(
        domain.types(),
        [
            "Started",
            "Counted",
            "CountedForgetful",
            "CountedSneaky",
            "Reset",
            "CountedBlindly",
            "CountedQuietly",
            "CountedPanicking",
            "CountedPanickingWhenNext",
            "CountedPassing",
            "CountedInvalid"
        ]
    );
    assert_eq!(domain.kind("tally").map(|kind| kind.name), Some("TALLY"));
    assert_eq!(
        domain.key_of_pk("TALLY#t#1"),
        Some(EntityKey::of::<Tally>("t#1")),
        "an id may hold #"
    );
    assert_eq!(domain.key_of_pk("ORDER#o"), None, "not this domain's");
    let event = domain
        .parse(r#"{"eventId":"e","type":"Counted","aggregateId":"t","sequence":2,"data":{}}"#)
        .expect("valid");
    assert_eq!(event.type_name(), "Counted");
    assert_eq!(event.handler(), "handlers::on_counted");
    let err = domain
        .parse(r#"{"eventId":"e","type":"Counting","aggregateId":"t","sequence":2,"data":{}}"#)
        .expect_err("unknown");
    assert_eq!(err.to_string(), "unknown event type `Counting`");
}

static IN_PK: sequence_guard::Counter = sequence_guard::Counter {
    kind: "BIN",
    sort_key: "COUNT",
    attribute: "pk",
};

#[test]
fn a_domain_that_would_write_the_engines_attributes_is_refused_when_registered() {
    assert_eq!(domain().check(), Ok(()));
    let err = domain()
        .entity::<Subscription>()
        .check()
        .expect_err("expiresAt is the table's TTL attribute");
    let text = err.to_string();
    assert!(
        text.contains("handlers::Subscription")
            && text.contains("SUBSCRIPTION")
            && text.contains("`expiresAt`")
            && text.contains("TTL")
            && text.contains("rename"),
        "{text}"
    );
    let err = domain()
        .entity::<Misnamed>()
        .counter(&IN_PK)
        .check()
        .expect_err("two mistakes");
    assert_eq!(err.problems().len(), 2, "{err}");
    assert!(
        err.problems()[0].contains("handlers::Misnamed")
            && err.problems()[0].contains("no field serialized as `sequence`"),
        "{err}"
    );
    assert!(
        err.problems()[1].contains("counter count") && err.problems()[1].contains("`pk`"),
        "{err}"
    );
}

#[test]
#[should_panic(expected = "`expiresAt`")]
fn a_runner_refuses_a_domain_whose_declarations_cannot_work() {
    let store = MemoryStore::new();
    let _runner = Runner::new(
        domain().entity::<Subscription>(),
        &store,
        RunnerConfig::default(),
    );
}
