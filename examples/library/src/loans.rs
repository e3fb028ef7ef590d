//! The process `loans`: a consumer of the same events that reacts with
//! events of its own. It follows each book's stream; a loan gets a
//! deadline [`LOAN_SECONDS`] later. If the book is not back by then, the
//! sweep fires it: `loans` appends `ReminderSent` to the book's stream and
//! gives the member [`GRACE_SECONDS`] more; if the book is still not back,
//! it appends `FineCharged` ([`FINE_CENTS`]). A return before either
//! clears the deadline: nothing pending is sent.
//!
//! | on | when | its state becomes | its deadline | it appends |
//! | --- | --- | --- | --- | --- |
//! | `BookAdded` | | `ON_SHELF` | | |
//! | `BookLent` | | `LENT`, the member kept | now + 14 days | |
//! | `BookReturned` | | `ON_SHELF` | cleared | |
//! | the deadline | `LENT` | `REMINDED` | now + 7 days | `ReminderSent`, at the sequence it has seen |
//! | the deadline | `REMINDED` | `FINED` | | `FineCharged`, at the sequence it has seen |
//! | `ReminderSent` (its own, or a person's) | `LENT` | `REMINDED` | now + 7 days | |
//! | `FineCharged` (its own, or a person's) | | `FINED` | cleared | |
//!
//! Its state and what it appends are written in one transaction, or not at
//! all. A deadline's append is at the sequence `loans` has seen
//! ([`DueOutbox::append`]): if the book was returned meanwhile (an event
//! `loans` has not seen yet), nothing is written, and the return, when it
//! arrives, clears the deadline. It never reads a member's name or email:
//! their streams are not its own, and it ignores them.
//!
//! Its item, in its own table: `LOAN#<book>` / `STATE` (`sequence`,
//! `lastEventId`, `state`, `member` while lent; and the engine's `dueAt`
//! while a deadline is set). Its binaries are `library-loans-process` (the
//! Lambda function's code; the function is `<stack>-loans-projector`),
//! `-replay`, `-rebuild`, `-verify` and `-inspect`.

use serde::de::IgnoredAny;
use serde::{Deserialize, Serialize};

use sequence_guard::process::{Due, DueOutbox, Outbox, Process};
use sequence_guard::{Decision, Domain, Entity, Events, Handling, Sequenced};

use crate::events::Loan;
use crate::guard;

/// How long a loan lasts: 14 days.
pub const LOAN_SECONDS: u64 = 14 * 24 * 60 * 60;

/// How long a reminded member has before the fine: 7 days.
pub const GRACE_SECONDS: u64 = 7 * 24 * 60 * 60;

/// The fine, in cents.
pub const FINE_CENTS: u64 = 500;

/// Where a book's loan stands for `loans`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum LoanState {
    OnShelf,
    Lent,
    Reminded,
    Fined,
}

/// `loans`' state for one book: `LOAN#<book>` / `STATE`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Entity)]
#[serde(rename_all = "camelCase")]
#[entity(kind = "LOAN")]
pub struct LoanStatus {
    pub sequence: u64,
    pub last_event_id: String,
    pub state: LoanState,
    /// The member who has the book, while lent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub member: Option<String>,
}

/// `ReminderSent` data, as `loans` appends it.
#[derive(Debug, Serialize)]
struct Reminder<'a> {
    member: &'a str,
}

/// `FineCharged` data, as `loans` appends it.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Charge<'a> {
    member: &'a str,
    amount_cents: u64,
}

/// The events it receives: every type of the library's store. It reads
/// the member of a loan, and nothing else.
#[derive(Debug, Deserialize)]
#[serde(tag = "type", content = "data")]
#[allow(clippy::enum_variant_names)] // the event types' names
pub enum LoansEvent {
    MemberJoined(IgnoredAny),
    BookAdded(IgnoredAny),
    BookLent(Loan),
    BookReturned(IgnoredAny),
    ReminderSent(IgnoredAny),
    FineCharged(IgnoredAny),
    PersonalDataErased(IgnoredAny),
}

impl Events for LoansEvent {
    fn handling(self) -> Handling {
        match self {
            LoansEvent::BookAdded(data) => Handling::process(data, on_book_added),
            LoansEvent::BookLent(data) => Handling::process(data, on_book_lent),
            LoansEvent::BookReturned(data) => Handling::process(data, on_book_returned),
            LoansEvent::ReminderSent(data) => Handling::process(data, on_reminder_sent),
            LoansEvent::FineCharged(data) => Handling::process(data, on_fine_charged),
            // A member's stream is not a loan's; nor is a member's erasure.
            LoansEvent::MemberJoined(_) | LoansEvent::PersonalDataErased(_) => Handling::ignore(),
        }
    }
}

/// The process, registered: its state, its deadline's handler, and the
/// event store it appends to (the library's).
pub fn domain() -> Domain {
    Domain::new::<LoansEvent>()
        .entity::<LoanStatus>()
        .with_process(Process::new("loans", crate::domain()).on_deadline(on_deadline))
}

/// `BookAdded`: on the shelf.
pub fn on_book_added(
    state: &mut Option<LoanStatus>,
    event: &Sequenced<IgnoredAny>,
    _: &mut Outbox,
) -> Decision {
    if state.is_some() {
        return Decision::Duplicate;
    }
    *state = Some(LoanStatus {
        sequence: event.sequence,
        last_event_id: event.event_id.clone(),
        state: LoanState::OnShelf,
        member: None,
    });
    Decision::Applied
}

/// `BookLent`: lent, due back in 14 days.
pub fn on_book_lent(
    state: &mut Option<LoanStatus>,
    event: &Sequenced<Loan>,
    outbox: &mut Outbox,
) -> Decision {
    let state = match guard(state, event) {
        Ok(state) => state,
        Err(decision) => return decision,
    };
    state.state = LoanState::Lent;
    state.member = Some(event.data.member.to_string());
    outbox.set_deadline(outbox.now() + LOAN_SECONDS);
    moved(state, event);
    Decision::Applied
}

/// `BookReturned`: back on the shelf; what was pending is not sent.
pub fn on_book_returned(
    state: &mut Option<LoanStatus>,
    event: &Sequenced<IgnoredAny>,
    outbox: &mut Outbox,
) -> Decision {
    let state = match guard(state, event) {
        Ok(state) => state,
        Err(decision) => return decision,
    };
    state.state = LoanState::OnShelf;
    state.member = None;
    outbox.clear_deadline();
    moved(state, event);
    Decision::Applied
}

/// `ReminderSent`: its own (already `REMINDED`), or a person's, which
/// starts the grace period as its own does.
pub fn on_reminder_sent(
    state: &mut Option<LoanStatus>,
    event: &Sequenced<IgnoredAny>,
    outbox: &mut Outbox,
) -> Decision {
    let state = match guard(state, event) {
        Ok(state) => state,
        Err(decision) => return decision,
    };
    if state.state == LoanState::Lent {
        state.state = LoanState::Reminded;
        outbox.set_deadline(outbox.now() + GRACE_SECONDS);
    }
    moved(state, event);
    Decision::Applied
}

/// `FineCharged` (its own, or a person's): fined, nothing more pending.
pub fn on_fine_charged(
    state: &mut Option<LoanStatus>,
    event: &Sequenced<IgnoredAny>,
    outbox: &mut Outbox,
) -> Decision {
    let state = match guard(state, event) {
        Ok(state) => state,
        Err(decision) => return decision,
    };
    state.state = LoanState::Fined;
    outbox.clear_deadline();
    moved(state, event);
    Decision::Applied
}

/// The deadline: a book still lent gets a reminder and 7 more days; a book
/// still out after them, a fine. Each at the sequence `loans` has seen.
/// (A deadline moves no sequence: no event was applied.)
pub fn on_deadline(state: &mut LoanStatus, _: &Due, outbox: &mut DueOutbox) {
    let Some(member) = state.member.clone() else {
        return;
    };
    match state.state {
        LoanState::Lent => {
            outbox.append("ReminderSent", &Reminder { member: &member });
            outbox.set_deadline(outbox.now() + GRACE_SECONDS);
            state.state = LoanState::Reminded;
        }
        LoanState::Reminded => {
            let charge = Charge {
                member: &member,
                amount_cents: FINE_CENTS,
            };
            outbox.append("FineCharged", &charge);
            state.state = LoanState::Fined;
        }
        LoanState::OnShelf | LoanState::Fined => {}
    }
}

/// The state at the event: its sequence and last event id.
fn moved<D>(state: &mut LoanStatus, event: &Sequenced<D>) {
    state.sequence = event.sequence;
    state.last_event_id.clone_from(&event.event_id);
}

#[cfg(test)]
mod tests {
    use sequence_guard::limits::Text;
    use sequence_guard::producer::ExpectedSequence;
    use sequence_guard::testkit::{given, is_ignored};

    use super::*;

    const NOW: u64 = 1_800_000_000;

    fn at(sequence: u64, state: LoanState, member: Option<&str>) -> LoanStatus {
        LoanStatus {
            sequence,
            last_event_id: format!("e{sequence}"),
            state,
            member: member.map(str::to_owned),
        }
    }

    fn lent(member: &str) -> LoansEvent {
        LoansEvent::BookLent(Loan {
            member: Text::new(member).expect("a member"),
        })
    }

    #[test]
    fn the_process_is_well_declared() {
        if let Err(err) = domain().check() {
            panic!("{err}");
        }
    }

    #[test]
    fn a_book_added_is_on_the_shelf_with_no_deadline() {
        let added = given(None::<LoanStatus>).within(&domain()).at(NOW).when(
            "e1",
            "book-1",
            1,
            LoansEvent::BookAdded(IgnoredAny),
        );
        assert!(added.outbox().is_empty());
        added.then(Decision::Applied, Some(at(1, LoanState::OnShelf, None)));
    }

    #[test]
    fn a_loan_is_due_back_in_14_days() {
        let then = given(Some(at(1, LoanState::OnShelf, None)))
            .within(&domain())
            .at(NOW)
            .when("e2", "book-1", 2, lent("ada"));
        assert_eq!(then.outbox().deadline(), Some(Some(NOW + LOAN_SECONDS)));
        then.appends(&[])
            .then(Decision::Applied, Some(at(2, LoanState::Lent, Some("ada"))));
    }

    #[test]
    fn a_return_clears_what_is_pending() {
        for before in [LoanState::Lent, LoanState::Reminded] {
            let then = given(Some(at(3, before, Some("ada"))))
                .within(&domain())
                .at(NOW)
                .when("e4", "book-1", 4, LoansEvent::BookReturned(IgnoredAny));
            assert_eq!(then.outbox().deadline(), Some(None), "{before:?}");
            then.appends(&[])
                .then(Decision::Applied, Some(at(4, LoanState::OnShelf, None)));
        }
    }

    #[test]
    fn the_deadline_of_a_loan_sends_a_reminder_at_the_sequence_seen() {
        let fired = given(Some(at(2, LoanState::Lent, Some("ada"))))
            .within(&domain())
            .at(NOW)
            .when_due("book-1", NOW)
            .appends(&[("book-1", "ReminderSent")]);
        let reminder = &fired.outbox().appends()[0];
        assert_eq!(reminder.expected, ExpectedSequence::Exact(2));
        assert_eq!(reminder.event.data, serde_json::json!({"member": "ada"}));
        assert_eq!(fired.outbox().deadline(), Some(Some(NOW + GRACE_SECONDS)));
        fired.then(at(2, LoanState::Reminded, Some("ada")));
    }

    #[test]
    fn the_deadline_after_the_grace_charges_a_fine_once() {
        let fired = given(Some(at(3, LoanState::Reminded, Some("ada"))))
            .within(&domain())
            .at(NOW)
            .when_due("book-1", NOW)
            .appends(&[("book-1", "FineCharged")]);
        let fine = &fired.outbox().appends()[0];
        assert_eq!(fine.expected, ExpectedSequence::Exact(3));
        assert_eq!(
            fine.event.data,
            serde_json::json!({"member": "ada", "amountCents": FINE_CENTS})
        );
        // No further deadline: the engine clears the one that fired.
        assert_eq!(fired.outbox().deadline(), None);
        fired.then(at(3, LoanState::Fined, Some("ada")));

        // Its own FineCharged, when it arrives: fined, nothing pending.
        let then = given(Some(at(3, LoanState::Fined, Some("ada"))))
            .within(&domain())
            .when("e4", "book-1", 4, LoansEvent::FineCharged(IgnoredAny));
        assert_eq!(then.outbox().deadline(), Some(None));
        then.then(
            Decision::Applied,
            Some(at(4, LoanState::Fined, Some("ada"))),
        );

        // A deadline of a fined or returned book: nothing.
        for state in [
            at(4, LoanState::Fined, Some("ada")),
            at(4, LoanState::OnShelf, None),
        ] {
            given(Some(state.clone()))
                .within(&domain())
                .at(NOW)
                .when_due("book-1", NOW)
                .appends(&[])
                .then(state);
        }
    }

    #[test]
    fn its_own_reminder_moves_the_sequence_and_a_persons_starts_the_grace() {
        // Its own: already REMINDED, the grace deadline set when it fired.
        let own = given(Some(at(2, LoanState::Reminded, Some("ada"))))
            .within(&domain())
            .at(NOW)
            .when("e3", "book-1", 3, LoansEvent::ReminderSent(IgnoredAny));
        assert!(own.outbox().is_empty());
        own.then(
            Decision::Applied,
            Some(at(3, LoanState::Reminded, Some("ada"))),
        );
        // A person's, on a book still lent: the grace starts now.
        let by_hand = given(Some(at(2, LoanState::Lent, Some("ada"))))
            .within(&domain())
            .at(NOW)
            .when("e3", "book-1", 3, LoansEvent::ReminderSent(IgnoredAny));
        assert_eq!(by_hand.outbox().deadline(), Some(Some(NOW + GRACE_SECONDS)));
        by_hand.then(
            Decision::Applied,
            Some(at(3, LoanState::Reminded, Some("ada"))),
        );
    }

    #[test]
    fn a_members_events_are_not_its_own() {
        assert!(is_ignored(LoansEvent::MemberJoined(IgnoredAny)));
        assert!(is_ignored(LoansEvent::PersonalDataErased(IgnoredAny)));
    }
}
