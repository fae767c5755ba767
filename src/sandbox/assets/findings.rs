//! What the layers in a box report, turned into findings of the policy's rules:
//!
//! - the kernel's refusals, which the supervisor answered and reported (seccomp user
//!   notification): the system call and what it named. Kept outside the program's
//!   reach, these are the record of what the program tried and could not do;
//! - the run-time hooks' records (Python's audit hook, Node's guard), which the
//!   interpreter writes on its records pipe before it ends the program: the rule, the
//!   layer, what was attempted and the snippet's line. They come from inside the
//!   program's own process, so they explain (early, with a line number); a record
//!   naming a rule the policy does not have is not a finding.

use crate::policy::{Action, Finding, Layer, Policy, Rule};
use serde::Deserialize;

/// The record a run-time hook writes when it stops a program.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
struct Record {
    rule: String,
    #[serde(default)]
    message: String,
    layer: String,
    #[serde(default)]
    attempted: String,
    #[serde(default)]
    line: Option<u32>,
}

/// The finding a hook's record stands for, or `None` when it does not parse or names
/// no rule of `policy`.
pub fn explained(record: &[u8], policy: &Policy) -> Option<Finding> {
    let record: Record = serde_json::from_slice(record).ok()?;
    let rule = policy.rules.iter().find(|r| r.id == record.rule)?;
    let layer = [
        Layer::PythonAuditHook,
        Layer::NodePermission,
        Layer::NodeCodegen,
    ]
    .into_iter()
    .find(|layer| layer.as_str() == record.layer)
    .unwrap_or(Layer::NodeGuard);
    let message = if record.message.is_empty() {
        rule.message.clone()
    } else {
        record.message
    };
    let attempted: String = record.attempted.chars().take(200).collect();
    let line = record.line.unwrap_or(0);
    Some(Finding {
        line,
        column: u32::from(line > 0),
        end_line: line,
        end_column: u32::from(line > 0),
        ..finding(
            rule,
            layer,
            format!("{message} (stopped while running: {attempted})"),
        )
    })
}

/// The finding for a system call the kernel refused and the supervisor reported:
/// under `rule` (the policy's rule that denies processes) when it was a new process or
/// program, else a finding of the supervisor's own (a thread asking for another call's
/// program).
pub fn refused(syscall: &str, detail: &str, rule: Option<&Rule>) -> Finding {
    let what: String = format!("{syscall} {detail}").chars().take(300).collect();
    match rule {
        Some(rule) if syscall != "read" => finding(
            rule,
            Layer::Kernel,
            format!(
                "{} (the kernel refused it: {}; the program went on with \
                 `Operation not permitted`)",
                rule.message,
                what.trim()
            ),
        ),
        _ => Finding {
            rule: "supervisor".into(),
            category: "integrity".into(),
            action: Action::Deny,
            message: format!("the box's supervisor refused {}", what.trim()),
            line: 0,
            column: 0,
            end_line: 0,
            end_column: 0,
            layer: Layer::Supervisor,
        },
    }
}

/// The finding that says how many more refusals and records there were than a result
/// keeps.
pub fn unreported(count: u64, rule: Option<&Rule>) -> Finding {
    let message = format!(
        "and {count} more refusals or records of the run-time layers, not listed one by one"
    );
    match rule {
        Some(rule) => finding(rule, Layer::Kernel, message),
        None => Finding {
            rule: "supervisor".into(),
            category: "integrity".into(),
            action: Action::Deny,
            message,
            line: 0,
            column: 0,
            end_line: 0,
            end_column: 0,
            layer: Layer::Supervisor,
        },
    }
}

fn finding(rule: &Rule, layer: Layer, message: String) -> Finding {
    Finding {
        rule: rule.id.clone(),
        category: rule.category.clone(),
        action: Action::Deny,
        message,
        line: 0,
        column: 0,
        end_line: 0,
        end_column: 0,
        layer,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hooks_record_becomes_a_finding_of_the_policy() {
        let policy = Policy::preset("default").unwrap();
        let record = br#"{"rule":"process-exec","layer":"python-audit-hook","attempted":"os.system 'id'","line":3}"#;
        let finding = explained(record, &policy).unwrap();
        assert_eq!(finding.rule, "process-exec");
        assert_eq!(finding.layer, Layer::PythonAuditHook);
        assert_eq!(finding.line, 3);
        assert!(finding.message.contains("os.system 'id'"));
        // A record naming no rule of the policy, or garbled, is no finding.
        assert!(explained(br#"{"rule":"nope","layer":"x"}"#, &policy).is_none());
        assert!(explained(b"{\"rule", &policy).is_none());
    }

    #[test]
    fn a_kernel_refusal_is_a_finding_of_the_rule_that_denies_processes() {
        let policy = Policy::preset("default").unwrap();
        let rule = policy.rules.iter().find(|r| r.id == "process-exec");
        let finding = refused("execve", "/bin/sh", rule);
        assert_eq!(
            (finding.rule.as_str(), finding.layer),
            ("process-exec", Layer::Kernel)
        );
        assert!(
            finding.message.contains("execve /bin/sh"),
            "{}",
            finding.message
        );
        let other = refused("read", "of the call channel by thread 9", rule);
        assert_eq!(
            (other.rule.as_str(), other.layer),
            ("supervisor", Layer::Supervisor)
        );
    }
}
