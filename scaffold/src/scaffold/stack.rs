//! The SAM template, made from two files of sequence-guard's: the stack
//! (`templates/stack/base.yaml`: the event store, the dispatcher, the alarm
//! topic, the dashboard) and one consumer (`templates/stack/consumer.yaml`:
//! its queues, subscription, table, function and sweep, and outputs; with
//! `templates/stack/watch.yaml`: its alarms, log query and dashboard row),
//! rendered once for the first consumer and
//! once for each further consumer a crate declares. Every consumer is
//! whole because there is one definition of a consumer. What a process
//! adds to a consumer (its index of due deadlines, the event store's name
//! and rights, its sweep's period, an alarm, a dashboard line) is in the
//! same file, in its `#@ process ...` sections, each inserted where a line
//! holds only `{{process ...}}` (and that line dropped for a consumer that
//! is not one); its sweep's schedule is a value of this module's. The
//! first consumer alone opens personal data: its `#@ personal ...`
//! sections (the key's use, the key items' read, their variables) are
//! inserted likewise, and dropped for every further consumer. The stack's
//! part of personal data (the key, the tools' policies) is
//! `templates/stack/personal.yaml`'s. What an append calls on the event
//! store, each on its own items, is one section (`#@ append grants`),
//! inserted in a process's grants and in the producer's and `erase`'s
//! policies.

use super::sections::{indented, insert, one_of_each, split};
use super::{ConsumerDeclaration, Error, Names};

const BASE: &str = include_str!("../../../templates/stack/base.yaml");
const CONSUMER: &str = include_str!("../../../templates/stack/consumer.yaml");
const WATCH: &str = include_str!("../../../templates/stack/watch.yaml");
const PERSONAL: &str = include_str!("../../../templates/stack/personal.yaml");

/// The dashboard rows above the first further consumer's: the first
/// consumer's (24) and the producer's (12).
const FIRST_ROW_OF_OTHERS: usize = 36;

/// The height of one consumer's dashboard row.
const ROW_HEIGHT: usize = 24;

/// The height a process adds to its row (its deadlines: fired, moved, failed).
const PROCESS_ROW_HEIGHT: usize = 6;

/// The sections of a process's additions, each inserted at the line
/// `{{<section>}}` of the consumer's definition.
const PROCESS_SECTIONS: [&str; 6] = [
    "process parameters",
    "process attributes",
    "process indexes",
    "process grants",
    "process resources",
    "process widgets",
];

/// The sections of what opening personal data adds to a consumer (the
/// first), each inserted at the line `{{<section>}}` of its definition.
const PERSONAL_SECTIONS: [&str; 2] = ["personal grants", "personal environment"];

/// The section of what a consumer that is not a process reads of the
/// event store (a gap's events), inserted at the line `{{reader grants}}`;
/// a process's append grants hold the same read.
const READER_GRANTS: &str = "reader grants";

/// The section of what an append calls on the event store, on its stream
/// and request items only: inserted at the line `{{append grants}}` of a
/// process's grants and of the producer's and `erase`'s policies, so that
/// the three are granted one thing.
const APPEND_GRANTS: &str = "append grants";

/// The sweep of a consumer that is not a process: every five minutes.
const PARKED_SWEEP: [(&str, &str); 2] = [
    ("{{sweep schedule}}", "rate(5 minutes)"),
    (
        "{{sweep description}}",
        "Records how long events have stayed parked (OldestParkedAge).",
    ),
];

/// The comment above the sweep of a consumer that is not a process.
const PARKED_SWEEP_COMMENT: &str = "# Looks at parked events every five minutes: a stream whose missing\n\
# event never comes sends nothing that would show it.";

/// The comment above a process's sweep.
const PROCESS_SWEEP_COMMENT: &str = "# Looks at parked events and fires the due deadlines every\n\
# {{Id}}DeadlinePeriod: a deadline fires up to one period late.";

/// The values of one consumer's placeholders.
struct Consumer {
    values: Vec<(&'static str, String)>,
    /// The condition of its resources: none for the first consumer.
    condition: Option<String>,
    /// The name of its dashboard row's `!Sub` variable.
    widgets: String,
    /// What is inserted at a line holding only `{{process ...}}` or
    /// `{{environment ...}}`, without indentation (the line's is added):
    /// nothing for a consumer that is not a process and has no variables.
    blocks: Vec<(String, String)>,
}

impl Consumer {
    /// The first consumer: the resource names every earlier release had
    /// (`EventsQueue`, `ProjectionTable`, `ProjectorFunction`, ...), so that
    /// an update replaces none of them; it opens personal data (`section`
    /// gives those sections of the definition).
    fn first(binary: &dyn Fn(&str) -> String, section: &dyn Fn(&str) -> String) -> Self {
        let mut values = vec![
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
                "Send events here (MessageGroupId = aggregateId, or a counter's id).".to_owned(),
            ),
            ("{{subscription condition}}", "WithProducer".to_owned()),
            (
                "{{event store}}",
                "!If [WithProducer, !Ref EventsTable, !Ref AWS::NoValue]".to_owned(),
            ),
            ("{{deployed}}", "true".to_owned()),
            ("{{y}}", "0".to_owned()),
            (
                "{{undelivered}}",
                format!(
                    "!If\n  - WithProducer\n  - {}\n  - \"\"",
                    undelivered("Events", 2)
                ),
            ),
        ];
        values.extend(PARKED_SWEEP.map(|(key, value)| (key, value.to_owned())));
        let mut blocks = vec![(
            "{{sweep comment}}".to_owned(),
            PARKED_SWEEP_COMMENT.to_owned(),
        )];
        for name in PERSONAL_SECTIONS {
            blocks.push((format!("{{{{{name}}}}}"), section(name)));
        }
        // The first consumer runs without the producer too: its read of
        // the event store is the producer's condition's.
        blocks.push((
            format!("{{{{{READER_GRANTS}}}}}"),
            with_producer(&section(READER_GRANTS)),
        ));
        Consumer {
            values,
            condition: None,
            widgets: "ProjectorWidgets".to_owned(),
            blocks,
        }
    }

    /// A further consumer, its dashboard row from `y` down; `section` gives
    /// a section of the definition (a process's additions).
    fn further(
        binary: &dyn Fn(&str) -> String,
        declared: &ConsumerDeclaration,
        y: usize,
        section: &dyn Fn(&str) -> String,
    ) -> Self {
        let id = declared.id();
        let name = &declared.name;
        let condition = format!("With{id}Consumer");
        let kind = if declared.process {
            "process"
        } else {
            "consumer"
        };
        let label = format!("the {} {kind}", name.replace('-', " "));
        let mut title = label.replacen("the ", "", 1);
        title[..1].make_ascii_uppercase();
        let lambda = declared.lambda_binary();
        let mut values = vec![
            ("{{Id}}", id.clone()),
            ("{{Queue}}", id.clone()),
            ("{{Table}}", format!("{id}Table")),
            ("{{-name}}", format!("-{name}")),
            ("{{queue}}", name.clone()),
            ("{{binary}}", binary(&format!("{name}-{lambda}"))),
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
            // Deployed with the producer only: its table is there.
            ("{{event store}}", "!Ref EventsTable".to_owned()),
            ("{{deployed}}", declared.deployed.to_string()),
            ("{{y}}", y.to_string()),
            ("{{undelivered}}", undelivered(&id, 0)),
        ];
        let mut blocks = Vec::new();
        if declared.process {
            blocks.push((
                "{{sweep comment}}".to_owned(),
                PROCESS_SWEEP_COMMENT.to_owned(),
            ));
            values.extend([
                ("{{sweep schedule}}", format!("!Ref {id}DeadlinePeriod")),
                (
                    "{{sweep description}}",
                    "Fires the due deadlines (this period is their precision) and records how long events have stayed parked (OldestParkedAge).".to_owned(),
                ),
            ]);
            for name in PROCESS_SECTIONS {
                let text = insert(&section(name), APPEND_GRANTS, &section(APPEND_GRANTS));
                blocks.push((format!("{{{{{name}}}}}"), text));
            }
        } else {
            values.extend(PARKED_SWEEP.map(|(key, value)| (key, value.to_owned())));
            blocks.push((
                "{{sweep comment}}".to_owned(),
                PARKED_SWEEP_COMMENT.to_owned(),
            ));
            blocks.push((format!("{{{{{READER_GRANTS}}}}}"), section(READER_GRANTS)));
        }
        blocks.push((
            "{{environment parameters}}".to_owned(),
            environment_parameters(declared),
        ));
        blocks.push((
            "{{environment}}".to_owned(),
            declared
                .environment
                .iter()
                .map(|variable| format!("{}: !Ref {}\n", variable.name, variable.parameter()))
                .collect(),
        ));
        Consumer {
            values,
            condition: Some(condition),
            widgets: format!("{id}ProjectorWidgets"),
            blocks,
        }
    }

    /// The height of its dashboard row.
    fn height(declared: &ConsumerDeclaration) -> usize {
        ROW_HEIGHT
            + if declared.process {
                PROCESS_ROW_HEIGHT
            } else {
                0
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
        let mut expanded = String::with_capacity(section.len());
        for line in section.lines() {
            let indent = &line[..line.len() - line.trim_start().len()];
            let marker = line.trim();
            if is_block(marker) {
                let block = self
                    .blocks
                    .iter()
                    .find(|(key, _)| key == marker)
                    .map(|(_, block)| block.as_str())
                    .unwrap_or_default();
                expanded.push_str(&indented(block.trim_end(), indent.len()));
            } else {
                expanded.push_str(line);
                expanded.push('\n');
            }
        }
        let mut text = String::with_capacity(expanded.len());
        for line in expanded.lines() {
            let indent = &line[..line.len() - line.trim_start().len()];
            if line.trim() == "{{condition}}" {
                if let Some(condition) = &self.condition {
                    text.push_str(&format!("{indent}Condition: {condition}\n"));
                }
                continue;
            }
            text.push_str(line);
            text.push('\n');
        }
        for step in [6, 12, 18, 24] {
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

/// Whether a line holding only `marker` is replaced by a block (or dropped).
fn is_block(marker: &str) -> bool {
    marker == "{{sweep comment}}"
        || marker == "{{reader grants}}"
        || ((marker.starts_with("{{process ")
            || marker.starts_with("{{personal ")
            || marker.starts_with("{{environment"))
            && marker.ends_with("}}"))
}

/// The parameters of a consumer's variables: a `Number` within its bounds,
/// or a `String`.
fn environment_parameters(declared: &ConsumerDeclaration) -> String {
    let mut text = String::new();
    for variable in &declared.environment {
        let numeric = variable.min.is_some() || variable.max.is_some();
        text.push_str(&format!(
            "{}:\n  Type: {}\n  Description: \"{} ({} of {{{{consumer}}}}).\"\n",
            variable.parameter(),
            if numeric { "Number" } else { "String" },
            variable.description.trim_end_matches('.'),
            variable.name,
        ));
        if numeric {
            text.push_str(&format!("  Default: {}\n", variable.default));
        } else {
            text.push_str(&format!("  Default: \"{}\"\n", variable.default));
        }
        for (bound, value) in [("MinValue", variable.min), ("MaxValue", variable.max)] {
            if let Some(value) = value {
                text.push_str(&format!("  {bound}: {value}\n"));
            }
        }
    }
    text
}

/// The dashboard's line of a consumer's subscription dead-letter queue
/// (its `!Sub`, the lines after the first `depth` spaces in).
fn undelivered(queue: &str, depth: usize) -> String {
    let pad = " ".repeat(depth);
    format!(
        "!Sub\n{pad}  - ', [\".\", \".\", \".\", \"${{Name}}\"]'\n{pad}  - Name: !GetAtt {queue}SubscriptionDeadLetterQueue.QueueName"
    )
}

/// A section of statements (`- Sid: ...`, with its comment), each granted
/// with the producer only: `!If [WithProducer, <statement>, NoValue]`.
fn with_producer(statements: &str) -> String {
    let mut text = String::new();
    let mut statement = String::new();
    let flush = |statement: &mut String, text: &mut String| {
        if !statement.is_empty() {
            text.push_str("- !If\n  - WithProducer\n");
            text.push_str(&indented(statement.trim_end(), 2));
            text.push_str("  - !Ref AWS::NoValue\n");
            statement.clear();
        }
    };
    for line in statements.lines() {
        if line.starts_with("- ") {
            flush(&mut statement, &mut text);
        }
        if line.starts_with('#') && statement.is_empty() {
            text.push_str(line);
            text.push('\n');
        } else {
            statement.push_str(line);
            statement.push('\n');
        }
    }
    flush(&mut statement, &mut text);
    text
}

/// The consumer's definition, by section (`#@ name` lines), without the
/// comments above the first.
fn sections() -> Result<Vec<(&'static str, String)>, Error> {
    let consumer = ["parameters", "conditions", "rules", "resources", "outputs"];
    let watch = ["watch", "widgets", "widget variables"];
    let mut sections = split(CONSUMER);
    sections.extend(split(WATCH));
    let expected = consumer
        .into_iter()
        .chain(watch)
        .chain(PROCESS_SECTIONS)
        .chain(PERSONAL_SECTIONS)
        .chain([APPEND_GRANTS, READER_GRANTS]);
    for expected in expected {
        let found = sections
            .iter()
            .filter(|(name, _)| *name == expected)
            .count();
        if found != 1 {
            return Err(Error::Drifted {
                file: "templates/stack/consumer.yaml and watch.yaml",
                pattern: expected,
                found,
                expected: 1,
            });
        }
    }
    Ok(sections)
}

/// The stack's part of personal data: its `resources` (with `append`, what
/// an append calls, in the producer's and `erase`'s policies) and `outputs`.
fn personal(append: &str) -> Result<(String, String), Error> {
    let sections = split(PERSONAL);
    let section = |name: &'static str| {
        sections
            .iter()
            .find(|(found, _)| *found == name)
            .map(|(_, body)| body.trim_end().to_owned() + "\n")
            .ok_or(Error::Drifted {
                file: "templates/stack/personal.yaml",
                pattern: name,
                found: 0,
                expected: 1,
            })
    };
    let resources = section("resources")?;
    let found = resources
        .lines()
        .filter(|line| line.trim() == "{{append grants}}")
        .count();
    if found != 2 {
        return Err(Error::Drifted {
            file: "templates/stack/personal.yaml",
            pattern: "{{append grants}}",
            found,
            expected: 2,
        });
    }
    Ok((
        insert(&resources, APPEND_GRANTS, append) + "\n",
        section("outputs")?,
    ))
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
    let sections = sections()?;
    let section = |name: &str| {
        sections
            .iter()
            .find(|(found, _)| *found == name)
            .map(|(_, body)| body.trim_end_matches('\n').to_owned() + "\n")
            .unwrap_or_default()
    };
    let mut consumers = vec![Consumer::first(binary, &section)];
    let mut y = FIRST_ROW_OF_OTHERS;
    for declared in further {
        consumers.push(Consumer::further(binary, declared, y, &section));
        y += Consumer::height(declared);
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
    let (personal_resources, personal_outputs) = personal(&section(APPEND_GRANTS))?;
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
            // A consumer's resources, then what watches it.
            consumers
                .iter()
                .map(|consumer| {
                    consumer.render(&format!("{}\n{}", section("resources"), section("watch")))
                })
                .collect::<Vec<_>>()
                .join("\n"),
        ),
        ("#@ consumer outputs\n", joined(&consumers, "outputs", "")),
        ("#@ personal data resources\n", personal_resources),
        ("#@ personal data outputs\n", personal_outputs),
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
                pattern: "#@ consumer ... or #@ personal data ...",
                found,
                expected: 1,
            });
        }
        text = text.replace(marker, &value);
    }
    // A section left without entries is left out.
    text = text.replace("\nRules:\n\n", "\n");
    // Each function on Lambda's compute and on Managed Instances.
    let text = super::compute::either(&text)?;
    one_of_each(&text)?;
    Ok(text)
}
