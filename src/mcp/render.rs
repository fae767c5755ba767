//! Text renderings of the structured results, for clients that show a model only the
//! `content` of a tool result. They carry the same facts as `structuredContent`, worded
//! so a model can act on them (what happened, then what to change).

use super::types::{CheckResult, RunResult, RunStatus};
use crate::analysis::Language;
use crate::policy::{Action, Finding};

/// The text of a run tool's result.
pub fn run_result(result: &RunResult) -> String {
    let mut text = match result.status {
        RunStatus::Completed => completed_header(result),
        RunStatus::Blocked => format!(
            "Stopped while running by the sandbox policy `{}`: the program tried something \
             the policy denies (below); its output up to that point follows. Rewrite the \
             code without it and call the tool again.\n",
            result.policy
        ),
        RunStatus::Denied => format!(
            "Denied by the sandbox policy `{}`: nothing was run. Rewrite the code without \
             what is listed below and call the tool again.\n",
            result.policy
        ),
        RunStatus::InvalidInput
        | RunStatus::EngineError
        | RunStatus::Cancelled
        | RunStatus::ShuttingDown => {
            format!(
                "Nothing was run: {}\n",
                result.message.as_deref().unwrap_or("unknown reason")
            )
        }
    };
    let (denials, warnings): (Vec<&Finding>, Vec<&Finding>) = result
        .findings
        .iter()
        .partition(|f| f.action == Action::Deny);
    if !denials.is_empty() {
        text.push_str("\nDenied:\n");
        push_findings(&mut text, &denials);
    }
    if !warnings.is_empty() {
        text.push_str("\nWarnings (allowed, but worth a look):\n");
        push_findings(&mut text, &warnings);
    }
    if matches!(result.status, RunStatus::Completed | RunStatus::Blocked) {
        push_stream(&mut text, "stdout", &result.stdout);
        push_stream(&mut text, "stderr", &result.stderr);
    }
    if let Some(hint) = nothing_printed_hint(result) {
        text.push('\n');
        text.push_str(hint);
    }
    text
}

/// A run that succeeded and printed nothing: models often expect the value of the last
/// expression to be shown, as in a notebook, and would otherwise try again blindly.
fn nothing_printed_hint(result: &RunResult) -> Option<&'static str> {
    let silent = result.status == RunStatus::Completed
        && result.exit_code == Some(0)
        && result.stdout.is_empty()
        && result.stderr.is_empty();
    silent.then_some(match result.language {
        Language::Python => {
            "Nothing was printed: the program ran and exited 0, but the value of the last \
             expression is not shown as in a notebook. print() the result you want to see.\n"
        }
        Language::JavaScript => {
            "Nothing was printed: the program ran and exited 0, but the value of the last \
             expression is not shown as in a REPL. console.log() the result you want to see.\n"
        }
    })
}

/// The text of `check_code`'s result.
pub fn check_result(result: &CheckResult) -> String {
    let mut text = if result.allowed {
        format!(
            "Allowed by the sandbox policy `{}`: this code would run.\n",
            result.policy
        )
    } else {
        format!(
            "Denied by the sandbox policy `{}`: this code would not run. Rewrite it without \
             what is listed below.\n",
            result.policy
        )
    };
    if result.findings.is_empty() {
        text.push_str("No findings.\n");
    } else {
        text.push('\n');
        let findings: Vec<&Finding> = result.findings.iter().collect();
        push_findings(&mut text, &findings);
    }
    text
}

/// One line saying how the run ended, e.g. `exit code 1 · 83 ms · policy default`.
fn completed_header(result: &RunResult) -> String {
    let exit_code = result
        .exit_code
        .map_or_else(|| "none".to_string(), |c| c.to_string());
    let mut how = Vec::new();
    if result.timed_out {
        how.push("TIMED OUT: killed at the time limit".to_string());
    }
    if result.oom_killed {
        how.push("OUT OF MEMORY: killed at the memory limit".to_string());
    }
    if result.truncated {
        how.push("output truncated at the output limit".to_string());
    }
    let mut line = format!(
        "exit code {exit_code} · {} ms · policy {}",
        result.duration_ms, result.policy
    );
    for part in how {
        line.push_str(" · ");
        line.push_str(&part);
    }
    line.push('\n');
    line
}

fn push_findings(text: &mut String, findings: &[&Finding]) {
    for finding in findings {
        let layer = if finding.layer.is_static() {
            String::new()
        } else {
            format!(" (run time: {})", finding.layer.as_str())
        };
        text.push_str(&format!(
            "- line {}, column {}: {} [{}]{layer} {}\n",
            finding.line, finding.column, finding.rule, finding.action, finding.message
        ));
    }
}

fn push_stream(text: &mut String, name: &str, content: &str) {
    text.push_str(&format!("\n--- {name} ---\n"));
    if content.is_empty() {
        text.push_str("(empty)\n");
    } else {
        text.push_str(content);
        if !content.ends_with('\n') {
            text.push('\n');
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn finding(action: Action) -> Finding {
        Finding {
            rule: "process-exec".into(),
            category: "process".into(),
            action,
            message: "no processes (`os.system`)".into(),
            line: 2,
            column: 1,
            end_line: 2,
            end_column: 10,
            layer: Default::default(),
        }
    }

    #[test]
    fn a_denial_names_rule_line_and_column() {
        let mut result = RunResult::not_run(RunStatus::Denied, Language::Python, "default");
        result.findings = vec![finding(Action::Deny)];
        let text = run_result(&result);
        assert!(text.contains("nothing was run"), "{text}");
        assert!(
            text.contains("line 2, column 1: process-exec [deny]"),
            "{text}"
        );
        assert!(!text.contains("--- stdout ---"), "{text}");
    }

    #[test]
    fn a_silent_success_says_to_print_the_result() {
        let mut result = RunResult::not_run(RunStatus::Completed, Language::Python, "default");
        result.exit_code = Some(0);
        assert!(run_result(&result).contains("print() the result"));
        result.language = Language::JavaScript;
        assert!(run_result(&result).contains("console.log() the result"));
        result.stderr = "a warning".into();
        assert!(!run_result(&result).contains("Nothing was printed"));
        result.stderr.clear();
        result.exit_code = Some(1);
        assert!(!run_result(&result).contains("Nothing was printed"));
    }

    #[test]
    fn a_failed_run_keeps_both_streams_and_its_warnings() {
        let mut result = RunResult::not_run(RunStatus::Completed, Language::Python, "default");
        result.exit_code = Some(1);
        result.stdout = "partial".into();
        result.stderr = "Traceback".into();
        result.findings = vec![finding(Action::Warn)];
        let text = run_result(&result);
        assert!(text.starts_with("exit code 1"), "{text}");
        assert!(text.contains("--- stdout ---\npartial\n"), "{text}");
        assert!(text.contains("--- stderr ---\nTraceback\n"), "{text}");
        assert!(text.contains("Warnings"), "{text}");
    }
}
