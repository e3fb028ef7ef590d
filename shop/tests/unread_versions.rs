//! A type that a consumer passes or ignores is read without its `data` and
//! its `version`: the status consumer is not stopped by a version bump of a
//! type it never reads, and the rest of the envelope is still checked.

mod support;

use sequence_guard::runner::{Invocation, Outcome, Runner, RunnerConfig};
use sequence_guard::store::memory::MemoryStore;
use shop::status::Status;
use support::*;

fn invocation() -> Invocation {
    Invocation {
        deadline: None,
        now: sequence_guard::lambda::epoch_seconds(),
    }
}

const CREATED: &str =
    r#"{"eventId":"o-1","type":"OrderCreated","aggregateId":"o","sequence":1,"data":{}}"#;
/// A pass, at a version the status consumer does not know, with data of
/// no shape it knows either.
const UPDATED_V99: &str = r#"{"eventId":"o-2","type":"OrderUpdated","aggregateId":"o","sequence":2,"version":99,"data":{"lines":[1,2],"totalCents":"lots"}}"#;
/// Ignored, at a version the status consumer does not know.
const PRODUCT_V99: &str = r#"{"eventId":"p-1","type":"ProductCreated","aggregateId":"p","sequence":1,"version":99,"data":{"title":7}}"#;

#[tokio::test]
async fn a_passed_or_ignored_type_is_read_without_its_version() {
    let store = MemoryStore::new();
    let runner = Runner::new(shop::status::domain(), &store, RunnerConfig::default());
    let report = runner
        .run(
            &batch(vec![
                message("m1", "o", CREATED),
                message("m2", "o", UPDATED_V99),
                message("m3", "p", PRODUCT_V99),
            ]),
            invocation(),
        )
        .await
        .expect("run");
    assert_eq!(
        outcomes(&report),
        [Outcome::Applied, Outcome::Applied, Outcome::Ignored],
        "{report:?}"
    );
    let status = store
        .entities()
        .into_iter()
        .find_map(|(_, entity)| entity.get::<Status>().cloned())
        .expect("the order's status");
    assert_eq!(
        (status.sequence, status.last_event_id.as_str()),
        (2, "o-2"),
        "the pass moved the sequence"
    );
}

#[test]
fn the_version_of_a_type_the_consumer_reads_is_still_checked() {
    let domain = shop::status::domain();
    let cancelled = r#"{"eventId":"o-3","type":"OrderCancelled","aggregateId":"o","sequence":3,"version":99,"data":{"reason":"x"}}"#;
    let err = domain
        .parse(cancelled)
        .expect_err("a handled type at version 99");
    assert_eq!(
        err.to_string(),
        "field `version` names OrderCancelled version 99, newer than this consumer knows (1)"
    );
    // The same bump on the first consumer, which reads every type: refused.
    let err = shop::domain().parse(PRODUCT_V99).expect_err("version 99");
    assert!(err.to_string().contains("version 99"), "{err}");
}

#[test]
fn the_rest_of_the_envelope_of_an_ignored_type_is_still_checked() {
    let domain = shop::status::domain();
    for (body, reason) in [
        (
            r#"{"type":"ProductCreated","aggregateId":"p","version":99,"data":{}}"#,
            "missing field `eventId`",
        ),
        (
            r#"{"eventId":"p-1","type":"ProductCreated","aggregateId":"p","sequence":0,"version":99,"data":{}}"#,
            "field `sequence` must be an integer from 1 to 2^63-1, got 0",
        ),
        (
            r#"{"eventId":"o-2","type":"OrderUpdated","version":99,"sequence":2,"data":{}}"#,
            "missing field `aggregateId`",
        ),
    ] {
        let err = domain.parse(body).expect_err(body);
        assert_eq!(err.to_string(), reason, "{body}");
    }
}
