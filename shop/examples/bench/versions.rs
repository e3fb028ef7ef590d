//! Reading a body by its version: parse time of a body without `version`,
//! with `"version":1`, at a current version 2, and at version 1 upcast to 2.

use std::time::Instant;

use crate::figure_files::{Figure, Tables};

/// The time to read one body (`Domain::parse`: envelope, version, upcast,
/// data), by its version: the median of 5 rounds of 200,000 parses each.
pub fn print_versions(tables: &mut Tables) {
    const ROUNDS: usize = 5;
    const PARSES: u32 = 200_000;
    println!("\n== Reading a body by its version: ns per message (Domain::parse), one thread");
    let (shop, bank) = (shop::domain(), bank::domain());
    let order = |version: &str| {
        format!(
            r#"{{"eventId":"order-1-2","type":"OrderUpdated","aggregateId":"order-1","sequence":2,{version}"data":{{"customerName":"Ada Lovelace","email":"ada@example.com","totalCents":1250}}}}"#
        )
    };
    let account = |event_type: &str, version: &str, data: &str| {
        format!(
            r#"{{"eventId":"acct-1-1","type":"{event_type}","aggregateId":"acct-1","sequence":1,{version}"data":{data}}}"#
        )
    };
    let cases = [
        ("shop OrderUpdated, no `version`", &shop, order("")),
        (
            "shop OrderUpdated, \"version\":1",
            &shop,
            order(r#""version":1,"#),
        ),
        (
            "bank MoneyDeposited, no `version` (no upcasts)",
            &bank,
            account("MoneyDeposited", "", r#"{"amountCents":1250}"#),
        ),
        (
            "bank AccountOpened, \"version\":2 (current)",
            &bank,
            account(
                "AccountOpened",
                r#""version":2,"#,
                r#"{"owner":"Ada Lovelace","currency":"GBP"}"#,
            ),
        ),
        (
            "bank AccountOpened, version 1 upcast to 2",
            &bank,
            account("AccountOpened", "", r#"{"owner":"Ada Lovelace"}"#),
        ),
    ];
    tables.start(
        "versions",
        "Reading a body by its version (`Domain::parse`: envelope, version, upcast, data), \
         one thread, the median of 5 rounds of 200,000 parses",
        "scripts/bench",
        "body",
        &[],
    );
    let mut rounds: Vec<Vec<f64>> = vec![Vec::new(); cases.len()];
    for _ in 0..ROUNDS {
        // Rounds interleave the cases, so that a slower moment is shared.
        for ((_, domain, body), times) in cases.iter().zip(&mut rounds) {
            let started = Instant::now();
            for _ in 0..PARSES {
                let _ = std::hint::black_box(domain.parse(std::hint::black_box(body)));
            }
            times.push(started.elapsed().as_nanos() as f64 / f64::from(PARSES));
        }
    }
    for ((label, domain, body), times) in cases.iter().zip(&mut rounds) {
        times.sort_by(f64::total_cmp);
        let read = match domain.parse(body) {
            Ok(_) => String::new(),
            Err(err) => format!("  (refused: {err})"),
        };
        println!(
            "{label:<48} {:>7.0} ns  (rounds {:.0} to {:.0}){read}",
            times[ROUNDS / 2],
            times[0],
            times[ROUNDS - 1]
        );
        tables.record("versions", Figure::new(label, times[ROUNDS / 2], 0, "ns"));
    }
}
