//! The suite's own domain, a lending library: a book's stream says who has
//! it (`BookLent { member }`, `BookReturned { member }`), and each event
//! also moves its member's numbers, keyed by the member, in the same write.

use sequence_guard::handling::{Counter, Effects};
use sequence_guard::{Decision, Domain, Entity, Events, Handling, Sequenced};
use serde::{Deserialize, Serialize};

/// A book: who has it now, and its stream's place.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Book {
    pub sequence: u64,
    pub last_event_id: String,
    pub lent_to: Option<String>,
}

impl Entity for Book {
    const KIND: &'static str = "BOOK";
    fn sequence(&self) -> u64 {
        self.sequence
    }
    fn last_event_id(&self) -> &str {
        &self.last_event_id
    }
}

/// The books a member holds now (`MEMBER#<id>`, `ACTIVITY`, `onLoan`).
pub static ON_LOAN: Counter = Counter {
    kind: "MEMBER",
    sort_key: "ACTIVITY",
    attribute: "onLoan",
};

/// The loans a member ever had: on the same item as [`ON_LOAN`].
pub static LOANS: Counter = Counter {
    kind: "MEMBER",
    sort_key: "ACTIVITY",
    attribute: "loans",
};

/// The recalls a member was sent (an item of its own: `RECALLS`).
pub static RECALLS: Counter = Counter {
    kind: "MEMBER",
    sort_key: "RECALLS",
    attribute: "recalls",
};

/// A counter the domain does not register.
pub static UNREGISTERED: Counter = Counter {
    kind: "SHELF",
    sort_key: "BOOKS",
    attribute: "count",
};

#[derive(Debug, Deserialize)]
pub struct Added {}

#[derive(Debug, Deserialize)]
pub struct Loan {
    pub member: String,
}

/// The members a recall goes to: an effect on each one's item.
#[derive(Debug, Deserialize)]
pub struct Recall {
    pub members: Vec<String>,
}

/// The book stream's event types, each variant named as its `type`.
#[derive(Debug, Deserialize)]
#[serde(tag = "type", content = "data")]
#[allow(clippy::enum_variant_names)] // the event types' names
pub enum BookEvent {
    BookAdded(Added),
    BookLent(Loan),
    BookReturned(Loan),
    BookRecalled(Recall),
    /// A handler that adds to counters on a duplicate: a fault.
    BookMisfiled(Loan),
    /// A handler that adds to a counter the domain does not register.
    BookShelved(Loan),
}

impl Events for BookEvent {
    fn handling(self) -> Handling {
        match self {
            BookEvent::BookAdded(data) => Handling::sequenced(data, added),
            BookEvent::BookLent(data) => Handling::sequenced_with_effects(data, lent),
            BookEvent::BookReturned(data) => Handling::sequenced_with_effects(data, returned),
            BookEvent::BookRecalled(data) => Handling::sequenced_with_effects(data, recalled),
            BookEvent::BookMisfiled(data) => Handling::sequenced_with_effects(data, misfiled),
            BookEvent::BookShelved(data) => Handling::sequenced_with_effects(data, shelved),
        }
    }
}

pub fn domain() -> Domain {
    Domain::new::<BookEvent>()
        .entity::<Book>()
        .counter(&ON_LOAN)
        .counter(&LOANS)
        .counter(&RECALLS)
}

pub fn added(book: &mut Option<Book>, event: &Sequenced<Added>) -> Decision {
    if book.is_some() {
        return Decision::Duplicate;
    }
    *book = Some(Book {
        sequence: event.sequence,
        last_event_id: event.event_id.clone(),
        lent_to: None,
    });
    Decision::Applied
}

/// The guard of an update: `Ok` with the book when the event is its next.
pub fn next<'a, D>(
    book: &'a mut Option<Book>,
    event: &Sequenced<D>,
) -> Result<&'a mut Book, Decision> {
    let Some(book) = book else {
        return Err(Decision::NotCreated);
    };
    if book.sequence >= event.sequence {
        return Err(Decision::Duplicate);
    }
    if book.sequence + 1 != event.sequence {
        return Err(Decision::Gap);
    }
    book.sequence = event.sequence;
    book.last_event_id = event.event_id.clone();
    Ok(book)
}

pub fn lent(book: &mut Option<Book>, event: &Sequenced<Loan>, effects: &mut Effects) -> Decision {
    let book = match next(book, event) {
        Ok(book) => book,
        Err(decision) => return decision,
    };
    book.lent_to = Some(event.data.member.clone());
    effects.add(&ON_LOAN, &event.data.member, 1);
    effects.add(&LOANS, &event.data.member, 1);
    Decision::Applied
}

fn returned(book: &mut Option<Book>, event: &Sequenced<Loan>, effects: &mut Effects) -> Decision {
    let book = match next(book, event) {
        Ok(book) => book,
        Err(decision) => return decision,
    };
    book.lent_to = None;
    effects.add(&ON_LOAN, &event.data.member, -1);
    Decision::Applied
}

fn recalled(book: &mut Option<Book>, event: &Sequenced<Recall>, effects: &mut Effects) -> Decision {
    if let Err(decision) = next(book, event) {
        return decision;
    }
    for member in &event.data.members {
        effects.add(&RECALLS, member, 1);
    }
    Decision::Applied
}

fn misfiled(book: &mut Option<Book>, event: &Sequenced<Loan>, effects: &mut Effects) -> Decision {
    effects.add(&ON_LOAN, &event.data.member, 1);
    match book {
        Some(book) if book.sequence >= event.sequence => Decision::Duplicate,
        Some(_) => Decision::Gap,
        None => Decision::NotCreated,
    }
}

fn shelved(book: &mut Option<Book>, event: &Sequenced<Loan>, effects: &mut Effects) -> Decision {
    if let Err(decision) = next(book, event) {
        return decision;
    }
    effects.add(&UNREGISTERED, &event.data.member, 1);
    Decision::Applied
}
