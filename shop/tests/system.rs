//! `System::check`: what can be known of a crate's domains only together,
//! refused before any message (what `local` and the scaffolded crate's test
//! run): two processes of one name, a consumer that does not declare one of
//! the store's types, a process appending to another store, names the
//! template cannot take.

use sequence_guard::domain::System;

fn problems(system: &System) -> Vec<String> {
    match system.check() {
        Ok(()) => Vec::new(),
        Err(err) => err.problems().to_vec(),
    }
}

#[test]
fn the_shop_checks() {
    assert_eq!(problems(&shop::system()), Vec::<String>::new());
}

#[test]
fn two_processes_of_one_name_are_refused_naming_both() {
    let system = shop::system().consumer("payments-2", shop::payments::domain());
    let found = problems(&system);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].contains("`payments` and `payments-2` are both the process `payments`"),
        "{found:?}"
    );
}

#[test]
fn a_consumer_missing_a_store_type_is_refused_naming_the_types() {
    // The bank's domain knows none of the shop's types.
    let system = System::new(shop::domain()).consumer("bank", bank::domain());
    let found = problems(&system);
    assert!(
        found.iter().any(
            |problem| problem.starts_with("the consumer `bank` does not declare ")
                && problem.contains("OrderCreated")
                && problem.contains("Handling::ignore()")
        ),
        "{found:?}"
    );
}

#[test]
fn a_process_of_another_store_and_bad_names_are_refused() {
    let system = System::new(bank::domain())
        .consumer("Payments", shop::payments::domain())
        .consumer("orders", shop::domain())
        .consumer("orders", shop::domain());
    let found = problems(&system);
    for expected in [
        "the consumer name `Payments` must be 1 to 32 lower-case letters",
        "appends to an event store of other types than this system's",
        "two consumers are named `orders`",
    ] {
        assert!(
            found.iter().any(|problem| problem.contains(expected)),
            "{expected}: {found:?}"
        );
    }
    assert!(problems(&System::new(shop::domain()))[0].contains("no consumer"));
}
