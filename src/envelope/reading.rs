//! A domain reads a message body ([`Domain::parse`]): the envelope's fields,
//! its sealed values opened with the domain's keys, `data` upcast and read
//! as the event type declares it, and the entity kind or counter its
//! handling names checked against the domain's registrations. And the keys
//! bodies read in bulk need, read first ([`Domain::fetch_keys`]).

use serde_json::Value;

use super::sealed::{Opening, sealed_subject};
use super::{Event, InvalidMessage, Parser, parse_body};
use crate::domain::{Domain, short_name};
use crate::personal::KeyError;

impl Domain {
    /// The keys reading `bodies` needs, read from their items (a key kept
    /// from before is used again only while its item holds it; a subject
    /// erased since reads as the placeholder): call it before reading
    /// stored bodies in bulk. On an error, read none of them.
    pub async fn fetch_keys<'a>(
        &self,
        bodies: impl IntoIterator<Item = &'a str>,
    ) -> Result<(), KeyError> {
        let Some(keys) = &self.keys else {
            return Ok(());
        };
        if self.personal.is_empty() {
            return Ok(());
        }
        let subjects: Vec<String> = bodies
            .into_iter()
            .filter_map(|body| sealed_subject(body, &self.personal))
            .collect();
        keys.confirm(&subjects).await
    }

    /// Reads one message body.
    pub fn parse(&self, body: &str) -> Result<Event, InvalidMessage> {
        let opening = match self.keys.as_deref() {
            Some(keys) => Opening::With(keys),
            None => Opening::NoKeys,
        };
        self.read_body(body, opening)
    }

    /// Reads one message body for its envelope, its personal values not
    /// opened but read as the placeholder: what the dispatcher checks
    /// before it sends a body, which it never reads a key for.
    pub(crate) fn parse_unopened(&self, body: &str) -> Result<Event, InvalidMessage> {
        self.read_body(body, Opening::Placeholder)
    }

    fn read_body(&self, body: &str, opening: Opening<'_>) -> Result<Event, InvalidMessage> {
        let erasure = |data| self.erasure_of(data);
        let event = parse_body(
            self.read,
            self.types,
            &self.versions,
            (&self.personal, opening),
            &erasure,
            body,
        )
        .map_err(|err| self.passed_without_sequence(body, err))?;
        self.check_declared(&event)?;
        Ok(event)
    }

    /// A passed type's event without a sequence, refused with why: a pass
    /// moves its entity to the event's sequence. That a type is unsequenced
    /// is known only from its messages (the producer's handling decides),
    /// so this is said at the first one. Any other refusal is `err`.
    fn passed_without_sequence(&self, body: &str, err: InvalidMessage) -> InvalidMessage {
        // An unsequenced body has neither (`aggregateId` is read first).
        if !matches!(&err, InvalidMessage::Missing(field) if field == "aggregateId" || field == "sequence")
        {
            return err;
        }
        let envelope: Value = serde_json::from_str(body).unwrap_or_default();
        if envelope
            .get("sequence")
            .is_some_and(|sequence| !sequence.is_null())
        {
            return err;
        }
        let event_type = envelope.get("type").and_then(Value::as_str);
        match event_type.and_then(|name| self.passes.iter().find(|pass| **pass == name)) {
            Some(event_type) => InvalidMessage::Invalid {
                field: "sequence".to_owned(),
                problem: format!(
                    "is missing, and {event_type} is passed (Handling::pass): a pass moves its entity to the event's sequence, so it takes only a sequenced type. If {event_type} has no sequence (an unsequenced type, a counter's addition), this consumer ignores it: Handling::ignore()"
                ),
            },
            None => err,
        }
    }

    /// Whether the domain registers the entity kind or the counter the
    /// event's handling writes: an unregistered one would be missed by the
    /// sweep (its parked events never alarm) and by `inspect`.
    fn check_declared(&self, event: &Event) -> Result<(), InvalidMessage> {
        if let Some(kind) = event.kind() {
            let registered = self
                .kinds
                .iter()
                .any(|known| known.name == kind.name && known.type_name() == kind.type_name());
            if !registered {
                return Err(InvalidMessage::Undeclared(format!(
                    "{} writes a {} entity ({}), and the domain does not register it: add .entity::<{}>() to the domain",
                    event.handler(),
                    kind.name,
                    kind.type_name(),
                    short_name(kind.type_name())
                )));
            }
        }
        if let Some(effect) = event.deduplicated() {
            if !self.counters.contains(&effect.counter) {
                return Err(InvalidMessage::Undeclared(format!(
                    "{} adds to the counter {}, and the domain does not register it: add .counter(&...) with that counter to the domain",
                    event.handler(),
                    effect.counter.label()
                )));
            }
        }
        Ok(())
    }
}

impl Parser for Domain {
    fn parse(&self, body: &str) -> Result<Event, InvalidMessage> {
        Domain::parse(self, body)
    }
}
