//! Reading `replay`'s files: an SQS event as Lambda delivers it, a
//! scheduled event, or bare event bodies wrapped as the SQS records Lambda
//! would deliver.

use std::io;

use aws_lambda_events::event::sqs::{SqsEvent, SqsMessage};
use serde_json::Value;

use crate::domain::Domain;

/// One file, read.
pub(super) enum Input {
    /// An SQS event as Lambda delivers it: one invocation.
    Batch(SqsEvent),
    /// Bare event bodies (one, or JSON lines), wrapped as SQS records: one
    /// invocation per ten.
    Batches(Vec<SqsEvent>),
    /// A scheduled event, at its `time` (epoch seconds) when it has one.
    Schedule(Option<u64>),
}

/// Reads one file: what is wrong with it, said plainly.
pub(super) fn read(domain: &Domain, file: &std::path::Path) -> Result<Input, String> {
    let text = std::fs::read_to_string(file).map_err(|err| match err.kind() {
        io::ErrorKind::NotFound => "no such file".to_owned(),
        io::ErrorKind::IsADirectory => "is a directory, not an event file".to_owned(),
        io::ErrorKind::PermissionDenied => "permission denied".to_owned(),
        io::ErrorKind::InvalidData => "not UTF-8 text".to_owned(),
        _ => format!("cannot read it: {err}"),
    })?;
    let value: Value = match serde_json::from_str(&text) {
        Ok(value) => value,
        // Several lines, the first an object: one event body a line (JSON lines).
        Err(_) if json_lines(&text) => return bodies(domain, &text),
        Err(err) => return Err(format!("not JSON: {err}")),
    };
    if value.get("eventId").is_some() || value.get("type").is_some() {
        // One bare event body.
        return Ok(Input::Batches(vec![wrapped(domain, &[text.trim()], 0)]));
    }
    if value.get("Records").is_some() {
        return serde_json::from_value(value)
            .map(Input::Batch)
            .map_err(|err| format!("not an SQS event as Lambda delivers it: {err}"));
    }
    if value.get("source").and_then(Value::as_str) == Some("aws.events") {
        return match value.get("time") {
            None | Some(Value::Null) => Ok(Input::Schedule(None)),
            Some(time) => time
                .as_str()
                .and_then(|time| {
                    aws_sdk_dynamodb::primitives::DateTime::from_str(
                        time,
                        aws_sdk_dynamodb::primitives::DateTimeFormat::DateTime,
                    )
                    .ok()
                })
                .and_then(|time| u64::try_from(time.secs()).ok())
                .map(|time| Input::Schedule(Some(time)))
                .ok_or_else(|| {
                    format!("the scheduled event's `time` is not a UTC date and time as EventBridge writes it (`2026-11-30T12:05:00Z`): {time}")
                }),
        };
    }
    Err(
        "neither an SQS event (`{\"Records\": [...]}`), a scheduled event (`\"source\": \"aws.events\"`), nor an event body (`{\"eventId\": ..., \"type\": ...}`)"
            .to_owned(),
    )
}

/// Whether the text reads as JSON lines: more than one line, the first a
/// JSON object.
fn json_lines(text: &str) -> bool {
    let mut lines = text.lines().map(str::trim).filter(|line| !line.is_empty());
    let first = lines.next();
    lines.next().is_some()
        && first.is_some_and(|line| matches!(serde_json::from_str(line), Ok(Value::Object(_))))
}

/// JSON lines of event bodies, in SQS batches of ten, in order.
fn bodies(domain: &Domain, text: &str) -> Result<Input, String> {
    let lines: Vec<(usize, &str)> = text
        .lines()
        .enumerate()
        .map(|(index, line)| (index + 1, line.trim()))
        .filter(|(_, line)| !line.is_empty())
        .collect();
    for (number, line) in &lines {
        match serde_json::from_str::<Value>(line) {
            Ok(Value::Object(_)) => {}
            Ok(_) => {
                return Err(format!(
                    "line {number} is not a JSON object (an event body)"
                ));
            }
            Err(err) => return Err(format!("line {number} is not JSON: {err}")),
        }
    }
    let bodies: Vec<&str> = lines.iter().map(|(_, line)| *line).collect();
    Ok(Input::Batches(
        bodies
            .chunks(MAX_BATCH)
            .enumerate()
            .map(|(index, chunk)| wrapped(domain, chunk, index * MAX_BATCH))
            .collect(),
    ))
}

/// The most messages SQS gives a function in one FIFO batch.
const MAX_BATCH: usize = 10;

/// Event bodies as the SQS records Lambda would deliver: message ids
/// `body-<n>` (from `first` + 1), the group the event's stream (as the
/// domain reads it; for a body it cannot read, the `aggregateId`, else the
/// `eventId`), the deduplication id as the dispatcher makes it, a first
/// delivery. An unsequenced event the domain ignores names no stream in its
/// body (its producer's handler does, from its data): it has no group.
fn wrapped(domain: &Domain, bodies: &[&str], first: usize) -> SqsEvent {
    let mut event = SqsEvent::default();
    for (index, body) in bodies.iter().enumerate() {
        let raw: Value = serde_json::from_str(body).unwrap_or(Value::Null);
        let text = |value: Option<&Value>| value.and_then(Value::as_str).map(str::to_owned);
        let event_id = text(raw.get("eventId")).unwrap_or_default();
        let group = match domain.parse(body) {
            Ok(event) => event.stream().to_owned(),
            Err(_) => text(raw.get("aggregateId")).unwrap_or_else(|| event_id.clone()),
        };
        let sequence = raw.get("sequence").and_then(Value::as_u64);
        let mut message = SqsMessage::default();
        message.message_id = Some(format!("body-{}", first + index + 1));
        message.body = Some((*body).to_owned());
        if !group.is_empty() {
            message.attributes.insert(
                "MessageDeduplicationId".to_owned(),
                crate::dispatcher::deduplication_id(&group, sequence, &event_id),
            );
            message.attributes.insert(
                "MessageGroupId".to_owned(),
                crate::dispatcher::group_id(&group),
            );
        }
        message
            .attributes
            .insert("ApproximateReceiveCount".to_owned(), "1".to_owned());
        event.records.push(message);
    }
    event
}
