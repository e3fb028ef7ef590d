//! Books: the projection of each book's stream, and, through effects, each
//! member's activity, keyed by the member: three counters on one item.
//!
//! Items: `BOOK#<book>` / `STATE` (`sequence`, `lastEventId`, `title`,
//! `lentTo` while lent, `overdue` once reminded until returned) and
//! `MEMBER#<member>` / `ACTIVITY` (`onLoan`, `loans`, `fines`), written in
//! the same transaction as the book, once per event (the book's write is
//! conditional on its `sequence`).

use sequence_guard::handling::{Counter, Effects};
use sequence_guard::{Decision, Entity, Sequenced};
use serde::{Deserialize, Serialize};

use crate::events::{Fine, Loan, Title};
use crate::guard;

/// A book: the item `BOOK#<aggregateId>` / `STATE`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Entity)]
#[serde(rename_all = "camelCase")]
#[entity(kind = "BOOK")]
pub struct Book {
    /// The sequence of the last event applied (the guard's condition reads it).
    pub sequence: u64,
    pub last_event_id: String,
    pub title: String,
    /// The member who has it, while lent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lent_to: Option<String>,
    /// Reminded and not yet returned.
    #[serde(default)]
    pub overdue: bool,
}

/// The books a member holds now: `MEMBER#<member>`, `ACTIVITY`, `onLoan`.
pub static ON_LOAN: Counter = Counter {
    kind: "MEMBER",
    sort_key: "ACTIVITY",
    attribute: "onLoan",
};

/// The loans a member ever had, on the same item.
pub static LOANS: Counter = Counter {
    kind: "MEMBER",
    sort_key: "ACTIVITY",
    attribute: "loans",
};

/// The fines a member was charged, on the same item.
pub static FINES: Counter = Counter {
    kind: "MEMBER",
    sort_key: "ACTIVITY",
    attribute: "fines",
};

/// `BookAdded`: a creation checks existence instead of the sequence.
pub fn on_book_added(book: &mut Option<Book>, event: &Sequenced<Title>) -> Decision {
    if book.is_some() {
        return Decision::Duplicate;
    }
    *book = Some(Book {
        sequence: event.sequence,
        last_event_id: event.event_id.clone(),
        title: event.data.title.to_string(),
        lent_to: None,
        overdue: false,
    });
    Decision::Applied
}

/// `BookLent`: the guard, the book lent to the member, who holds one more
/// book and had one more loan.
pub fn on_book_lent(
    book: &mut Option<Book>,
    event: &Sequenced<Loan>,
    effects: &mut Effects,
) -> Decision {
    let book = match guard(book, event) {
        Ok(book) => book,
        Err(decision) => return decision,
    };
    let member = event.data.member.to_string();
    effects.add(&ON_LOAN, &member, 1);
    effects.add(&LOANS, &member, 1);
    book.lent_to = Some(member);
    book.overdue = false;
    moved(book, event);
    Decision::Applied
}

/// `BookReturned`: the guard, the book back; the member holds one less.
pub fn on_book_returned(
    book: &mut Option<Book>,
    event: &Sequenced<Loan>,
    effects: &mut Effects,
) -> Decision {
    let book = match guard(book, event) {
        Ok(book) => book,
        Err(decision) => return decision,
    };
    effects.add(&ON_LOAN, event.data.member.as_str(), -1);
    book.lent_to = None;
    book.overdue = false;
    moved(book, event);
    Decision::Applied
}

/// `ReminderSent`: the guard; the book is overdue.
pub fn on_reminder_sent(book: &mut Option<Book>, event: &Sequenced<Loan>) -> Decision {
    let book = match guard(book, event) {
        Ok(book) => book,
        Err(decision) => return decision,
    };
    book.overdue = true;
    moved(book, event);
    Decision::Applied
}

/// `FineCharged`: the guard; the member was fined once more.
pub fn on_fine_charged(
    book: &mut Option<Book>,
    event: &Sequenced<Fine>,
    effects: &mut Effects,
) -> Decision {
    let book = match guard(book, event) {
        Ok(book) => book,
        Err(decision) => return decision,
    };
    effects.add(&FINES, event.data.member.as_str(), 1);
    moved(book, event);
    Decision::Applied
}

/// The book at the event: its sequence and last event id.
fn moved<D>(book: &mut Book, event: &Sequenced<D>) {
    book.sequence = event.sequence;
    book.last_event_id.clone_from(&event.event_id);
}

#[cfg(test)]
mod tests {
    use sequence_guard::Decision;
    use sequence_guard::limits::Text;
    use sequence_guard::testkit::given;

    use super::*;
    use crate::domain;
    use crate::events::LibraryEvent;

    fn book(sequence: u64, lent_to: Option<&str>, overdue: bool) -> Book {
        Book {
            sequence,
            last_event_id: format!("e{sequence}"),
            title: "Dune".into(),
            lent_to: lent_to.map(str::to_owned),
            overdue,
        }
    }

    fn loan(member: &str) -> Loan {
        Loan {
            member: Text::new(member).expect("a member"),
        }
    }

    #[test]
    fn a_book_added_is_created_at_its_sequence_once() {
        let added = || {
            LibraryEvent::BookAdded(Title {
                title: Text::new("Dune").expect("a title"),
            })
        };
        given(None::<Book>)
            .when("e1", "book-1", 1, added())
            .then(Decision::Applied, Some(book(1, None, false)));
        given(Some(book(3, None, false)))
            .when("e1", "book-1", 1, added())
            .then(Decision::Duplicate, Some(book(3, None, false)));
    }

    #[test]
    fn a_loan_moves_the_book_and_the_members_activity() {
        given(Some(book(1, None, false)))
            .within(&domain())
            .when("e2", "book-1", 2, LibraryEvent::BookLent(loan("ada")))
            .adds_effects(&[(&ON_LOAN, "ada", 1), (&LOANS, "ada", 1)])
            .then(Decision::Applied, Some(book(2, Some("ada"), false)));
    }

    #[test]
    fn a_return_gives_the_book_back_and_takes_one_off_loan() {
        given(Some(book(3, Some("ada"), true)))
            .within(&domain())
            .when("e4", "book-1", 4, LibraryEvent::BookReturned(loan("ada")))
            .adds_effects(&[(&ON_LOAN, "ada", -1)])
            .then(Decision::Applied, Some(book(4, None, false)));
    }

    #[test]
    fn a_reminder_marks_the_book_overdue_and_a_fine_counts_once() {
        given(Some(book(2, Some("ada"), false)))
            .within(&domain())
            .when("e3", "book-1", 3, LibraryEvent::ReminderSent(loan("ada")))
            .adds_effects(&[])
            .then(Decision::Applied, Some(book(3, Some("ada"), true)));
        let fine = || {
            LibraryEvent::FineCharged(Fine {
                member: Text::new("ada").expect("a member"),
                amount_cents: 500,
            })
        };
        given(Some(book(3, Some("ada"), true)))
            .within(&domain())
            .when("e4", "book-1", 4, fine())
            .adds_effects(&[(&FINES, "ada", 1)])
            .then(Decision::Applied, Some(book(4, Some("ada"), true)));
        // Delivered again: a duplicate, which adds nothing.
        given(Some(book(4, Some("ada"), true)))
            .within(&domain())
            .when("e4", "book-1", 4, fine())
            .adds_effects(&[])
            .then(Decision::Duplicate, Some(book(4, Some("ada"), true)));
    }

    #[test]
    fn the_guard_answers_gap_and_not_created() {
        given(Some(book(1, None, false)))
            .within(&domain())
            .when("e3", "book-1", 3, LibraryEvent::BookLent(loan("ada")))
            .adds_effects(&[])
            .then(Decision::Gap, Some(book(1, None, false)));
        given(None::<Book>)
            .within(&domain())
            .when("e2", "book-1", 2, LibraryEvent::BookLent(loan("ada")))
            .then(Decision::NotCreated, None);
    }
}
