//! Members: the projection of each member's stream, whose name and email
//! are personal. `erase --subject <member>` forgets them: their key is
//! deleted, and each consumer replaces the two with `(erased)`, under the
//! guard, keeping the rest (and the member's activity, which holds numbers
//! only).
//!
//! Item: `MEMBER#<aggregateId>` / `STATE` (`sequence`, `lastEventId`,
//! `name`, `email`), beside the member's `ACTIVITY` item.

use sequence_guard::{Decision, Entity, Sequenced};
use serde::{Deserialize, Serialize};

use crate::events::Joining;

/// A member: the item `MEMBER#<aggregateId>` / `STATE`. Its `name` and
/// `email` are personal: the line `replay`, `inspect` and `local` print of
/// it names them without their values (`email (personal) name
/// (personal)`), and says `(erased)` once the member is forgotten.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Entity)]
#[serde(rename_all = "camelCase")]
#[entity(kind = "MEMBER", personal("name", "email"))]
pub struct Member {
    pub sequence: u64,
    pub last_event_id: String,
    pub name: String,
    pub email: String,
}

/// `MemberJoined`: a creation checks existence instead of the sequence.
pub fn on_member_joined(member: &mut Option<Member>, event: &Sequenced<Joining>) -> Decision {
    if member.is_some() {
        return Decision::Duplicate;
    }
    *member = Some(Member {
        sequence: event.sequence,
        last_event_id: event.event_id.clone(),
        name: event.data.name.to_string(),
        email: event.data.email.to_string(),
    });
    Decision::Applied
}

#[cfg(test)]
mod tests {
    use sequence_guard::limits::Text;
    use sequence_guard::personal::Erasure;
    use sequence_guard::testkit::given;

    use super::*;
    use crate::events::LibraryEvent;

    fn ada(sequence: u64, name: &str, email: &str) -> Member {
        Member {
            sequence,
            last_event_id: format!("e{sequence}"),
            name: name.into(),
            email: email.into(),
        }
    }

    #[test]
    fn a_member_joins_once() {
        let joined = || {
            LibraryEvent::MemberJoined(Joining {
                name: Text::new("Ada Lovelace").expect("a name"),
                email: Text::new("ada@example.com").expect("an email"),
            })
        };
        let kept = ada(1, "Ada Lovelace", "ada@example.com");
        given(None::<Member>)
            .when("e1", "ada", 1, joined())
            .then(Decision::Applied, Some(kept.clone()));
        given(Some(kept.clone()))
            .when("e1", "ada", 1, joined())
            .then(Decision::Duplicate, Some(kept.clone()));
    }

    #[test]
    fn an_erasure_forgets_the_name_and_email_and_keeps_the_rest() {
        let erased = || LibraryEvent::PersonalDataErased(Erasure::new("ada", "MemberJoined"));
        let forgotten = ada(2, "(erased)", "(erased)");
        given(Some(ada(1, "Ada Lovelace", "ada@example.com")))
            .when("e2", "ada", 2, erased())
            .then(Decision::Applied, Some(forgotten.clone()));
        // Again: a duplicate.
        given(Some(forgotten.clone()))
            .when("e2", "ada", 2, erased())
            .then(Decision::Duplicate, Some(forgotten));
    }
}
