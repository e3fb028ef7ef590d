//! The library's events: what its producer appends (a member joins, a book
//! is added, lent and returned), what the `loans` process appends (a
//! reminder, a fine), and the erasure `erase` appends. One enum, tagged by
//! the envelope's `type`, each event's `data` a struct that declares its
//! limits; the registration says how each is handled.
//!
//! | event | stream | handled as | handler |
//! | --- | --- | --- | --- |
//! | `MemberJoined` | the member's (`ada`) | a creation; `name` and `email` personal, the member's own | [`on_member_joined`] |
//! | `BookAdded` | the book's (`book-1`) | a creation | [`on_book_added`] |
//! | `BookLent` | the book's | sequenced; effects on the member's activity (`onLoan` +1, `loans` +1) | [`on_book_lent`] |
//! | `BookReturned` | the book's | sequenced; effect `onLoan` -1 | [`on_book_returned`] |
//! | `ReminderSent` | the book's (appended by `loans`) | sequenced | [`on_reminder_sent`] |
//! | `FineCharged` | the book's (appended by `loans`) | sequenced; effect `fines` +1 | [`on_fine_charged`] |
//! | `PersonalDataErased` | the member's (appended by `erase`) | the member's name and email become `(erased)` | `Handling::erasure` |

use sequence_guard::limits::{Text, non_negative};
use sequence_guard::personal::{Erasure, Personal};
use sequence_guard::{Events, Handling};
use serde::Deserialize;

use crate::books::{
    on_book_added, on_book_lent, on_book_returned, on_fine_charged, on_reminder_sent,
};
use crate::members::on_member_joined;

/// `MemberJoined` data: a member's name and email, both personal (sealed
/// by `append` under the member's key, forgotten by `erase --subject`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Joining {
    pub name: Text<1, 256>,
    pub email: Text<3, 256>,
}

/// `BookAdded` data.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Title {
    pub title: Text<1, 256>,
}

/// `BookLent`, `BookReturned` and `ReminderSent` data: the member (their
/// id, the stream of their `MemberJoined`; an opaque id, not personal).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Loan {
    pub member: Text<1, 256>,
}

/// `FineCharged` data: the member and the amount.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Fine {
    pub member: Text<1, 256>,
    #[serde(deserialize_with = "non_negative")]
    pub amount_cents: u64,
}

/// Every event of the library's event store, by the envelope's `type`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(tag = "type", content = "data")]
pub enum LibraryEvent {
    MemberJoined(Joining),
    BookAdded(Title),
    BookLent(Loan),
    BookReturned(Loan),
    ReminderSent(Loan),
    FineCharged(Fine),
    PersonalDataErased(Erasure),
}

/// The registration: how each type is handled, by which handler; and
/// which fields are personal.
impl Events for LibraryEvent {
    fn handling(self) -> Handling {
        match self {
            LibraryEvent::MemberJoined(data) => Handling::sequenced(data, on_member_joined),
            LibraryEvent::BookAdded(data) => Handling::sequenced(data, on_book_added),
            LibraryEvent::BookLent(data) => Handling::sequenced_with_effects(data, on_book_lent),
            LibraryEvent::BookReturned(data) => {
                Handling::sequenced_with_effects(data, on_book_returned)
            }
            LibraryEvent::ReminderSent(data) => Handling::sequenced(data, on_reminder_sent),
            LibraryEvent::FineCharged(data) => {
                Handling::sequenced_with_effects(data, on_fine_charged)
            }
            // Under the guard: the member's name and email replaced with
            // `(erased)`, the rest kept.
            LibraryEvent::PersonalDataErased(data) => Handling::erasure(data),
        }
    }

    /// A member's name and email are personal, the member's own (the
    /// subject is the event's `aggregateId`: the member).
    fn personal() -> Personal {
        Personal::new().fields("MemberJoined", &["name", "email"])
    }
}
