//! A process that would fail at its first message of a type its event
//! store has: refused when the domain is built, naming the fix.

use sequence_guard::process::Process;
use sequence_guard::{Domain, Events, Handling};
use serde::Deserialize;
use serde::de::IgnoredAny;

use super::{Reminder, library, remind, reminders};

/// The reminders, written before erasures existed: no `PersonalDataErased`.
#[derive(Debug, Deserialize)]
#[serde(tag = "type", content = "data")]
enum Unerased {
    Lent(IgnoredAny),
    Returned(IgnoredAny),
    Reminded(IgnoredAny),
}

impl Events for Unerased {
    fn handling(self) -> Handling {
        match self {
            Unerased::Lent(_) | Unerased::Returned(_) | Unerased::Reminded(_) => {
                Handling::pass::<Reminder>()
            }
        }
    }
}

/// The reminders, forgetting a type of the store's that is not personal.
#[derive(Debug, Deserialize)]
#[serde(tag = "type", content = "data")]
enum Unreminded {
    Lent(IgnoredAny),
    Returned(IgnoredAny),
    PersonalDataErased(IgnoredAny),
}

impl Events for Unreminded {
    fn handling(self) -> Handling {
        match self {
            Unreminded::Lent(_) | Unreminded::Returned(_) | Unreminded::PersonalDataErased(_) => {
                Handling::pass::<Reminder>()
            }
        }
    }
}

#[test]
fn a_process_without_the_erasure_of_a_store_with_personal_data_is_refused_naming_the_fix() {
    let domain = Domain::new::<Unerased>()
        .with_process(Process::new("reminders", library()).on_deadline(remind));
    let err = domain.check().expect_err("refused");
    let [problem] = err.problems() else {
        panic!("one problem: {err}");
    };
    assert!(
        problem.contains("the process reminders does not declare PersonalDataErased")
            && problem.contains("Handling::pass::<State>()")
            && problem.contains("Handling::erasure(data)"),
        "{problem}"
    );
}

#[test]
fn a_process_that_does_not_declare_a_type_of_its_store_is_refused_naming_it() {
    let domain = Domain::new::<Unreminded>()
        .with_process(Process::new("reminders", library()).on_deadline(remind));
    let err = domain.check().expect_err("refused");
    let [problem] = err.problems() else {
        panic!("one problem: {err}");
    };
    assert!(
        problem.contains("does not declare the event store's type Reminded")
            && problem.contains("Handling::ignore()"),
        "{problem}"
    );
    // Declaring every type, it is sound.
    assert_eq!(reminders(Some(remind)).check(), Ok(()));
}
