//! A local run's script: one command a line, `#` comments and blank lines
//! aside. Each command is read whole before anything runs, and a line that
//! is none is named with why.
//!
//! | command | what it does |
//! | --- | --- |
//! | `append <stream> <type> <data>` | appends one event (its `data`, a JSON object: the rest of the line), as `append` does |
//! | `clock <epoch seconds>` / `clock +<seconds>` | sets the run's clock, or moves it on: what events record as `appendedAt`, what handlers read as now, and when deadlines fall due |
//! | `sweep` | every consumer's scheduled sweep at the clock: due deadlines fired, parked events looked at |
//! | `erase <subject>` | forgets a subject, as `erase --subject` does (refused, in its words, for a domain that declares no personal data) |
//! | `show` | what every consumer's table holds: the entities of the streams seen so far, with their deadlines, and every counter (an effect's, keyed by a member, too) |

use serde_json::Value;

/// The script's commands, for `--help`.
pub(super) const HELP: &str = "\
Script (one command a line; `#` starts a comment):
  append <stream> <type> <data>   append one event; <data> is a JSON object
  clock <epoch seconds>           set the run's clock
  clock +<seconds>                move it on
  sweep                           every consumer's scheduled sweep at the clock
  erase <subject>                 forget a subject, as `erase --subject` does
  show                            what every consumer's table holds";

/// One command of a script.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Command {
    Append {
        stream: String,
        event_type: String,
        data: Value,
    },
    Clock(Clock),
    Sweep,
    Erase(String),
    Show,
}

/// How a `clock` command sets the clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Clock {
    At(u64),
    After(u64),
}

/// The script's commands, each with its line's number and text; `Err`
/// names the first line that is no command, and why.
pub(super) fn parse(text: &str) -> Result<Vec<(usize, String, Command)>, String> {
    let mut commands = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let number = index + 1;
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let command = command(line).map_err(|why| format!("line {number}: {why}: {line}"))?;
        commands.push((number, line.to_owned(), command));
    }
    Ok(commands)
}

fn command(line: &str) -> Result<Command, String> {
    let (word, rest) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
    let rest = rest.trim();
    match word {
        "append" => {
            let mut parts = rest.splitn(3, char::is_whitespace);
            let stream = parts.next().filter(|part| !part.is_empty());
            let event_type = parts.next().filter(|part| !part.is_empty());
            let (Some(stream), Some(event_type)) = (stream, event_type) else {
                return Err("append takes a stream, a type and its data (`append order-1 OrderCreated {...}`)".to_owned());
            };
            let data = match parts.next().map(str::trim).filter(|data| !data.is_empty()) {
                None => Value::Object(serde_json::Map::new()),
                Some(data) => serde_json::from_str::<Value>(data)
                    .map_err(|err| format!("the data is not JSON ({err})"))?,
            };
            if !data.is_object() {
                return Err("the data must be a JSON object".to_owned());
            }
            Ok(Command::Append {
                stream: stream.to_owned(),
                event_type: event_type.to_owned(),
                data,
            })
        }
        "clock" => {
            let seconds = |text: &str| {
                text.parse::<u64>().map_err(|_| {
                    "clock takes epoch seconds, or +<seconds> to move it on".to_owned()
                })
            };
            match rest.strip_prefix('+') {
                Some(after) => Ok(Command::Clock(Clock::After(seconds(after)?))),
                None => Ok(Command::Clock(Clock::At(seconds(rest)?))),
            }
        }
        "sweep" if rest.is_empty() => Ok(Command::Sweep),
        "show" if rest.is_empty() => Ok(Command::Show),
        "erase" if !rest.is_empty() && !rest.contains(char::is_whitespace) => {
            Ok(Command::Erase(rest.to_owned()))
        }
        "erase" => Err("erase takes one subject, as append stored it".to_owned()),
        "sweep" | "show" => Err(format!("{word} takes nothing more")),
        _ => Err("not a command (append, clock, sweep, erase, show)".to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_command_is_read_and_a_bad_line_named() {
        let script = "# a run\n\nappend order-1 OrderCreated {\"totalCents\": 5}\nclock 1800000000\nclock +900\nsweep\nerase order-1\nshow\n";
        let commands = parse(script).expect("a script");
        assert_eq!(commands.len(), 6);
        assert_eq!(commands[0].0, 3);
        assert_eq!(
            commands[0].2,
            Command::Append {
                stream: "order-1".into(),
                event_type: "OrderCreated".into(),
                data: serde_json::json!({"totalCents": 5}),
            }
        );
        assert_eq!(commands[2].2, Command::Clock(Clock::After(900)));
        for (bad, why) in [
            ("append order-1", "takes a stream, a type"),
            ("append order-1 T {nope}", "not JSON"),
            ("append order-1 T [1]", "a JSON object"),
            ("clock soon", "epoch seconds"),
            ("erase", "one subject"),
            ("sweep now", "takes nothing more"),
            ("fly", "not a command"),
        ] {
            let err = parse(&format!("show\n{bad}\n")).expect_err(bad);
            assert!(err.starts_with("line 2: ") && err.contains(why), "{err}");
        }
    }
}
