//! What a step checks of a handler's answer beyond its entity, before
//! anything is written: a process's appends gathered (one stream, one
//! request id, what the event store accepts, no personal value, room in one
//! transaction), the deadline it sets (in a process with a deadline
//! handler, in epoch seconds), and the effects on counters of other keys
//! (registered). Each problem is the rest of the handler's fault after its
//! name. The planner (`plan/outbox.rs`, `plan/effects.rs`) and the sweep's
//! deadlines (`due.rs`) check with it, and so does the [`crate::testkit`]:
//! a handler test refuses what the runner refuses, in the same words.

use crate::answer::{MAX_OUTGOING, Outbox, Outgoing};
use crate::domain::{Cause, Domain, Process};
use crate::handling::Effect;
use crate::producer::{Append, AppendError, ExpectedSequence, MAX_BYTES, NewEvent, check_append};
use crate::store::{MAX_COMMIT_ITEMS, Outbound};

/// How far after the step's clock a deadline may be: a hundred years
/// (36,525 days). A time further ahead is not epoch seconds (epoch
/// milliseconds are some 57,000 years ahead), and would never fire.
pub(crate) const MAX_DEADLINE_AHEAD: u64 = 36_525 * 86_400;

/// A message handler's outbox, checked: what it appends, gathered (`None`
/// when nothing), and the deadline it sets or clears. `Err`: the rest of
/// the handler's fault. A step that does not react (a fold that writes no
/// appends: `verify`'s, a rebuild's of what happened before the process
/// started) drops the appends unchecked and checks the deadline's time
/// alone: the live step, which reacts, refuses what the process's
/// declaration cannot carry.
pub(crate) fn checked_outbox(
    domain: &Domain,
    cause: &Cause,
    mut outbox: Outbox,
    reacts: bool,
) -> Result<(Option<Outbound>, Option<Option<u64>>), String> {
    if outbox.is_empty() {
        return Ok((None, None));
    }
    let Some(process) = domain.process() else {
        if !reacts {
            return Ok((None, None));
        }
        return Err(
            "filled its outbox (events to append, a deadline), and the domain declares no process: what it answered would be dropped; declare the process (Domain::with_process)"
                .to_owned(),
        );
    };
    let now = outbox.now();
    let (appends, deadline) = outbox.take();
    if !reacts {
        return match deadline.flatten().and_then(|at| far_deadline(at, now)) {
            Some(problem) => Err(problem),
            None => Ok((None, deadline)),
        };
    }
    if let Some(problem) = deadline_problem(process, deadline, now) {
        return Err(problem);
    }
    let outbound = if appends.is_empty() {
        None
    } else {
        Some(gathered(process, cause, appends)?)
    };
    Ok((outbound, deadline))
}

/// What is wrong with the deadline a handler of `process` set at `now`:
/// a deadline that would be stored and never fired.
pub(crate) fn deadline_problem(
    process: &Process,
    deadline: Option<Option<u64>>,
    now: u64,
) -> Option<String> {
    let at = deadline.flatten()?;
    if process.deadline_kind().is_none() {
        return Some(format!(
            "set a deadline, and the process {} has no deadline handler: it would be stored and never fired; give the process one (Process::on_deadline), or set none",
            process.name()
        ));
    }
    far_deadline(at, now)
}

/// A deadline at `at` set at `now` that is not epoch seconds.
fn far_deadline(at: u64, now: u64) -> Option<String> {
    (at > now.saturating_add(MAX_DEADLINE_AHEAD)).then(|| {
        format!(
            "set a deadline at {at}, more than 100 years after the step's clock ({now}): a deadline is in epoch seconds (the clock, `now()`, plus a number of seconds), and this one would never fire (is it in milliseconds?)"
        )
    })
}

/// What is wrong with an applied event's effects for `domain`: a counter
/// it does not register.
pub(crate) fn effects_problem(domain: &Domain, effects: &[Effect]) -> Option<String> {
    let counters = domain.counters();
    let effect = effects
        .iter()
        .find(|effect| !counters.contains(&effect.counter))?;
    Some(format!(
        "added to the counter {}, and the domain does not register it: add .counter(&...) with that counter to the domain",
        effect.counter.label()
    ))
}

/// One handler's appends as one [`Outbound`]: to one stream, the first's
/// expectation for all, each event's id derived from the cause, checked
/// as the event store will check them, and within one transaction with
/// the state's write.
pub(crate) fn gathered(
    process: &Process,
    cause: &Cause,
    appends: Vec<Outgoing>,
) -> Result<Outbound, String> {
    let Some(first) = appends.first() else {
        return Err("appended nothing".to_owned());
    };
    let (stream, expected) = (first.stream.clone(), first.expected);
    if appends.len() > MAX_OUTGOING {
        return Err(format!(
            "appended {} events in one step: at most {MAX_OUTGOING} (a transaction holds 100 items, two an event)",
            appends.len()
        ));
    }
    if let Some(other) = appends.iter().find(|append| append.stream != stream) {
        return Err(format!(
            "appended to the streams `{stream}` and `{}` in one step: a step appends to one stream, in one transaction",
            other.stream
        ));
    }
    if appends
        .iter()
        .skip(1)
        .any(|append| append.expected != ExpectedSequence::Any)
    {
        return Err(
            "gave an expected sequence to an event that is not the step's first to its stream: the ones after it follow it"
                .to_owned(),
        );
    }
    if let Some(problem) = appends
        .iter()
        .find_map(|append| personal_field(process.store_domain(), &append.event))
    {
        return Err(problem);
    }
    let request_id = process.request_id(cause, 0);
    let events = appends
        .into_iter()
        .enumerate()
        .map(|(index, append)| {
            let mut event = append.event;
            event.event_id = Some(process.request_id(cause, index));
            event
        })
        .collect();
    let outbound = Outbound {
        stream,
        expected,
        request_id,
        events,
    };
    let append = Append {
        stream_id: outbound.stream.clone(),
        events: outbound.events.clone(),
        expected: outbound.expected,
        request_id: Some(outbound.request_id.clone()),
        writes: Vec::new(),
    };
    check_append(process.store_domain(), &append).map_err(|err| match err {
        AppendError::Invalid { index, reason } => {
            format!("appended an event the event store refuses: event {index}: {reason}")
        }
        other => format!("appended what the event store refuses: {other}"),
    })?;
    let size = bytes(&outbound);
    if size > MAX_BYTES {
        return Err(too_big(outbound.events.len(), size));
    }
    Ok(outbound)
}

/// A step's appends that do not fit one transaction with the state's write.
pub(crate) fn too_big(events: usize, size: usize) -> String {
    format!(
        "appended {events} events of {size} bytes: with the state's write they do not fit one transaction ({MAX_COMMIT_ITEMS} items, 4 MB)"
    )
}

/// What a step's appends take of a transaction's 4 MB, at most: each
/// event's data, its envelope, its item's other attributes and its
/// request record's share.
pub(crate) fn bytes(outbound: &Outbound) -> usize {
    outbound
        .events
        .iter()
        .map(|event| event.data.to_string().len() + 1024)
        .sum()
}

/// What is wrong with an event a process appends that carries a personal
/// value: a step writes its events as they are, and has no key to seal one
/// with (a value copied sealed from an event it read would be stored as
/// sealed by nobody, and open nowhere).
fn personal_field(domain: &Domain, event: &NewEvent) -> Option<String> {
    let fields = domain.personal().of(&event.event_type)?;
    let field = fields.fields.iter().find(|field| {
        event
            .data
            .get(**field)
            .is_some_and(|value| !value.is_null())
    })?;
    Some(format!(
        "appended a {} with the personal field `{field}`: a process's step writes its events as they are and cannot seal personal data; leave it out (the event store's producer appends it)",
        event.event_type
    ))
}
