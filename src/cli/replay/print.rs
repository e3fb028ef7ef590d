//! What `replay` prints: each batch's messages, parking and response, a
//! sweep's report, and the embedded table at the end.

use std::io::{self, Write};

use aws_lambda_events::event::sqs::{SqsEvent, SqsMessage};
use serde_json::Value;

use crate::domain::Domain;
use crate::runner::{BatchReport, MessageReport, Outcome, ParkingReport};
use crate::store::memory::MemoryStore;
use crate::sweep::SweepReport;

/// One batch: a row per message, what was parked, cleared and drained, and
/// the batch response.
pub(super) fn print_batch(
    out: &mut impl Write,
    event: &SqsEvent,
    report: &BatchReport,
    now: u64,
) -> io::Result<()> {
    let rows: Vec<[String; 5]> = report
        .messages
        .iter()
        .zip(&event.records)
        .map(|(message, record)| row(message, record))
        .collect();
    print_rows(out, &rows)?;
    for parking in &report.parking {
        print_parking(out, parking, now)?;
    }
    let response = serde_json::to_string(&report.response()).unwrap_or_else(|err| err.to_string());
    writeln!(out, "  response: {response}")
}

/// One message's row: message id, stream, sequence, type, and outcome with
/// its reason. An ignored event whose body names no stream, delivered
/// without a group (a bare body of an unsequenced type), has none to show:
/// `-`, not the message id the runner keeps it apart by.
fn row(message: &MessageReport, record: &SqsMessage) -> [String; 5] {
    // An invalid body may still name its type and sequence.
    let raw: Option<Value> = record
        .body
        .as_deref()
        .and_then(|body| serde_json::from_str(body).ok());
    let field = |name: &str| raw.as_ref().and_then(|raw| raw.get(name)).cloned();
    let event_type = message.event_type.map(str::to_owned).or_else(|| {
        field("type").and_then(|value| value.as_str().map(|text| text.chars().take(40).collect()))
    });
    let sequence = message
        .sequence
        .or_else(|| field("sequence").and_then(|value| value.as_u64()));
    let reason = message
        .reason
        .as_deref()
        .map(|reason| format!(" ({reason})"))
        .unwrap_or_default();
    let grouped = record
        .attributes
        .get("MessageGroupId")
        .is_some_and(|group| !group.is_empty());
    let stream = if message.outcome == Outcome::Ignored
        && !grouped
        && message.stream == message.message_id
    {
        "-".to_owned()
    } else {
        message.stream.clone()
    };
    [
        message.message_id.clone(),
        stream,
        sequence.map_or_else(|| "seq -".to_owned(), |sequence| format!("seq {sequence}")),
        event_type.unwrap_or_else(|| "?".to_owned()),
        format!("{}{reason}", message.outcome.as_str()),
    ]
}

/// The rows, each column as wide as its longest cell (a long message id,
/// say).
fn print_rows(out: &mut impl Write, rows: &[[String; 5]]) -> io::Result<()> {
    let width = |column: usize| {
        rows.iter()
            .map(|row| row[column].chars().count())
            .max()
            .unwrap_or(0)
    };
    let widths = [width(0), width(1), width(2), width(3)];
    for row in rows {
        writeln!(
            out,
            "  {:<w0$}  {:<w1$}  {:<w2$}  {:<w3$}  {}",
            row[0],
            row[1],
            row[2],
            row[3],
            row[4],
            w0 = widths[0],
            w1 = widths[1],
            w2 = widths[2],
            w3 = widths[3],
        )?;
    }
    Ok(())
}

/// One commit's parking: what it parked, cleared and drained (`now` says
/// how long a drained event had waited).
fn print_parking(out: &mut impl Write, parking: &ParkingReport, now: u64) -> io::Result<()> {
    if !parking.parked.is_empty() {
        writeln!(
            out,
            "  parked  {} seq {} (waiting for {}; {} parked on it)",
            parking.stream,
            list(&parking.parked),
            parking
                .waiting_for
                .map_or_else(|| "-".to_owned(), |next| next.to_string()),
            parking.parked_now
        )?;
    }
    if !parking.cleared.is_empty() {
        writeln!(
            out,
            "  cleared {} seq {} (behind the entity; conflicts recorded: {})",
            parking.stream,
            list(&parking.cleared),
            if parking.conflicts.is_empty() {
                "none".to_owned()
            } else {
                list(&parking.conflicts)
            }
        )?;
    }
    for drained in &parking.drained {
        writeln!(
            out,
            "  drained {} seq {} {} (event {}, message {}, parked {} s before)",
            parking.stream,
            drained.sequence,
            drained.event_type,
            drained.event_id,
            drained.message_id,
            now.saturating_sub(drained.parked_at)
        )?;
    }
    Ok(())
}

/// A scheduled sweep's report: what it drained, what still waits, and the
/// totals.
pub(super) fn print_sweep(out: &mut impl Write, report: &SweepReport) -> io::Result<()> {
    let drained: usize = report
        .drained
        .iter()
        .map(|parking| parking.drained.len())
        .sum();
    for parking in &report.drained {
        for event in &parking.drained {
            writeln!(
                out,
                "  drained {} seq {} {} (event {}, message {})",
                parking.stream, event.sequence, event.event_type, event.event_id, event.message_id
            )?;
        }
    }
    for stream in &report.longest {
        writeln!(
            out,
            "  waiting {}: for seq {}, {} parked, for {} s",
            stream.key, stream.waiting_for, stream.parked, stream.parked_for_seconds
        )?;
    }
    let deadlines = &report.deadlines;
    if *deadlines != crate::runner::DeadlineReport::default() {
        writeln!(
            out,
            "  deadlines: fired {}, moved {}, failed {}",
            deadlines.fired, deadlines.moved, deadlines.failed
        )?;
    }
    for problem in &deadlines.problems {
        writeln!(out, "  deadline failed: {problem}")?;
    }
    writeln!(
        out,
        "  {} with events parked; drained {drained}; oldest waiting {}",
        count(report.entities, "entity", "entities"),
        report
            .oldest_parked_age_seconds
            .map_or_else(|| "-".to_owned(), |age| format!("{age} s"))
    )
}

/// The embedded table: each entity and counter, named as `inspect` takes
/// them, and what is parked.
pub(in crate::cli) fn print_state(
    out: &mut impl Write,
    domain: &Domain,
    store: &MemoryStore,
) -> io::Result<()> {
    writeln!(out, "\nEmbedded table:")?;
    let entities = store.entities();
    let counters = store.counters();
    let parking = store.parking();
    if entities.is_empty() && counters.is_empty() && parking.is_empty() {
        return writeln!(out, "  (empty: no message was applied)");
    }
    for (key, entity) in entities {
        writeln!(
            out,
            "  {:<7} {:<12} sequence {:<3} {}",
            key.kind().label(),
            key.id(),
            entity.sequence(),
            entity.summary()
        )?;
    }
    for [name, id, line] in crate::cli::counters::rows(domain, counters) {
        writeln!(out, "  {name:<7} {id:<12} {line}")?;
    }
    for (key, inspection) in parking {
        let parked: Vec<u64> = inspection
            .parked
            .iter()
            .map(|parked| parked.sequence)
            .collect();
        if !parked.is_empty() {
            writeln!(out, "  parked  {key}: seq {}", list(&parked))?;
        }
        for conflict in &inspection.conflicts {
            writeln!(
                out,
                "  conflict {key}: seq {} event {}",
                conflict.sequence, conflict.event_id
            )?;
        }
    }
    for (key, at) in store.deadlines() {
        writeln!(out, "  due     {key}: at {at} (epoch seconds)")?;
    }
    let appended = store.appended();
    if !appended.is_empty() {
        // A process's appends: to the event store, once deployed.
        writeln!(out, "\nWould append (a process's; not sent anywhere here):")?;
        for event in appended {
            writeln!(
                out,
                "  {:<12} seq {:<3} {:<16} {} {}",
                event.stream, event.sequence, event.event_type, event.event_id, event.data
            )?;
        }
    }
    Ok(())
}

/// `one` or `many`, as `n` asks.
pub(super) fn plural<'a>(n: usize, one: &'a str, many: &'a str) -> &'a str {
    if n == 1 { one } else { many }
}

/// `n` and its noun.
fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", plural(n, one, many))
}

/// Sequences, comma separated.
fn list(sequences: &[u64]) -> String {
    sequences
        .iter()
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}
