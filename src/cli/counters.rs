//! Counters as the tools print a table's: one row per item, its counters
//! in the order the domain registers them (`activity ada  onLoan 0 loans 2
//! fines 1`), as `replay` prints its embedded table and `local` its
//! consumers'.

use crate::domain::Domain;
use crate::handling::Counter;

/// One counter's value: the counter, its id, the number.
pub(super) type CounterValue = (&'static Counter, String, i64);

/// The counters, a row per item: its name as `inspect` takes it, its id,
/// and its counters in the order the domain registers them (`onLoan 0
/// loans 2 fines 1`); the items ordered by key.
pub(super) fn rows(domain: &Domain, mut counters: Vec<CounterValue>) -> Vec<[String; 3]> {
    let position = |counter: &Counter| {
        domain
            .counters()
            .iter()
            .position(|known| *known == counter)
            .unwrap_or(usize::MAX)
    };
    counters.sort_by_cached_key(|(counter, id, _)| {
        (
            counter.kind,
            counter.sort_key,
            id.clone(),
            position(counter),
        )
    });
    let mut rows: Vec<((&str, &str), [String; 3])> = Vec::new();
    for (counter, id, value) in counters {
        let item = (counter.kind, counter.sort_key);
        let shown = format!("{} {value}", counter.attribute);
        match rows.last_mut() {
            Some((last, [_, last_id, line])) if *last == item && *last_id == id => {
                line.push(' ');
                line.push_str(&shown);
            }
            _ => rows.push((item, [domain.counter_name(counter), id, shown])),
        }
    }
    rows.into_iter().map(|(_, row)| row).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::test_domain;

    static ON_LOAN: Counter = Counter {
        kind: "MEMBER",
        sort_key: "ACTIVITY",
        attribute: "onLoan",
    };
    static LOANS: Counter = Counter {
        kind: "MEMBER",
        sort_key: "ACTIVITY",
        attribute: "loans",
    };

    #[test]
    fn the_counters_of_one_item_are_one_row_in_the_domains_order() {
        let domain = test_domain::domain().counter(&ON_LOAN).counter(&LOANS);
        let rows = rows(
            &domain,
            vec![
                (&LOANS, "grace".into(), 1),
                (&LOANS, "ada".into(), 2),
                (&ON_LOAN, "ada".into(), 0),
            ],
        );
        let row = |name: &str, id: &str, line: &str| [name, id, line].map(str::to_owned);
        assert_eq!(
            rows,
            [
                row("member", "ada", "onLoan 0 loans 2"),
                row("member", "grace", "loans 1"),
            ]
        );
    }
}
