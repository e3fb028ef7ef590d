//! A small evaluator of IAM policies, for what the template writes, so
//! that the tests judge what a role may do, not only what its policy
//! lists: Allow and Deny statements; `Action` and `Resource` with `*` and
//! `?`; the template's `!GetAtt`, `!Ref` and `!Sub` resolved to ARNs (a
//! table's, its index's and its stream's are three); and the condition
//! operators the template uses: `StringEquals`, `StringLike`,
//! `ArnEquals`, `ArnLike`, `Null`, and `ForAllValues:` or `ForAnyValue:`
//! before the string operators. Anything else (`NotAction`, `NotResource`,
//! another operator, `...IfExists`, an intrinsic it cannot resolve) fails
//! the test that meets it: nothing is judged by a rule this file lacks.
//!
//! IAM's rules, kept: an explicit Deny wins; else an Allow that matches
//! the action (case aside), the resource and every condition; else the
//! request is denied. A condition on a key the request does not carry is
//! false, but for `Null: true` and for `ForAllValues:`, which holds of an
//! empty set: a `Scan` carries no `dynamodb:LeadingKeys`, so
//! `ForAllValues:StringLike` on them lets every Scan through, as AWS does,
//! unless a `Null: false` on the key asks for it.

use std::collections::BTreeMap;

use super::personal::statements;
use super::*;

const REGION: &str = "us-east-1";
const ACCOUNT: &str = "123456789012";
const STACK: &str = "stack";

/// The multivalued key of DynamoDB's partition keys in a request.
pub(super) const LEADING_KEYS: &str = "dynamodb:LeadingKeys";

/// A request as IAM authorizes it: an action, the resource's ARN, and the
/// request's context keys, each a set of values.
#[derive(Debug, Clone)]
pub(super) struct Request {
    pub action: String,
    pub resource: String,
    pub context: BTreeMap<String, Vec<String>>,
}

impl Request {
    pub fn new(action: &str, resource: &str) -> Request {
        Request {
            action: action.to_owned(),
            resource: resource.to_owned(),
            context: BTreeMap::new(),
        }
    }

    /// The request with the context key `key` holding `values`.
    pub fn with(mut self, key: &str, values: &[&str]) -> Request {
        self.context.insert(
            key.to_owned(),
            values.iter().map(|value| (*value).to_owned()).collect(),
        );
        self
    }
}

/// A DynamoDB request on `table` (a logical id of the template) by its
/// partition keys (none: a `Scan`).
pub(super) fn on_table(action: &str, table: &str, leading: &[&str]) -> Request {
    let request = Request::new(&format!("dynamodb:{action}"), &table_arn(table));
    if leading.is_empty() {
        request
    } else {
        request.with(LEADING_KEYS, leading)
    }
}

/// The ARN `!GetAtt <table>.Arn` resolves to (the logical id stands for
/// the table's name).
pub(super) fn table_arn(table: &str) -> String {
    format!("arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/{table}")
}

/// The ARN `!GetAtt <table>.StreamArn` resolves to.
pub(super) fn stream_arn(table: &str) -> String {
    format!("{}/stream/2026-01-01T00:00:00.000", table_arn(table))
}

/// The ARN of a table's index.
pub(super) fn index_arn(table: &str, index: &str) -> String {
    format!("{}/index/{index}", table_arn(table))
}

/// The ARN `!GetAtt <key>.Arn` resolves to for a KMS key.
pub(super) fn key_arn(key: &str) -> String {
    format!("arn:aws:kms:{REGION}:{ACCOUNT}:key/{key}")
}

/// The statements that together decide for one principal.
pub(super) struct Policy<'a> {
    template: &'a Value,
    statements: Vec<&'a Value>,
}

impl<'a> Policy<'a> {
    /// A role's: its inline policies, and every policy of the template
    /// attached to it. A role that takes a managed policy by its ARN
    /// cannot be judged here, and fails.
    pub fn of_role(template: &'a Value, role: &str) -> Policy<'a> {
        let properties = &resource(template, role)["Properties"];
        assert!(
            properties["ManagedPolicyArns"].is_null(),
            "{role}: a managed policy by ARN cannot be evaluated here"
        );
        let mut found = Vec::new();
        for policy in one_or_many(&properties["Policies"]) {
            found.extend(statements(&policy["PolicyDocument"]));
        }
        let resources = template["Resources"].as_mapping().expect("resources");
        for item in resources.values() {
            let attached = one_or_many(&item["Properties"]["Roles"])
                .iter()
                .any(|named| intrinsic(named) == format!("Ref {role}"));
            if attached {
                found.extend(statements(&item["Properties"]["PolicyDocument"]));
            }
        }
        Policy {
            template,
            statements: found,
        }
    }

    /// A policy of the template (`AWS::IAM::ManagedPolicy`, ...), as the
    /// only policy of whoever it is attached to.
    pub fn of_policy(template: &'a Value, name: &str) -> Policy<'a> {
        let document = &resource(template, name)["Properties"]["PolicyDocument"];
        Policy {
            template,
            statements: statements(document),
        }
    }

    /// A policy document written here, on `template`'s resources.
    #[cfg(test)]
    fn of_document(template: &'a Value, document: &'a Value) -> Policy<'a> {
        Policy {
            template,
            statements: statements(document),
        }
    }

    /// Whether IAM allows `request`.
    pub fn allows(&self, request: &Request) -> bool {
        let applying = |effect: &str| {
            self.statements.iter().any(|statement| {
                let said = statement["Effect"].as_str();
                assert!(
                    matches!(said, Some("Allow" | "Deny")),
                    "an Effect is Allow or Deny: {statement:?}"
                );
                said == Some(effect) && self.applies(statement, request)
            })
        };
        !applying("Deny") && applying("Allow")
    }

    fn applies(&self, statement: &Value, request: &Request) -> bool {
        for unsupported in ["NotAction", "NotResource", "NotPrincipal"] {
            assert!(
                statement[unsupported].is_null(),
                "{unsupported} is not evaluated here: {statement:?}"
            );
        }
        let action = one_or_many(&statement["Action"])
            .into_iter()
            .any(|pattern| {
                let pattern = pattern.as_str().expect("an action");
                glob(
                    &pattern.to_ascii_lowercase(),
                    &request.action.to_ascii_lowercase(),
                )
            });
        let resource = one_or_many(&statement["Resource"])
            .into_iter()
            .any(|pattern| glob(&resolve(self.template, pattern), &request.resource));
        action && resource && self.holds(&statement["Condition"], request)
    }

    /// Every operator of the block holds, each for every key it names.
    fn holds(&self, condition: &Value, request: &Request) -> bool {
        let Some(block) = condition.as_mapping() else {
            assert!(condition.is_null(), "a Condition is a map: {condition:?}");
            return true;
        };
        block.iter().all(|(operator, keys)| {
            let operator = operator.as_str().expect("an operator");
            let (set, test) = match operator.split_once(':') {
                Some(("ForAllValues", test)) => (Some(true), test),
                Some(("ForAnyValue", test)) => (Some(false), test),
                None => (None, operator),
                Some(_) => panic!("{operator}: not evaluated here"),
            };
            let keys = keys.as_mapping().expect("keys and values");
            keys.iter().all(|(key, wanted)| {
                let key = key.as_str().expect("a condition key");
                let wanted: Vec<String> = one_or_many(wanted)
                    .into_iter()
                    .map(|value| text(self.template, value))
                    .collect();
                let given: &[String] = request
                    .context
                    .iter()
                    .find(|(name, _)| name.eq_ignore_ascii_case(key))
                    .map_or(&[], |(_, values)| values.as_slice());
                match (set, test) {
                    (None, "Null") => match wanted.as_slice() {
                        [absent] if absent == "true" => given.is_empty(),
                        [absent] if absent == "false" => !given.is_empty(),
                        other => panic!("Null takes true or false: {other:?}"),
                    },
                    // No key: false. A multivalued key wants a set operator.
                    (None, test) => match given {
                        [] => false,
                        [value] => compares(test, &wanted, value),
                        _ => panic!("{operator} on the multivalued {key}: use a set operator"),
                    },
                    (Some(true), test) => given.iter().all(|value| compares(test, &wanted, value)),
                    (Some(false), test) => given.iter().any(|value| compares(test, &wanted, value)),
                }
            })
        })
    }
}

/// Whether `value` is one of `wanted`, by the operator `test`.
fn compares(test: &str, wanted: &[String], value: &str) -> bool {
    match test {
        "StringEquals" => wanted.iter().any(|wanted| wanted == value),
        "StringLike" | "ArnLike" | "ArnEquals" => wanted.iter().any(|wanted| glob(wanted, value)),
        other => panic!("{other}: not evaluated here"),
    }
}

/// `*` any run of characters, `?` one character, the rest itself.
pub(super) fn glob(pattern: &str, text: &str) -> bool {
    let (pattern, text): (Vec<char>, Vec<char>) =
        (pattern.chars().collect(), text.chars().collect());
    // The pattern's position after the last `*`, and the text's then.
    let (mut p, mut t, mut star, mut resume) = (0, 0, None, 0);
    while t < text.len() {
        if p < pattern.len() && (pattern[p] == '?' || pattern[p] == text[t]) {
            p += 1;
            t += 1;
        } else if p < pattern.len() && pattern[p] == '*' {
            star = Some(p);
            resume = t;
            p += 1;
        } else if let Some(at) = star {
            p = at + 1;
            resume += 1;
            t = resume;
        } else {
            return false;
        }
    }
    pattern[p..].iter().all(|c| *c == '*')
}

/// A condition's value as text (a YAML boolean as `true`/`false`).
fn text(template: &Value, value: &Value) -> String {
    match value {
        Value::Bool(flag) => flag.to_string(),
        Value::Number(number) => number.to_string(),
        other => resolve(template, other),
    }
}

/// A `Resource` (or a condition's value) as the ARN or text it deploys to.
pub(super) fn resolve(template: &Value, value: &Value) -> String {
    match function(value) {
        None => value
            .as_str()
            .unwrap_or_else(|| panic!("not text: {value:?}"))
            .to_owned(),
        Some((name, argument)) => match (name.as_str(), argument) {
            ("GetAtt", Value::String(target)) => attribute(template, target),
            ("GetAtt", Value::Sequence(parts)) => attribute(
                template,
                &format!(
                    "{}.{}",
                    parts[0].as_str().unwrap_or("?"),
                    parts[1].as_str().unwrap_or("?")
                ),
            ),
            ("Ref", Value::String(target)) => reference(template, target),
            ("Sub", Value::String(text)) => substitute(template, text, None),
            ("Sub", Value::Sequence(parts)) => substitute(
                template,
                parts[0].as_str().expect("a Sub string"),
                parts.get(1).and_then(Value::as_mapping),
            ),
            other => panic!("{other:?}: not resolved here"),
        },
    }
}

/// `${...}` in `text` resolved: a variable of the `!Sub`, an attribute
/// (`X.Arn`) or a reference.
fn substitute(template: &Value, text: &str, variables: Option<&serde_yaml::Mapping>) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let (name, after) = rest[start + 2..].split_once('}').expect("a closed ${");
        let value = match variables.and_then(|variables| variables.get(name)) {
            Some(value) => resolve(template, value),
            None if name.starts_with('!') => format!("${{{}}}", &name[1..]),
            None if name.contains('.') && !name.starts_with("AWS::") => attribute(template, name),
            None => reference(template, name),
        };
        out.push_str(&value);
        rest = after;
    }
    out.push_str(rest);
    out
}

/// `!GetAtt <resource>.<attribute>`, for the resources the roles name.
fn attribute(template: &Value, target: &str) -> String {
    let (name, attribute) = target.split_once('.').expect("<resource>.<attribute>");
    let kind = resource(template, name)["Type"].as_str().unwrap_or("");
    match (kind, attribute) {
        ("AWS::DynamoDB::Table", "Arn") => table_arn(name),
        ("AWS::DynamoDB::Table", "StreamArn") => stream_arn(name),
        ("AWS::SQS::Queue", "Arn") => format!("arn:aws:sqs:{REGION}:{ACCOUNT}:{name}"),
        ("AWS::Logs::LogGroup", "Arn") => {
            format!("arn:aws:logs:{REGION}:{ACCOUNT}:log-group:{name}:*")
        }
        ("AWS::KMS::Key", "Arn") => key_arn(name),
        other => panic!("GetAtt {target} ({other:?}): not resolved here"),
    }
}

/// `!Ref <name>`: a pseudo parameter, or a resource the roles name.
fn reference(template: &Value, name: &str) -> String {
    match name {
        "AWS::Partition" => "aws".to_owned(),
        "AWS::Region" => REGION.to_owned(),
        "AWS::AccountId" => ACCOUNT.to_owned(),
        "AWS::StackName" => STACK.to_owned(),
        _ => match resource(template, name)["Type"].as_str().unwrap_or("") {
            "AWS::SNS::Topic" => format!("arn:aws:sns:{REGION}:{ACCOUNT}:{name}"),
            other => panic!("Ref {name} ({other}): not resolved here"),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEMPLATE: &str = "
Resources:
  Items:
    Type: AWS::DynamoDB::Table
";

    fn policy(document: &str) -> Value {
        serde_yaml::from_str(document).expect("a policy document")
    }

    #[test]
    fn for_all_values_holds_of_a_scan_and_null_false_refuses_it() {
        let template: Value = serde_yaml::from_str(TEMPLATE).expect("YAML");
        let open = policy(
            "
Statement:
  - Effect: Allow
    Action: [dynamodb:GetItem, dynamodb:Scan]
    Resource: !GetAtt Items.Arn
    Condition:
      ForAllValues:StringLike:
        dynamodb:LeadingKeys: [\"A#*\"]
",
        );
        let open = Policy::of_document(&template, &open);
        assert!(open.allows(&on_table("GetItem", "Items", &["A#1"])));
        assert!(!open.allows(&on_table("GetItem", "Items", &["B#1"])));
        // A Scan has no leading key: the empty set passes ForAllValues.
        assert!(open.allows(&on_table("Scan", "Items", &[])));

        let guarded = policy(
            "
Statement:
  - Effect: Allow
    Action: [dynamodb:GetItem, dynamodb:Scan]
    Resource: !GetAtt Items.Arn
    Condition:
      ForAllValues:StringLike:
        dynamodb:LeadingKeys: [\"A#*\"]
      \"Null\":
        dynamodb:LeadingKeys: \"false\"
",
        );
        let guarded = Policy::of_document(&template, &guarded);
        assert!(guarded.allows(&on_table("GetItem", "Items", &["A#1"])));
        assert!(!guarded.allows(&on_table("Scan", "Items", &[])));
        // A BatchGetItem of two prefixes: every key must fit.
        assert!(!guarded.allows(&on_table("BatchGetItem", "Items", &["A#1", "B#1"])));
    }

    #[test]
    fn a_table_is_not_its_index_nor_its_stream_and_deny_wins() {
        let template: Value = serde_yaml::from_str(TEMPLATE).expect("YAML");
        let document = policy(
            "
Statement:
  - Effect: Allow
    Action: dynamodb:*
    Resource: !GetAtt Items.Arn
  - Effect: Allow
    Action: dynamodb:Query
    Resource: !Sub \"${Items.Arn}/index/*\"
  - Effect: Deny
    Action: dynamodb:DeleteItem
    Resource: \"*\"
",
        );
        let policy = Policy::of_document(&template, &document);
        assert!(policy.allows(&on_table("PutItem", "Items", &["A#1"])));
        assert!(policy.allows(&Request::new("DYNAMODB:putitem", &table_arn("Items"))));
        assert!(!policy.allows(&on_table("DeleteItem", "Items", &["A#1"])));
        assert!(policy.allows(&Request::new("dynamodb:Query", &index_arn("Items", "due"))));
        assert!(!policy.allows(&Request::new("dynamodb:Scan", &index_arn("Items", "due"))));
        assert!(!policy.allows(&Request::new("dynamodb:GetRecords", &stream_arn("Items"))));
        assert!(!policy.allows(&on_table("PutItem", "Other", &["A#1"])));
    }

    #[test]
    fn glob_matches_as_iam_does() {
        assert!(glob("SUBJECT#*", "SUBJECT#ada"));
        assert!(glob("SUBJECT#*", "SUBJECT#"));
        assert!(!glob("SUBJECT#*", "STREAM#SUBJECT#ada"));
        assert!(glob("a?c*", "abcdef"));
        assert!(!glob("a?c", "ac"));
        assert!(glob("*", ""));
        assert!(glob("arn:*:table/T", "arn:aws:dynamodb:r:1:table/T"));
        assert!(!glob(
            "arn:*:table/T",
            "arn:aws:dynamodb:r:1:table/T/index/i"
        ));
    }
}
