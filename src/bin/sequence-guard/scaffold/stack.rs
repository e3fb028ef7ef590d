//! The SAM template, made from two files of sequence-guard's: the stack
//! (`templates/stack/base.yaml`: the event store, the dispatcher, the alarm
//! topic, the dashboard) and one consumer (`templates/stack/consumer.yaml`:
//! its queues, subscription, table, function and sweep, alarms, log query,
//! dashboard row and outputs), rendered once for the first consumer and
//! once for each further consumer a crate declares. Every consumer is
//! whole because there is one definition of a consumer.

use super::{Error, Names};

const BASE: &str = include_str!("../../../../templates/stack/base.yaml");
const CONSUMER: &str = include_str!("../../../../templates/stack/consumer.yaml");

/// The dashboard rows above the first further consumer's: the first
/// consumer's (24) and the producer's (12).
const FIRST_ROW_OF_OTHERS: usize = 36;

/// The height of one consumer's dashboard row.
const ROW_HEIGHT: usize = 24;

/// The longest name of a further consumer: its function is named
/// `<stack>-<name>-projector`, at most 64 characters with the stack's.
pub const MAX_CONSUMER_NAME: usize = 12;

/// A further consumer of the event store, as a crate declares it: its name
/// (`status`: binaries `<crate>-status-projector`, ..., resources
/// `Status...`), what it projects, and whether it is deployed by default.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerDeclaration {
    pub name: String,
    pub description: String,
    pub deployed: bool,
}

impl ConsumerDeclaration {
    /// A declaration, its name checked: lower-case letters, digits and `-`,
    /// starting with a letter, at most [`MAX_CONSUMER_NAME`], not a name the
    /// first consumer or the producer has.
    pub fn new(name: &str, description: &str, deployed: bool) -> Result<Self, Error> {
        let fits = !name.is_empty()
            && name.len() <= MAX_CONSUMER_NAME
            && name.starts_with(|c: char| c.is_ascii_lowercase())
            && !name.ends_with('-')
            && !name.contains("--")
            && name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
        if !fits {
            return Err(Error::BadConsumer(name.to_owned()));
        }
        if ["events", "projector", "dispatcher", "producer", "dispatch"].contains(&name) {
            return Err(Error::ReservedConsumer(name.to_owned()));
        }
        let description = description.trim();
        if description.is_empty() || description.contains(['"', '\n', '\\']) {
            return Err(Error::BadConsumerDescription(name.to_owned()));
        }
        Ok(ConsumerDeclaration {
            name: name.to_owned(),
            description: description.to_owned(),
            deployed,
        })
    }

    /// `status` → `Status`, `order-audit` → `OrderAudit`: its resources' prefix.
    fn id(&self) -> String {
        self.name
            .split('-')
            .map(|part| {
                let mut chars = part.chars();
                chars.next().map_or_else(String::new, |first| {
                    first.to_ascii_uppercase().to_string() + chars.as_str()
                })
            })
            .collect()
    }

    /// `order-audit` → `order_audit`: the module of the crate whose
    /// `domain()` the consumer's binaries run.
    pub fn module(&self) -> String {
        self.name.replace('-', "_")
    }
}

/// The values of one consumer's placeholders.
struct Consumer {
    values: Vec<(&'static str, String)>,
    /// The condition of its resources: none for the first consumer.
    condition: Option<String>,
    /// The name of its dashboard row's `!Sub` variable.
    widgets: String,
}

impl Consumer {
    /// The first consumer: the resource names every earlier release had
    /// (`EventsQueue`, `ProjectionTable`, `ProjectorFunction`, ...), so that
    /// an update replaces none of them.
    fn first(binary: &dyn Fn(&str) -> String) -> Self {
        Consumer {
            values: vec![
                ("{{Id}}", String::new()),
                ("{{Queue}}", "Events".to_owned()),
                ("{{Table}}", "ProjectionTable".to_owned()),
                ("{{-name}}", String::new()),
                ("{{queue}}", "events".to_owned()),
                ("{{binary}}", binary("projector")),
                ("{{policy}}", "project".to_owned()),
                ("{{service}}", "!Ref AWS::StackName".to_owned()),
                ("{{consumer}}", "the projector".to_owned()),
                ("{{Label}}", String::new()),
                ("{{Title}}", "Projector: ".to_owned()),
                (
                    "{{description}}",
                    "Projects ordered events from the FIFO queue into the table.".to_owned(),
                ),
                (
                    "{{queue description}}",
                    "Send events here (MessageGroupId = aggregateId, or a counter's id)."
                        .to_owned(),
                ),
                ("{{subscription condition}}", "WithProducer".to_owned()),
                ("{{deployed}}", "true".to_owned()),
                ("{{y}}", "0".to_owned()),
                (
                    "{{undelivered}}",
                    format!(
                        "!If\n  - WithProducer\n  - {}\n  - \"\"",
                        undelivered("Events", 2)
                    ),
                ),
            ],
            condition: None,
            widgets: "ProjectorWidgets".to_owned(),
        }
    }

    /// A further consumer, the `nth` (from 0) after the first.
    fn further(
        binary: &dyn Fn(&str) -> String,
        declared: &ConsumerDeclaration,
        nth: usize,
    ) -> Self {
        let id = declared.id();
        let name = &declared.name;
        let condition = format!("With{id}Consumer");
        let label = format!("the {} consumer", name.replace('-', " "));
        let mut title = label.replacen("the ", "", 1);
        title[..1].make_ascii_uppercase();
        Consumer {
            values: vec![
                ("{{Id}}", id.clone()),
                ("{{Queue}}", id.clone()),
                ("{{Table}}", format!("{id}Table")),
                ("{{-name}}", format!("-{name}")),
                ("{{queue}}", name.clone()),
                ("{{binary}}", binary(&format!("{name}-projector"))),
                ("{{policy}}", format!("project-{name}")),
                (
                    "{{service}}",
                    format!("!Sub \"${{AWS::StackName}}-{name}\""),
                ),
                ("{{consumer}}", label),
                ("{{Label}}", format!("{title} - ")),
                ("{{Title}}", format!("{title}: ")),
                ("{{description}}", declared.description.clone()),
                (
                    "{{queue description}}",
                    format!("{title}'s queue, subscribed to the events topic."),
                ),
                ("{{subscription condition}}", condition.clone()),
                ("{{deployed}}", declared.deployed.to_string()),
                (
                    "{{y}}",
                    (FIRST_ROW_OF_OTHERS + nth * ROW_HEIGHT).to_string(),
                ),
                ("{{undelivered}}", undelivered(&id, 0)),
            ],
            condition: Some(condition),
            widgets: format!("{id}ProjectorWidgets"),
        }
    }

    /// A section of the consumer's definition with its values.
    fn render(&self, section: &str) -> String {
        let y: usize = self
            .values
            .iter()
            .find(|(key, _)| *key == "{{y}}")
            .and_then(|(_, value)| value.parse().ok())
            .unwrap_or(0);
        let mut text = String::with_capacity(section.len());
        for line in section.lines() {
            if line.trim() == "{{condition}}" {
                if let Some(condition) = &self.condition {
                    let indent = &line[..line.len() - line.trim_start().len()];
                    text.push_str(&format!("{indent}Condition: {condition}\n"));
                }
                continue;
            }
            text.push_str(line);
            text.push('\n');
        }
        for step in [6, 12, 18] {
            text = text.replace(&format!("{{{{y+{step}}}}}"), &(y + step).to_string());
        }
        for (key, value) in &self.values {
            text = text.replace(key, value);
        }
        text
    }

    /// Its entry in the dashboard's `!Sub` variables, at the map's
    /// indentation: its row, under its condition.
    fn widgets_entry(&self, widgets: &str, variables: &str) -> String {
        let widgets = self.render(widgets);
        let variables = self.render(variables);
        let mut entry = String::new();
        let (sub, depth) = match &self.condition {
            None => {
                entry.push_str(&format!("{}: !Sub\n", self.widgets));
                (2, 2)
            }
            Some(condition) => {
                entry.push_str(&format!(
                    "{}: !If\n  - {condition}\n  - !Sub\n",
                    self.widgets
                ));
                (4, 4)
            }
        };
        let pad = " ".repeat(sub);
        entry.push_str(&format!("{pad}- |\n"));
        if self.condition.is_some() {
            // After the rows above it.
            entry.push_str(&format!("{pad}  ,\n"));
        }
        entry.push_str(&indented(widgets.trim_end(), depth + 2));
        entry.push_str(&format!("{pad}- "));
        entry.push_str(indented(variables.trim_end(), depth + 2).trim_start());
        if self.condition.is_some() {
            entry.push_str("  - \"\"\n");
        }
        entry
    }
}

/// The dashboard's line of a consumer's subscription dead-letter queue
/// (its `!Sub`, the lines after the first `depth` spaces in).
fn undelivered(queue: &str, depth: usize) -> String {
    let pad = " ".repeat(depth);
    format!(
        "!Sub\n{pad}  - ', [\".\", \".\", \".\", \"${{Name}}\"]'\n{pad}  - Name: !GetAtt {queue}SubscriptionDeadLetterQueue.QueueName"
    )
}

/// Each line of `text` with `depth` more spaces, and a newline after it.
fn indented(text: &str, depth: usize) -> String {
    let pad = " ".repeat(depth);
    text.lines()
        .map(|line| {
            if line.is_empty() {
                "\n".to_owned()
            } else {
                format!("{pad}{line}\n")
            }
        })
        .collect()
}

/// Every entry of every section named once: a consumer whose name makes
/// one of the stack's names (`projection`: `ProjectionTable`) is refused.
fn one_of_each(text: &str) -> Result<(), Error> {
    let mut seen = std::collections::BTreeSet::new();
    let mut section = "";
    for line in text.lines() {
        if !line.starts_with([' ', '#']) && line.ends_with(':') {
            section = line;
            continue;
        }
        let Some(name) = line
            .strip_prefix("  ")
            .filter(|rest| rest.starts_with(|c: char| c.is_ascii_alphabetic()))
            .and_then(|rest| rest.strip_suffix(':'))
        else {
            continue;
        };
        if !seen.insert((section, name)) {
            return Err(Error::NameTaken(name.to_owned()));
        }
    }
    Ok(())
}

/// The consumer's definition, by section (`#@ name` lines), without the
/// comments above the first.
fn sections(text: &str) -> Result<Vec<(&str, String)>, Error> {
    let mut sections: Vec<(&str, String)> = Vec::new();
    for line in text.lines() {
        if let Some(name) = line.strip_prefix("#@ ") {
            sections.push((name.trim(), String::new()));
        } else if let Some((_, body)) = sections.last_mut() {
            body.push_str(line);
            body.push('\n');
        }
    }
    for expected in [
        "parameters",
        "conditions",
        "rules",
        "resources",
        "widgets",
        "widget variables",
        "outputs",
    ] {
        if !sections.iter().any(|(name, _)| *name == expected) {
            return Err(Error::Drifted {
                file: "templates/stack/consumer.yaml",
                pattern: expected,
                found: 0,
                expected: 1,
            });
        }
    }
    Ok(sections)
}

/// The stack for a crate's names and further consumers: the first
/// consumer and each declared one from the one definition.
pub fn render(names: &Names, further: &[ConsumerDeclaration]) -> Result<String, Error> {
    render_with(&|tool| names.binary(tool), further)
}

/// The stack, each tool's binary named by `binary` (our own template's
/// binaries have no crate's prefix).
pub fn render_with(
    binary: &dyn Fn(&str) -> String,
    further: &[ConsumerDeclaration],
) -> Result<String, Error> {
    let sections = sections(CONSUMER)?;
    let section = |name: &str| {
        sections
            .iter()
            .find(|(found, _)| *found == name)
            .map(|(_, body)| body.trim_end_matches('\n').to_owned() + "\n")
            .unwrap_or_default()
    };
    let mut consumers = vec![Consumer::first(binary)];
    for (nth, declared) in further.iter().enumerate() {
        consumers.push(Consumer::further(binary, declared, nth));
    }
    let only_further = &consumers[1..];
    let joined = |of: &[Consumer], name: &str, separator: &str| {
        of.iter()
            .map(|consumer| consumer.render(&section(name)))
            .collect::<Vec<_>>()
            .join(separator)
    };
    let widgets = section("widgets");
    let variables = section("widget variables");
    let entries: String = consumers
        .iter()
        .map(|consumer| indented(&consumer.widgets_entry(&widgets, &variables), 10))
        .collect();
    let more_widgets: String = only_further
        .iter()
        .map(|consumer| format!("${{{}}}", consumer.widgets))
        .collect();
    let mut text = BASE.to_owned();
    for (marker, value) in [
        (
            "#@ consumer parameters\n",
            joined(only_further, "parameters", ""),
        ),
        (
            "#@ consumer conditions\n",
            joined(only_further, "conditions", ""),
        ),
        ("#@ consumer rules\n", joined(only_further, "rules", "")),
        (
            "#@ consumer resources\n",
            joined(&consumers, "resources", "\n"),
        ),
        ("#@ consumer outputs\n", joined(&consumers, "outputs", "")),
        (
            "        - #@ consumer widget variables\n",
            format!("        - {}", entries.trim_start()),
        ),
        ("{{more widgets}}", more_widgets),
        ("{{dispatcher binary}}", binary("dispatcher")),
    ] {
        let found = text.matches(marker).count();
        if found != 1 {
            return Err(Error::Drifted {
                file: "templates/stack/base.yaml",
                pattern: "#@ consumer ...",
                found,
                expected: 1,
            });
        }
        text = text.replace(marker, &value);
    }
    // A section left without entries is left out.
    text = text.replace("\nRules:\n\n", "\n");
    one_of_each(&text)?;
    Ok(text)
}
