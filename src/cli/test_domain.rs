//! A small domain for the tools' unit tests: notes (an entity) and a word
//! count per book (a counter, not sequenced), named nowhere else.

use serde::{Deserialize, Serialize};

use crate::handling::Counter;
use crate::{Decision, Domain, Entity, Events, Handling, Sequenced};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Note {
    pub(crate) sequence: u64,
    pub(crate) last_event_id: String,
    pub(crate) text: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) tag: Option<String>,
}

impl Entity for Note {
    const KIND: &'static str = "NOTE";
    fn sequence(&self) -> u64 {
        self.sequence
    }
    fn last_event_id(&self) -> &str {
        &self.last_event_id
    }
}

pub(crate) static WORDS: Counter = Counter {
    kind: "BOOK",
    sort_key: "WORDS",
    attribute: "count",
};

#[derive(Debug, Deserialize)]
pub(crate) struct Text {
    text: String,
}

#[derive(Debug, Deserialize)]
pub(crate) struct Words {
    book: String,
    delta: i64,
}

/// `NoteWritten` and `NoteEdited` (sequenced), `WordsCounted` (added to the
/// book's count once per event; its stream is the book).
#[derive(Debug, Deserialize)]
#[serde(tag = "type", content = "data")]
pub(crate) enum NoteEvent {
    NoteWritten(Text),
    NoteEdited(Text),
    WordsCounted(Words),
}

fn written(note: &mut Option<Note>, event: &Sequenced<Text>) -> Decision {
    if note.is_some() {
        return Decision::Duplicate;
    }
    *note = Some(Note {
        sequence: event.sequence,
        last_event_id: event.event_id.clone(),
        text: event.data.text.clone(),
        tag: None,
    });
    Decision::Applied
}

fn edited(note: &mut Option<Note>, event: &Sequenced<Text>) -> Decision {
    let Some(note) = note else {
        return Decision::NotCreated;
    };
    if note.sequence >= event.sequence {
        return Decision::Duplicate;
    }
    if note.sequence + 1 != event.sequence {
        return Decision::Gap;
    }
    note.text.clone_from(&event.data.text);
    note.last_event_id.clone_from(&event.event_id);
    note.sequence = event.sequence;
    Decision::Applied
}

impl Events for NoteEvent {
    fn handling(self) -> Handling {
        match self {
            NoteEvent::NoteWritten(data) => Handling::sequenced(data, written),
            NoteEvent::NoteEdited(data) => Handling::sequenced(data, edited),
            NoteEvent::WordsCounted(data) => {
                Handling::add("words", &WORDS, data.book.clone(), data.delta)
            }
        }
    }
}

/// The notes' domain, registered.
pub(crate) fn domain() -> Domain {
    Domain::new::<NoteEvent>().entity::<Note>().counter(&WORDS)
}
