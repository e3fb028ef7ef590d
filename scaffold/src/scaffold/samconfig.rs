//! `samconfig.toml` for a stack: what `sam build` and `sam deploy` need,
//! and every parameter of its template at the template's default, but
//! those only a team can give ([`THE_TEAMS`]), left for it as comments. A
//! first `sam deploy` then asks only whether to apply the change set.
//! (`sam deploy --guided` asks every parameter of the template whatever
//! this file holds: it takes these values as its defaults.)
//!
//! Each deploy sets each parameter named here; one left out keeps the value
//! of the deploy before (CloudFormation's `UsePreviousValue`), so the file,
//! not the history of deploys, says how the stack is set.

use super::Error;
use super::template::{Substitution, once, substitute};

const SAMCONFIG: &str = include_str!("../../../templates/samconfig.toml");

/// The parameters only a team can give, each with the comment above it
/// and an example value: commented out, for the team to fill in.
pub const THE_TEAMS: [(&str, &str, &str); 1] = [(
    "AlarmEmail",
    "Yours to give: the address the alarms are sent to (SNS asks it to confirm, once).",
    "ops@example.com",
)];

/// One parameter of a template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Parameter {
    pub name: String,
    /// As the template writes it, unquoted; `None` when it has none.
    pub default: Option<String>,
}

/// `samconfig.toml` for the stack `stack`, whose template is `template`.
pub fn samconfig(stack: &str, template: &str) -> Result<String, Error> {
    let mut overrides = String::new();
    for parameter in parameters(template)? {
        let theirs = THE_TEAMS.iter().find(|(name, ..)| *name == parameter.name);
        match (theirs, &parameter.default) {
            (Some((name, comment, example)), _) => {
                overrides.push_str(&format!("  # {comment}\n  # {},\n", pair(name, example)));
            }
            (None, Some(default)) => {
                overrides.push_str(&format!("  {},\n", pair(&parameter.name, default)));
            }
            (None, None) => overrides.push_str(&format!(
                "  # Yours to give: the template has no default.\n  # {},\n",
                pair(&parameter.name, "")
            )),
        }
    }
    substitute(
        "templates/samconfig.toml",
        SAMCONFIG,
        &[
            Substitution::times("{{stack}}", stack.to_owned(), 2),
            once("{{parameter_overrides}}", overrides),
        ],
    )
}

/// `Name=value` as SAM reads it, a TOML string: the value quoted when it is
/// empty or holds a space.
fn pair(name: &str, value: &str) -> String {
    let value = if value.is_empty() || value.contains(char::is_whitespace) {
        format!("\\\"{value}\\\"")
    } else {
        value.to_owned()
    };
    format!("\"{name}={value}\"")
}

/// The parameters of `template` (ours, rendered: each a name two spaces in
/// under `Parameters:`, its `Default:` four), in its order.
pub fn parameters(template: &str) -> Result<Vec<Parameter>, Error> {
    let mut lines = template.lines().skip_while(|line| *line != "Parameters:");
    if lines.next().is_none() {
        return Err(drifted("Parameters:"));
    }
    let mut found: Vec<Parameter> = Vec::new();
    for line in lines {
        if line.starts_with(|c: char| !c.is_whitespace() && c != '#') {
            break;
        }
        if let Some(name) = line.strip_prefix("  ").and_then(|l| l.strip_suffix(':'))
            && name.starts_with(|c: char| c.is_ascii_alphabetic())
            && name.chars().all(|c| c.is_ascii_alphanumeric())
        {
            found.push(Parameter {
                name: name.to_owned(),
                default: None,
            });
        } else if let Some(value) = line.strip_prefix("    Default:") {
            let parameter = found.last_mut().ok_or_else(|| drifted("    Default:"))?;
            parameter.default = Some(unquoted(value.trim()).ok_or_else(|| drifted(line))?);
        }
    }
    if found.is_empty() {
        return Err(drifted("Parameters: (none found)"));
    }
    Ok(found)
}

/// A YAML scalar as it reads, when it needs no escape: `"..."`, `'...'` or plain.
fn unquoted(value: &str) -> Option<String> {
    let inner = |quote: char| {
        value
            .strip_prefix(quote)
            .and_then(|v| v.strip_suffix(quote))
    };
    if let Some(text) = inner('"') {
        return (!text.contains(['\\', '"'])).then(|| text.to_owned());
    }
    if let Some(text) = inner('\'') {
        return Some(text.replace("''", "'"));
    }
    (!value.contains(['"', '\\', '#'])).then(|| value.to_owned())
}

fn drifted(line: &str) -> Error {
    Error::Parameters(line.to_owned())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::scaffold::declaration::DeclaredDefault;
    use crate::scaffold::template::template;
    use crate::scaffold::{ConsumerDeclaration, DeclaredVariable, Names, archiver};

    /// The deploy settings of `samconfig`, read as TOML: each named setting,
    /// and the value of each parameter `parameter_overrides` names, as SAM
    /// reads `Name=value` (a value in `"` unquoted).
    fn read(samconfig: &str) -> (toml_edit::DocumentMut, BTreeMap<String, String>) {
        let document: toml_edit::DocumentMut = samconfig.parse().expect("samconfig.toml is TOML");
        let list = document["default"]["deploy"]["parameters"]["parameter_overrides"]
            .as_array()
            .expect("parameter_overrides, a list");
        let overrides = list
            .iter()
            .map(|item| {
                let pair = item.as_str().expect("each a string");
                let (name, value) = pair.split_once('=').expect("Name=value");
                let value = value.strip_prefix('"').and_then(|v| v.strip_suffix('"'));
                (
                    name.to_owned(),
                    value.unwrap_or(&pair[name.len() + 1..]).to_owned(),
                )
            })
            .collect();
        (document, overrides)
    }

    /// Each parameter of `template` and its default, as YAML reads them.
    fn declared(template: &str) -> BTreeMap<String, String> {
        let yaml: serde_yaml::Value = serde_yaml::from_str(template).expect("YAML");
        let parameters = yaml["Parameters"].as_mapping().expect("parameters");
        parameters
            .iter()
            .map(|(name, parameter)| {
                let default = match &parameter["Default"] {
                    serde_yaml::Value::String(text) => text.clone(),
                    serde_yaml::Value::Number(number) => number.to_string(),
                    other => panic!("{name:?}: a default {other:?}"),
                };
                (name.as_str().expect("a name").to_owned(), default)
            })
            .collect()
    }

    /// A crate with two further consumers: one with a variable whose
    /// default has a space, and a process.
    fn further() -> Vec<ConsumerDeclaration> {
        let audit = ConsumerDeclaration::new("audit", "Each parcel's audit trail.", true)
            .and_then(|declared| {
                declared.with(
                    false,
                    vec![DeclaredVariable {
                        name: "AUDIT_LABEL".into(),
                        description: "The label of the audit trail".into(),
                        default: DeclaredDefault::Text("parcel trail".into()),
                        min: None,
                        max: None,
                    }],
                )
            })
            .expect("audit");
        vec![audit, archiver().expect("the archiver")]
    }

    #[test]
    fn samconfig_sets_every_parameter_at_its_default_but_the_teams() {
        let parcels = Names::new("parcels").expect("a good name");
        let ours =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../template.yaml"))
                .expect("our template.yaml");
        for (stack, template) in [
            (
                "parcels",
                template(&parcels, &[archiver().expect("archiver")]).expect("new's"),
            ),
            (
                "parcels",
                template(&parcels, &further()).expect("with two more"),
            ),
            ("sequence-guard", ours),
        ] {
            // GIVEN a stack's template, and the samconfig.toml made for it
            let samconfig = samconfig(stack, &template).expect("samconfig.toml");
            let (settings, overrides) = read(&samconfig);
            let mut expected = declared(&template);
            // THEN every parameter is named at the template's default, but
            // those a team must give, which are left to it as comments
            for (team, _, example) in THE_TEAMS {
                assert!(expected.remove(team).is_some(), "{team} is a parameter");
                let left = format!("  # \"{team}={example}\",\n");
                assert!(samconfig.contains(&left), "{left}:\n{samconfig}");
            }
            assert_eq!(overrides, expected, "{samconfig}");
            assert!(expected.len() > 20, "{expected:?}");
            // AND a deploy needs nothing more: the stack, the code's bucket,
            // the capabilities; it shows the change set before applying it
            let deploy = &settings["default"]["deploy"]["parameters"];
            assert_eq!(
                settings["default"]["global"]["parameters"]["stack_name"].as_str(),
                Some(stack)
            );
            assert_eq!(deploy["s3_prefix"].as_str(), Some(stack));
            assert_eq!(deploy["resolve_s3"].as_bool(), Some(true));
            assert_eq!(deploy["capabilities"].as_str(), Some("CAPABILITY_IAM"));
            assert_eq!(deploy["confirm_changeset"].as_bool(), Some(true));
            assert_eq!(
                settings["default"]["build"]["parameters"]["beta_features"].as_bool(),
                Some(true)
            );
        }
    }

    #[test]
    fn a_value_with_a_space_or_none_is_quoted_for_sam() {
        let template = "Parameters:\n  Period:\n    Type: String\n    Default: rate(1 minute)\n  Empty:\n    Default: \"\"\n  Quoted:\n    Default: 'it''s'\n  Bare:\n    Type: String\n\nResources:\n  Period:\n    Default: no\n";
        let found = parameters(template).expect("parameters");
        let named = |name: &str, default: Option<&str>| Parameter {
            name: name.into(),
            default: default.map(str::to_owned),
        };
        assert_eq!(
            found,
            [
                named("Period", Some("rate(1 minute)")),
                named("Empty", Some("")),
                named("Quoted", Some("it's")),
                named("Bare", None),
            ]
        );
        let samconfig = samconfig("s", template).expect("samconfig");
        for line in [
            "  \"Period=\\\"rate(1 minute)\\\"\",\n",
            "  \"Empty=\\\"\\\"\",\n",
            "  \"Quoted=it's\",\n",
            "  # Yours to give: the template has no default.\n  # \"Bare=\\\"\\\"\",\n",
        ] {
            assert!(samconfig.contains(line), "{line}:\n{samconfig}");
        }
    }

    #[test]
    fn a_template_without_parameters_or_with_an_escape_is_refused() {
        for (template, at) in [
            ("Resources:\n  A:\n    Type: X\n", "Parameters:"),
            ("Parameters:\nResources:\n", "Parameters: (none found)"),
            (
                "Parameters:\n  A:\n    Default: \"a\\\"b\"\n",
                "    Default: \"a\\\"b\"",
            ),
        ] {
            let err = parameters(template).expect_err("refused");
            assert!(
                matches!(&err, Error::Parameters(line) if line == at),
                "{err}"
            );
        }
    }

    #[test]
    fn our_samconfig_and_the_banks_are_rendered_for_their_templates() {
        // (SEQUENCE_GUARD_BLESS=1 writes them, after a change of the template
        // or of templates/samconfig.toml)
        let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
        for (stack, dir) in [
            ("sequence-guard", root.to_owned()),
            ("bank", format!("{root}/examples/bank")),
        ] {
            let template =
                std::fs::read_to_string(format!("{dir}/template.yaml")).expect("template");
            let rendered = samconfig(stack, &template).expect("samconfig.toml");
            let path = format!("{dir}/samconfig.toml");
            if std::env::var_os("SEQUENCE_GUARD_BLESS").is_some() {
                std::fs::write(&path, &rendered).expect("samconfig.toml written");
            }
            let found = std::fs::read_to_string(&path).expect("samconfig.toml");
            assert!(
                found == rendered,
                "{path} is not rendered for its template: run `SEQUENCE_GUARD_BLESS=1 cargo test -p sequence-guard-scaffold samconfig`"
            );
        }
    }
}
