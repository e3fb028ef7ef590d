//! A lending library on sequence-guard, as a team would write it: made by
//! `sequence-guard new library`, the items it starts from replaced by the
//! library's own files, then `sequence-guard sync`.
//!
//! Members join (their name and email personal); books are added, lent
//! and returned. The process [`loans`] follows each book: a loan not
//! returned in 14 days gets a reminder, and 7 days later a fine; a return
//! before either clears what is pending. The projector keeps each book,
//! each member, and each member's activity (books on loan, loans, fines:
//! three counters on one item, moved by the books' events through effects
//! keyed by the member). `erase --subject <member>` forgets a member.
//!
//! | module | what |
//! | --- | --- |
//! | [`events`] | every event type, its data and limits, how it is handled, which fields are personal |
//! | [`books`] | the book projection and the member's activity (effects) |
//! | [`members`] | the member projection (personal data) |
//! | [`loans`] | the process: reminders and fines, by deadlines |
//! | [`system`] | the whole system, as `template.yaml` deploys it (written by `sync`) |
//!
//! `library-local` runs the whole system on one machine from a script:
//! `cargo run --bin library-local -- local/overdue.txt` (README.md).

use sequence_guard::{Decision, Domain, Entity, Sequenced};

pub mod books;
pub mod events;
pub mod loans;
pub mod members;
pub mod system;

pub use books::{Book, FINES, LOANS, ON_LOAN};
pub use events::LibraryEvent;
pub use members::Member;

/// The library, registered: its events, its entity kinds, and the
/// counters effects add to (a counter is not named by a handling, so each
/// is registered). Every binary of `src/bin/` runs it.
pub fn domain() -> Domain {
    Domain::new::<LibraryEvent>()
        .entity::<Book>()
        .entity::<Member>()
        .counter(&ON_LOAN)
        .counter(&LOANS)
        .counter(&FINES)
        .with_crate_version(env!("CARGO_PKG_VERSION"))
}

/// The guard of an update: the entity, when the event is its next;
/// otherwise the decision (a duplicate, a gap, or not created yet).
pub fn guard<'a, T: Entity, D>(
    entity: &'a mut Option<T>,
    event: &Sequenced<D>,
) -> Result<&'a mut T, Decision> {
    let Some(entity) = entity else {
        return Err(Decision::NotCreated);
    };
    if entity.sequence() != event.sequence - 1 {
        return Err(if entity.sequence() >= event.sequence {
            Decision::Duplicate
        } else {
            Decision::Gap
        });
    }
    Ok(entity)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLES: [(&str, &str); 3] = [
        (
            "events/01-members-join-and-borrow.json",
            include_str!("../events/01-members-join-and-borrow.json"),
        ),
        (
            "events/02-reminded-then-fined.json",
            include_str!("../events/02-reminded-then-fined.json"),
        ),
        (
            "events/03-member-forgotten.json",
            include_str!("../events/03-member-forgotten.json"),
        ),
    ];

    #[test]
    fn the_domain_is_well_declared() {
        if let Err(err) = domain().check() {
            panic!("{err}");
        }
    }

    #[test]
    fn every_sample_body_is_read_by_the_domain() {
        for (path, sample) in SAMPLES {
            let event: serde_json::Value = serde_json::from_str(sample).expect(path);
            let records = event["Records"].as_array().expect("records");
            for record in records {
                let body = record["body"].as_str().expect("a body");
                for domain in [domain(), loans::domain()] {
                    if let Err(err) = domain.parse(body) {
                        panic!("{path}: {body}: {err}");
                    }
                }
            }
        }
    }

    #[test]
    fn an_erasure_leaves_no_personal_value_in_clear() {
        // The samples folded with every personal value marked, each subject
        // erased: no entity of either consumer keeps a marker. (A member's
        // name copied into a book's attribute undeclared would be named.)
        let samples = SAMPLES.map(|(_, sample)| sample);
        match sequence_guard::testkit::check_erasures(&domain(), &samples) {
            Ok(followed) => assert_eq!(followed, 4, "two members' name and email"),
            Err(leak) => panic!("{leak}"),
        }
        if let Err(leak) = sequence_guard::testkit::check_erasures(&loans::domain(), &samples) {
            panic!("{leak}");
        }
    }
}
