//! The declarations' checks, and the plans a table makes for each version.

use super::Table;
use super::*;

const TYPES: &[&str] = &["Opened", "Closed"];

fn same(data: Value) -> Result<Value, String> {
    Ok(data)
}

fn refuse(_: Value) -> Result<Value, String> {
    Err("`owner` is missing".to_owned())
}

#[test]
fn a_complete_declaration_has_no_problem() {
    let versions = Versions::none()
        .current("Opened", 3)
        .upcast("Opened", 2, same)
        .upcast("Opened", 1, same)
        .current("Closed", 1);
    assert_eq!(problems(&versions, TYPES), Vec::<String>::new());
    let (table, _) = Table::new(&versions, TYPES);
    assert_eq!((table.current("Opened"), table.current("Closed")), (3, 1));
    assert_eq!(table.current("Other"), 1);
}

#[test]
fn each_mistake_is_named_with_its_fix() {
    let versions = Versions::none()
        .current("Openned", 2)
        .current("Opened", 3)
        .current("Opened", 3)
        .upcast("Opened", 2, same)
        .upcast("Opened", 2, same)
        .upcast("Opened", 3, same)
        .upcast("Closed", 1, same)
        .current("Closed", 0);
    let problems = problems(&versions, TYPES);
    let expected = [
        "versions are declared for `Openned`, a type the events enum does not have (it has Opened, Closed)",
        "the current version of Opened is declared twice",
        "Closed is declared at version 0: versions start at 1",
        "two upcasts of Opened from version 2: keep one",
        "an upcast of Opened from version 3, whose current version is 3",
        "an upcast of Closed from version 1, whose current version is 0",
        "Opened is at version 3 and has no upcast from version 1: add .upcast(\"Opened\", 1, ...)",
    ];
    assert_eq!(problems.len(), expected.len(), "{problems:#?}");
    for (problem, expected) in problems.iter().zip(expected) {
        assert!(problem.starts_with(expected), "{problem}\n  !~ {expected}");
    }
}

#[test]
fn a_plan_runs_the_upcasts_from_the_bodys_version() {
    fn add(name: &'static str) -> impl Fn(Value) -> Value {
        move |mut data| {
            if let Value::Object(fields) = &mut data {
                fields.insert(name.to_owned(), Value::Bool(true));
            }
            data
        }
    }
    fn one(data: Value) -> Result<Value, String> {
        Ok(add("one")(data))
    }
    fn two(data: Value) -> Result<Value, String> {
        Ok(add("two")(data))
    }
    let versions = Versions::none()
        .current("Opened", 3)
        .upcast("Opened", 1, one)
        .upcast("Opened", 2, two);
    let (table, _) = Table::new(&versions, TYPES);
    let run = |version| {
        let plan = table.plan("Opened", version)?;
        plan.map(|plan| plan.run(serde_json::json!({}))).transpose()
    };
    assert_eq!(
        run(1),
        Ok(Some(serde_json::json!({"one": true, "two": true})))
    );
    assert_eq!(run(2), Ok(Some(serde_json::json!({"two": true}))));
    assert_eq!(run(3), Ok(None), "the current version: nothing to do");
    assert_eq!(
        run(4).map_err(|err| err.to_string()),
        Err(
            "field `version` names Opened version 4, newer than this consumer knows (3)".to_owned()
        )
    );
    assert_eq!(
        table.plan("Closed", 2).err().map(|err| err.to_string()),
        Some(
            "field `version` names Closed version 2, newer than this consumer knows (1)".to_owned()
        )
    );
}

#[test]
fn a_refusing_upcast_and_one_that_answers_no_object_are_named() {
    fn scalar(_: Value) -> Result<Value, String> {
        Ok(Value::Null)
    }
    for (upcast, expected) in [
        (
            refuse as Upcast,
            "field `data` of Opened version 1 cannot be upcast to version 2: `owner` is missing",
        ),
        (
            scalar as Upcast,
            "field `data` of Opened version 1, upcast to version 2, is not an object (the upcast's answer must be one)",
        ),
    ] {
        let versions = Versions::none()
            .current("Opened", 2)
            .upcast("Opened", 1, upcast);
        let (table, _) = Table::new(&versions, TYPES);
        let plan = table.plan("Opened", 1).ok().flatten();
        let answer = plan.map(|plan| plan.run(serde_json::json!({})));
        assert_eq!(
            answer.and_then(Result::err).map(|err| err.to_string()),
            Some(expected.to_owned())
        );
    }
}
