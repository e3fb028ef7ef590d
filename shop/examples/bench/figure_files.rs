//! The figures a run prints, written to files, and the docs made from them.
//!
//! With `--figures DIR` (`scripts/bench` gives `docs/figures`) each table a
//! run prints is also written as `DIR/NAME.json` (each figure: its name,
//! value, unit, baseline where there is one; the table's date and command)
//! and `DIR/NAME.md`, the markdown table the docs include: one figure a
//! cell. `bench --splice DIR --into FILE...` renders every `NAME.json` of
//! DIR again to its `NAME.md`, the figures marked `headline` to
//! `headline.md` (the README's table), and puts each `NAME.md` between its
//! markers in each FILE:
//!
//! ```text
//! <!-- figures:NAME begin -->
//! (the content of DIR/NAME.md, exactly)
//! <!-- figures:NAME end -->
//! ```
//!
//! The pipeline benchmark includes this file too (`#[path]`).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// One table of figures: one file of each kind.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Table {
    /// The files' name (`NAME.json`, `NAME.md`) and its markers' name.
    pub name: String,
    /// What the table holds.
    pub title: String,
    /// The command that prints it.
    pub command: String,
    /// The day of the run, UTC (`YYYY-MM-DD`).
    pub date: String,
    /// Said under the table (e.g. where its figures were taken from).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// The first column's header.
    pub row_label: String,
    /// A grid's columns: each figure has a row and a column. Empty: a list,
    /// one figure a row, with its value and its baseline.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub columns: Vec<String>,
    pub figures: Vec<Figure>,
}

/// One figure.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Figure {
    /// What it measures (in a grid: its row and its column).
    pub name: String,
    pub value: f64,
    /// `ms`, `events/s`, `$`, ... (empty: a count or a ratio).
    pub unit: String,
    /// Decimals printed.
    pub decimals: usize,
    /// What it is compared with, measured in the same run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<Baseline>,
    /// Its cell, in a grid.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub row: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub column: Option<String>,
    /// Its row in the README's table, when it is one of the headline
    /// figures.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headline: Option<String>,
}

/// A figure's baseline: what it is and its value (in the figure's unit).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Baseline {
    pub name: String,
    pub value: f64,
}

impl Figure {
    /// A figure of a list.
    pub fn new(name: &str, value: f64, decimals: usize, unit: &str) -> Self {
        Figure {
            name: name.to_owned(),
            value,
            unit: unit.to_owned(),
            decimals,
            baseline: None,
            row: None,
            column: None,
            headline: None,
        }
    }

    /// A figure of a grid, in `row` and `column`.
    pub fn cell(row: &str, column: &str, value: f64, decimals: usize, unit: &str) -> Self {
        Figure {
            row: Some(row.to_owned()),
            column: Some(column.to_owned()),
            ..Figure::new(&format!("{row}: {column}"), value, decimals, unit)
        }
    }

    pub fn baseline(self, name: &str, value: f64) -> Self {
        Figure {
            baseline: Some(Baseline {
                name: name.to_owned(),
                value,
            }),
            ..self
        }
    }

    /// One of the README's figures, in its row `label`.
    pub fn headline(self, label: &str) -> Self {
        Figure {
            headline: Some(label.to_owned()),
            ..self
        }
    }
}

/// The tables a run measured, written by [`Tables::write_all`].
#[derive(Debug, Default)]
pub struct Tables {
    tables: Vec<Table>,
}

impl Tables {
    /// Starts the table `name` (a table of that name started before is
    /// replaced): a grid when `columns` are given, else a list.
    pub fn start(
        &mut self,
        name: &str,
        title: &str,
        command: &str,
        row_label: &str,
        columns: &[&str],
    ) {
        self.tables.retain(|kept| kept.name != name);
        self.tables.push(Table {
            name: name.to_owned(),
            title: title.to_owned(),
            command: command.to_owned(),
            date: today(),
            note: None,
            row_label: row_label.to_owned(),
            columns: columns.iter().map(|column| (*column).to_owned()).collect(),
            figures: Vec::new(),
        });
    }

    /// Adds `figure` to the table `name` (started first; else it is
    /// dropped). A figure that is not a number (nothing measured) is not
    /// kept.
    pub fn record(&mut self, name: &str, figure: Figure) {
        if !figure.value.is_finite() {
            return;
        }
        if let Some(table) = self.tables.iter_mut().find(|table| table.name == name) {
            table.figures.push(figure);
        }
    }

    /// Writes every table that holds a figure to `dir`: `NAME.json` and
    /// `NAME.md`.
    pub fn write_all(&self, dir: &Path) -> Result<Vec<PathBuf>, String> {
        std::fs::create_dir_all(dir)
            .map_err(|err| format!("cannot create {}: {err}", dir.display()))?;
        let mut written = Vec::new();
        for table in self.tables.iter().filter(|table| !table.figures.is_empty()) {
            written.extend(write_table(dir, table)?);
        }
        Ok(written)
    }
}

/// Writes `table` to `dir` as `NAME.json` and `NAME.md`.
fn write_table(dir: &Path, table: &Table) -> Result<[PathBuf; 2], String> {
    let json = dir.join(format!("{}.json", table.name));
    let text = serde_json::to_string_pretty(table)
        .map_err(|err| format!("cannot write {}: {err}", json.display()))?;
    write(&json, &format!("{text}\n"))?;
    let markdown = dir.join(format!("{}.md", table.name));
    write(&markdown, &render(table))?;
    Ok([json, markdown])
}

fn write(path: &Path, text: &str) -> Result<(), String> {
    std::fs::write(path, text).map_err(|err| format!("cannot write {}: {err}", path.display()))
}

/// A value as the docs show it.
fn number(value: f64, decimals: usize) -> String {
    format!("{value:.decimals$}")
}

/// A value with its unit.
fn with_unit(value: f64, decimals: usize, unit: &str) -> String {
    match unit {
        "" => number(value, decimals),
        "$" => format!("${}", number(value, decimals)),
        unit => format!("{} {unit}", number(value, decimals)),
    }
}

/// A markdown cell: no line break, no column separator.
fn cell_text(text: &str) -> String {
    text.replace('\n', " ").replace('|', "\\|")
}

fn table_lines(header: &[String], align: &[&str], rows: &[Vec<String>]) -> String {
    let line = |cells: Vec<String>| format!("| {} |\n", cells.join(" | "));
    let mut out = line(header.iter().map(|cell| cell_text(cell)).collect());
    out += &line(align.iter().map(|cell| (*cell).to_owned()).collect());
    for row in rows {
        out += &line(row.iter().map(|cell| cell_text(cell)).collect());
    }
    out
}

/// The markdown of `table`: the table, then its command and date (and its
/// note); its title is in its JSON, and the doc says it.
pub fn render(table: &Table) -> String {
    let mut out = if table.columns.is_empty() {
        let rows: Vec<Vec<String>> = table
            .figures
            .iter()
            .map(|figure| {
                let baseline = figure.baseline.as_ref().map_or(String::new(), |baseline| {
                    format!(
                        "{}: {}",
                        baseline.name,
                        with_unit(baseline.value, figure.decimals, &figure.unit)
                    )
                });
                vec![
                    figure.name.clone(),
                    with_unit(figure.value, figure.decimals, &figure.unit),
                    baseline,
                ]
            })
            .collect();
        let header = [table.row_label.clone(), "value".into(), "baseline".into()];
        table_lines(&header, &["---", "---", "---"], &rows)
    } else {
        let mut row_names: Vec<&str> = Vec::new();
        for figure in &table.figures {
            let row = figure.row.as_deref().unwrap_or(&figure.name);
            if !row_names.contains(&row) {
                row_names.push(row);
            }
        }
        let rows: Vec<Vec<String>> = row_names
            .iter()
            .map(|row| {
                let mut cells = vec![(*row).to_owned()];
                for column in &table.columns {
                    let found = table.figures.iter().find(|figure| {
                        figure.row.as_deref().unwrap_or(&figure.name) == *row
                            && figure.column.as_deref() == Some(column)
                    });
                    cells.push(found.map_or(String::new(), |figure| {
                        number(figure.value, figure.decimals)
                    }));
                }
                cells
            })
            .collect();
        let mut header = vec![table.row_label.clone()];
        header.extend(table.columns.iter().cloned());
        let mut align = vec!["---"];
        align.extend(table.columns.iter().map(|_| "---:"));
        table_lines(&header, &align, &rows)
    };
    out += &format!("\nFrom `{}`, {}.", table.command, table.date);
    if let Some(note) = &table.note {
        out += &format!(" {note}");
    }
    out.push('\n');
    out
}

/// The README's table: every figure marked `headline`, in the order of
/// `tables`, its value and its baseline.
pub fn render_headline(tables: &[Table]) -> String {
    let rows: Vec<Vec<String>> = tables
        .iter()
        .flat_map(|table| &table.figures)
        .filter_map(|figure| {
            let label = figure.headline.as_ref()?;
            let baseline = figure.baseline.as_ref().map_or(String::new(), |baseline| {
                format!(
                    "{}: {}",
                    baseline.name,
                    with_unit(baseline.value, figure.decimals, &figure.unit)
                )
            });
            Some(vec![
                label.clone(),
                with_unit(figure.value, figure.decimals, &figure.unit),
                baseline,
            ])
        })
        .collect();
    let header = ["".into(), "sequence-guard".into(), "baseline".into()];
    table_lines(&header, &["---", "---", "---"], &rows)
}

/// The order of the README's rows: these tables first, the others after
/// by name.
const HEADLINE_ORDER: [&str; 5] = ["requests", "cpu", "cold-start", "memory", "drain"];

/// Renders every `NAME.json` of `dir` to its `NAME.md` and the headline
/// figures to `headline.md`, then puts each `NAME.md` of `dir` between its
/// markers in each of `docs`. A marker without its file, or a begin without
/// its end, is an error (nothing of that doc written).
pub fn splice_all(dir: &Path, docs: &[PathBuf]) -> Result<(), String> {
    let mut tables = Vec::new();
    let entries =
        std::fs::read_dir(dir).map_err(|err| format!("cannot read {}: {err}", dir.display()))?;
    for entry in entries {
        let path = entry
            .map_err(|err| format!("cannot read {}: {err}", dir.display()))?
            .path();
        if path
            .extension()
            .is_some_and(|extension| extension == "json")
        {
            let text = std::fs::read_to_string(&path)
                .map_err(|err| format!("cannot read {}: {err}", path.display()))?;
            let table: Table = serde_json::from_str(&text)
                .map_err(|err| format!("{} is not a table of figures: {err}", path.display()))?;
            write(&dir.join(format!("{}.md", table.name)), &render(&table))?;
            tables.push(table);
        }
    }
    let rank = |table: &Table| {
        HEADLINE_ORDER
            .iter()
            .position(|name| *name == table.name)
            .unwrap_or(HEADLINE_ORDER.len())
    };
    tables.sort_by(|a, b| rank(a).cmp(&rank(b)).then_with(|| a.name.cmp(&b.name)));
    write(&dir.join("headline.md"), &render_headline(&tables))?;
    for doc in docs {
        let text = std::fs::read_to_string(doc)
            .map_err(|err| format!("cannot read {}: {err}", doc.display()))?;
        let mut spliced = text.clone();
        for name in markers(&text) {
            let path = dir.join(format!("{name}.md"));
            let content = std::fs::read_to_string(&path).map_err(|err| {
                format!(
                    "{}: the figures {name}: cannot read {}: {err}",
                    doc.display(),
                    path.display()
                )
            })?;
            spliced = splice(&spliced, &name, &content)
                .map_err(|err| format!("{}: {err}", doc.display()))?;
        }
        if spliced != text {
            write(doc, &spliced)?;
        }
    }
    Ok(())
}

fn begin(name: &str) -> String {
    format!("<!-- figures:{name} begin -->\n")
}

fn end(name: &str) -> String {
    format!("<!-- figures:{name} end -->")
}

/// The names of the marked regions of `doc`, in order.
pub fn markers(doc: &str) -> Vec<String> {
    doc.lines()
        .filter_map(|line| {
            line.trim()
                .strip_prefix("<!-- figures:")?
                .strip_suffix(" begin -->")
                .map(str::to_owned)
        })
        .collect()
}

/// `doc` with the region marked `name` holding `content` (which ends with
/// a line break).
pub fn splice(doc: &str, name: &str, content: &str) -> Result<String, String> {
    let (begin, end) = (begin(name), end(name));
    let Some(start) = doc.find(&begin).map(|at| at + begin.len()) else {
        return Err(format!("no line `{}`", begin.trim_end()));
    };
    let Some(length) = doc[start..].find(&end) else {
        return Err(format!("`{}` without `{end}` after it", begin.trim_end()));
    };
    Ok(format!(
        "{}{content}{}",
        &doc[..start],
        &doc[start + length..]
    ))
}

/// Today's date, UTC.
pub fn today() -> String {
    let seconds = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_secs());
    date_of(seconds / 86_400)
}

/// The date `days` after 1970-01-01 (Howard Hinnant's civil_from_days).
fn date_of(days: u64) -> String {
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grid() -> Table {
        Table {
            name: "cost".into(),
            title: "$ per million events".into(),
            command: "scripts/bench".into(),
            date: "2026-12-03".into(),
            note: None,
            row_label: "workload".into(),
            columns: vec!["sequence-guard".into(), "naive".into()],
            figures: vec![
                Figure::cell("drain", "sequence-guard", 1.374, 2, "$")
                    .baseline("naive pipeline", 3.58)
                    .headline("a million events, drained"),
                Figure::cell("drain", "naive", 3.58, 2, "$"),
                Figure::cell("one | hot", "naive", 2.7, 2, "$"),
            ],
        }
    }

    #[test]
    fn a_grid_is_one_figure_a_cell_in_the_columns_order() {
        assert_eq!(
            render(&grid()),
            "| workload | sequence-guard | naive |\n\
             | --- | ---: | ---: |\n\
             | drain | 1.37 | 3.58 |\n\
             | one \\| hot |  | 2.70 |\n\
             \nFrom `scripts/bench`, 2026-12-03.\n"
        );
    }

    #[test]
    fn a_list_shows_each_value_with_its_unit_and_baseline() {
        let table = Table {
            columns: Vec::new(),
            row_label: "figure".into(),
            note: Some("Transcribed.".into()),
            figures: vec![
                Figure::new("cold start", 26.54, 1, "ms").baseline("warm", 11.1),
                Figure::new("ratio", 1.2, 2, ""),
            ],
            ..grid()
        };
        assert_eq!(
            render(&table),
            "| figure | value | baseline |\n| --- | --- | --- |\n\
             | cold start | 26.5 ms | warm: 11.1 ms |\n| ratio | 1.20 |  |\n\
             \nFrom `scripts/bench`, 2026-12-03. Transcribed.\n"
        );
    }

    #[test]
    fn the_headline_holds_the_marked_figures_only() {
        assert_eq!(
            render_headline(&[grid()]),
            "|  | sequence-guard | baseline |\n| --- | --- | --- |\n\
             | a million events, drained | $1.37 | naive pipeline: $3.58 |\n"
        );
    }

    #[test]
    fn a_table_reads_back_as_written() {
        let table = grid();
        let text = serde_json::to_string_pretty(&table).unwrap_or_default();
        let read: Result<Table, _> = serde_json::from_str(&text);
        assert_eq!(read.ok(), Some(table));
        assert!(text.contains("\"baseline\": {\n"), "{text}");
    }

    #[test]
    fn splice_replaces_the_region_and_keeps_the_rest() {
        let doc = "# Doc\n\n<!-- figures:cost begin -->\nold\nlines\n<!-- figures:cost end -->\n\nAfter.\n";
        assert_eq!(markers(doc), vec!["cost".to_owned()]);
        let spliced = splice(doc, "cost", "| new |\n");
        assert_eq!(
            spliced.as_deref(),
            Ok(
                "# Doc\n\n<!-- figures:cost begin -->\n| new |\n<!-- figures:cost end -->\n\nAfter.\n"
            )
        );
        let again = spliced.and_then(|doc| splice(&doc, "cost", "| new |\n"));
        assert!(again.is_ok_and(|doc| doc.matches("| new |").count() == 1));
    }

    #[test]
    fn splice_refuses_a_region_without_its_end_or_begin() {
        let open = "<!-- figures:cost begin -->\nold\n";
        assert!(splice(open, "cost", "x\n").is_err_and(|err| err.contains("without")));
        assert!(splice(open, "cpu", "x\n").is_err_and(|err| err.contains("no line")));
    }

    #[test]
    fn splice_all_writes_the_files_and_the_docs() {
        let dir = std::env::temp_dir().join(format!("figure-files-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        let table = grid();
        let written = write_table(&dir, &table);
        assert!(written.is_ok(), "{written:?}");
        let doc = dir.join("doc.md");
        let text = "A\n<!-- figures:cost begin -->\n<!-- figures:cost end -->\n\
                    <!-- figures:headline begin -->\n<!-- figures:headline end -->\nB\n";
        assert!(std::fs::write(&doc, text).is_ok());
        assert_eq!(splice_all(&dir, std::slice::from_ref(&doc)), Ok(()));
        let spliced = std::fs::read_to_string(&doc).unwrap_or_default();
        assert!(spliced.contains(&render(&table)), "{spliced}");
        assert!(
            spliced.contains("| a million events, drained | $1.37 |"),
            "{spliced}"
        );
        assert!(spliced.starts_with("A\n") && spliced.ends_with("end -->\nB\n"));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn tables_keep_what_was_recorded_in_a_started_table() {
        let mut tables = Tables::default();
        tables.record("cost", Figure::new("dropped: not started", 1.0, 0, ""));
        tables.start("cost", "title", "scripts/bench", "figure", &[]);
        tables.record("cost", Figure::new("kept", 1.0, 0, ""));
        tables.record("cost", Figure::new("not measured", f64::NAN, 0, ""));
        let names: Vec<Vec<&str>> = tables
            .tables
            .iter()
            .map(|table| {
                table
                    .figures
                    .iter()
                    .map(|figure| figure.name.as_str())
                    .collect()
            })
            .collect();
        assert_eq!(names, vec![vec!["kept"]]);
    }

    #[test]
    fn dates_are_utc_days() {
        assert_eq!(date_of(0), "1970-01-01");
        assert_eq!(date_of(20_425), "2025-12-03");
        assert_eq!(date_of(19_782), "2024-02-29");
        assert_eq!(today().len(), 10);
    }
}
