//! Each function of the stack on either compute, chosen when the stack is
//! deployed: Lambda's own (the default), or Lambda Managed Instances when
//! `CapacityProviderArn` names a capacity provider.
//!
//! SAM's transform refuses a condition around a function's
//! `CapacityProviderConfig`, so a function whose definition holds a line
//! `{{capacity}}` is written twice: as it is, under `OnLambda`; and as
//! `Managed<name>`, with that provider, its memory and an alias, under
//! `OnManagedInstances`. Each keeps its own condition as well
//! (`WithProducer` becomes `WithProducerOnLambda` and
//! `WithProducerOnManagedInstances`, which the template declares). A deploy
//! has one of the two; what refers to the function chooses with `!If`.
//! The twin has no `FunctionName`: CloudFormation names it. It cannot have
//! the function's own (CloudFormation creates a new resource before it
//! deletes the old, so a switch would find the name taken), and a suffix
//! would take a longest stack's and consumer's names past Lambda's 64
//! characters.

use super::Error;

/// The line that marks a function for both computes, and where the
/// capacity provider goes in the managed one.
const CAPACITY: &str = "{{capacity}}";

/// What the managed function has where its definition says [`CAPACITY`].
const MANAGED: &str = "\
# On Lambda Managed Instances: one process serves up to
# ManagedInstancesConcurrency invocations at once, sharing its runner,
# clients and warm items.
CapacityProviderConfig:
  Arn: !Ref CapacityProviderArn
  PerExecutionEnvironmentMaxConcurrency: !Ref ManagedInstancesConcurrency
# A function on Managed Instances runs as a published version: the queue's
# mapping and the schedule call this alias, which each deploy moves.
AutoPublishAlias: live
";

/// The two computes: the condition's suffix and the logical id's prefix.
const LAMBDA: (&str, &str) = ("OnLambda", "");
const MANAGED_INSTANCES: (&str, &str) = ("OnManagedInstances", "Managed");

/// `text` with each function marked by [`CAPACITY`] written for both
/// computes.
pub(super) fn either(text: &str) -> Result<String, Error> {
    let mut out = String::with_capacity(text.len() * 5 / 4);
    for block in blocks(text) {
        if block.lines().any(|line| line.trim() == CAPACITY) {
            let body = block.trim_end_matches('\n');
            let trailing = &block[body.len()..];
            out.push_str(&on(body, LAMBDA)?);
            out.push_str("\n\n");
            out.push_str(&on(body, MANAGED_INSTANCES)?);
            out.push_str(if trailing.is_empty() { "\n" } else { trailing });
        } else {
            out.push_str(block);
        }
    }
    Ok(out)
}

/// `text` cut before each line that opens an entry of a section (two
/// spaces, then a name) or a section, so that a resource is one piece from
/// its name to the next one's comment or name.
fn blocks(text: &str) -> Vec<&str> {
    let mut starts = vec![0];
    let mut at = 0;
    let mut previous_opens = false;
    for line in text.split_inclusive('\n') {
        let opens = line.starts_with(|c: char| !c.is_whitespace())
            || line.strip_prefix("  ").is_some_and(|rest| {
                rest.starts_with(|c: char| c.is_ascii_alphabetic() || c == '#')
            });
        // A comment above a name belongs to it: cut once, before the comment.
        if opens && !previous_opens {
            starts.push(at);
        }
        previous_opens = opens && line.starts_with("  #");
        at += line.len();
    }
    starts.push(text.len());
    starts.dedup();
    starts
        .windows(2)
        .map(|pair| &text[pair[0]..pair[1]])
        .collect()
}

/// One function's definition (`body`, its comment above it included) on
/// one compute.
fn on(body: &str, (condition, prefix): (&str, &str)) -> Result<String, Error> {
    let mut out = String::with_capacity(body.len() + MANAGED.len());
    let mut conditioned = false;
    let mut named = 0;
    let mut sized = 0;
    for line in body.lines() {
        let indent = &line[..line.len() - line.trim_start().len()];
        let trimmed = line.trim();
        if trimmed == CAPACITY {
            if !prefix.is_empty() {
                for managed in MANAGED.lines() {
                    out.push_str(&format!("{indent}{managed}\n"));
                }
            }
            continue;
        }
        if indent.len() == 2 && !trimmed.starts_with('#') {
            // The logical id.
            out.push_str(&format!("  {prefix}{trimmed}\n"));
            continue;
        }
        if indent.len() == 4 {
            if let Some(own) = trimmed.strip_prefix("Condition: ") {
                out.push_str(&format!("    Condition: {own}{condition}\n"));
                conditioned = true;
                continue;
            }
            if trimmed.starts_with("Type: ") && !body.contains("\n    Condition: ") {
                out.push_str(&format!("{line}\n    Condition: {condition}\n"));
                conditioned = true;
                continue;
            }
        }
        if trimmed.starts_with("FunctionName: ") {
            named += 1;
            if !prefix.is_empty() {
                // CloudFormation names the twin.
                continue;
            }
        }
        if trimmed.starts_with("MemorySize: ") {
            sized += 1;
            if !prefix.is_empty() {
                // Managed Instances run a function in 2 GB at least.
                out.push_str(&format!(
                    "{indent}MemorySize: !Ref ManagedInstancesMemory\n"
                ));
                continue;
            }
        }
        out.push_str(line);
        out.push('\n');
    }
    for (pattern, found) in [
        ("FunctionName: ...", named),
        ("MemorySize: ...", sized),
        (
            "Type: ... (where its condition goes)",
            usize::from(conditioned),
        ),
    ] {
        if found != 1 {
            return Err(Error::Drifted {
                file: "templates/stack (a function marked {{capacity}})",
                pattern,
                found,
                expected: 1,
            });
        }
    }
    Ok(out.trim_end_matches('\n').to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    const FUNCTION: &str = "\
Resources:
  Queue:
    Type: AWS::SQS::Queue

  # The function.
  ThingFunction:
    Type: AWS::Serverless::Function
    Condition: WithThing
    Properties:
      FunctionName: !Sub \"${AWS::StackName}-thing\"
      MemorySize: 256
      {{capacity}}

  Alarm:
    Type: AWS::CloudWatch::Alarm
";

    #[test]
    fn a_marked_function_is_written_for_each_compute() {
        let text = either(FUNCTION).expect("renders");
        assert!(text.contains(
            "  # The function.\n  ThingFunction:\n    Type: AWS::Serverless::Function\n    Condition: WithThingOnLambda\n    Properties:\n      FunctionName: !Sub \"${AWS::StackName}-thing\"\n      MemorySize: 256\n\n"
        ), "{text}");
        assert!(text.contains(
            "  # The function.\n  ManagedThingFunction:\n    Type: AWS::Serverless::Function\n    Condition: WithThingOnManagedInstances\n    Properties:\n      MemorySize: !Ref ManagedInstancesMemory\n"
        ), "{text}");
        assert!(
            text.contains("      CapacityProviderConfig:\n        Arn: !Ref CapacityProviderArn\n")
        );
        assert!(
            text.contains("      AutoPublishAlias: live\n\n  Alarm:\n"),
            "{text}"
        );
        assert!(
            text.starts_with(
                "Resources:\n  Queue:\n    Type: AWS::SQS::Queue\n\n  # The function.\n"
            )
        );
        assert!(!text.contains(CAPACITY));
        assert_eq!(text.matches("CapacityProviderConfig").count(), 1);
        assert_eq!(
            text.matches("FunctionName").count(),
            1,
            "the twin's is CloudFormation's"
        );
    }

    #[test]
    fn a_function_without_a_condition_gets_the_computes_own() {
        let text = either(&FUNCTION.replace("    Condition: WithThing\n", "")).expect("renders");
        assert!(text.contains(
            "  ThingFunction:\n    Type: AWS::Serverless::Function\n    Condition: OnLambda\n"
        ));
        assert!(text.contains(
            "  ManagedThingFunction:\n    Type: AWS::Serverless::Function\n    Condition: OnManagedInstances\n"
        ));
    }

    #[test]
    fn text_without_the_mark_is_unchanged() {
        let text = FUNCTION.replace("      {{capacity}}\n", "");
        assert_eq!(either(&text).expect("renders"), text);
    }

    #[test]
    fn a_marked_function_without_a_name_or_a_memory_is_refused() {
        for line in [
            "      FunctionName: !Sub \"${AWS::StackName}-thing\"\n",
            "      MemorySize: 256\n",
        ] {
            let error = either(&FUNCTION.replace(line, "")).expect_err("refused");
            assert!(matches!(error, Error::Drifted { found: 0, .. }), "{error}");
        }
    }
}
