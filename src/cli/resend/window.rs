//! What a resend may not send: an event whose effect only its dedup record
//! keeps from being applied twice, once that record may have expired.
//!
//! A sequenced event resent is absorbed by the guard at any age: the entity
//! knows its sequence. An event of a type the domain handles without one
//! (`Handling::add`: a counter's) is absorbed only by its dedup record,
//! which the consumer keeps `DEDUP_TTL_SECONDS` after it handled the event
//! (never before it was appended): at least until `appendedAt` plus that.
//! A resent copy sent now is handled by now plus the longest a message may
//! wait ([`LONGEST_WAIT_SECONDS`]: the queue's retention, then the
//! dead-letter queue's, then a redrive). Handled later than its record
//! lives, it would be added again. So the whole range is looked at before
//! anything is sent, and a range that holds such an event is refused unless
//! `appendedAt + DEDUP_TTL_SECONDS` is past now plus that wait (and an hour
//! for clocks). With the projector's default window (35 days, sized on the
//! same wait), that refuses every counter's event: a team that resends
//! counters keeps its dedup records longer.

use std::ops::RangeInclusive;

use crate::domain::Domain;
use crate::producer::{EventStore, StoredEvent};
use crate::store::StoreError;

/// The longest a resent message may wait before it is handled: the queue's
/// retention (14 days, as template.yaml sets it), then the dead-letter
/// queue's (14 days: a FIFO queue's message starts its retention again
/// there), then a week to redrive it. `DEDUP_TTL_SECONDS`' default is
/// sized on the same wait (`shop/tests/template/projector.rs`).
pub(super) const LONGEST_WAIT_SECONDS: u64 = 35 * 86_400;

/// Taken off the dedup window besides, for clocks.
pub(super) const CLOCKS_SECONDS: u64 = 3_600;

/// Events read from the event store at a time.
const PAGE: i32 = 100;

/// The consumer's dedup window, and now (epoch seconds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Window {
    /// `DEDUP_TTL_SECONDS`: how long the consumer keeps a dedup record.
    pub(super) ttl_seconds: u64,
    pub(super) now: u64,
}

impl Window {
    /// Whether an event appended at `appended_at` may have lost its dedup
    /// record by the time a copy resent now is handled: its record lives at
    /// least until `appended_at` plus the window, and the copy may be
    /// handled as late as now plus the longest wait (an event without
    /// `appendedAt`, read as 0, may have).
    fn expired(&self, appended_at: u64) -> bool {
        let record_lives_until = appended_at.saturating_add(self.ttl_seconds);
        let copy_handled_by = self
            .now
            .saturating_add(LONGEST_WAIT_SECONDS)
            .saturating_add(CLOCKS_SECONDS);
        record_lives_until < copy_handled_by
    }
}

/// The events of a range that a resend refuses to send: the first, how
/// many, the last, and the first event after the last (from which on the
/// range may be resent).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct TooOld {
    pub(super) sequence: u64,
    pub(super) event_type: String,
    pub(super) appended_at: u64,
    pub(super) count: u64,
    pub(super) last: u64,
    pub(super) next: Option<u64>,
}

impl TooOld {
    /// Why it is refused, and the way to mend the counter instead.
    pub(super) fn explain(&self, stream: &str, window: Window) -> String {
        let age = if self.appended_at == 0 {
            "has no appendedAt".to_owned()
        } else {
            format!(
                "was appended {} days ago",
                window.now.saturating_sub(self.appended_at) / 86_400
            )
        };
        let others = match self.count {
            1 => String::new(),
            count => format!(
                " The range holds {count} such events, up to sequence {}.",
                self.last
            ),
        };
        let from = self.next.map_or_else(String::new, |next| {
            format!(" The events from sequence {next} on may be resent (--from {next}).")
        });
        format!(
            "stream {stream} sequence {}: its type, {}, is deduplicated only by its dedup record, \
             which the consumer keeps DEDUP_TTL_SECONDS ({} s) from when it handled it, and it \
             {age}; a resent copy may wait up to {} days before it is handled (the queue's 14 \
             days, the dead-letter queue's 14, a week to redrive), by when its dedup record may \
             have expired: resending it would add it again. Nothing was sent.{others}{from} Mend \
             the counter instead from verify's \"expected\" and \"found\" (docs/operate.md, \
             Runbook: a hole), or resend counters only from consumers that keep dedup records \
             longer than {} days plus the events' age.",
            self.sequence,
            self.event_type,
            window.ttl_seconds,
            LONGEST_WAIT_SECONDS / 86_400,
            LONGEST_WAIT_SECONDS / 86_400
        )
    }
}

/// What a look at the range found so far.
#[derive(Debug, Default)]
pub(super) struct Look {
    pub(super) too_old: Option<TooOld>,
}

impl Look {
    /// Looks at a page of the range, in order.
    pub(super) fn page(&mut self, events: &[StoredEvent], domain: &Domain, window: Window) {
        for event in events {
            // A body the domain refuses is named when the send reaches it.
            let counted = domain
                .parse(&event.body)
                .is_ok_and(|parsed| parsed.deduplicated().is_some());
            if !(counted && window.expired(event.appended_at)) {
                if let Some(too_old) = &mut self.too_old
                    && too_old.next.is_none()
                {
                    too_old.next = Some(event.sequence);
                }
                continue;
            }
            match &mut self.too_old {
                Some(too_old) => {
                    too_old.count += 1;
                    too_old.last = event.sequence;
                    too_old.next = None;
                }
                None => {
                    self.too_old = Some(TooOld {
                        sequence: event.sequence,
                        event_type: event.event_type.clone(),
                        appended_at: event.appended_at,
                        count: 1,
                        last: event.sequence,
                        next: None,
                    });
                }
            }
        }
    }
}

/// Looks at the whole range, a page at a time, before anything is sent:
/// the events a resend must not send, if any.
pub(super) async fn look(
    events: &EventStore,
    domain: &Domain,
    stream: &str,
    range: &RangeInclusive<u64>,
    window: Window,
) -> Result<Option<TooOld>, StoreError> {
    let mut after = range.start().saturating_sub(1);
    let mut look = Look::default();
    loop {
        let stored = events.read(stream, after, PAGE).await?;
        let page: Vec<StoredEvent> = stored
            .into_iter()
            .take_while(|event| event.sequence <= *range.end())
            .collect();
        let Some(last) = page.last() else {
            return Ok(look.too_old);
        };
        after = last.sequence;
        look.page(&page, domain, window);
        if after >= *range.end() {
            return Ok(look.too_old);
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const DAY: u64 = 86_400;
    const NOW: u64 = 1_764_000_000;
    const WINDOW: Window = Window {
        ttl_seconds: 60 * DAY,
        now: NOW,
    };

    fn words(sequence: u64, age_days: u64) -> StoredEvent {
        StoredEvent {
            sequence,
            event_id: format!("w{sequence}"),
            event_type: "WordsCounted".to_owned(),
            body: json!({"eventId": format!("w{sequence}"), "type": "WordsCounted",
                         "data": {"book": "b-1", "delta": 3}})
            .to_string(),
            appended_at: NOW - age_days * DAY,
        }
    }

    fn note(sequence: u64, age_days: u64) -> StoredEvent {
        let event_type = if sequence == 1 {
            "NoteWritten"
        } else {
            "NoteEdited"
        };
        StoredEvent {
            sequence,
            event_id: format!("e{sequence}"),
            event_type: event_type.to_owned(),
            body: json!({"eventId": format!("e{sequence}"), "type": event_type,
                         "aggregateId": "n-1", "sequence": sequence, "data": {"text": "t"}})
            .to_string(),
            appended_at: NOW - age_days * DAY,
        }
    }

    fn look_at(pages: &[Vec<StoredEvent>]) -> Option<TooOld> {
        let domain = crate::cli::test_domain::domain();
        let mut look = Look::default();
        for page in pages {
            look.page(page, &domain, WINDOW);
        }
        look.too_old
    }

    #[test]
    fn a_counters_event_whose_record_may_expire_before_a_copy_is_handled_is_refused() {
        // Kept 60 days: a copy may wait 35 days (and an hour), so an event
        // appended 24 days ago may be resent, one of 25 days may not.
        assert_eq!(look_at(&[vec![words(1, 24), words(2, 1)]]), None);
        let too_old = look_at(&[vec![words(1, 26), words(2, 25)], vec![words(3, 2)]]);
        assert_eq!(
            too_old,
            Some(TooOld {
                sequence: 1,
                event_type: "WordsCounted".to_owned(),
                appended_at: NOW - 26 * DAY,
                count: 2,
                last: 2,
                next: Some(3),
            })
        );
        let said = too_old
            .map(|t| t.explain("b-1", WINDOW))
            .unwrap_or_default();
        for part in [
            "stream b-1 sequence 1",
            "deduplicated only by its dedup record",
            "DEDUP_TTL_SECONDS (5184000 s)",
            "appended 26 days ago",
            "may wait up to 35 days before it is handled",
            "the dead-letter queue's 14",
            "its dedup record may have expired: resending it would add it again",
            "Nothing was sent",
            "2 such events, up to sequence 2",
            "--from 3",
            "\"expected\" and \"found\"",
        ] {
            assert!(said.contains(part), "`{part}` not in {said}");
        }
    }

    #[test]
    fn sequenced_events_are_resent_at_any_age() {
        assert_eq!(look_at(&[vec![note(1, 400), note(2, 399)]]), None);
    }

    #[test]
    fn an_event_without_appended_at_is_taken_as_old() {
        let mut event = words(4, 0);
        event.appended_at = 0;
        let too_old = look_at(&[vec![event]]).expect("refused");
        assert_eq!((too_old.sequence, too_old.next), (4, None));
        assert!(too_old.explain("b-1", WINDOW).contains("has no appendedAt"));
    }

    #[test]
    fn a_window_no_longer_than_the_wait_refuses_every_counters_event() {
        // The projector's default: 35 days, the wait itself. A copy resent
        // now may reach the consumer after the record of an event appended
        // a minute ago (and handled at once) has expired: refused.
        for ttl_seconds in [DAY, 35 * DAY, 35 * DAY + 3_599] {
            let window = Window {
                ttl_seconds,
                now: NOW,
            };
            assert!(window.expired(NOW - 60), "{ttl_seconds}");
            assert!(window.expired(NOW), "{ttl_seconds}");
        }
        // A day more than the wait (and clocks): a day's events may go.
        let window = Window {
            ttl_seconds: 36 * DAY + 3_600,
            now: NOW,
        };
        assert!(!window.expired(NOW - DAY));
        assert!(window.expired(NOW - DAY - 1));
    }
}
